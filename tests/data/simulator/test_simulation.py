"""Tests of data/simulator/simulation.py: calibration of a whole run, determinism, arguments."""
import filecmp

import numpy as np
import pytest

from data.simulator import simulate

# Real KuaiRand-Pure marginals and the tolerances the default run must meet.
TARGET_CLICK_RATE, CLICK_ABS_TOL = 0.44, 0.05
TARGET_WATCH_P30_S, P30_REL_TOL = 1.8, 0.35
TARGET_WATCH_P50_S, P50_REL_TOL = 4.5, 0.30
TARGET_WATCH_P80_S, P80_REL_TOL = 30.0, 0.30
TARGET_DURATION_MEDIAN_S, DURATION_REL_TOL = 71.0, 0.20

SMALL = dict(num_users=40, num_videos=60, num_days=3, impressions_per_user_day=4.0)


def _rel_err(value, target):
    return abs(value - target) / target


# --- calibration --------------------------------------------------------------

def test_default_run_matches_kuairand_marginals(default_run):
    result, log, _, _, _ = default_run
    watch_s = log["play_time_ms"].to_numpy() / 1000.0
    assert 9000 <= len(log) <= 13000
    assert abs(log["is_click"].mean() - TARGET_CLICK_RATE) <= CLICK_ABS_TOL
    assert _rel_err(np.quantile(watch_s, 0.30), TARGET_WATCH_P30_S) <= P30_REL_TOL
    assert _rel_err(np.quantile(watch_s, 0.50), TARGET_WATCH_P50_S) <= P50_REL_TOL
    assert _rel_err(np.quantile(watch_s, 0.80), TARGET_WATCH_P80_S) <= P80_REL_TOL
    assert _rel_err(np.median(log["duration_ms"]) / 1000.0,
                    TARGET_DURATION_MEDIAN_S) <= DURATION_REL_TOL
    # The returned marginals are those of the written file.
    m = result["marginals"]
    assert m["rows"] == len(log)
    assert m["click_rate"] == pytest.approx(log["is_click"].mean())
    assert m["watch_p50_s"] == pytest.approx(np.quantile(watch_s, 0.5))


def test_ids_in_log_exist_in_side_tables(default_run):
    _, log, users, videos, _ = default_run
    assert set(log["user_id"]) <= set(users["user_id"])
    assert set(log["video_id"]) <= set(videos["video_id"])
    assert users["user_id"].is_unique and videos["video_id"].is_unique


# --- determinism --------------------------------------------------------------

def test_same_seed_gives_identical_bytes(tmp_path):
    a = simulate(str(tmp_path / "a"), seed=3, **SMALL)
    b = simulate(str(tmp_path / "b"), seed=3, **SMALL)
    for key in ("log", "user_features", "video_features", "truth"):
        assert filecmp.cmp(a[key], b[key], shallow=False), key


def test_other_seed_gives_other_files(tmp_path):
    a = simulate(str(tmp_path / "a"), seed=3, **SMALL)
    b = simulate(str(tmp_path / "b"), seed=4, **SMALL)
    for key in ("log", "user_features", "video_features", "truth"):
        assert not filecmp.cmp(a[key], b[key], shallow=False), key


def test_rerun_keeps_unchanged_files_and_rewrites_changed_ones(tmp_path):
    """A rerun of the same simulation leaves every file as it was (inode and mtime: LogExampleGen's
    input fingerprint, hence TFX's cache key, stays); another seed replaces them."""
    import os

    out = str(tmp_path / "sim")
    first = simulate(out, seed=3, **SMALL)
    before = {k: os.stat(first[k]) for k in ("log", "user_features", "video_features", "truth")}
    for k in before:  # an mtime in the past, so a rewrite in the same clock tick would still show
        os.utime(first[k], ns=(before[k].st_atime_ns, before[k].st_mtime_ns - 10**9))
    before = {k: os.stat(first[k]) for k in before}
    simulate(out, seed=3, **SMALL)
    for k, st in before.items():
        now = os.stat(first[k])
        assert (now.st_ino, now.st_mtime_ns) == (st.st_ino, st.st_mtime_ns), k
    assert not any(n.endswith(".tmp") for n in os.listdir(out))
    simulate(out, seed=4, **SMALL)
    assert os.stat(first["log"]).st_mtime_ns != before["log"].st_mtime_ns


def test_bad_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="num_users"):
        simulate(str(tmp_path), num_users=0)
    with pytest.raises(ValueError, match="impressions_per_user_day"):
        simulate(str(tmp_path), impressions_per_user_day=0)
