"""ModelReport parts on synthetic inputs: plots + HTML, discretizations, TensorBoard tags.

The whole component runs in the e2e tests (tests/e2e/).
"""
import math
import os
import re

import numpy as np
import pytest

from components.model_report import discretization as D
from components.model_report import report as R
from components.model_report.inputs import (OVERALL, CalibrationBucket, Evaluation, Gate, SliceMetrics,
                                            quantile_coverage, slice_name, value_order)
from tests.helpers import e2e_utils


def _slice(column, value, auc, xauc, mae, n):
    metrics = {"click_prob": {"example_count": float(n), "auc": auc, "calibration": 1.02},
               "watch_time_s": {"xauc": xauc, "mean_absolute_error": mae}}
    if column is None:
        return SliceMetrics(OVERALL, [], [], metrics)
    return SliceMetrics(slice_name([column], [value]), [column], [value], metrics)


def _calibration_buckets(rng, n=4000, num_buckets=20):
    """TFMA-like buckets (underflow, num_buckets on [0, 1], overflow) of a calibrated model."""
    p = rng.uniform(0, 1, n)
    y = rng.uniform(0, 1, n) < p
    edges = np.linspace(0, 1, num_buckets + 1)
    buckets = [CalibrationBucket(-math.inf, 0.0, 0.0, 0.0, 0.0)]
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (p >= lo) & (p < hi)
        buckets.append(CalibrationBucket(lo, hi, float(m.sum()), float(y[m].sum()), float(p[m].sum())))
    buckets.append(CalibrationBucket(1.0, math.inf, 0.0, 0.0, 0.0))
    return buckets


def _evaluation(rng, blessed=True, with_baseline=True):
    slices = [_slice(None, None, 0.7, 0.62, 18.0, 5000)]
    for tab, auc in ((0, 0.71), (1, 0.69), (12, 0.6)):
        slices.append(_slice("tab", str(tab), auc, 0.6, 17.0 + tab, 1000))
    for bucket in (">=300s", "<15s", "15-30s"):
        slices.append(_slice("duration_bucket", bucket, 0.7, 0.61, 20.0, 800))
    if with_baseline:
        slices[0].baseline = {"click_prob": {"auc": 0.69}}
        slices[0].change = {"click_prob": {"auc": 0.01}}
    gates = [
        Gate(OVERALL, "click_prob", "auc", "value", 0.7, lower=0.55, passed=True),
        Gate(OVERALL, "click_prob", "auc", "change", 0.7, baseline=0.69, change=0.01, max_change=-0.01,
             direction="higher_is_better", passed=blessed,
             message="" if blessed else "change 0.01 is below -0.01"),
        Gate(OVERALL, "watch_time_s", "mean_absolute_error", "value", 18.0, upper=1e4),
    ]
    return Evaluation(slices=slices, calibration={OVERALL: _calibration_buckets(rng)}, gates=gates,
                      validation_ok=blessed, has_baseline=with_baseline)


def _data(rng, coverage=None, blessed=True):
    watch = np.concatenate([np.zeros(50), rng.lognormal(1.5, 1.5, 3000)])
    return R.ReportData(
        evaluation=_evaluation(rng, blessed=blessed), blessed=blessed, train_watch=watch,
        eval_watch=rng.lognormal(1.5, 1.5, 800),
        discretizations=D.compare(watch, num_thresholds=20, beta=50.0),
        quantile_coverage=coverage or {}, info={"evaluation": "/tmp/eval <1>"})


def test_rebin_calibration_sums_match_hand_computation():
    buckets = [CalibrationBucket(-math.inf, 0.0, 2, 0, 0.0),   # underflow -> first bin
               CalibrationBucket(0.0, 0.25, 10, 2, 1.5),
               CalibrationBucket(0.25, 0.5, 10, 3, 3.5),
               CalibrationBucket(0.5, 0.75, 0, 0, 0.0),
               CalibrationBucket(0.75, 1.0, 4, 3, 3.6),
               CalibrationBucket(1.0, math.inf, 1, 1, 1.0)]    # overflow -> last bin
    rows = R.rebin_calibration(buckets, num_bins=2)
    assert len(rows) == 2
    assert rows[0]["count"] == 22 and rows[0]["observed_rate"] == pytest.approx(5 / 22)
    assert rows[0]["mean_prediction"] == pytest.approx(5.0 / 22)
    assert rows[1]["count"] == 5 and rows[1]["observed_rate"] == pytest.approx(4 / 5)
    assert rows[1]["mean_prediction"] == pytest.approx(4.6 / 5)
    with pytest.raises(ValueError):
        R.rebin_calibration(buckets, num_bins=0)


def test_discretizations_ead_has_lowest_objective():
    rng = np.random.default_rng(0)
    watch = rng.lognormal(1.5, 1.5, 5000)
    ead_, freq, width = D.compare(watch, num_thresholds=30, beta=100.0)
    assert [d.name for d in (ead_, freq, width)] == [D.EAD, D.EQUAL_FREQUENCY, D.EQUAL_WIDTH]
    assert ead_.J <= freq.J + 1e-9 and ead_.J <= width.J + 1e-9  # EAD minimises J over candidates
    t_max = np.quantile(watch, 0.99)
    assert width.thresholds == pytest.approx(np.arange(1, 31) / 30 * width.thresholds[-1])
    assert abs(width.thresholds[-1] - t_max) / t_max < 0.05
    assert np.all(np.diff(freq.thresholds) > 0)
    # Equal frequency: about 1/M of the samples below T_max per bucket.
    counts = np.histogram(watch, bins=np.concatenate([[0.0], freq.thresholds]))[0]
    assert counts.min() > 0.6 * counts.mean() and counts.max() < 1.4 * counts.mean()


def test_discretizations_use_the_transform_asset_when_given():
    rng = np.random.default_rng(1)
    watch = rng.lognormal(1.5, 1.0, 2000)
    asset = {"thresholds": [1.0, 2.0, 4.0, 8.0], "beta": 10.0, "M": 4, "path": "x/ead_thresholds.json"}
    ead_, freq, width = D.compare(watch, num_thresholds=30, beta=100.0, ead_asset=asset)
    assert ead_.thresholds == [1.0, 2.0, 4.0, 8.0] and ead_.source == "transform graph asset"
    assert len(freq.thresholds) <= 4 and len(width.thresholds) == 4  # the asset's M
    assert ead_.J is not None


def test_ead_asset_is_read_from_the_transform_graph(tmp_path):
    from components.model_report.inputs import load_ead_asset
    from models.watch_time import ead

    assert load_ead_asset(str(tmp_path)) is None and load_ead_asset(None) is None
    assets = tmp_path / "transform_fn" / "assets"
    assets.mkdir(parents=True)
    result = ead.search_thresholds(np.linspace(0.5, 100.0, 99), 8, 10.0)
    (assets / "ead_thresholds.json").write_text(result.to_json())
    asset = load_ead_asset(str(tmp_path))
    assert asset["thresholds"] == pytest.approx(result.thresholds) and asset["M"] == 8 and asset["beta"] == 10.0
    (assets / "ead_thresholds.json").write_text("[1, 2.5]")
    assert load_ead_asset(str(tmp_path))["thresholds"] == [1.0, 2.5]
    (assets / "ead_thresholds.json").write_text('{"x": 1}')
    with pytest.raises(ValueError, match="thresholds"):
        load_ead_asset(str(tmp_path))


def test_slice_values_sort_in_natural_order():
    values = [">=300s", "60-120s", "<15s", "15-30s", "120-300s", "30-60s"]
    assert sorted(values, key=value_order) == ["<15s", "15-30s", "30-60s", "60-120s", "120-300s", ">=300s"]
    assert sorted(["12", "2", "b", "a"], key=value_order) == ["2", "12", "a", "b"]


def test_quantile_coverage_from_metric_names():
    metrics = {"quantiles": {"quantile_coverage@0.7500": 0.8, "quantile_coverage@0.2500": 0.3,
                             "pinball_loss": 1.0}, "click_prob": {"auc": 0.7}}
    assert quantile_coverage(metrics) == {0.25: 0.3, 0.75: 0.8}
    assert quantile_coverage({"click_prob": {"auc": 0.7}}) == {}


def test_report_writes_page_with_every_section_and_existing_images(tmp_path):
    rng = np.random.default_rng(2)
    index = R.write_report(str(tmp_path), _data(rng))
    page = open(index, encoding="utf-8").read()
    for anchor in ("blessing", "overall", "watch-time", "quantile-calibration", "click-calibration", "slices"):
        assert f"id='{anchor}'" in page, anchor
    assert "BLESSED" in page and "NOT BLESSED" not in page
    assert R.NO_QUANTILE_HEAD in page  # no quantile head -> the note, no plot
    srcs = e2e_utils.image_sources(index)
    assert sorted(srcs) == sorted(["plots/watch_time_distribution.png", "plots/click_calibration.png",
                                   "plots/slices_0.png", "plots/slices_1.png"])
    assert e2e_utils.broken_images(index) == []
    for src in srcs:
        assert not e2e_utils.png_is_blank(os.path.join(tmp_path, src)), src
    assert "/tmp/eval &lt;1&gt;" in page  # text is escaped
    # Slice table rows in natural order, overall first.
    table = page[page.index("<h3>duration_bucket</h3>"):]
    assert [table.index(v) for v in ("Overall", "&lt;15s", "15-30s", "&gt;=300s")] == sorted(
        table.index(v) for v in ("Overall", "&lt;15s", "15-30s", "&gt;=300s"))
    assert os.path.exists(tmp_path / R.REPORT_JSON)


def test_report_shows_failed_gate_and_quantile_curve(tmp_path):
    rng = np.random.default_rng(3)
    taus = np.arange(1, 10) / 10
    index = R.write_report(str(tmp_path), _data(rng, coverage=dict(zip(taus, taus * 0.9)), blessed=False))
    page = open(index, encoding="utf-8").read()
    assert "NOT BLESSED" in page
    assert page.count('class="fail"') == 1 and "change 0.01 is below -0.01" in page
    assert "change vs baseline &gt;= -0.01" in page
    assert R.NO_QUANTILE_HEAD not in page
    assert "plots/quantile_calibration.png" in e2e_utils.image_sources(index)
    assert e2e_utils.broken_images(index) == []


def test_broken_image_is_detected(tmp_path):
    index = tmp_path / "index.html"
    (tmp_path / "ok.png").write_bytes(b"\x89PNG")
    index.write_text('<img src="ok.png"><img src="missing.png"><img src="http://x/y.png">')
    assert e2e_utils.broken_images(str(index)) == ["missing.png", "http://x/y.png"]


def test_tensorboard_summaries_have_slice_metric_tags(tmp_path):
    from components.model_report import tb_summaries as T

    ev = _evaluation(np.random.default_rng(4))
    tags = T.write_summaries(str(tmp_path), ev, blessed=True)
    written = e2e_utils.tensorboard_tags(str(tmp_path))
    assert set(tags) <= written
    assert {"model_analysis/overall/click_prob/auc", "model_analysis/tab=12/click_prob/auc",
            "model_analysis/duration_bucket=<15s/watch_time_s/xauc",
            "model_analysis/overall/click_prob/auc_change_vs_baseline",
            "model_analysis/blessed", "model_analysis/gates"} <= written
    n_metrics = sum(len(m) for s in ev.slices for m in s.metrics.values())
    assert len([t for t in tags if re.match(r"model_analysis/[^/]+/[^/]+/[^/]+$", t)]) == n_metrics + 1


@pytest.mark.skipif(not os.path.exists(e2e_utils.CHROMIUM), reason="chromium missing: run `make chromium`")
def test_report_renders_in_headless_chromium(tmp_path):
    rng = np.random.default_rng(5)
    index = R.write_report(str(tmp_path / "report"), _data(rng))
    png = str(tmp_path / "report.png")
    log = e2e_utils.chromium_screenshot(index, png, str(tmp_path))
    assert e2e_utils.console_errors(log) == []
    assert not e2e_utils.png_is_blank(png)
    # The checks can fail: a page with a script error and a missing image.
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="missing.png"><script>undefined_function()</script></body></html>')
    log = e2e_utils.chromium_screenshot(str(bad), str(tmp_path / "bad.png"), str(tmp_path))
    assert any("undefined_function" in line for line in e2e_utils.console_errors(log))
    assert e2e_utils.broken_images(str(bad)) == ["missing.png"]


def test_calibration_warning_outside_ten_percent_only():
    from components.model_report.calibration_note import calibration_warnings

    metrics = {"click_prob": {"calibration": 1.25, "mean_prediction": 0.51, "mean_label": 0.408},
               "watch_time_s": {"calibration": 0.95}, "ranking_score": {"auc": 0.7}}
    (line,) = calibration_warnings(metrics)
    # 0.51 / 0.408 = 1.25: 25 % above the observed rate
    assert line.startswith("click_prob calibration 1.25 (mean prediction 0.51 vs observed 0.408)")
    assert "25% more than observed" in line and "+-10%" in line
    assert calibration_warnings({"click_prob": {"calibration": 1.0999}}) == []
    assert "10% less" in calibration_warnings({"click_prob": {"calibration": 0.8999}})[0]


def test_overall_table_leaves_the_coverage_levels_to_the_plot_and_warns_on_calibration(tmp_path):
    rng = np.random.default_rng(4)
    taus = np.arange(1, 101) / 101
    data = _data(rng, coverage=dict(zip(taus, taus)))
    overall = data.evaluation.overall()
    overall.metrics["quantiles"] = {f"quantile_coverage@{t:.4f}": t for t in taus} | {"mean_coverage_error": 0.01}
    overall.metrics["click_prob"].update(calibration=1.25, mean_prediction=0.51, mean_label=0.408)
    page = open(R.write_report(str(tmp_path), data), encoding="utf-8").read()
    table = page[page.index("id='overall'"):page.index("id='watch-time'")]
    assert "quantile_coverage@0." not in table and "mean_coverage_error" in table
    assert "The 100 <code>quantile_coverage@&tau;</code> metrics are plotted" in table
    assert table.count("class='warn'") == 1 and "click_prob calibration 1.25" in table
