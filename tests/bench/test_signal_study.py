"""bench/signal_study.py: the candidate signals against naive loops over their definitions,
and leak-free (a label at or after t_i − D never changes row i's candidates)."""
import numpy as np
import pandas as pd
import pytest

from bench import signal_study as S

DELAY = 300_000


def _log(n=400, seed=0):
    rng = np.random.default_rng(seed)
    t = 1_650_000_000_000 + np.sort(rng.integers(0, 3 * 86_400_000, n))
    t[5:9] = t[4]  # ties: never in each other's sets
    video = rng.integers(0, 12, n)
    return pd.DataFrame({
        "user_id": rng.integers(0, 6, n), "video_id": video, "time_ms": t,
        "date": 20220425 + (t - t.min()) // 86_400_000, "tab": rng.integers(0, 3, n),
        "hour": rng.integers(0, 24, n), "is_click": rng.integers(0, 2, n),
        "w": np.round(rng.exponential(2.0, n), 3), "author_id": video % 5, "music_id": video % 3,
        "tag": np.where(video % 4 == 0, -1, video % 4)})


def test_prior_sums_and_since_last_match_naive_loops():
    df = _log()
    g = S._codes(df, ["user_id", "video_id"])
    t, y = df["time_ms"].to_numpy(), df["is_click"].to_numpy(float)
    t0 = int(t.min())
    for query in (t, t - DELAY):
        got = S.prior_sums(g, t, {"y": y}, query, t0)
        for i in range(len(df)):
            members = [j for j in range(len(df)) if g[j] == g[i] and t[j] < query[i]]
            assert got["n"][i] == len(members)
            assert got["y"][i] == pytest.approx(sum(y[j] for j in members))
    since = S.since_last(g, t, t0)
    for i in range(len(df)):
        before = [t[j] for j in range(len(df)) if g[j] == g[i] and t[j] < t[i]]
        assert since[i] == pytest.approx(np.log1p((t[i] - max(before)) / 1000.0) if before else -1.0)


def test_candidates_match_naive_definitions():
    df = _log(seed=1)
    out = S.candidate_groups(df, train_end_ms=int(df["time_ms"].quantile(0.7)), delay_ms=DELAY)
    t, y, w = df["time_ms"].to_numpy(), df["is_click"].to_numpy(float), df["w"].to_numpy(float)
    for i in range(0, len(df), 7):
        same_uv = (df["user_id"] == df["user_id"][i]) & (df["video_id"] == df["video_id"][i])
        known = same_uv & (t + DELAY < t[i])
        assert out["exposure"]["uv_n"][i] == (same_uv & (t < t[i])).sum()
        assert out["exposure"]["uv_clicks"][i] == pytest.approx(y[known].sum())
        assert out["exposure"]["uv_watch"][i] == pytest.approx(w[known].sum())
        video = df["video_id"] == df["video_id"][i]
        assert out["popularity"]["video_n_1h"][i] == (video & (t < t[i]) & (t >= t[i] - 3_600_000)).sum()
        first = t[video & (t < t[i])]
        assert out["popularity"]["video_since_first"][i] == pytest.approx(
            np.log1p((t[i] - first.min()) / 1000.0) if len(first) else -1.0)
        author_known = (df["author_id"] == df["author_id"][i]) & (t + DELAY < t[i])
        n = author_known.sum()
        assert out["eb_items"]["author_known_n"][i] == pytest.approx(np.log1p(n))
        assert out["eb_items"]["author_watch_mean"][i] == pytest.approx(w[author_known].mean() if n else -1.0)
        tab_known = (df["tab"] == df["tab"][i]) & (t + DELAY < t[i])
        e_tab = (y[tab_known].sum() + 1.0) / (tab_known.sum() + 2.0)
        th = tab_known & (df["hour"] == df["hour"][i])
        assert out["tab_hour"]["tab_hour_ctr"][i] == pytest.approx((y[th].sum() + 10 * e_tab) / (th.sum() + 10))
        today = (df["user_id"] == df["user_id"][i]) & (df["date"] == df["date"][i]) & (t < t[i])
        assert out["user_activity"]["user_n_today"][i] == today.sum()


def test_a_label_not_yet_known_changes_nothing():
    df = _log(seed=2)
    i = 250
    late = df["time_ms"].to_numpy() + DELAY >= df["time_ms"][i]  # labels row i may not see
    flipped = df.copy()
    flipped.loc[late, "is_click"] = 1 - flipped.loc[late, "is_click"]
    flipped.loc[late, "w"] = flipped.loc[late, "w"] + 5.0
    # the EB prior is fitted on the train days' labels, so keep it fixed: train_end before every late row
    train_end = int(df["time_ms"][late].min())
    base = S.candidate_groups(df, train_end, DELAY)
    after = S.candidate_groups(flipped, train_end, DELAY)
    for group, values in base.items():
        for name, v in values.items():
            assert after[group][name][i] == pytest.approx(v[i]), (group, name)


def test_eb_prior_recovers_a_beta_binomial():
    rng = np.random.default_rng(3)
    p = rng.beta(4.0, 12.0, 3000)
    n = rng.integers(200, 400, 3000).astype(float)
    a, b = S.eb_prior(rng.binomial(n.astype(int), p).astype(float), n)
    assert a / (a + b) == pytest.approx(0.25, abs=0.01)
    assert a + b == pytest.approx(16.0, rel=0.25)  # binomial noise inflates the variance a little
