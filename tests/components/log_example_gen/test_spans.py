"""Span windows (span.py): spans 0..k of simulated logs, concatenated, equal a one-shot run
(same rows, same features, same histories), and every split of a span run is non-empty."""
import os

import pytest

from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen.row_rules import day_start_ms
from components.log_example_gen.span import SpanWindow, span_window
from tests.components.log_example_gen.fixture_logs import by_key, read_examples, run_component

L = 4
SPAN_HOURS, HOLDOUT_HOURS, NUM_SPANS = 24.0, 4.0, 2
SPLITS = ("train", "validation", "eval")


def test_split_of_a_row_by_time_and_user():
    w = span_window(2, origin_ms=1_000, span_hours=1.0, holdout_hours=0.5)
    assert w == SpanWindow(2, 1_000 + 7_200_000, 1_000 + 10_800_000, 1_800_000)
    assert w.split_of(w.start_ms - 1, 3) is None  # before: history only
    assert w.split_of(w.start_ms, 3) == "train" and w.split_of(w.end_ms - 1, 4) == "train"
    assert w.split_of(w.end_ms, 4) == "validation" and w.split_of(w.end_ms, 5) == "eval"
    assert w.split_of(w.end_ms + w.holdout_ms, 5) is None  # after the holdout: not emitted
    with pytest.raises(ValueError, match="holdout_ms"):
        SpanWindow(0, 0, 10, 0).check()
    with pytest.raises(ValueError, match="start_ms < end_ms"):
        SpanWindow(0, 10, 10, 5).check()


def _examples(examples_uri):
    return {s: read_examples(bp.split_uri(examples_uri, s), L) for s in SPLITS}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from data.simulator import simulate

    tmp = tmp_path_factory.mktemp("spans")
    logs = str(tmp / "logs")
    simulate(logs, num_users=60, num_videos=30, num_days=3, impressions_per_user_day=6.0, seed=5)
    knobs = dict(history_length=L, max_bad_row_fraction=0.0, eval_last_n_days=1, validation_last_n_days=1)
    one_shot, _, _ = run_component(str(tmp / "one_shot"), logs, **knobs)
    origin = day_start_ms(20220425) + 10 * 3_600_000  # 10:00 UTC+8: holdouts in busy hours
    spans = []
    for k in range(NUM_SPANS):
        w = span_window(k, origin, SPAN_HOURS, HOLDOUT_HOURS)
        examples, dead_letter, _ = run_component(
            str(tmp / f"span{k}"), logs, span_index=w.index, span_start_ms=w.start_ms, span_end_ms=w.end_ms,
            span_holdout_ms=w.holdout_ms, **knobs)
        spans.append((w, examples, bp.read_counts(dead_letter.uri)))
    return _examples(one_shot.uri), spans


def test_spans_concatenated_equal_a_one_shot_run(runs):
    one_shot, spans = runs
    reference = by_key([e for s in SPLITS for e in one_shot[s]])
    trained = []
    for w, examples, counts in spans:
        got = _examples(examples.uri)
        assert examples.span == w.index
        assert examples.get_int_custom_property("span_end_ms") == w.end_ms
        assert all(counts["splits"][s] > 0 for s in SPLITS), counts["splits"]
        assert counts["good_rows"] == len(reference)  # every row read; the others feed histories only
        for split in SPLITS:
            for e in got[split]:  # features and histories identical to the one-shot run
                assert e == reference[(e["user_id"], e["video_id"], e["time_ms"])]
                t = e["time_ms"]
                inside = w.start_ms <= t < w.end_ms if split == "train" else w.end_ms <= t < w.end_ms + w.holdout_ms
                assert inside, (split, t, w)
            assert {e["user_id"] % 2 for e in got[split]} == {"validation": {0}, "eval": {1}}.get(
                split, {0, 1})
        trained += [(e["user_id"], e["video_id"], e["time_ms"]) for e in got["train"]]
    first, last = spans[0][0], spans[-1][0]
    expected = sorted(k for k in reference if first.start_ms <= k[2] < last.end_ms)
    assert sorted(trained) == expected  # each row of [start_0, end_k) trained exactly once
    assert len(expected) > 100
    # histories reach back across span boundaries (the point of reading earlier rows)
    later = [reference[k] for k in expected if k[2] >= spans[1][0].start_ms]
    assert any(e["time_ms"] - 1000 * max(e["hist_time_gap_s"]) < spans[1][0].start_ms
               for e in later if e["hist_len"] > 0)

def test_config_round_trip_and_component_args_with_a_span(tmp_path):
    from components.log_example_gen.component import LogExampleGen
    from tests.components.log_example_gen.fixture_logs import make_config

    plain = make_config()
    assert "span_index" not in plain.to_component_args() and plain.span_window() is None
    cfg = make_config(span_index=3, span_start_ms=10, span_end_ms=20, span_holdout_ms=5)
    args = cfg.to_component_args()
    assert {k: args[k] for k in ("span_index", "span_start_ms", "span_end_ms", "span_holdout_ms")} == dict(
        span_index=3, span_start_ms=10, span_end_ms=20, span_holdout_ms=5)
    assert type(cfg).from_custom_config(args) == cfg
    assert LogExampleGen(input_base=str(tmp_path), config=cfg).exec_properties["span_index"] == 3
    with pytest.raises(ValueError, match="holdout_ms"):
        make_config(span_index=0, span_start_ms=10, span_end_ms=20)
    assert os.path.basename(bp.split_uri("x", "eval")) == "Split-eval"
