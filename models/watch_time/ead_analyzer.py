"""EAD in TF Transform: the analyzer that learns the thresholds, and THE reader of its asset.

- :func:`ead_thresholds_analyzer` wires the pure EAD search (models/watch_time/ead.py)
  into TF Transform (one analyzer, one analysis phase): the thresholds become constants
  of the transform graph, and the
  search report (:class:`ead.EadResult` as JSON) becomes the graph's asset
  ``ASSET_FILENAME``, annotated with the key ``ASSET_KEY``.
- :func:`read_ead_result` / :func:`ead_asset_path` read that asset back, from a
  ``tft.TFTransformOutput`` (the Trainer) or a transform-graph directory (the
  TransformGraph artifact's uri: the model report, benchmarks). Nothing else should
  open the file: the Trainer's CREAD thresholds are the very constants the graph
  buckets with.
"""
from __future__ import annotations

import dataclasses
import json
import os
import uuid
from typing import Optional, Sequence

import numpy as np

from models import tft_analyzer
from models.watch_time import ead

ASSET_FILENAME = "ead_thresholds.json"  # EadResult.to_json(), an asset of the transform graph
ASSET_KEY = "ead_thresholds"  # tft.annotate_asset key: TFTransformOutput.vocabulary_file_by_name(ASSET_KEY)


# ----------------------------------------------------------------- TF Transform
def _make_ead_ptransform(M, beta, alphas, num_quantiles, epsilon, t_max_quantile):
    """Beam PTransform: PCollection of (watch-time batch,) -> (thresholds, report json,
    path of the report written as ``ASSET_FILENAME`` under the analyzer temp dir).

    The boundaries come from TF Transform's own ``QuantilesCombiner`` with the arguments
    ``tft.quantiles(x, num_quantiles, epsilon)`` gives it (the same sketch, so the same
    boundaries), run as one global combine; the search and the write follow in one step.
    TF Transform copies the file into the transform graph's ``assets/``, so the Trainer
    reads the very thresholds the graph holds (``TFTransformOutput.vocabulary_file_by_name``)."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform import analyzers as tft_analyzers

    alphas = tuple(float(a) for a in alphas)
    combiner = tft_analyzers.QuantilesCombiner(num_quantiles, epsilon, np.float32, has_weights=False,
                                               output_shape=[1, num_quantiles - 1], feature_shape=[])

    class _Quantiles(beam.CombineFn):
        def create_accumulator(self):
            return combiner.create_accumulator()

        def add_input(self, acc, batch):
            return combiner.add_input(acc, batch)

        def merge_accumulators(self, accs):
            return combiner.merge_accumulators(accs)

        def compact(self, acc):
            return combiner.compact(acc)

        def extract_output(self, acc):
            return combiner.extract_output(acc)[0]

    class _EadAnalyze(tft_beam.experimental.PTransformAnalyzer):
        def expand(self, pcoll):
            base_dir = self.base_temp_dir

            def _search_and_write(boundaries):
                b = np.asarray(boundaries, dtype=np.float64).reshape(-1)
                res = ead.search_thresholds(b, M, beta, alphas, t_max_quantile)
                report = res.to_json().encode("utf-8")
                out_dir = os.path.join(base_dir, "ead", uuid.uuid4().hex)
                tf.io.gfile.makedirs(out_dir)
                path = os.path.join(out_dir, ASSET_FILENAME)
                with tf.io.gfile.GFile(path, "wb") as f:
                    f.write(report)
                yield beam.pvalue.TaggedOutput("thresholds", np.asarray(res.thresholds, np.float32))
                yield beam.pvalue.TaggedOutput("report", np.array(report, dtype=object))
                yield beam.pvalue.TaggedOutput("asset", np.array(path.encode("utf-8"), dtype=object))

            outs = (pcoll
                    | "Quantiles" >> beam.CombineGlobally(_Quantiles())
                    | "SearchAndWrite" >> beam.FlatMap(_search_and_write).with_outputs(
                        "thresholds", "report", "asset"))
            return outs.thresholds, outs.report, outs.asset

    return _EadAnalyze()


def ead_thresholds_analyzer(watch_time, M: int, beta: float,
                            alphas: Sequence[float] = ead.DEFAULT_ALPHAS,
                            num_quantiles: int = 1000, t_max_quantile: float = 0.99,
                            epsilon: Optional[float] = None, name: str = "ead_thresholds",
                            asset_key: str = ASSET_KEY):
    """TF Transform analyzer: EAD thresholds of ``watch_time`` as transform-graph constants.

    One analyzer in one analysis phase (``tft.experimental.ptransform_analyzer``): the
    ``num_quantiles - 1`` boundaries ``tft.quantiles(watch_time, num_quantiles, epsilon)``
    would give (its combiner, see :func:`_make_ead_ptransform`), then
    :func:`ead.search_thresholds` on them once, then the report's asset. Chaining
    ``tft.quantiles`` and two analyzers on its output cost two more analysis phases
    (each a re-trace of ``preprocessing_fn`` and a pass over the data). No py_function:
    the outputs are plain constants in the exported graph.

    Returns ``(thresholds, report)``: float32 ``[M_eff]`` (static shape unknown,
    ``M_eff <= M`` after merging duplicates) and a scalar string with
    :meth:`ead.EadResult.to_json` (J of every candidate). Both are placeholders while
    tracing and constants in the final transform graph. The same report is also
    an asset of the transform graph (``ASSET_FILENAME``, looked up by ``asset_key``:
    ``TFTransformOutput.vocabulary_file_by_name(asset_key)``), the JSON artifact the
    Trainer builds its CREAD head from and people inspect: read it with
    :func:`read_ead_result`.
    """
    import tensorflow as tf
    import tensorflow_transform as tft

    if M < 1:
        raise ValueError(f"M must be >= 1, got {M}")
    if num_quantiles < 2:
        raise ValueError(f"num_quantiles must be >= 2, got {num_quantiles}")
    if epsilon is None:
        epsilon = 1.0 / (10.0 * num_quantiles)  # rank error well below one bucket
    with tf.compat.v1.name_scope(name):
        x = tf.reshape(tf.cast(watch_time, tf.float32), [-1])
        thresholds, report, _ = tft_analyzer.ptransform_analyzer(
            inputs=[x],
            ptransform=_make_ead_ptransform(M, beta, alphas, num_quantiles, epsilon, t_max_quantile),
            output_dtypes=[tf.float32, tf.string, tf.string],
            output_shapes=[[None], [], []],
            output_asset_default_values=[None, None, b"{}"],
            name="analyzer")
        tft.annotate_asset(asset_key, ASSET_FILENAME)
    return thresholds, report


# ------------------------------------------------------------------ the reader
def ead_asset_path(transform_output, asset_key: str = ASSET_KEY) -> Optional[str]:
    """Path of the EAD asset of a transform graph, or None when it has none.

    ``transform_output``: a ``tft.TFTransformOutput`` or a transform-graph directory
    (``TFTransformOutput``'s directory: ``transform_fn/``, ``transformed_metadata/``;
    local or any ``tf.io.gfile`` filesystem). The asset is looked up by its key, as
    Transform annotated it; a graph without the annotation (an asset map) falls back to
    ``transform_fn/assets/ASSET_FILENAME``. None / "" give None.
    """
    import tensorflow as tf

    if transform_output is None or (isinstance(transform_output, (str, os.PathLike))
                                    and not os.fspath(transform_output)):
        return None
    if isinstance(transform_output, (str, os.PathLike)):
        import tensorflow_transform as tft

        transform_output = tft.TFTransformOutput(os.fspath(transform_output))
    path = transform_output.vocabulary_file_by_name(asset_key)
    if path and tf.io.gfile.exists(path):
        return path
    graph_dir = getattr(transform_output, "transform_savedmodel_dir", None)
    fallback = graph_dir and os.path.join(graph_dir, "assets", ASSET_FILENAME)
    return fallback if fallback and tf.io.gfile.exists(fallback) else None


def parse_ead_asset(text: str, source: str = "EAD asset") -> ead.EadResult:
    """:class:`ead.EadResult` from the asset's JSON text.

    Accepts ``EadResult.to_json()`` and, from older graphs, an object with at least
    ``thresholds`` or a bare JSON list of thresholds; the fields such an asset lacks
    are None (``M``, ``beta``, ``t_max_quantile``, ``chosen``...), ``M_eff`` is the
    number of thresholds and ``t_max`` the last one. ValueError names `source` when
    there are no thresholds.
    """
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{source}: not JSON ({e})") from None
    if isinstance(data, list):
        data = {"thresholds": data}
    if not isinstance(data, dict) or not data.get("thresholds"):
        raise ValueError(f"{source}: expected a JSON list of thresholds or an object with "
                         f"'thresholds', got {type(data).__name__}")
    thresholds = [float(t) for t in data["thresholds"]]
    fields = {f.name: None for f in dataclasses.fields(ead.EadResult)}
    fields.update(M_eff=len(thresholds), t_max=thresholds[-1], candidates=[])
    fields.update({k: v for k, v in data.items() if k in fields})
    fields["thresholds"] = thresholds
    return ead.EadResult(**fields)


def read_ead_result(transform_output, asset_key: str = ASSET_KEY) -> ead.EadResult:
    """The :class:`ead.EadResult` Transform stored in the transform graph: thresholds
    t_1..t_M (the constants the graph buckets with), the chosen candidate, β, M and J of
    every candidate.

    ``transform_output``: a ``tft.TFTransformOutput`` or a transform-graph directory
    (see :func:`ead_asset_path`). FileNotFoundError when the graph has no EAD asset
    (its preprocessing_fn did not call :func:`ead_thresholds_analyzer`).
    """
    import tensorflow as tf

    path = ead_asset_path(transform_output, asset_key)
    if path is None:
        where = getattr(transform_output, "transform_savedmodel_dir", transform_output)
        raise FileNotFoundError(f"no EAD asset {asset_key!r} ({ASSET_FILENAME}) in the transform graph "
                                f"{where}: its preprocessing_fn must call ead_thresholds_analyzer")
    with tf.io.gfile.GFile(path, "r") as f:
        return parse_ead_asset(f.read(), path)
