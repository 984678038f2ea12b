"""The Evaluator's per-slice batches (models/evaluation/tfma/extractors.py) through a
real TFMA run: every metric, overall and per slice, equals brute force (and so the
per-example path), with batches that mix slices; unsupported configs fall back."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfma = pytest.importorskip("tensorflow_model_analysis")

from models.evaluation import tfma as TM  # noqa: E402
from models.evaluation.tfma import extractors as X  # noqa: E402
from tests.models.evaluation.tfma.test_tfma_metrics import (  # noqa: E402
    ECS_K, NDCG_K, NUM_Q, TinyRanker, assert_close, expected, make_data, predict, serialize,
    slice_metrics)


def batched_config(**kw):
    specs = TM.metrics_specs(ranking_output="ranking_score", quantiles_output="quantiles",
                             num_quantiles=NUM_Q, ndcg_k=(NDCG_K,), ecs_k=ECS_K, batched=True, **kw)
    options = tfma.Options()
    options.include_default_metrics.value = False
    return tfma.EvalConfig(
        options=options,
        model_specs=[tfma.ModelSpec(signature_name="serving_examples", label_keys={
            "click_prob": "is_click", "watch_time_s": "watch_time_s"})],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["tab"]),
                       tfma.SlicingSpec(feature_keys=["tab", "duration_s"]),
                       tfma.SlicingSpec(feature_values={"tab": "1"})],
        metrics_specs=specs)


def test_slice_batches_match_brute_force_per_slice(tmp_path):
    d = make_data(3)
    serialized = serialize(d)
    model_dir = str(tmp_path / "model")
    tf.saved_model.save(TinyRanker(), model_dir, signatures={"serving_examples": TinyRanker().serve})
    pr = predict(tf.saved_model.load(model_dir), serialized)
    data_path = str(tmp_path / "eval.tfrecord")
    with tf.io.TFRecordWriter(data_path) as w:
        for s in serialized:
            w.write(s)
    config = batched_config(thresholds={"xauc": tfma.MetricThreshold(
        value_threshold=tfma.GenericValueThreshold(lower_bound={"value": 1.01}))})
    assert X.unsupported(config) == []
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=config)
    extractors = X.custom_extractors(shared, config)
    names = [x.stage_name for x in extractors]
    assert "ExtractUnbatchedInputs" not in names and names[-1] == X.SLICE_BATCHES_STAGE_NAME
    out_dir = str(tmp_path / "out")
    result = tfma.run_model_analysis(eval_shared_model=shared, eval_config=config, extractors=extractors,
                                     data_location=data_path, output_path=out_dir)
    got = slice_metrics(result)
    n = d["user_id"].size
    assert_close(got[()], expected(d, pr, np.arange(n)), "overall")
    assert got[()][("click_prob", "example_count")] == n
    bce = -np.mean([np.log(p) if c else np.log(1 - p)
                    for c, p in zip(d["is_click"], pr["click_prob"][:, 0])])
    assert got[()][("click_prob", "binary_crossentropy")] == pytest.approx(bce, abs=1e-6)
    for out, label in (("click_prob", d["is_click"]), ("watch_time_s", d["watch_time_s"])):  # RowMean
        assert got[()][(out, "mean_label")] == pytest.approx(np.mean(label.astype(np.float64)), abs=1e-9)
        assert got[()][(out, "mean_prediction")] == pytest.approx(np.mean(pr[out][:, 0]), abs=1e-6)
    tabs = set(d["tab"].tolist())
    for tab in tabs:
        rows = np.flatnonzero(d["tab"] == tab)
        assert_close(got[(("tab", tab),)], expected(d, pr, rows), f"tab {tab}")
        assert got[(("tab", tab),)][("click_prob", "example_count")] == rows.size
    crosses = {k for k in got if len(k) == 2}
    pairs = set(zip(d["tab"].tolist(), d["duration_s"].tolist()))
    assert len(crosses) == len(pairs)
    tab, dur = sorted(pairs)[1]
    rows = np.flatnonzero((d["tab"] == tab) & (d["duration_s"] == dur))
    key = tuple(sorted({("tab", tab), ("duration_s", dur)}))
    key = key if key in got else key[::-1]
    assert_close(got[key], expected(d, pr, rows), f"tab x duration {key}")
    validation = tfma.load_validation_result(out_dir)
    assert {f.metric_key.name for s in validation.metric_validations_per_slice
            for f in s.failures} == {"xauc"}


def test_row_mean_refuses_an_unknown_statistic():
    from models.evaluation.tfma.row_metrics import RowMean

    with pytest.raises(ValueError, match="statistic"):
        RowMean(statistic="median")


def test_unsupported_configs_fall_back():
    config = batched_config()
    config.options.include_default_metrics.value = True
    assert X.unsupported(config)  # the model may be Keras (model_type unset): TFMA feeds its metrics per example
    for model_type, why in ((tfma.TF_KERAS, True), (tfma.TF_GENERIC, False)):  # defaults only for Keras
        config.model_specs[0].model_type = model_type
        assert bool(X.unsupported(config)) is why, model_type
    config = batched_config()
    config.metrics_specs[0].metrics.append(TM.metric_config("ExampleCount"))
    assert any("ExampleCount" in w for w in X.unsupported(config))
    config = batched_config()
    config.cross_slicing_specs.add()
    assert X.unsupported(config) == ["cross_slicing_specs"]


def test_the_pipeline_evaluator_takes_the_batched_path():
    from pipeline import configs
    from pipeline.pipeline import EVALUATOR_EXTRACTORS, eval_config

    assert EVALUATOR_EXTRACTORS == X.__name__ and callable(X.custom_extractors)
    for head in ("regression", "cqe", "cread+cqe", "cread"):
        assert X.unsupported(eval_config(configs.EVAL_GATES, configs.EVAL_SLICE_FEATURES, watch_head=head)) == []
