"""StatisticsGen with a row budget per split, sampled before decoding (package doc).

Usage in a pipeline (the budget lives in pipeline/configs/ STATISTICS_SAMPLE_ROWS)::

    from components.statistics_gen.component import StatisticsGen

    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"], sample_rows=100_000)

Same inputs, outputs, id ("StatisticsGen") and artifact properties as
``tfx.components.StatisticsGen``, plus ``sample_rows``: a split of N examples is read at
rate min(1, sample_rows / N) (sampling.py); 0 reads every example, and a budget below
1,000 is refused. ``stats_options``'
``sample_rate`` and ``sample_rate_by_split`` still name a rate outright. The artifact's
``sample_rate_by_split`` records the rate each split was read at, so a reader knows the
statistics are a sample's (counts are the sample's, not the split's).
"""
from typing import Dict, List, Optional

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types import standard_component_specs as specs
from tfx.types.component_spec import ExecutionParameter
from tfx.utils import json_utils

from components.statistics_gen import sampling
from components.statistics_gen.executor import SAMPLE_ROWS_KEY, Executor


class StatisticsGenSpec(specs.StatisticsGenSpec):
    """TFX's StatisticsGen spec with ``sample_rows``."""

    PARAMETERS = {**specs.StatisticsGenSpec.PARAMETERS,
                  SAMPLE_ROWS_KEY: ExecutionParameter(type=int, optional=True)}


class StatisticsGen(base_beam_component.BaseBeamComponent):
    """TFX StatisticsGen reading a sample of at most ~``sample_rows`` examples per split."""

    SPEC_CLASS = StatisticsGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, examples, schema=None, stats_options=None,
                 exclude_splits: Optional[List[str]] = None,
                 sample_rate_by_split: Optional[Dict[str, float]] = None, sample_rows: int = 0):
        sampling.check_sample_rows(sample_rows)
        spec = StatisticsGenSpec(
            examples=examples,
            schema=schema,
            stats_options_json=stats_options.to_json() if stats_options else None,
            exclude_splits=json_utils.dumps(exclude_splits or []),
            sample_rate_by_split=json_utils.dumps(sample_rate_by_split) if sample_rate_by_split else None,
            statistics=types.Channel(type=standard_artifacts.ExampleStatistics),
            **{SAMPLE_ROWS_KEY: sample_rows},
        )
        super().__init__(spec=spec)
