"""The report's "Published model" section: what the Publisher (issue #10) published.

From the publish report (components/publisher/publish.py, `publish_report.json`):
decision and reason, embedding bytes before/after per table and rows kept, the
quantization error, NE / AUC / XAUC / MAE of the trained vs the published model, the
golden requests' max |Δ click_prob|, warmup records, and a plot of the NE loss against
the pruned fraction (`sweep`, per allocation and ranking criterion; drawn on the
validation split when the Publisher was given it, `sweep_split`).
"""
import html
import json
import os
from typing import Optional

REPORT_FILE = "publish_report.json"


def load(publish_report_uri: Optional[str]) -> Optional[dict]:
    """The publish report in an artifact dir, or None."""
    if not publish_report_uri:
        return None
    path = os.path.join(publish_report_uri, REPORT_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _fmt(v, digits=4):
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _table(header, rows) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def plot_sweep(path: str, sweep) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3.5))
    ax = fig.add_subplot(1, 1, 1)
    def curve(r):  # allocation (per table / across tables, allocation.py) and criterion
        return f"{r.get('allocation', 'per_table')}, {r['criterion']}"

    for name in sorted({curve(r) for r in sweep}):
        pts = sorted((r["fraction"], 100 * r["ne_loss"]) for r in sweep if curve(r) == name)
        ax.plot([100 * p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.axhline(0.05, color="grey", linestyle="--", linewidth=1, label="gate 0.05 %")
    ax.set_xlabel("rows pruned (%)")
    ax.set_ylabel("relative NE loss (%)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def section(report: Optional[dict], out_dir: str, plots_dir: str = "plots") -> str:
    """HTML of the section ("" when the pipeline has no publish report)."""
    if not report:
        return ""
    parts = ["<h2>Published model</h2>",
             f"<p><b>{_fmt(report.get('decision'))}</b>: {_fmt(report.get('reason'))}"
             + (f" — version {_fmt(report.get('version'))} at <code>{_fmt(report.get('path'))}</code>"
                if report.get("version") else "") + "</p>"]
    if report.get("embedding_bytes_fp32"):
        parts.append(f"<p>Embedding tables: {report['embedding_bytes_fp32']:,} bytes fp32 → "
                     f"{report['embedding_bytes_published']:,} published "
                     f"({_fmt(report.get('embedding_compression'), 3)}× smaller); rows kept "
                     f"{report['rows_kept']:,} of {report['rows']:,}. Golden requests: "
                     f"{_fmt(report.get('golden_requests'))}, max |Δ click_prob| "
                     f"{_fmt(report.get('golden_max_abs_delta_click_prob'))}; warmup records "
                     f"{_fmt(report.get('warmup_records'))}.</p>")
    if report.get("published"):
        t, p, d = report["trained"], report["published"], report["deltas"]
        parts.append(_table(["metric", "trained (fp32)", "published", "change"], [
            ["NE (click)", _fmt(t["ne"], 6), _fmt(p["ne"], 6), f"{100 * d['ne_loss']:+.4f} %"],
            ["AUC (click)", _fmt(t["auc"], 6), _fmt(p["auc"], 6), _fmt(-d["auc_drop"], 3)],
            ["XAUC (watch)", _fmt(t["xauc"], 6), _fmt(p["xauc"], 6), _fmt(-d["xauc_drop"], 3)],
            ["MAE (watch, s)", _fmt(t["mae"], 6), _fmt(p["mae"], 6), _fmt(d["mae_rise"], 3)]]))
    if report.get("tables"):
        parts.append(_table(["table", "rows", "kept", "dim", "bytes fp32", "bytes published", "int8",
                             "max |x − x̂|"], [
            [html.escape(n), f"{t['rows']:,}", f"{t['rows_kept']:,}", t["dim"], f"{t['bytes_fp32']:,}",
             f"{t['bytes_published']:,}", "yes" if t["quantized"] else "no", _fmt(t["max_abs_error"], 3)]
            for n, t in sorted(report["tables"].items())]))
    if report.get("sweep"):
        os.makedirs(os.path.join(out_dir, plots_dir), exist_ok=True)
        plot_sweep(os.path.join(out_dir, plots_dir, "published_ne_loss.png"), report["sweep"])
        parts.append(f"<p>NE loss against pruned fraction, in memory on the {_fmt(report.get('sweep_split'))} "
                     f"rows; pruned fraction chosen: {_fmt(report.get('prune_fraction_chosen'))}.</p>"
                     f"<img src='{plots_dir}/published_ne_loss.png' alt='NE loss against pruned fraction'>")
    for fallback in report.get("prune_fallbacks") or []:
        how = "in memory" if fallback.get("check") == "in memory" else "as a SavedModel"
        parts.append(f"<p>Pruned fraction {_fmt(fallback['fraction'])} refused on the eval split {how} "
                     f"({html.escape(fallback['reason'])}); the next smaller one was tried.</p>")
    return "".join(parts)
