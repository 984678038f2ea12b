"""``simulate``: one run of the simulator, from the seed to the four CSV files.

Every draw comes from one of six ``numpy.random.default_rng`` streams spawned
from ``SeedSequence(seed)``, one per concern (users, videos, exposure, watch
outcomes, timestamps, rarer events), so the same seed gives byte-identical files
and another seed gives other files. Steps::

    users.make_users            u_i, b_i, lambda_i + user table
    videos.make_videos          v_j, b_j, D_j, pop_j + video table
    feed.sample_exposure        which user sees which video on which day
    interactions                a_ij = u_i . v_j + b_i + b_j -> click, watch time,
                                exact truth (E[W], quantiles), rarer events
    feed.sample_timestamps      sessions, time_ms, tab
    writer                      release-format tables, sorted by time, written atomically
"""
from __future__ import annotations

import datetime as dt
from typing import Dict, Optional

import numpy as np

from data.simulator import feed, interactions, writer
from data.simulator.marginals import measure_marginals
from data.simulator.params import SimParams
from data.simulator.users import make_users
from data.simulator.videos import make_videos


def _dot_at(dot, u_idx, v_idx):
    """u . v of each impression, read from ``dot``'s rows one chunk of users at a time
    (impressions come user by user)."""
    out = np.empty(len(u_idx))
    for a in range(0, int(u_idx.max()) + 1 if len(u_idx) else 0, feed.DOT_CHUNK_USERS):
        lo, hi = np.searchsorted(u_idx, [a, a + feed.DOT_CHUNK_USERS])
        if hi > lo:
            out[lo:hi] = dot(a, a + feed.DOT_CHUNK_USERS)[u_idx[lo:hi] - a, v_idx[lo:hi]]
    return out


def simulate(out_dir: str, num_users: int = 300, num_videos: int = 400, num_days: int = 6,
             impressions_per_user_day: float = 6.0, seed: int = 7,
             start_date: str = "2022-04-25", params: Optional[SimParams] = None) -> Dict:
    """Simulate logs and write the four CSV files into ``out_dir``.

    Returns ``{"log": path, "user_features": path, "video_features": path,
    "truth": path, "marginals": {...}}`` where the marginals are measured on the
    written log (click rate, watch-time quantiles, duration median, ...).
    """
    if num_users < 1 or num_videos < 2 or num_days < 1:
        raise ValueError("need num_users >= 1, num_videos >= 2 and num_days >= 1, got "
                         f"{num_users}, {num_videos}, {num_days}")
    if impressions_per_user_day <= 0:
        raise ValueError(f"impressions_per_user_day must be > 0, got {impressions_per_user_day}")
    params = params or SimParams()
    start = dt.date.fromisoformat(start_date)
    rng_user, rng_video, rng_expo, rng_outcome, rng_time, rng_extra = [
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(6)]

    users, taste, user_bias, activity = make_users(num_users, params, rng_user)
    videos, vec, video_bias, duration_ms, popularity = make_videos(
        num_videos, start, params, rng_video)

    days = [start + dt.timedelta(days=k) for k in range(num_days)]
    dot = feed.user_video_dot(taste, vec)
    counts, u_idx, v_idx = feed.sample_exposure(
        dot, activity, popularity, days, impressions_per_user_day, params, rng_expo)

    affinity = _dot_at(dot, u_idx, v_idx) + user_bias[u_idx] + video_bias[v_idx]
    dur_ms = duration_ms[v_idx]
    wp = interactions.WatchParams.from_affinity(affinity, dur_ms / 1000.0, params)
    is_click, watch_s = interactions.sample_watch_time(wp, params, rng_outcome)
    play_ms = np.round(watch_s * 1000).astype(np.int64)

    time_ms, tab = feed.sample_timestamps(counts, play_ms, days, rng_time)
    engagement = interactions.sample_engagement(affinity, is_click, watch_s, play_ms, dur_ms,
                                                rng_extra)

    log = writer.log_table(u_idx, v_idx, time_ms, is_click, play_ms, dur_ms, tab, engagement)
    truth = writer.truth_table(log, interactions.expected_watch_time(wp, params), wp.p_click,
                               interactions.watch_time_quantiles(wp, params))
    log, truth = writer.sort_by_time(log, truth)
    paths = writer.write_tables(out_dir, log, users, videos, truth)
    return dict(paths, marginals=measure_marginals(log, truth, videos))
