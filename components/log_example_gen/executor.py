"""LogExampleGen executor: resolve the inputs, run the Beam pipeline, describe the outputs.

``run_log_example_gen`` is the whole execution on explicit artifacts and a Beam
pipeline (tests call it directly); ``Executor`` is the TFX wrapper.
"""
from typing import Any, Dict, List, Optional

import apache_beam as beam
from absl import logging
from tfx import types
from tfx.components.example_gen import driver as example_gen_driver
from tfx.components.util import examples_utils
from tfx.dsl.components.base import base_beam_executor
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils

from components import beam_in_process
from components.beam_dependencies import skip_for_local_runners
from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen import counts as counts_lib
from components.log_example_gen import inputs as inputs_lib
from components.log_example_gen import time_split, user_events
from components.log_example_gen.artifacts import num_examples_property
from components.log_example_gen.config import LogExampleGenConfig
from models.training.split_counts import write_split_counts

skip_for_local_runners()  # no TFX sdist per run on the DirectRunner (components/beam_dependencies.py)
beam_in_process.install()  # no state cache, no logger resets per pickle (components/beam_in_process.py)

INPUT_BASE_KEY = "input_base"
EXAMPLES_KEY = "examples"
USER_EVENTS_PROPERTY = "user_events_dir"
DEAD_LETTER_KEY = "dead_letter"


def record_inputs(resolved: inputs_lib.ResolvedInputs, examples: types.Artifact) -> None:
    """Span, version and input fingerprint on the Examples artifact, where TFX's
    ExampleGen puts them (custom properties, plus the Examples span/version properties)."""
    example_gen_driver.update_output_artifact(resolved.exec_properties(), examples.mlmd_artifact)
    examples.span = resolved.span
    if resolved.version is not None:
        examples.version = resolved.version


def run_log_example_gen(beam_pipeline: beam.Pipeline, input_base: str, config: LogExampleGenConfig,
                        examples: types.Artifact, dead_letter: types.Artifact,
                        exec_properties: Optional[Dict[str, Any]] = None) -> dict:
    """Reads the logs under input_base, writes split tf.Examples to ``examples.uri``
    and bad rows to ``dead_letter.uri``; returns counts.json as a dict.

    ``exec_properties``: what the driver recorded (span, input_fingerprint); the run
    fails with InputsChangedError if the files no longer match it. Fails with
    OutOfWindowError under ``out_of_window_rule='error'`` if a row is dated outside
    the date window, with BadRowFractionError above ``config.max_bad_row_fraction``
    (outputs not published)
    and with ValueError if a split that must hold examples is empty.
    """
    resolved = inputs_lib.resolve_inputs(input_base, config)
    inputs_lib.check_unchanged(resolved, exec_properties or {})
    logging.info("LogExampleGen: span %s, version %s, inputs\n%s", resolved.span, resolved.version,
                 resolved.fingerprint)
    with beam_pipeline as p:
        bp.write_log_examples(p, resolved, config, examples.uri, dead_letter.uri,
                              spill_groups=bp.groups_in_memory(p))

    counts = bp.read_counts(dead_letter.uri)
    examples.split_names = artifact_utils.encode_split_names(time_split.SPLIT_NAMES)
    record_inputs(resolved, examples)
    if config.span_window() is not None:  # the window this span's examples cover (span.py)
        for name in ("span_start_ms", "span_end_ms", "span_holdout_ms"):
            examples.set_int_custom_property(name, getattr(config, name))
    examples_utils.set_payload_format(examples, example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE)
    examples_utils.set_file_format(examples, "tfrecords_gzip")
    for split in time_split.SPLIT_NAMES:
        examples.set_int_custom_property(num_examples_property(split), counts["splits"][split])
    # the same counts as a file in the artifact, for the Trainer, whose FnArgs has the split's files
    # but not the artifact: it sizes its in-memory read from them (models/training/split_counts.py)
    write_split_counts(examples.uri, {split: counts["splits"][split] for split in time_split.SPLIT_NAMES})
    if config.user_events:  # every user's history events once, beside the splits (user_events.py)
        examples.set_string_custom_property(USER_EVENTS_PROPERTY, user_events.DIR)
    for key in ("total_rows", "good_rows", "bad_rows", "dropped_rows", "history_only_rows"):
        dead_letter.set_int_custom_property(key, counts[key])
    dead_letter.set_float_custom_property("bad_row_fraction", counts["bad_row_fraction"])

    problems = counts_lib.check_totals(counts)
    if problems:  # an invariant of the Beam pipeline, checked on every run
        raise RuntimeError(f"LogExampleGen: rows are not all accounted for: {problems}")
    counts_lib.check_window(counts, config.out_of_window_rule, dead_letter.uri)
    bp.check_bad_row_fraction(counts, config.max_bad_row_fraction, dead_letter.uri)
    span = config.span_window()
    empty = [s for s in time_split.SPLIT_NAMES if counts["splits"][s] == 0
             and not (s == time_split.VALIDATION and config.validation_last_n_days == 0 and span is None)]
    if empty and span is not None:
        raise ValueError(f"LogExampleGen: split(s) {empty} are empty in {span.describe()}: "
                         f"do the logs cover the span and its holdout?")
    if empty:
        raise ValueError(
            f"LogExampleGen: split(s) {empty} are empty; dates assigned: "
            f"{counts['split_dates']} (train_days={list(config.train_days)}, "
            f"eval_days={list(config.eval_days)}, eval_last_n_days={config.eval_last_n_days}, "
            f"validation_last_n_days={config.validation_last_n_days})")
    return counts


class Executor(base_beam_executor.BaseBeamExecutor):
    """TFX executor of LogExampleGen (execution properties: component.LogExampleGenSpec)."""

    def Do(self, input_dict: Dict[str, List[types.Artifact]],
           output_dict: Dict[str, List[types.Artifact]],
           exec_properties: Dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        run_log_example_gen(
            self._make_beam_pipeline(), exec_properties[INPUT_BASE_KEY],
            LogExampleGenConfig.from_exec_properties(exec_properties),
            artifact_utils.get_single_instance(output_dict[EXAMPLES_KEY]),
            artifact_utils.get_single_instance(output_dict[DEAD_LETTER_KEY]),
            exec_properties)
