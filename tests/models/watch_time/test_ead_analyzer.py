"""EAD in TF Transform: the analyzer against the pure search, and the one reader of
its asset (from a TFTransformOutput, a transform-graph directory, older asset forms)."""
import json
import os

import numpy as np
import pytest

from models.transform_config import FORCE_TF_COMPAT_V1
from models.watch_time import ead, ead_analyzer


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """x, the transformed rows and the transform-graph directory of a small analysis."""
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam

    tmp_path = tmp_path_factory.mktemp("ead")
    rng = np.random.default_rng(0)
    x = np.concatenate([np.zeros(300), rng.exponential(10.0, 1700)]).astype(np.float32)
    raw = [{"watch_time_s": float(v)} for v in x]
    meta = tft.DatasetMetadata.from_feature_spec(
        {"watch_time_s": tf.io.FixedLenFeature([], tf.float32)})

    def preprocessing_fn(inputs):
        wt = inputs["watch_time_s"]
        th, rep = ead_analyzer.ead_thresholds_analyzer(wt, M=20, beta=100.0, num_quantiles=100,
                                                       t_max_quantile=0.99)
        b = tft.quantiles(wt, 100, 1e-3)
        n = tf.shape(wt)[0]
        return {"th": tf.tile(th[tf.newaxis], [n, 1]), "rep": tf.fill([n], rep),
                "b": tf.tile(tf.reshape(b, [1, -1]), [n, 1]),
                "y_bucket": tf.reduce_sum(tf.cast(wt[:, None] > th[None, :], tf.int64), 1)}

    with tft_beam.Context(temp_dir=str(tmp_path / "tmp"), force_tf_compat_v1=FORCE_TF_COMPAT_V1):
        (data, _), transform_fn = (raw, meta) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp_path / "tf"))
    return x, data, str(tmp_path / "tf")


def test_tft_analyzer_matches_pure_function(analyzed):
    """Exact agreement when tft.quantiles is exact: n = 2000 (a multiple of the 100
    buckets) and epsilon = 1e-3 keep every point in the summary, so its boundaries
    equal boundaries_from_samples(method='higher'); thresholds then agree to float32
    rounding (rtol 1e-6), and the transform graph re-applied outside Beam gives them."""
    import tensorflow as tf
    import tensorflow_transform as tft

    x, data, tf_dir = analyzed
    b_np = ead.boundaries_from_samples(x, 100)
    np.testing.assert_allclose(np.asarray(data[0]["b"], np.float64), b_np, rtol=1e-6)
    ref = ead.search_thresholds(b_np, 20, 100.0, t_max_quantile=0.99)
    th = np.asarray(data[0]["th"], np.float64)
    np.testing.assert_allclose(th, ref.thresholds, rtol=1e-6)
    assert np.all(np.diff(th) > 0) and th.size == ref.M_eff
    rep = json.loads(data[0]["rep"])
    assert rep["chosen"] == ref.chosen and len(rep["candidates"]) == len(ref.candidates)

    # the thresholds are constants of the exported transform graph (no Beam, no py_function)
    out = tft.TFTransformOutput(tf_dir).transform_features_layer()(
        {"watch_time_s": tf.constant(x[:5])})
    np.testing.assert_allclose(out["th"].numpy()[0], th, rtol=0)
    np.testing.assert_array_equal(out["y_bucket"].numpy(), [r["y_bucket"] for r in data[:5]])

    # ... and the JSON report is an asset of the transform graph, found by its key
    asset = tft.TFTransformOutput(tf_dir).vocabulary_file_by_name("ead_thresholds")
    assert os.path.basename(asset) == ead_analyzer.ASSET_FILENAME
    with open(asset) as f:
        from_asset = ead.EadResult.from_json(f.read())
    np.testing.assert_allclose(from_asset.thresholds, th, rtol=1e-6)


def test_reader_gives_the_graph_thresholds_from_output_or_directory(analyzed):
    import tensorflow_transform as tft

    x, data, tf_dir = analyzed
    th = np.asarray(data[0]["th"], np.float64)
    ref = ead.search_thresholds(ead.boundaries_from_samples(x, 100), 20, 100.0, t_max_quantile=0.99)
    for source in (tft.TFTransformOutput(tf_dir), tf_dir):
        result = ead_analyzer.read_ead_result(source)
        np.testing.assert_allclose(result.thresholds, th, rtol=1e-6)
        assert (result.chosen, result.M, result.beta, result.t_max_quantile) == (ref.chosen, 20, 100.0, 0.99)
        assert len(result.candidates) == len(ref.candidates)
        assert os.path.basename(ead_analyzer.ead_asset_path(source)) == ead_analyzer.ASSET_FILENAME


def test_graph_without_the_asset(tmp_path):
    assert ead_analyzer.ead_asset_path(None) is None and ead_analyzer.ead_asset_path("") is None
    assert ead_analyzer.ead_asset_path(str(tmp_path)) is None
    with pytest.raises(FileNotFoundError, match="ead_thresholds_analyzer"):
        ead_analyzer.read_ead_result(str(tmp_path))


def _write_asset(graph_dir, text):
    assets = graph_dir / "transform_fn" / "assets"
    assets.mkdir(parents=True, exist_ok=True)
    (assets / ead_analyzer.ASSET_FILENAME).write_text(text)
    return str(graph_dir)


def test_reader_of_a_graph_directory_without_asset_map(tmp_path):
    result = ead.search_thresholds(np.linspace(0.5, 100.0, 99), 8, 10.0)
    graph = _write_asset(tmp_path, result.to_json())
    assert ead_analyzer.read_ead_result(graph) == result
    assert ead_analyzer.ead_asset_path(graph).endswith(os.path.join("assets", "ead_thresholds.json"))


@pytest.mark.parametrize("text,thresholds,M,beta", [
    ("[1, 2.5]", [1.0, 2.5], None, None),                        # bare list (older graphs)
    ('{"thresholds": [1, 4], "beta": 3.0, "x": 1}', [1.0, 4.0], None, 3.0),  # partial object
])
def test_older_asset_forms(tmp_path, text, thresholds, M, beta):
    result = ead_analyzer.read_ead_result(_write_asset(tmp_path, text))
    assert result.thresholds == thresholds and (result.M, result.beta) == (M, beta)
    assert result.M_eff == len(thresholds) and result.t_max == thresholds[-1] and result.candidates == []


@pytest.mark.parametrize("text", ['{"x": 1}', "[]", '"abc"', "not json"])
def test_malformed_asset_names_the_file(tmp_path, text):
    graph = _write_asset(tmp_path, text)
    with pytest.raises(ValueError, match="ead_thresholds.json"):
        ead_analyzer.read_ead_result(graph)


def test_thresholds_come_from_the_transform_graph_asset(small_transform_output):
    """The pipeline's preprocessing_fn: the asset holds the very thresholds the
    transform graph buckets with."""
    import tensorflow as tf

    from models import features as F
    from tests.conftest import SMALL_L as L
    from tests.helpers.ranker_utils import raw_batch

    tft_output, rows = small_transform_output
    t = np.asarray(ead_analyzer.read_ead_result(tft_output).thresholds)
    assert t.size >= 2 and np.all(np.diff(t) > 0)
    raw = {k: tf.constant(v) for k, v in raw_batch(rows, L).items()}
    raw[F.LABEL_WATCH] = tf.constant([r[F.LABEL_WATCH] for r in rows], tf.float32)
    raw[F.LABEL_CLICK] = tf.constant([r[F.LABEL_CLICK] for r in rows], tf.int64)
    out = tft_output.transform_features_layer()(raw)
    y = np.array([r[F.LABEL_WATCH] for r in rows], np.float32)
    np.testing.assert_array_equal(out[F.WATCH_BUCKET_LABEL].numpy(),
                                  (y[:, None] > t.astype(np.float32)[None, :]).sum(1))
