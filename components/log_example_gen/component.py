"""LogExampleGen: a TFX ExampleGen (Beam) for KuaiRand-Pure-format logs.

Usage in a pipeline (the values live in pipeline/configs/)::

    from components.log_example_gen.component import LogExampleGen
    from components.log_example_gen.config import LogExampleGenConfig

    example_gen = LogExampleGen(
        input_base=configs.DATA_PATH,
        config=LogExampleGenConfig(history_length=50, history_min_watch_s=0.0,
                                   train_days=(), eval_days=(), eval_last_n_days=2,
                                   validation_last_n_days=1, max_bad_row_fraction=0.01,
                                   duplicate_rule="drop", date_window=(), max_date_gap_days=2,
                                   out_of_window_rule="dead_letter", date_time_tolerance_s=10800.0,
                                   max_play_time_ms=86_400_000, max_duration_ms=86_400_000,
                                   read_range_bytes=4 << 20, label_delay_s=300.0,
                                   signal_prior_ctr=0.3))
    # or the same knobs as keywords: LogExampleGen(input_base=..., history_length=50, ...)
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])  # components/statistics_gen

Every knob is required (no defaults here; the file patterns default to
schemas/kuairand_format.py) and becomes an execution property, so it is in the
cache key; day lists are stored as comma-separated yyyymmdd text. The optional span
window (``span_index``, ``span_start_ms``, ``span_end_ms``, ``span_holdout_ms``;
span.py) replaces the day splits for continuous runs (pipeline/continuous.py).

Outputs:
- ``examples`` (standard Examples): ``Split-train`` / ``Split-validation`` (the last
  ``validation_last_n_days`` train days; 0 leaves it empty, which only a pipeline
  without a Trainer can use) / ``Split-eval`` gzipped TFRecords of tf.Examples with
  the raw features of models/features.py (``raw_feature_spec(history_length)`` parses
  them); ``span``, ``version`` and ``input_fingerprint`` as TFX's ExampleGen records them.
  With ``user_events``, also ``UserEvents/``: every user's history events once, for
  lifelong histories (user_events.py; custom property ``user_events_dir``).
- ``dead_letter`` (DeadLetterRows): bad rows as JSON lines + ``counts.json``.

Caching: the driver (driver.py) fingerprints the matching log / user / video files
(names, sizes, mtimes; inputs.py) before the cache check, so a cached rerun on
changed logs re-ingests and an unchanged rerun reuses the examples. On Kubeflow
Pipelines v2 TFX runs a pre-cache-check driver for FileBasedExampleGen only: there
the executor still records span and fingerprint, but KFP's cache key does not see
them (run LogExampleGen uncached there, or give each span its own input_base).

The execution fails (outputs are not published) if bad / total log rows exceeds
``max_bad_row_fraction``; the error names the fraction, the bound and the
dead-letter directory, which keeps the rows for inspection.
"""
from typing import Optional

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from components.log_example_gen import driver, executor
from components.log_example_gen.artifacts import DeadLetterRows
from components.log_example_gen.config import PATTERN_FIELDS, SPAN_FIELDS, LogExampleGenConfig

_KNOB_TYPES = {
    "history_length": int,
    "history_min_watch_s": float,
    "train_days": str,  # comma-separated yyyymmdd (config.to_component_args())
    "eval_days": str,
    "eval_last_n_days": int,
    "validation_last_n_days": int,
    "max_bad_row_fraction": float,
    "duplicate_rule": str,
    "date_window": str,  # comma-separated yyyymmdd, like the day lists
    "max_date_gap_days": int,
    "out_of_window_rule": str,
    "date_time_tolerance_s": float,
    "max_play_time_ms": int,
    "max_duration_ms": int,
    "read_range_bytes": int,
    "label_delay_s": float,
    "signal_prior_ctr": float,
}


class LogExampleGenSpec(types.ComponentSpec):
    """Execution properties: input_base + LogExampleGenConfig.to_component_args()."""
    PARAMETERS = {
        executor.INPUT_BASE_KEY: ExecutionParameter(type=str),
        **{name: ExecutionParameter(type=t) for name, t in _KNOB_TYPES.items()},
        **{name: ExecutionParameter(type=str, optional=True) for name in PATTERN_FIELDS},
        **{name: ExecutionParameter(type=int, optional=True) for name in SPAN_FIELDS},  # span.py
        "signal_families": ExecutionParameter(type=str, optional=True),  # comma list; absent: none
        "user_events": ExecutionParameter(type=int, optional=True),  # 1: UserEvents/ (user_events.py)
    }
    INPUTS = {}
    OUTPUTS = {
        executor.EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples),
        executor.DEAD_LETTER_KEY: ChannelParameter(type=DeadLetterRows),
    }


assert set(LogExampleGenSpec.PARAMETERS) == {executor.INPUT_BASE_KEY, *LogExampleGenConfig.field_names()}


class LogExampleGen(base_beam_component.BaseBeamComponent):
    """Custom Beam ExampleGen over a folder of KuaiRand-Pure-format CSV files."""

    SPEC_CLASS = LogExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
    DRIVER_CLASS = driver.Driver

    def __init__(self, input_base: str, config: Optional[LogExampleGenConfig] = None, **knobs):
        """``config``, or every required knob of LogExampleGenConfig as a keyword
        (days as text or int lists); ValueError naming missing or unknown knobs."""
        if config is None:
            config = LogExampleGenConfig.from_custom_config(knobs)
        elif knobs:
            raise ValueError(f"LogExampleGen: pass the knobs in config or as keywords, not both "
                             f"(got config and {sorted(knobs)})")
        if not isinstance(input_base, str) or not input_base:
            raise ValueError(f"LogExampleGen: input_base must be a non-empty path, got {input_base!r}")
        self.config = config
        super().__init__(spec=LogExampleGenSpec(
            input_base=input_base,
            examples=types.Channel(type=standard_artifacts.Examples),
            dead_letter=types.Channel(type=DeadLetterRows),
            **config.to_component_args()))
