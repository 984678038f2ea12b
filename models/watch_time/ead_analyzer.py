"""EAD in TF Transform: the analyzer that learns the thresholds, and THE reader of its asset.

- :func:`ead_thresholds_analyzer` wires the pure EAD search (models/watch_time/ead.py)
  into TF Transform: the thresholds become constants of the transform graph, and the
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

from models.watch_time import ead

ASSET_FILENAME = "ead_thresholds.json"  # EadResult.to_json(), an asset of the transform graph
ASSET_KEY = "ead_thresholds"  # tft.annotate_asset key: TFTransformOutput.vocabulary_file_by_name(ASSET_KEY)


# ----------------------------------------------------------------- TF Transform
def _make_search_ptransform(M, beta, alphas, t_max_quantile):
    """Beam PTransform: PCollection of (boundaries batch,) -> (thresholds, report json)."""
    import apache_beam as beam

    alphas = tuple(float(a) for a in alphas)

    def _search(batches):
        # Every batch carries the same analysed boundaries (an analyzer output);
        # take the first one.
        b = np.asarray(batches[0][0], dtype=np.float64).reshape(-1)
        res = ead.search_thresholds(b, M, beta, alphas, t_max_quantile)
        yield beam.pvalue.TaggedOutput("thresholds", np.asarray(res.thresholds, np.float32))
        yield beam.pvalue.TaggedOutput("report", np.array(res.to_json().encode("utf-8"), dtype=object))

    class _EadSearch(beam.PTransform):
        def expand(self, pcoll):
            outs = (pcoll
                    | "First" >> beam.combiners.Sample.FixedSizeGlobally(1)
                    | "Search" >> beam.FlatMap(_search).with_outputs("thresholds", "report"))
            return outs.thresholds, outs.report

    return _EadSearch()


def _make_asset_ptransform():
    """Beam PTransform: PCollection of (report batch,) -> path of the report written as
    ``ASSET_FILENAME`` under the analyzer temp dir. TF Transform copies the file into
    the transform graph's ``assets/``, so the Trainer reads the very thresholds the
    graph holds (``TFTransformOutput.vocabulary_file_by_name``)."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam

    class _WriteReport(tft_beam.experimental.PTransformAnalyzer):
        def expand(self, pcoll):
            base_dir = self.base_temp_dir

            def _write(batches):
                report = np.asarray(batches[0][0]).reshape(-1)[0]
                out_dir = os.path.join(base_dir, "ead", uuid.uuid4().hex)
                tf.io.gfile.makedirs(out_dir)
                path = os.path.join(out_dir, ASSET_FILENAME)
                with tf.io.gfile.GFile(path, "wb") as f:
                    f.write(report if isinstance(report, bytes) else str(report).encode("utf-8"))
                yield np.array(path.encode("utf-8"), dtype=object)

            return (pcoll
                    | "First" >> beam.combiners.Sample.FixedSizeGlobally(1)
                    | "Write" >> beam.FlatMap(_write))

    return _WriteReport()


def ead_thresholds_analyzer(watch_time, M: int, beta: float,
                            alphas: Sequence[float] = ead.DEFAULT_ALPHAS,
                            num_quantiles: int = 1000, t_max_quantile: float = 0.99,
                            epsilon: Optional[float] = None, name: str = "ead_thresholds",
                            asset_key: str = ASSET_KEY):
    """TF Transform analyzer: EAD thresholds of ``watch_time`` as transform-graph constants.

    Two analysis phases: ``tft.quantiles(watch_time, num_quantiles, epsilon)`` gives
    ``num_quantiles - 1`` boundaries (a constant after analysis); a Beam PTransform
    (``tft.experimental.ptransform_analyzer``) runs :func:`ead.search_thresholds` on them
    once. No py_function: the outputs are plain constants in the exported graph.

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
        boundaries = tft.quantiles(x, num_buckets=num_quantiles, epsilon=epsilon)
        # A [1, K] tensor per batch; its value is the same analysed constant each time.
        thresholds, report = tft.experimental.ptransform_analyzer(
            inputs=[tf.reshape(boundaries, [1, -1])],
            ptransform=_make_search_ptransform(M, beta, alphas, t_max_quantile),
            output_dtypes=[tf.float32, tf.string],
            output_shapes=[[None], []],
            name="search")
        tft.experimental.ptransform_analyzer(
            inputs=[tf.reshape(report, [1, 1])],
            ptransform=_make_asset_ptransform(),
            output_dtypes=[tf.string],
            output_shapes=[[]],
            output_asset_default_values=[b"{}"],
            name="write_report")
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
