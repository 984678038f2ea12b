"""LogExampleGenConfig (typed knobs, checks, round trips) and how LogExampleGen takes it."""
import dataclasses

import pytest

from components.log_example_gen.config import LogExampleGenConfig
from schemas import kuairand_format
from tests.components.log_example_gen.fixture_logs import D1, D2, D3, KNOBS, make_config

REQUIRED = ("history_length", "history_min_watch_s", "train_days", "eval_days", "eval_last_n_days",
            "validation_last_n_days", "max_bad_row_fraction", "duplicate_rule", "date_window",
            "max_date_gap_days", "out_of_window_rule", "date_time_tolerance_s", "max_play_time_ms",
            "max_duration_ms", "read_range_bytes", "label_delay_s", "signal_prior_ctr")
INGESTION = {k: KNOBS[k] for k in REQUIRED[7:]}


def test_knobs_have_no_defaults_and_patterns_default_to_the_format():
    assert LogExampleGenConfig.required_field_names() == REQUIRED
    cfg = make_config()
    assert (cfg.log_file_pattern, cfg.user_features_pattern, cfg.video_features_pattern) == (
        kuairand_format.LOG_FILE_PATTERN, kuairand_format.USER_FEATURES_PATTERN,
        kuairand_format.VIDEO_FEATURES_PATTERN)
    with pytest.raises(TypeError, match="history_length"):
        LogExampleGenConfig(**{k: v for k, v in KNOBS.items() if k != "history_length"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.history_length = 3


def test_days_and_numbers_are_normalised():
    cfg = make_config(train_days=f"{D2}-{D3}, {D1}", eval_days=[20220429, 20220428],
                      history_min_watch_s=1, max_bad_row_fraction=0)
    assert cfg.train_days == (D1, D2, D3) and cfg.eval_days == (20220428, 20220429)
    assert isinstance(cfg.history_min_watch_s, float) and cfg.history_min_watch_s == 1.0
    assert isinstance(cfg.max_bad_row_fraction, float)
    # the same days written differently are the same config (and the same cache key)
    assert make_config(train_days=f"{D1}-{D3}") == make_config(train_days=[D3, D1, D2])


def test_round_trips_through_custom_config_and_component_args():
    cfg = make_config(history_length=7, history_min_watch_s=2.5, train_days=f"{D1}-{D2}", eval_days=(D3,),
                      eval_last_n_days=0, validation_last_n_days=1, max_bad_row_fraction=0.05,
                      log_file_pattern="logs/log_*.csv")
    custom = cfg.to_custom_config()
    assert custom == dict(history_length=7, history_min_watch_s=2.5, train_days=[D1, D2], eval_days=[D3],
                          eval_last_n_days=0, validation_last_n_days=1, max_bad_row_fraction=0.05,
                          **dict(INGESTION, date_window=[]),
                          log_file_pattern="logs/log_*.csv",
                          user_features_pattern=kuairand_format.USER_FEATURES_PATTERN,
                          video_features_pattern=kuairand_format.VIDEO_FEATURES_PATTERN)
    args = cfg.to_component_args()
    assert args == dict(custom, train_days="20220425,20220426", eval_days="20220427", date_window="")
    assert LogExampleGenConfig.from_custom_config(custom) == cfg
    assert LogExampleGenConfig.from_custom_config(args) == cfg
    extra = dict(args, input_base="/logs", span=3, version=None, input_fingerprint="x")
    assert LogExampleGenConfig.from_exec_properties(extra) == cfg
    empty_days = make_config().to_component_args()
    assert empty_days["train_days"] == "" and LogExampleGenConfig.from_custom_config(empty_days) == make_config()


def test_from_custom_config_names_missing_and_unknown_keys():
    custom = make_config().to_custom_config()
    del custom["eval_last_n_days"], custom["log_file_pattern"]  # a pattern may be left out
    with pytest.raises(ValueError, match=r"missing \['eval_last_n_days'\], unknown \['history_len'\]"):
        LogExampleGenConfig.from_custom_config(dict(custom, history_len=3))
    assert LogExampleGenConfig.from_custom_config(dict(custom, eval_last_n_days=2)) == make_config()


@pytest.mark.parametrize("overrides,match", [
    (dict(history_length=0), "history_length must be >= 1, got 0"),
    (dict(history_length=2.5), "history_length must be an int, got 2.5"),
    (dict(history_length=True), "history_length must be an int"),
    (dict(history_min_watch_s=-1.0), r"history_min_watch_s must be in \[0.0, inf\], got -1.0"),
    (dict(history_min_watch_s="0"), "history_min_watch_s must be a number"),
    (dict(eval_last_n_days=-1), "eval_last_n_days must be >= 0, got -1"),
    (dict(eval_last_n_days=0), "eval_last_n_days must be >= 1 when no days are configured"),
    (dict(validation_last_n_days=-1), "validation_last_n_days must be >= 0, got -1"),
    (dict(max_bad_row_fraction=1.5), r"max_bad_row_fraction must be in \[0.0, 1.0\], got 1.5"),
    (dict(max_bad_row_fraction=-0.1), "max_bad_row_fraction must be in"),
    (dict(train_days=f"{D1}-{D2}", eval_days=f"{D2}"), r"days \[20220426\] are in both train_days and eval_days"),
    (dict(train_days="2022-04-25"), "LogExampleGenConfig.train_days: a day must be a yyyymmdd date"),
    (dict(eval_days=[20220231]), "LogExampleGenConfig.eval_days: .*not a calendar date"),
    (dict(eval_days=[D1, D1]), "eval_days lists a day twice"),
    (dict(eval_days=D1), "eval_days: expected a day list text or a sequence"),
    (dict(log_file_pattern=""), "log_file_pattern must be a non-empty file pattern"),
    (dict(video_features_pattern="/data/video_*.csv"), "video_features_pattern is relative to input_base"),
    (dict(duplicate_rule="ignore"), r"duplicate_rule must be one of \['drop', 'dead_letter', 'keep'\]"),
    (dict(out_of_window_rule="history_only"), "out_of_window_rule must be one of"),
    (dict(date_window="20220425-20220426", train_days=f"{D1}", eval_days=f"{D3}"),
     r"train/eval days \[20220427\] are outside date_window"),
    (dict(max_date_gap_days=-1), "max_date_gap_days must be >= 0"),
    (dict(read_range_bytes=0), "read_range_bytes must be >= 1"),
    (dict(date_time_tolerance_s=-1.0), "date_time_tolerance_s must be in"),
])
def test_bad_knobs_are_refused_with_the_knob_named(overrides, match):
    with pytest.raises(ValueError, match=match):
        make_config(**overrides)


# ---------------------------------------------------------------- the component

def test_component_takes_the_config_or_the_same_knobs_as_keywords():
    from components.log_example_gen.component import LogExampleGen, LogExampleGenSpec
    from components.log_example_gen.driver import Driver
    from components.log_example_gen.executor import Executor

    cfg = make_config(history_length=4, train_days=f"{D1}-{D2}", eval_days=f"{D3}", validation_last_n_days=1)
    by_config = LogExampleGen(input_base="/logs", config=cfg)
    # pipeline/pipeline.py's call: knobs as keywords, days as comma-separated text
    by_keywords = LogExampleGen(input_base="/logs", history_length=4, history_min_watch_s=0.0,
                                train_days="20220425,20220426", eval_days="20220427", eval_last_n_days=2,
                                validation_last_n_days=1, max_bad_row_fraction=0.01, **INGESTION)
    assert by_config.exec_properties == by_keywords.exec_properties == dict(
        cfg.to_component_args(), input_base="/logs")
    assert by_config.exec_properties["validation_last_n_days"] == 1
    assert by_config.id == "LogExampleGen" and by_config.config == cfg
    assert by_config.driver_class is Driver and by_config.executor_spec.executor_class is Executor
    assert set(by_config.outputs) == {"examples", "dead_letter"}
    optional = {k for k, p in LogExampleGenSpec.PARAMETERS.items() if p.optional}
    assert optional == {"log_file_pattern", "user_features_pattern", "video_features_pattern",
                        "span_index", "span_start_ms", "span_end_ms", "span_holdout_ms",  # span.py (#14)
                        "signal_families",  # signal_families.py (#37): absent when off
                        "user_events"}  # user_events.py (#38): absent when off


def test_component_refuses_missing_or_doubled_knobs():
    from components.log_example_gen.component import LogExampleGen

    knobs = dict(KNOBS)
    del knobs["max_bad_row_fraction"]
    with pytest.raises(ValueError, match=r"missing \['max_bad_row_fraction'\]"):
        LogExampleGen(input_base="/logs", **knobs)
    with pytest.raises(ValueError, match="not both"):
        LogExampleGen(input_base="/logs", config=make_config(), history_length=3)
    with pytest.raises(ValueError, match="history_length must be >= 1"):
        LogExampleGen(input_base="/logs", **dict(KNOBS, history_length=0))
    with pytest.raises(ValueError, match="input_base must be a non-empty path"):
        LogExampleGen(input_base="", config=make_config())
