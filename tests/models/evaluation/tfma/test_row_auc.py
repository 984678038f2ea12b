"""RowAUC and HistogramCombiner (models/evaluation/tfma): TFMA's calibration histogram
binned with NumPy gives TFMA's buckets, and so TFMA's AUC to the last bit."""
import pickle

import numpy as np
import pytest

tfma = pytest.importorskip("tensorflow_model_analysis")

from tensorflow_model_analysis.metrics import calibration_histogram, metric_types  # noqa: E402

from models.evaluation.tfma import combiners as C  # noqa: E402
from models.evaluation.tfma import specs as S  # noqa: E402
from models.evaluation.tfma.inputs import Reader  # noqa: E402
from models.evaluation.tfma.row_metrics import RowAUC, RowCalibrationPlot  # noqa: E402
from tests.models.evaluation.tfma.test_tfma_metrics import evaluate, run_combiner  # noqa: E402


def batches(y, p, size):
    """StandardMetricInputs of ``size`` rows each (what the per-slice batches hand in)."""
    return [metric_types.StandardMetricInputs(labels=y[i:i + size], predictions=p[i:i + size])
            for i in range(0, y.size, size)]


def rows(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.3).astype(np.float64)
    p = rng.random(n).astype(np.float32).astype(np.float64)
    # bucket edges, the interval's ends, outside it, ties and fractional labels
    p[:12] = [0.0, 1.0, 0.5, 1e-4, 2e-4, 0.99995, -0.25, 1.5, 0.3, 0.3, 0.3, 0.7]
    y[:12] = [1, 0, 1, 0, 1, 1, 0, 1, 0.25, 1, 0, 0.5]
    return y, p


def tfma_histogram(y, p, **kw):
    key = metric_types.PlotKey("_hist")
    args = dict(num_buckets=10000, left=0.0, right=1.0, fractional_labels=True,
                prediction_based_bucketing=True)
    args.update(kw)
    theirs = calibration_histogram._CalibrationHistogramCombiner(
        key=key, eval_config=None, aggregation_type=None, class_weights=None, example_weighted=False,
        **args)
    ours = C.HistogramCombiner(key, Reader(key, None, None), **args)
    parts = [batches(y[:1000], p[:1000], 1), batches(y[1000:], p[1000:], 700)]
    return run_combiner(theirs, parts)[key], run_combiner(ours, parts)[key]


@pytest.mark.parametrize("kw", [{}, dict(num_buckets=7, left=-1.0, right=2.0, fractional_labels=False),
                                dict(num_buckets=50, prediction_based_bucketing=False)])
def test_histogram_equals_tfma_bucket_by_bucket(kw):
    y, p = rows()
    if kw.get("prediction_based_bucketing") is False:
        y = np.round(y * 4) / 4  # label-based buckets: fractional labels in [0, 1]
    theirs, ours = tfma_histogram(y, p, **kw)
    assert [b.bucket_id for b in ours] == [b.bucket_id for b in theirs]
    for a, b in zip(ours, theirs):
        assert a.weighted_labels == b.weighted_labels and a.weighted_examples == b.weighted_examples
        assert a.weighted_predictions == pytest.approx(b.weighted_predictions, rel=1e-12, abs=1e-12)


def test_histogram_keeps_tfma_s_errors():
    with pytest.raises(ValueError, match=r"label must be within \[0, 1\]"):
        tfma_histogram(np.array([0.0, 1.5]), np.array([0.2, 0.4]))
    key = metric_types.PlotKey("_hist")
    comb = C.HistogramCombiner(key, Reader(key, None, None), 10, 0.0, 1.0, True)
    with pytest.raises(ValueError, match="NaN"):
        comb.extract_output(comb.add_input(comb.create_accumulator(), batches(
            np.array([1.0]), np.array([np.nan]), 1)[0]))
    assert comb.extract_output(comb.create_accumulator()) == {key: []}
    acc = pickle.loads(pickle.dumps(comb.create_accumulator()))
    assert comb.extract_output(comb.merge_accumulators([acc, comb.create_accumulator()])) == {key: []}


def test_row_auc_is_tfma_s_auc():
    y, p = rows(5000, seed=1)
    y = np.round(y)
    parts = [batches(y[:2500], p[:2500], 64), batches(y[2500:], p[2500:], 1000)]
    kw = dict(eval_config=tfma.EvalConfig(), model_names=[""], output_names=[""])
    row_comps = RowAUC().computations(**kw)
    assert any(isinstance(c.combiner, C.HistogramCombiner) for c in row_comps
               if isinstance(c, metric_types.MetricComputation))
    want = evaluate(tfma.metrics.AUC().computations(**kw), parts)
    got = evaluate(row_comps, parts)
    assert list(got) == list(want) and [k.name for k in got] == ["auc"]
    assert got == want  # the same histogram, TFMA's summation: bit for bit
    # a weighted AUC keeps TFMA's own histogram
    weighted = RowAUC().computations(**{**kw, "example_weighted": True})
    assert not any(isinstance(getattr(c, "combiner", None), C.HistogramCombiner) for c in weighted)


def test_row_calibration_plot_is_tfma_s_plot():
    y, p = rows(2000, seed=2)
    y = np.round(y)
    parts = [batches(y[:900], p[:900], 100), batches(y[900:], p[900:], 1100)]
    kw = dict(eval_config=tfma.EvalConfig(), model_names=[""], output_names=[""])
    got = evaluate(RowCalibrationPlot(num_buckets=20).computations(**kw), parts)
    want = evaluate(tfma.metrics.CalibrationPlot(num_buckets=20).computations(**kw), parts)
    assert [k.name for k in got] == ["calibration_plot"]
    (g,), (w,) = got.values(), want.values()
    assert len(g.buckets) == len(w.buckets) == 22
    for a, b in zip(g.buckets, w.buckets):
        assert a.lower_threshold_inclusive == b.lower_threshold_inclusive
        assert a.num_weighted_examples.value == b.num_weighted_examples.value
        assert a.total_weighted_label.value == b.total_weighted_label.value
        assert a.total_weighted_refined_prediction.value == pytest.approx(
            b.total_weighted_refined_prediction.value, rel=1e-12)


def test_the_pipeline_evaluator_bins_one_histogram_with_numpy():
    """AUC and the calibration plot share one histogram computation only if their
    combiners are of one class (TFMA de-duplicates by combiner class and keys)."""
    from tensorflow_model_analysis.evaluators import metrics_plots_and_validations_evaluator as E
    from tensorflow_model_analysis.metrics import metric_specs

    from pipeline import configs
    from pipeline.pipeline import eval_config

    config = eval_config(configs.EVAL_GATES, configs.EVAL_SLICE_FEATURES, watch_head="cread+cqe")
    combiners, *_ = E._filter_and_separate_computations(
        metric_specs.to_computations(config.metrics_specs, eval_config=config))
    histograms = [c.combiner for c in combiners if "histogram" in c.keys[0].name]
    assert len(histograms) == 1 and isinstance(histograms[0], C.HistogramCombiner)


def test_batched_specs_use_row_auc_under_the_name_auc():
    unbatched, batched = S.metrics_specs(), S.metrics_specs(batched=True)
    assert [m.class_name for m in unbatched[0].metrics][1] == "AUC"
    mc = batched[0].metrics[1]
    assert (mc.class_name, mc.module) == ("RowAUC", "models.evaluation.tfma.row_metrics")
    gated = S.metrics_specs(batched=True, thresholds={"auc": tfma.MetricThreshold()})
    assert gated[0].metrics[1].per_slice_thresholds
