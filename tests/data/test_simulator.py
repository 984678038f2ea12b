"""Tests of data/simulator.py: calibration, determinism, release format, truth file."""
import datetime as dt
import filecmp
import os
import re

import numpy as np
import pandas as pd
import pytest

from data import simulator as sim
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

# Real KuaiRand-Pure marginals and the tolerances the default run must meet.
TARGET_CLICK_RATE, CLICK_ABS_TOL = 0.44, 0.05
TARGET_WATCH_P30_S, P30_REL_TOL = 1.8, 0.35
TARGET_WATCH_P50_S, P50_REL_TOL = 4.5, 0.30
TARGET_WATCH_P80_S, P80_REL_TOL = 30.0, 0.30
TARGET_DURATION_MEDIAN_S, DURATION_REL_TOL = 71.0, 0.20

SMALL = dict(num_users=40, num_videos=60, num_days=3, impressions_per_user_day=4.0)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim_default")
    result = sim.simulate(str(out))  # default size: 300 users, 400 videos, 6 days
    log = pd.read_csv(result["log"])
    users = pd.read_csv(result["user_features"])
    videos = pd.read_csv(result["video_features"])
    truth = pd.read_csv(result["truth"])
    return result, log, users, videos, truth


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


def test_click_is_learnable_but_noisy(default_run):
    _, log, _, _, truth = default_run
    auc = sim._auc(truth["p_click"].to_numpy(), log["is_click"].to_numpy())
    assert 0.70 <= auc <= 0.80


def test_auc_helper_matches_pairwise_count():
    rng = np.random.default_rng(0)
    score = rng.integers(0, 5, 60).astype(float)  # ties on purpose
    label = rng.integers(0, 2, 60)
    pos, neg = score[label == 1], score[label == 0]
    brute = ((pos[:, None] > neg[None, :]).sum()
             + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size)
    assert sim._auc(score, label) == pytest.approx(brute)


def test_autoplay_previews_and_activity_spread(default_run):
    _, log, _, _, _ = default_run
    no_click = log[log["is_click"] == 0]
    # Feed autoplay: most non-clicks still play, but only a short preview.
    assert (no_click["play_time_ms"] > 0).mean() > 0.7
    assert (no_click["play_time_ms"] < 7000).all()
    assert (log.loc[log["is_click"] == 1, "play_time_ms"] >= 7000).mean() > 0.85
    per_user = log.groupby("user_id").size()
    assert (per_user >= 10).sum() >= 30
    assert (per_user <= 2).sum() >= 3


# --- determinism --------------------------------------------------------------

def test_same_seed_gives_identical_bytes(tmp_path):
    a = sim.simulate(str(tmp_path / "a"), seed=3, **SMALL)
    b = sim.simulate(str(tmp_path / "b"), seed=3, **SMALL)
    for key in ("log", "user_features", "video_features", "truth"):
        assert filecmp.cmp(a[key], b[key], shallow=False), key


def test_other_seed_gives_other_files(tmp_path):
    a = sim.simulate(str(tmp_path / "a"), seed=3, **SMALL)
    b = sim.simulate(str(tmp_path / "b"), seed=4, **SMALL)
    for key in ("log", "user_features", "video_features", "truth"):
        assert not filecmp.cmp(a[key], b[key], shallow=False), key


def test_bad_arguments_raise(tmp_path):
    with pytest.raises(ValueError, match="num_users"):
        sim.simulate(str(tmp_path), num_users=0)
    with pytest.raises(ValueError, match="impressions_per_user_day"):
        sim.simulate(str(tmp_path), impressions_per_user_day=0)


def test_cli_writes_files(tmp_path):
    out = tmp_path / "cli"
    assert sim.main(["--out", str(out), "--users", "20", "--videos", "30", "--days", "2",
                     "--seed", "1"]) == 0
    assert sorted(os.listdir(out)) == sorted(
        [sim.LOG_FILE, sim.USER_FILE, sim.VIDEO_FILE, sim.TRUTH_FILE])


# --- format -------------------------------------------------------------------

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
    assert set(log["tab"].unique()) <= set(sim.TAB_VALUES.tolist())
    assert (log["tab"] == 1).mean() > 0.6
    assert (log["comment_stay_time"] >= 0).all() and (log["profile_stay_time"] == 0).all()
    assert (log["play_time_ms"] >= 0).all()
    long_view = (log["play_time_ms"] >= 18000) | (log["play_time_ms"] >= log["duration_ms"])
    assert (log["long_view"] == long_view.astype(int)).all()
    duration = videos.set_index("video_id")["video_duration"]
    assert (log["duration_ms"].to_numpy() == duration.loc[log["video_id"]].to_numpy()).all()


def test_side_table_value_kinds(default_run):
    _, _, users, videos, _ = default_run
    assert set(users["user_active_degree"]) <= {
        "full_active", "high_active", "middle_active", "low_active", "2_14_day_new",
        "single_low_active", "30day_retention", "day_new", "UNKNOWN"}
    assert (users["follow_user_num_range"] == "0").eq(users["follow_user_num"] == 0).all()
    assert (users.loc[users["follow_user_num"] > 500, "follow_user_num_range"] == "500+").all()
    assert (users.loc[users["register_days"] > 730, "register_days_range"] == "730+").all()
    assert set(users["is_live_streamer"]) <= {-124, 1}
    for k in range(18):
        assert f"onehot_feat{k}" in users
    assert users["onehot_feat4"].dtype == np.float64 and users["onehot_feat0"].dtype == np.int64
    assert set(videos["video_type"]) <= {"NORMAL", "AD"}
    assert videos["upload_dt"].str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    tags = videos["tag"].dropna()
    assert tags.str.fullmatch(r"\d+(,\d+)*").all() and tags.str.contains(",").any()
    assert videos["video_duration"].dtype == np.float64
    assert (videos["video_duration"] >= 5000).all()


def test_ids_in_log_exist_in_side_tables(default_run):
    _, log, users, videos, _ = default_run
    assert set(log["user_id"]) <= set(users["user_id"])
    assert set(log["video_id"]) <= set(videos["video_id"])
    assert users["user_id"].is_unique and videos["video_id"].is_unique


def test_time_sorted_inside_days_and_dates_are_utc8(default_run):
    _, log, _, _, _ = default_run
    assert log["time_ms"].is_monotonic_increasing
    start = dt.date(2022, 4, 25)
    # 2022-04-25 00:00 UTC+8 = 2022-04-24 16:00 UTC
    first_ms = 1650816000000
    assert (log["time_ms"] >= first_ms).all()
    assert (log["time_ms"] < first_ms + 6 * 86_400_000).all()
    local = pd.to_datetime(log["time_ms"], unit="ms", utc=True).dt.tz_convert("Asia/Shanghai")
    assert (local.dt.strftime("%Y%m%d").astype(int) == log["date"]).all()
    assert (local.dt.hour * 100 == log["hourmin"]).all()
    days = {int((start + dt.timedelta(days=k)).strftime("%Y%m%d")) for k in range(6)}
    assert set(log["date"]) == days


# --- truth file ---------------------------------------------------------------

def test_truth_rows_align_with_log(default_run):
    _, log, _, _, truth = default_run
    assert len(truth) == len(log)
    for col in ("user_id", "video_id", "time_ms"):
        assert (truth[col] == log[col]).all()
    q = truth[["q10_s", "q25_s", "q50_s", "q75_s", "q90_s"]].to_numpy()
    assert (np.diff(q, axis=1) >= 0).all()
    assert (truth["expected_watch_time_s"] >= 0).all()
    assert truth["p_click"].between(0, 1).all()


def test_truth_means_match_realised_outcomes(default_run):
    _, log, _, _, truth = default_run
    watch_s = log["play_time_ms"].to_numpy() / 1000.0
    expected = truth["expected_watch_time_s"].to_numpy()
    assert watch_s.mean() == pytest.approx(expected.mean(), rel=0.08)
    assert log["is_click"].mean() == pytest.approx(truth["p_click"].mean(), abs=0.02)


def test_truth_quantiles_are_calibrated(default_run):
    _, log, _, _, truth = default_run
    watch_s = log["play_time_ms"].to_numpy() / 1000.0
    for level, col in zip(sim.QUANTILE_LEVELS, TRUTH_HEADER[5:]):
        q = truth[col].to_numpy()
        # Point masses (0 s, full duration) make P(W < q) <= level <= P(W <= q).
        assert (watch_s < q - 1e-3).mean() <= level + 0.02, col
        assert (watch_s <= q + 1e-3).mean() >= level - 0.02, col


def _one_pair(affinity, duration_s, params, n=None):
    wp = sim.WatchParams.from_affinity(np.array([affinity]), np.array([duration_s]), params)
    if n is None:
        return wp
    return sim.WatchParams(*(np.repeat(np.asarray(getattr(wp, f.name)), n)
                             for f in sim.dataclasses.fields(sim.WatchParams)))


@pytest.mark.parametrize("affinity,duration_s", [(-1.5, 8.0), (0.0, 71.0), (1.5, 300.0),
                                                 (0.5, 12.0)])
def test_exact_truth_matches_monte_carlo_of_sampler(affinity, duration_s):
    params = sim.SimParams()
    wp = _one_pair(affinity, duration_s, params)
    q = sim.watch_time_quantiles(wp, params)[0]
    mean = sim.expected_watch_time(wp, params)[0]
    n = 200_000
    clicks, draws = sim.sample_watch_time(_one_pair(affinity, duration_s, params, n), params,
                                          np.random.default_rng(11))
    assert clicks.mean() == pytest.approx(wp.p_click[0], abs=0.005)
    assert draws.mean() == pytest.approx(mean, rel=0.02)
    empirical = np.quantile(draws, sim.QUANTILE_LEVELS)
    np.testing.assert_allclose(empirical, q, rtol=0.03, atol=0.02)


def test_expected_watch_equals_integral_of_survival():
    """E[W] = int_0^inf (1 - F(x)) dx, checked by brute-force trapezoid integration."""
    params = sim.SimParams()
    for affinity, duration_s in [(-1.0, 20.0), (1.0, 150.0)]:
        wp = _one_pair(affinity, duration_s, params)
        xs = np.linspace(0.0, duration_s * (1 + 30 * params.loop_mean), 400_001)
        cdf = sim.watch_time_cdf(xs[:, None], wp, params)[:, 0]
        assert np.all(np.diff(cdf) >= -1e-12)
        integral = np.trapz(1.0 - cdf, xs)
        assert integral == pytest.approx(sim.expected_watch_time(wp, params)[0], rel=1e-3)
