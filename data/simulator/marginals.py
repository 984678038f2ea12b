"""Marginals of a KuaiRand-format log, to calibrate the simulator against the real logs.

Real KuaiRand-Pure targets (DESIGN.md section 6): click rate 0.44; watch time p30
1.8 s, median 4.5 s, p80 30 s, p99 208 s; video duration median 71 s.
``click_auc_of_true_p`` is the AUC of the true ``p_click`` against the drawn
clicks: the ceiling any click model can reach on the simulated log.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import pandas as pd

from models.evaluation.metrics import auc


def measure_marginals(log: pd.DataFrame, truth: pd.DataFrame,
                      videos: Optional[pd.DataFrame] = None) -> Dict:
    """Marginals of a KuaiRand-format log (and its truth table) for calibration checks."""
    watch = log["play_time_ms"].to_numpy() / 1000.0
    per_user = log.groupby("user_id").size()
    out = {
        "rows": int(len(log)),
        "users_in_log": int(log["user_id"].nunique()),
        "videos_in_log": int(log["video_id"].nunique()),
        "click_rate": float(log["is_click"].mean()),
        "mean_p_click": float(truth["p_click"].mean()),
        "click_auc_of_true_p": auc(log["is_click"].to_numpy(), truth["p_click"].to_numpy()),
        "watch_p30_s": float(np.quantile(watch, 0.30)),
        "watch_p50_s": float(np.quantile(watch, 0.50)),
        "watch_p80_s": float(np.quantile(watch, 0.80)),
        "watch_p99_s": float(np.quantile(watch, 0.99)),
        "watch_mean_s": float(watch.mean()),
        "mean_expected_watch_s": float(truth["expected_watch_time_s"].mean()),
        "play_positive_rate": float((watch > 0).mean()),
        "long_view_rate": float(log["long_view"].mean()),
        "duration_median_s": float(np.median(log["duration_ms"]) / 1000.0),
        "events_per_user_median": float(per_user.median()),
        "users_with_10plus_events": int((per_user >= 10).sum()),
        "users_with_1to2_events": int((per_user <= 2).sum()),
    }
    if videos is not None:
        out["video_table_duration_median_s"] = float(videos["video_duration"].median() / 1000.0)
    return out
