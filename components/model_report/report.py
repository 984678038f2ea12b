"""The model-analysis report: matplotlib plots and one static HTML page.

One concept: plain data in (:class:`ReportData`), files out (``index.html``,
``plots/*.png``, ``report.json``). Nothing here reads TFX artifacts or TFMA files;
``inputs.py`` does, so this module is tested on synthetic data.

Sections of the page:

1. **Blessing**: the Evaluator's decision and every gate (rule, candidate value,
   baseline value and change when there is a baseline, pass / fail with TFMA's message).
2. **Overall metrics** per model output.
3. **Watch-time distribution** (train split, log x) with the EAD thresholds against
   equal-frequency and equal-width thresholds, and the EAD objective J of each.
4. **Quantile calibration**: tau vs empirical coverage P(y <= q_tau) (TFMA metrics
   ``quantile_coverage@tau``); a note when the model has no quantile head.
5. **Click calibration**: mean predicted vs observed click rate by prediction bin
   (TFMA ``CalibrationPlot`` buckets, re-binned).
6. **Metrics by slice**: a table and bar charts per slicing column.
"""
from __future__ import annotations

import dataclasses
import html
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

import matplotlib

matplotlib.use("Agg")  # headless; set before any pyplot import anywhere in the process

import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from components.model_report import quantile_calibration  # noqa: E402
from components.model_report import published as published_section  # noqa: E402
from components.model_report.calibration_note import calibration_warnings  # noqa: E402
from components.model_report.discretization import Discretization  # noqa: E402
from components.model_report.inputs import (OVERALL, CalibrationBucket, Evaluation, SliceMetrics,  # noqa: E402
                                            value_order)

PLOTS_DIR = "plots"
INDEX = "index.html"
REPORT_JSON = "report.json"

# Metric names shown in the slice tables / as bar charts, for whichever output has them
# (ranking metrics sit on "ranking_score" or "watch_time_s" depending on the model).
TABLE_METRICS = ["example_count", "auc", "gauc", "gauc_num_users_used", "calibration",
                 "normalized_entropy", "mean_absolute_error", "rmse", "xauc", "xgauc",
                 "ndcg_watch@10", "ecs_model@10"]
COVERAGE_PREFIX = "quantile_coverage@"  # per-level metrics: plotted, not listed in the Overall table
CHART_METRICS = ["auc", "gauc", "calibration", "xauc", "mean_absolute_error"]
NO_QUANTILE_HEAD = ("No quantile head: the model has no <code>quantiles</code> output, so "
                    "TFMA computed no <code>quantile_coverage@&tau;</code> metrics.")


@dataclasses.dataclass
class ReportData:
    evaluation: Evaluation
    blessed: bool
    train_watch: np.ndarray
    discretizations: List[Discretization]
    quantile_coverage: Dict[float, float]  # tau -> coverage; empty: no quantile head
    eval_watch: Optional[np.ndarray] = None
    calibration_slice: str = OVERALL
    info: Dict[str, str] = dataclasses.field(default_factory=dict)  # shown as a key/value table
    title: str = "Model analysis"
    conformal: Optional[dict] = None  # validation coverage before / after conformal levels (#13)
    published: Optional[dict] = None  # the Publisher's report (#10; components/model_report/published.py)


# ---------------------------------------------------------------------- numbers


def rebin_calibration(buckets: Sequence[CalibrationBucket], num_bins: int = 10
                      ) -> List[Dict[str, float]]:
    """Equal-width prediction bins on [0, 1]: count, mean prediction, observed rate.

    Each TFMA bucket goes to the bin of its midpoint (the under/overflow buckets with an
    infinite edge go to the first / last bin). Empty bins are left out.
    """
    if num_bins < 1:
        raise ValueError(f"num_bins must be >= 1, got {num_bins}")
    sums = np.zeros((num_bins, 3))  # count, label, prediction
    for b in buckets:
        lo = 0.0 if not math.isfinite(b.lower) else b.lower
        hi = 1.0 if not math.isfinite(b.upper) else b.upper
        mid = min(max((lo + hi) / 2.0, 0.0), 1.0)
        i = min(int(mid * num_bins), num_bins - 1)
        sums[i] += (b.count, b.label_sum, b.prediction_sum)
    rows = []
    for i, (count, label, pred) in enumerate(sums):
        if count > 0:
            rows.append({"bin_lower": i / num_bins, "bin_upper": (i + 1) / num_bins, "count": float(count),
                         "mean_prediction": float(pred / count), "observed_rate": float(label / count)})
    return rows


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer()
                                                   and abs(value) < 1e12):
        return f"{int(value):,}"
    if isinstance(value, float) and not math.isfinite(value):
        return html.escape(str(value))
    return f"{value:.{digits}g}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def _get(slice_metrics: Optional[SliceMetrics], output: str, metric: str) -> Optional[float]:
    if slice_metrics is None:
        return None
    return slice_metrics.metrics.get(output, {}).get(metric)


def slice_columns(evaluation: Evaluation) -> List[str]:
    """Slicing columns in the order they first appear (Overall left out)."""
    seen = []
    for s in evaluation.slices:
        if s.column and s.column not in seen:
            seen.append(s.column)
    return seen


# ---------------------------------------------------------------------- plots


def _save(fig: Figure, path: str) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    return path


def plot_watch_time(path: str, train_watch: np.ndarray, discretizations: Sequence[Discretization],
                    eval_watch: Optional[np.ndarray] = None) -> str:
    """One panel per discretization: log-x histogram of watch time with its thresholds."""
    x = np.asarray(train_watch, dtype=np.float64)
    positive = x[x > 0]
    n_zero = int(np.sum(x <= 0))
    panels = max(1, len(discretizations))
    fig = Figure(figsize=(10, 2.6 * panels + 0.4))
    if positive.size == 0:
        ax = fig.add_subplot(1, 1, 1)
        ax.text(0.5, 0.5, "no positive watch times", ha="center", va="center", transform=ax.transAxes)
        return _save(fig, path)
    lo, hi = max(float(positive.min()), 1e-2), float(positive.max())
    hi = max(hi, lo * 10)
    bins = np.logspace(np.log10(lo), np.log10(hi), 60)
    colors = {"EAD": "#c0392b", "equal frequency": "#2471a3", "equal width": "#1e8449"}
    axes = [fig.add_subplot(panels, 1, i + 1) for i in range(panels)]
    for ax, d in zip(axes, discretizations or [None]):
        ax.hist(np.clip(positive, lo, hi), bins=bins, color="#b3b6b7", label="train")
        if eval_watch is not None:
            ev = np.asarray(eval_watch, dtype=np.float64)
            ev = ev[ev > 0]
            if ev.size:
                w = np.full(ev.size, positive.size / ev.size)  # same total as train
                ax.hist(np.clip(ev, lo, hi), bins=bins, weights=w, histtype="step", color="#34495e",
                        label="eval (rescaled)")
        ax.set_xscale("log")
        ax.set_ylabel("impressions")
        if d is not None:
            color = colors.get(d.name, "#7d3c98")
            for t in d.thresholds:
                if t > 0:
                    ax.axvline(t, color=color, lw=0.8, alpha=0.8)
            j = "" if d.J is None else f", J = {d.J:.4g}"
            ax.set_title(f"{d.name}: M = {len(d.thresholds)} thresholds (lines){j}", fontsize=10)
        ax.legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel(f"watch time (s, log scale; {n_zero} zero plays not shown)")
    return _save(fig, path)


def plot_quantile_calibration(path: str, coverage: Dict[float, float], conformal: Optional[dict] = None) -> str:
    """Eval-day coverage, and validation before / after conformal levels (quantile_calibration.py)."""
    return quantile_calibration.plot_quantile_calibration(path, coverage, conformal)


def plot_click_calibration(path: str, rows: List[Dict[str, float]]) -> str:
    fig = Figure(figsize=(6, 6.5))
    ax = fig.add_subplot(2, 1, 1)
    ax.plot([0, 1], [0, 1], ls="--", color="#7f8c8d", label="perfect")
    if rows:
        pred = [r["mean_prediction"] for r in rows]
        obs = [r["observed_rate"] for r in rows]
        ax.plot(pred, obs, marker="o", color="#2471a3", label="model")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("mean predicted click probability")
    ax.set_ylabel("observed click rate")
    ax.set_title("click calibration by prediction bin", fontsize=10)
    ax.legend(loc="upper left")
    ax2 = fig.add_subplot(2, 1, 2)
    if rows:
        ax2.bar([(r["bin_lower"] + r["bin_upper"]) / 2 for r in rows], [r["count"] for r in rows],
                width=[(r["bin_upper"] - r["bin_lower"]) * 0.9 for r in rows], color="#aab7b8")
    ax2.set_xlim(0, 1)
    ax2.set_xlabel("predicted click probability bin")
    ax2.set_ylabel("impressions")
    return _save(fig, path)


def plot_slice_metrics(path: str, column: str, slices: Sequence[SliceMetrics],
                       overall: Optional[SliceMetrics], metrics: Sequence[Tuple[str, str]]) -> str:
    """Bar charts, one per metric, of the slices of ``column``; dashed line = overall."""
    labels = [s.value for s in slices]
    ncols = min(3, max(1, len(metrics)))
    nrows = -(-len(metrics) // ncols)
    fig = Figure(figsize=(4.4 * ncols, 3.4 * nrows + 0.3))
    for i, (output, metric) in enumerate(metrics):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        values = [_get(s, output, metric) for s in slices]
        ax.bar(range(len(labels)), [np.nan if v is None else v for v in values], color="#5d6d7e")
        ref = _get(overall, output, metric)
        if ref is not None:
            ax.axhline(ref, ls="--", color="#c0392b", lw=1, label="overall")
            ax.legend(fontsize=7, loc="lower right")
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=7)
        ax.set_title(f"{metric} ({output})", fontsize=9)
    fig.suptitle(f"by {column}", fontsize=10)
    return _save(fig, path)


# ---------------------------------------------------------------------- HTML

_CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 24px; color: #1c2833; }
h1 { margin-bottom: 4px; } h2 { border-bottom: 1px solid #d5d8dc; padding-bottom: 4px; margin-top: 32px; }
table { border-collapse: collapse; margin: 8px 0 16px 0; font-size: 13px; }
th, td { border: 1px solid #d5d8dc; padding: 3px 8px; text-align: right; }
th { background: #f2f3f4; } td.l, th.l { text-align: left; }
.badge { display: inline-block; padding: 6px 14px; border-radius: 4px; color: white; font-weight: bold; }
.blessed { background: #1e8449; } .not-blessed { background: #c0392b; }
.pass { color: #1e8449; font-weight: bold; } .fail { color: #c0392b; font-weight: bold; }
.note { background: #fef9e7; border-left: 4px solid #f4d03f; padding: 8px 12px; }
.warn { background: #fdedec; border-left: 4px solid #c0392b; padding: 8px 12px; }
img { max-width: 100%; border: 1px solid #eaeded; }
code { background: #f4f6f6; padding: 1px 4px; }
.scroll { overflow-x: auto; max-width: 100%; }
"""


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left_cols: int = 1) -> str:
    """Table of already-escaped cells; the first ``left_cols`` columns left-aligned."""
    cls = lambda i: ' class="l"' if i < left_cols else ""  # noqa: E731
    head = "".join(f"<th{cls(i)}>{h}</th>" for i, h in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td{cls(i)}>{c}</td>" for i, c in enumerate(r)) + "</tr>"
                   for r in rows)
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _img(rel: str, alt: str) -> str:
    return f'<p><img src="{html.escape(rel)}" alt="{html.escape(alt)}"></p>'


def _blessing_section(data: ReportData) -> str:
    ev = data.evaluation
    badge = ('<span class="badge blessed">BLESSED</span>' if data.blessed
             else '<span class="badge not-blessed">NOT BLESSED</span>')
    baseline = ("compared with the latest blessed model (baseline)" if ev.has_baseline
                else "no blessed baseline yet: only the absolute bounds apply")
    rows = []
    for g in ev.gates:
        result = '<span class="pass">pass</span>' if g.passed else '<span class="fail">FAIL</span>'
        if g.message:
            result += f"<br><small>{html.escape(g.message)}</small>"
        rows.append([html.escape(g.slice), html.escape(g.output), html.escape(g.metric), html.escape(g.rule()),
                     _fmt(g.value), _fmt(g.baseline), _fmt(g.change), result])
    gates = (_table(["slice", "output", "metric", "rule", "candidate", "baseline", "change", "result"],
                    rows, left_cols=4) if rows else "<p>No gates configured.</p>")
    return (f"<h2 id='blessing'>Blessing</h2><p>{badge} &nbsp; TFMA validation "
            f"{'ok' if ev.validation_ok else 'failed'}; {html.escape(baseline)}.</p>{gates}")


def _overall_section(data: ReportData) -> str:
    overall = data.evaluation.overall()
    if overall is None:
        return "<h2>Overall metrics</h2><p>No overall slice in the evaluation.</p>"
    rows, levels = [], 0
    for output in sorted(overall.metrics):
        for metric, value in sorted(overall.metrics[output].items()):
            if metric.startswith(COVERAGE_PREFIX):  # one per level: the quantile calibration plot shows them
                levels += 1
                continue
            rows.append([html.escape(output or "(all)"), html.escape(metric), _fmt(value),
                         _fmt(overall.baseline.get(output, {}).get(metric)),
                         _fmt(overall.change.get(output, {}).get(metric))])
    warnings = "".join(f"<p class='warn'>Calibration warning: {html.escape(w)}.</p>"
                       for w in calibration_warnings(overall.metrics))
    coverage = (f"<p class='note'>The {levels} <code>{COVERAGE_PREFIX}&tau;</code> metrics are plotted under "
                f"<a href='#quantile-calibration'>Quantile calibration</a>.</p>" if levels else "")
    return ("<h2 id='overall'>Overall metrics</h2>" + warnings
            + _table(["output", "metric", "candidate", "baseline", "change"], rows, left_cols=2) + coverage)


def _watch_section(data: ReportData, out_dir: str) -> str:
    rel = f"{PLOTS_DIR}/watch_time_distribution.png"
    plot_watch_time(os.path.join(out_dir, rel), data.train_watch, data.discretizations, data.eval_watch)
    rows = []
    for d in data.discretizations:
        t = d.thresholds
        preview = ", ".join(f"{v:.3g}" for v in t[:6]) + (" ... " + f"{t[-1]:.4g}" if len(t) > 6 else "")
        rows.append([html.escape(d.name), html.escape(d.source), str(len(t)), _fmt(d.J), html.escape(preview)])
    x = np.asarray(data.train_watch, dtype=np.float64)
    summary = ""
    if x.size:
        q = np.quantile(x, [0.3, 0.5, 0.8, 0.99])
        summary = (f"<p>{x.size:,} train impressions; watch time p30 {q[0]:.3g} s, median {q[1]:.3g} s, "
                   f"p80 {q[2]:.3g} s, p99 {q[3]:.3g} s; {np.mean(x <= 0):.1%} zero plays.</p>")
    return ("<h2 id='watch-time'>Watch-time distribution and discretization</h2>" + summary
            + "<p>EAD (Sun et al., CREAD, AAAI 2024) picks thresholds minimising "
              "J = A<sub>w</sub> + &beta; A<sub>b</sub> on the training CDF; lower J is better.</p>"
            + _table(["thresholds", "source", "M", "J", "t_1 ... t_M (s)"], rows, left_cols=2)
            + _img(rel, "watch-time distribution with EAD, equal-frequency and equal-width thresholds"))


def _quantile_section(data: ReportData, out_dir: str) -> str:
    head = "<h2 id='quantile-calibration'>Quantile calibration</h2>"
    if not data.quantile_coverage:
        return head + f"<p class='note'>{NO_QUANTILE_HEAD}</p>"
    rel = f"{PLOTS_DIR}/quantile_calibration.png"
    plot_quantile_calibration(os.path.join(out_dir, rel), data.quantile_coverage, data.conformal)
    return head + _img(rel, "quantile level tau against empirical coverage")


def _click_section(data: ReportData, out_dir: str) -> str:
    head = "<h2 id='click-calibration'>Click calibration</h2>"
    buckets = data.evaluation.calibration.get(data.calibration_slice)
    if not buckets:
        return head + ("<p class='note'>No calibration plot in the evaluation (add TFMA's "
                       "<code>CalibrationPlot</code> to the click output's metrics).</p>")
    rows = rebin_calibration(buckets)
    rel = f"{PLOTS_DIR}/click_calibration.png"
    plot_click_calibration(os.path.join(out_dir, rel), rows)
    table = _table(["predicted bin", "impressions", "mean predicted", "observed rate"],
                   [[f"{r['bin_lower']:.1f}&ndash;{r['bin_upper']:.1f}", _fmt(r["count"]),
                     _fmt(r["mean_prediction"]), _fmt(r["observed_rate"])] for r in rows])
    return head + f"<p>Slice: {html.escape(data.calibration_slice)}.</p>" + _img(
        rel, "predicted against observed click rate") + table


def _slices_section(data: ReportData, out_dir: str) -> str:
    ev = data.evaluation
    overall = ev.overall()
    parts = ["<h2 id='slices'>Metrics by slice</h2>"]
    outputs_of = {}
    for s in ev.slices:
        for o, by in s.metrics.items():
            for m in by:
                outputs_of.setdefault(m, set()).add(o)
    table_metrics = [(o, m) for m in TABLE_METRICS for o in sorted(outputs_of.get(m, ()))]
    table_metrics = [(o, m) for o, m in table_metrics  # example_count: once
                     if m != "example_count" or o == min(outputs_of[m])]
    chart_metrics = [(o, m) for m in CHART_METRICS for o in sorted(outputs_of.get(m, ()))]
    for i, column in enumerate(slice_columns(ev)):
        slices = sorted((s for s in ev.slices if s.column == column),
                        key=lambda s: [value_order(v) for v in s.values])
        rows = [[html.escape(s.name if s is overall else s.value)] + [_fmt(_get(s, o, m)) for o, m in table_metrics]
                for s in ([overall] if overall else []) + slices]
        parts.append(f"<h3>{html.escape(column)}</h3>")
        parts.append(_table([html.escape(column)] + [f"{html.escape(m)}<br><small>{html.escape(o)}</small>"
                                                     for o, m in table_metrics], rows))
        if chart_metrics:
            rel = f"{PLOTS_DIR}/slices_{i}.png"
            plot_slice_metrics(os.path.join(out_dir, rel), column, slices, overall, chart_metrics)
            parts.append(_img(rel, f"metrics by {column}"))
    if len(parts) == 1:
        parts.append("<p>No slices besides Overall.</p>")
    return "".join(parts)


def _info_section(data: ReportData) -> str:
    if not data.info:
        return ""
    rows = [[html.escape(k), f"<code>{html.escape(str(v))}</code>"] for k, v in data.info.items()]
    return _table(["input", "location"], rows, left_cols=2)


def write_report(out_dir: str, data: ReportData) -> str:
    """Writes ``index.html``, ``plots/*.png`` and ``report.json`` into ``out_dir``; returns
    the path of ``index.html``."""
    os.makedirs(os.path.join(out_dir, PLOTS_DIR), exist_ok=True)
    body = "".join([
        f"<h1>{html.escape(data.title)}</h1>",
        _info_section(data),
        _blessing_section(data),
        _overall_section(data),
        _watch_section(data, out_dir),
        _quantile_section(data, out_dir),
        _click_section(data, out_dir),
        _slices_section(data, out_dir),
        published_section.section(data.published, out_dir, PLOTS_DIR),
    ])
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(data.title)}</title><style>{_CSS}</style></head><body>{body}</body></html>")
    index = os.path.join(out_dir, INDEX)
    with open(index, "w", encoding="utf-8") as f:
        f.write(page)
    with open(os.path.join(out_dir, REPORT_JSON), "w", encoding="utf-8") as f:
        json.dump({"blessed": data.blessed, "evaluation": data.evaluation.to_dict(),
                   "discretizations": [dataclasses.asdict(d) for d in data.discretizations],
                   "quantile_coverage": {str(k): v for k, v in data.quantile_coverage.items()},
                   "info": data.info}, f, indent=1, default=float)
    return index
