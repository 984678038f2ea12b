"""LogExampleGen: a TFX ExampleGen (Beam) for KuaiRand-Pure-format logs.

Usage in a pipeline::

    from components.log_example_gen import LogExampleGen

    example_gen = LogExampleGen(input_base=configs.DATA_PATH,
                                history_length=configs.HISTORY_LENGTH)
    statistics_gen = tfx.components.StatisticsGen(
        examples=example_gen.outputs["examples"])

Outputs:
- ``examples`` (standard Examples): ``Split-train`` / ``Split-validation`` (the last
  ``validation_last_n_days`` train days; 0 leaves it empty, which only a pipeline
  without a Trainer can use) / ``Split-eval`` gzipped
  TFRecords of tf.Examples with the raw features of models/features.py
  (``raw_feature_spec(history_length)`` parses them).
- ``dead_letter`` (DeadLetterRows): bad rows as JSON lines + ``counts.json``.

The execution fails (outputs are not published) if bad / total log rows exceeds
``max_bad_row_fraction``; the error names the fraction, the bound and the
dead-letter directory, which keeps the rows for inspection. Day lists are
comma-separated yyyymmdd strings (see time_split.py for the rules).
"""
import apache_beam as beam
from tfx.dsl.component.experimental.annotations import (BeamComponentParameter, OutputArtifact,
                                                         Parameter)
from tfx.dsl.component.experimental.decorators import component
from tfx.types import artifact_utils, standard_artifacts
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2

from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen import time_split
from components.log_example_gen.artifacts import DeadLetterRows
from pipeline import configs


def _days_text(days) -> str:
    return ",".join(str(d) for d in days)


@component(use_beam=True)
def LogExampleGen(  # pylint: disable=invalid-name
    examples: OutputArtifact[standard_artifacts.Examples],
    dead_letter: OutputArtifact[DeadLetterRows],
    input_base: Parameter[str],
    history_length: Parameter[int] = configs.HISTORY_LENGTH,
    history_min_watch_s: Parameter[float] = configs.HISTORY_MIN_WATCH_S,
    train_days: Parameter[str] = _days_text(configs.TRAIN_DAYS),
    eval_days: Parameter[str] = _days_text(configs.EVAL_DAYS),
    eval_last_n_days: Parameter[int] = configs.EVAL_LAST_N_DAYS,
    validation_last_n_days: Parameter[int] = configs.VALIDATION_LAST_N_TRAIN_DAYS,
    max_bad_row_fraction: Parameter[float] = configs.MAX_BAD_ROW_FRACTION,
    log_file_pattern: Parameter[str] = configs.LOG_FILE_PATTERN,
    user_features_pattern: Parameter[str] = configs.USER_FEATURES_PATTERN,
    video_features_pattern: Parameter[str] = configs.VIDEO_FEATURES_PATTERN,
    beam_pipeline: BeamComponentParameter[beam.Pipeline] = None,
):
    """Reads KuaiRand-Pure-format logs under input_base and writes split tf.Examples."""
    config = bp.LogExampleGenConfig(
        history_length=int(history_length),
        history_min_watch_s=float(history_min_watch_s),
        train_days=tuple(time_split.parse_days(train_days)),
        eval_days=tuple(time_split.parse_days(eval_days)),
        eval_last_n_days=int(eval_last_n_days),
        validation_last_n_days=int(validation_last_n_days),
        log_file_pattern=log_file_pattern,
        user_features_pattern=user_features_pattern,
        video_features_pattern=video_features_pattern,
    )
    with beam_pipeline as p:
        bp.write_log_examples(p, input_base, config, examples.uri, dead_letter.uri)

    counts = bp.read_counts(dead_letter.uri)
    examples.split_names = artifact_utils.encode_split_names(time_split.SPLIT_NAMES)
    examples.span = 0
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    for split in time_split.SPLIT_NAMES:
        examples.set_int_custom_property(f"num_{split}_examples", counts["splits"][split])
    for key in ("total_rows", "good_rows", "bad_rows", "history_only_rows"):
        dead_letter.set_int_custom_property(key, counts[key])
    dead_letter.set_float_custom_property("bad_row_fraction", counts["bad_row_fraction"])

    bp.check_bad_row_fraction(counts, max_bad_row_fraction, dead_letter.uri)
    empty = [s for s in time_split.SPLIT_NAMES if counts["splits"][s] == 0
             and not (s == time_split.VALIDATION and int(validation_last_n_days) == 0)]
    if empty:
        raise ValueError(
            f"LogExampleGen: split(s) {empty} are empty; dates assigned: "
            f"{counts['split_dates']} (train_days={train_days!r}, eval_days={eval_days!r}, "
            f"eval_last_n_days={eval_last_n_days}, validation_last_n_days={validation_last_n_days})")
