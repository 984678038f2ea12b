"""Custom TFMA metrics of the watch-time ranker, one job per module.

=============  ===================================================================
module         job
=============  ===================================================================
``inputs``     which prediction, label and features a metric reads from TFMA's
               extracts (multi-output models, ``prediction_output`` / ``label_key``)
``sampling``   row-keeping combiner base: exact up to ``max_rows``, then a mergeable
               SplitMix64 bottom-k hash sample by group, with its error bounds
``combiners``  the Beam CombineFns; each calls a pure NumPy function of
               `models.evaluation.metrics`
``user_table`` one table of rows per slice shared by the per-user metrics (GAUC,
               request GAUC, XGAUC, nDCG, model ECS), each derived from it
``metrics``    the ``tfma`` Metric classes (table of classes and metric keys) and
               their computations; the ``MetricConfig.module`` TFMA imports
``specs``      ``metric_config`` / ``metrics_specs``: the MetricsSpecs the Evaluator
               runs, built-ins included, with the blessing thresholds
``extractors`` ``custom_extractors``: TFMA's extractors with per-slice batches instead
               of one extract per example (the Evaluator's ``module_path``)
=============  ===================================================================

Metrics: XAUC, XGAUC, GroupAUC (GAUC), RequestGAUC (GAUC over a user's requests), UserNDCG (nDCG@k), ModelECS and ObservedECS
(effective catalog size ``2 sum_i i p_i - 1``), NormalizedEntropy, RMSE and
QuantileCoverage (``c_i = mean 1(y <= t_tau_i)``, tau_i = i/(N+1)); the equations are
in the class docstrings of `models.evaluation.tfma.metrics`.

Usage: ``from models.evaluation import tfma as TM; TM.metrics_specs(...)``.
"""
from models.evaluation.tfma.combiners import PINBALL_KEY, coverage_key
from models.evaluation.tfma.metrics import (
    MODULE, RMSE, XAUC, XGAUC, GroupAUC, ModelECS, NormalizedEntropy, ObservedECS,
    QuantileCoverage, RequestGAUC, RowBinaryCrossEntropy, RowCount, UserNDCG)
from models.evaluation.tfma.sampling import DEFAULT_MAX_ROWS, stable_hash
from models.evaluation.tfma.specs import metric_config, metrics_specs

__all__ = [
    "DEFAULT_MAX_ROWS", "MODULE", "PINBALL_KEY", "GroupAUC", "ModelECS", "NormalizedEntropy",
    "ObservedECS", "QuantileCoverage", "RMSE", "RequestGAUC", "RowBinaryCrossEntropy", "RowCount",
    "UserNDCG", "XAUC", "XGAUC", "coverage_key", "metric_config", "metrics_specs", "stable_hash",
]
