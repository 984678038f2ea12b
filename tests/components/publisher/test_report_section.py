"""The report's "Published model" section from a publish report (hand-made numbers)."""
import json
import os

from components.model_report import published


def test_section_shows_the_figures_and_draws_the_sweep(tmp_path):
    report = {
        "decision": "published", "reason": "every gate passed", "version": 7, "path": "/s/m/7",
        "embedding_bytes_fp32": 64000, "embedding_bytes_published": 12000, "embedding_compression": 64000 / 12000,
        "rows": 1000, "rows_kept": 500, "golden_requests": 500, "golden_max_abs_delta_click_prob": 0.0012,
        "warmup_records": 100,
        "trained": {"ne": 0.9, "auc": 0.74, "xauc": 0.68, "mae": 20.0},
        "published": {"ne": 0.9003, "auc": 0.7395, "xauc": 0.6799, "mae": 20.1},
        "deltas": {"ne_loss": 0.0003 / 0.9, "auc_drop": 0.0005, "xauc_drop": 0.0001, "mae_rise": 0.1},
        "tables": {"emb_video_id": {"rows": 1000, "rows_kept": 500, "dim": 16, "bytes_fp32": 64000,
                                    "bytes_published": 12000, "quantized": True, "max_abs_error": 1e-4}},
        "sweep": [{"criterion": c, "fraction": f, "ne_loss": f * 1e-3} for c in ("opt_state", "l2_norm")
                  for f in (0.0, 0.5)],
    }
    out = tmp_path / "report"
    os.makedirs(out / "pub")
    with open(out / "pub" / published.REPORT_FILE, "w") as f:
        json.dump(report, f)
    html = published.section(published.load(str(out / "pub")), str(out))
    assert "<h2>Published model</h2>" in html and "version 7" in html
    assert "64,000 bytes fp32 → 12,000 published (5.33× smaller)" in html
    assert "+0.0333 %" in html  # NE loss 0.0003 / 0.9
    assert "emb_video_id" in html and "0.0012" in html
    assert (out / "plots" / "published_ne_loss.png").stat().st_size > 1000
    assert published.section(None, str(out)) == "" and published.load(str(tmp_path / "none")) is None
