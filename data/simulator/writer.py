"""The simulator's files, in the KuaiRand-Pure release format (``schemas.kuairand_format``).

Four CSV files per run::

    log_standard_sim.csv          impressions, sorted by time_ms (LOG_COLUMNS)
    user_features_sim.csv         one row per user id 0..num_users-1 (USER_COLUMNS)
    video_features_basic_sim.csv  one row per video id 0..num_videos-1 (VIDEO_COLUMNS)
    truth_sim.csv                 per log row: true p_click, E[watch], quantiles (TRUTH_COLUMNS)

The file prefixes (``log_``, ``user_features``, ``video_features_basic``) are how
the ingestion finds the tables; ``truth_sim.csv`` deliberately does not match them.
Each file is written to a temporary name and renamed (atomic publish), unless the
file already holds exactly those bytes: then it is left untouched (same mtime), so a
rerun of the same simulation leaves LogExampleGen's input fingerprint (names, sizes,
mtimes) unchanged and TFX reuses the cached examples (issue #34). Rows of the log and
the truth file are in the same order (time_ms, user_id, video_id).

Log columns not drawn by the model.  ``date``/``hourmin`` use UTC+8
(Asia/Shanghai): in the real release 99.1% of rows have ``date`` equal to the
UTC+8 calendar day of ``time_ms`` (the first 20220425 row, 1650812741436, is
2022-04-24 23:05 UTC+8, the release labels run a few minutes ahead near hour
ends) and ``hourmin`` is always a whole hour (HH*100, never e.g. 1530); here both
are exact floor values of UTC+8 time.  ``profile_stay_time`` is 0 (as in 99.99% of
real rows); ``is_rand = 0``.  ``duration_ms`` equals the video's
``video_duration``.  Truth values are rounded to 6 decimals.
"""
from __future__ import annotations

import filecmp
import os
from typing import Dict, Mapping

import numpy as np
import pandas as pd

from schemas.kuairand_format import LOG_COLUMNS, UTC_OFFSET_MS

LOG_FILE = "log_standard_sim.csv"
USER_FILE = "user_features_sim.csv"
VIDEO_FILE = "video_features_basic_sim.csv"
TRUTH_FILE = "truth_sim.csv"
TRUTH_COLUMNS = [
    "user_id", "video_id", "time_ms", "expected_watch_time_s", "p_click",
    "q10_s", "q25_s", "q50_s", "q75_s", "q90_s",
]


def log_table(user_idx, video_idx, time_ms, is_click, play_ms, duration_ms, tab,
              engagement: Mapping[str, np.ndarray]) -> pd.DataFrame:
    """The impression log with the release's columns, in impression order.

    ``engagement`` holds the other outcome columns (``interactions.sample_engagement``).
    """
    n = time_ms.shape[0]
    local = pd.to_datetime(time_ms + UTC_OFFSET_MS, unit="ms")
    return pd.DataFrame({
        "user_id": user_idx.astype(np.int64),
        "video_id": video_idx.astype(np.int64),
        "date": (local.year * 10000 + local.month * 100 + local.day).to_numpy(np.int64),
        "hourmin": (local.hour * 100).to_numpy(np.int64),
        "time_ms": time_ms,
        "is_click": is_click,
        "is_like": engagement["is_like"],
        "is_follow": engagement["is_follow"],
        "is_comment": engagement["is_comment"],
        "is_forward": engagement["is_forward"],
        "is_hate": engagement["is_hate"],
        "long_view": engagement["long_view"],
        "play_time_ms": play_ms,
        "duration_ms": duration_ms.astype(np.int64),
        "profile_stay_time": np.zeros(n, dtype=np.int64),
        "comment_stay_time": engagement["comment_stay_time"],
        "is_profile_enter": engagement["is_profile_enter"],
        "is_rand": np.zeros(n, dtype=np.int64),
        "tab": tab,
    })[LOG_COLUMNS]


def truth_table(log: pd.DataFrame, expected_watch_s, p_click, quantiles) -> pd.DataFrame:
    """Truth rows aligned with ``log``; ``quantiles`` has one column per q*_s column."""
    truth = pd.DataFrame({
        "user_id": log["user_id"], "video_id": log["video_id"], "time_ms": log["time_ms"],
        "expected_watch_time_s": np.round(expected_watch_s, 6),
        "p_click": np.round(p_click, 6),
    })
    for k, col in enumerate(TRUTH_COLUMNS[5:]):
        truth[col] = np.round(quantiles[:, k], 6)
    return truth


def sort_by_time(log: pd.DataFrame, truth: pd.DataFrame):
    """Both tables reordered by (time_ms, user_id, video_id), index reset."""
    order = np.lexsort((log["video_id"].to_numpy(), log["user_id"].to_numpy(),
                        log["time_ms"].to_numpy()))
    return (log.iloc[order].reset_index(drop=True),
            truth.iloc[order].reset_index(drop=True))


def write_tables(out_dir: str, log: pd.DataFrame, users: pd.DataFrame,
                 videos: pd.DataFrame, truth: pd.DataFrame) -> Dict[str, str]:
    """Write the four CSV files into ``out_dir``; returns ``{"log": path, ...}``."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "log": os.path.join(out_dir, LOG_FILE),
        "user_features": os.path.join(out_dir, USER_FILE),
        "video_features": os.path.join(out_dir, VIDEO_FILE),
        "truth": os.path.join(out_dir, TRUTH_FILE),
    }
    for key, df in (("log", log), ("user_features", users),
                    ("video_features", videos), ("truth", truth)):
        tmp = f"{paths[key]}.{os.getpid()}.tmp"  # per process: concurrent runs never share a temp file
        df.to_csv(tmp, index=False, lineterminator="\n")
        if os.path.exists(paths[key]) and filecmp.cmp(tmp, paths[key], shallow=False):
            os.remove(tmp)  # the same content: keep the file (and its mtime)
        else:
            os.replace(tmp, paths[key])
    return paths
