"""Tests of data/simulator/writer.py: release headers, file names, value kinds, truth rows."""
import os

import numpy as np
import pytest

from data.simulator import params
from tests.conftest import KUAIRAND_DIR

# Headers of the public KuaiRand-Pure release files (copied from the real files).
REAL_LOG_HEADER = [
    "user_id", "video_id", "date", "hourmin", "time_ms", "is_click", "is_like",
    "is_follow", "is_comment", "is_forward", "is_hate", "long_view", "play_time_ms",
    "duration_ms", "profile_stay_time", "comment_stay_time", "is_profile_enter",
    "is_rand", "tab",
]
REAL_USER_HEADER = [
    "user_id", "user_active_degree", "is_lowactive_period", "is_live_streamer",
    "is_video_author", "follow_user_num", "follow_user_num_range", "fans_user_num",
    "fans_user_num_range", "friend_user_num", "friend_user_num_range", "register_days",
    "register_days_range", "onehot_feat0", "onehot_feat1", "onehot_feat2", "onehot_feat3",
    "onehot_feat4", "onehot_feat5", "onehot_feat6", "onehot_feat7", "onehot_feat8",
    "onehot_feat9", "onehot_feat10", "onehot_feat11", "onehot_feat12", "onehot_feat13",
    "onehot_feat14", "onehot_feat15", "onehot_feat16", "onehot_feat17",
]
REAL_VIDEO_HEADER = [
    "video_id", "author_id", "video_type", "upload_dt", "upload_type", "visible_status",
    "video_duration", "server_width", "server_height", "music_id", "music_type", "tag",
]
TRUTH_HEADER = [
    "user_id", "video_id", "time_ms", "expected_watch_time_s", "p_click",
    "q10_s", "q25_s", "q50_s", "q75_s", "q90_s",
]


def _header(path):
    with open(path) as f:
        return f.readline().rstrip("\n").split(",")


def test_headers_equal_release_headers(default_run):
    result = default_run[0]
    assert _header(result["log"]) == REAL_LOG_HEADER
    assert _header(result["user_features"]) == REAL_USER_HEADER
    assert _header(result["video_features"]) == REAL_VIDEO_HEADER
    assert _header(result["truth"]) == TRUTH_HEADER
    # Ingestion finds tables by prefix; the truth file must not look like a log.
    names = {k: os.path.basename(result[k]) for k in ("log", "user_features",
                                                      "video_features", "truth")}
    assert names["log"].startswith("log_")
    assert names["user_features"].startswith("user_features")
    assert names["video_features"].startswith("video_features_basic")
    assert not names["truth"].startswith(("log_", "user_features", "video_features"))


@pytest.mark.skipif(not os.path.isdir(KUAIRAND_DIR), reason="real KuaiRand-Pure not present")
def test_hardcoded_headers_are_the_real_ones():
    assert _header(os.path.join(KUAIRAND_DIR, "log_standard_4_25_to_4_30_pure.csv")) \
        == REAL_LOG_HEADER
    assert _header(os.path.join(KUAIRAND_DIR, "user_features_pure.csv")) == REAL_USER_HEADER
    assert _header(os.path.join(KUAIRAND_DIR, "video_features_basic_pure.csv")) \
        == REAL_VIDEO_HEADER


def test_log_value_kinds(default_run):
    _, log, _, videos, _ = default_run
    assert all(log[c].dtype == np.int64 for c in REAL_LOG_HEADER)
    for col in ("is_click", "is_like", "is_follow", "is_comment", "is_forward", "is_hate",
                "long_view", "is_profile_enter"):
        assert set(log[col].unique()) <= {0, 1}, col
    assert (log["is_rand"] == 0).all()
    assert set(log["tab"].unique()) <= set(params.TAB_VALUES.tolist())
    assert (log["tab"] == 1).mean() > 0.6
    assert (log["comment_stay_time"] >= 0).all() and (log["profile_stay_time"] == 0).all()
    assert (log["play_time_ms"] >= 0).all()
    long_view = (log["play_time_ms"] >= 18000) | (log["play_time_ms"] >= log["duration_ms"])
    assert (log["long_view"] == long_view.astype(int)).all()
    duration = videos.set_index("video_id")["video_duration"]
    assert (log["duration_ms"].to_numpy() == duration.loc[log["video_id"]].to_numpy()).all()


def test_truth_rows_align_with_log(default_run):
    _, log, _, _, truth = default_run
    assert len(truth) == len(log)
    for col in ("user_id", "video_id", "time_ms"):
        assert (truth[col] == log[col]).all()
    q = truth[["q10_s", "q25_s", "q50_s", "q75_s", "q90_s"]].to_numpy()
    assert (np.diff(q, axis=1) >= 0).all()
    assert (truth["expected_watch_time_s"] >= 0).all()
    assert truth["p_click"].between(0, 1).all()
