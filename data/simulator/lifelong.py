"""Lifelong histories (opt-in, issue #38): users whose interests go dormant for hundreds of
events and come back, with histories of up to L events and a long-range marker.

Nothing here is used by ``simulate`` (the default KuaiRand-format logs are unchanged);
``simulate_lifelong`` returns arrays for the lifelong-memory benchmark
(``bench/bench_lifelong.py``). Generative model (all draws from ``SeedSequence(seed)``)::

    topic(j) = j mod T,  b_j ~ N(0, s_b^2)                 videos 1..V (0 = padding)
    user u: I_u ~ U{2..5} interests (distinct topics), strengths a_k ~ U(a_lo, a_hi),
            shares pi ~ Dirichlet(1), history length n_u ~ U{L/2..L}
    history: phases of 1 + Geometric(1/phase_mean) events; each phase has one active
            interest k ~ pi; an event is a video of k's topic with prob 1 - noise, else a
            video of a uniform random topic (noise)
    request after the history: N candidates, topic from the user's interests (share
            p_interest, uniform over interests, so often a dormant one), from the noise
            topics of the history (p_seen_noise) or uniform (rest)
    p_click = sigmoid(c0 + a_k [topic is interest k] + c_r [topic in the last R events] + b_j)

``long_range`` marks candidates whose topic occurs in the history but not in its last
``recent`` (= R = 50) events: their relevant past lies beyond what DIN's last-50 sees.
Histories are left-padded: ``history[u, L - n_u:]`` are u's events, oldest first.

``write_logs`` writes a simulation as KuaiRand-format logs (writer.py's files), so the
histories can go through LogExampleGen: user u's events one a minute over the first
``days - 1`` days (viewed: click 1, 10 s watched), its request's N candidates on the last
day at one time (click = the label). With LogExampleGen's ``user_events`` on,
``user_events.long_history(events_u, request_ms, L)`` reversed is ``history[u]``'s events
(tests/components/log_example_gen/test_user_events.py).
"""
from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Dict

import numpy as np


@dataclasses.dataclass(frozen=True)
class LifelongParams:
    """Knobs of the lifelong generative model (symbols as in the module docstring)."""

    num_videos: int = 5000          # V
    num_topics: int = 200           # T
    history_length: int = 2000      # L
    candidates: int = 16            # N
    recent: int = 50                # R
    phase_mean: float = 150.0
    noise: float = 0.2
    p_interest: float = 0.4
    p_seen_noise: float = 0.2
    strength_low: float = 1.5       # a_lo
    strength_high: float = 3.0      # a_hi
    click_bias: float = -2.0        # c0
    recent_boost: float = 0.8       # c_r
    video_bias_scale: float = 0.5   # s_b


@dataclasses.dataclass
class LifelongData:
    """Arrays of one lifelong simulation (U users)."""

    video_topic: np.ndarray    # [V + 1] int32, topic of each video id (row 0 = padding, topic 0)
    history: np.ndarray        # [U, L] int32 video ids, left-padded with 0
    history_length: np.ndarray  # [U] int32 number of real events
    candidates: np.ndarray     # [U, N] int32 video ids
    labels: np.ndarray         # [U, N] float32 clicks
    p_click: np.ndarray        # [U, N] float32 true click probability
    long_range: np.ndarray     # [U, N] bool


def _history(rng, n, interests, shares, params: LifelongParams):
    """Topics of one user's ``n`` events (phases of one active interest + noise)."""
    topics = np.empty(n, np.int64)
    pos = 0
    while pos < n:
        length = 1 + rng.geometric(1.0 / params.phase_mean)
        topics[pos:pos + length] = interests[rng.choice(len(interests), p=shares)]
        pos += length
    noisy = rng.random(n) < params.noise
    topics[noisy] = rng.integers(0, params.num_topics, int(noisy.sum()))
    return topics


def _videos_of(rng, topics, params: LifelongParams):
    """A uniform video id (1..V) of each topic."""
    per_topic = params.num_videos // params.num_topics
    return 1 + topics + params.num_topics * rng.integers(0, per_topic, topics.shape)


def long_range_marker(history, history_length, candidate_topics, video_topic, recent):
    """True where the candidate's topic occurs in the user's history but not in its last
    ``recent`` events (brute force per user; U·N small)."""
    users, length = history.shape
    out = np.zeros(candidate_topics.shape, bool)
    for u in range(users):
        events = video_topic[history[u, length - history_length[u]:]]
        recent_set = set(events[-recent:].tolist())
        all_set = set(events.tolist())
        out[u] = [t in all_set and t not in recent_set for t in candidate_topics[u].tolist()]
    return out


def simulate_lifelong(num_users: int = 2000, seed: int = 0,
                      params: LifelongParams = LifelongParams()) -> LifelongData:
    """Simulate ``num_users`` lifelong histories and one request of N candidates each."""
    if num_users < 1:
        raise ValueError(f"num_users must be >= 1, got {num_users}")
    if params.num_videos < params.num_topics or params.history_length < 2 * params.recent:
        raise ValueError("need num_videos >= num_topics and history_length >= 2 * recent")
    rng_user, rng_hist, rng_req = [np.random.default_rng(s)
                                   for s in np.random.SeedSequence(seed).spawn(3)]
    big_l, n_cand, n_topics = params.history_length, params.candidates, params.num_topics
    video_ids = np.arange(params.num_videos // n_topics * n_topics + 1)
    video_topic = np.where(video_ids > 0, (video_ids - 1) % n_topics, 0).astype(np.int32)
    video_bias = params.video_bias_scale * rng_user.standard_normal(len(video_ids))

    history = np.zeros((num_users, big_l), np.int32)
    lengths = rng_user.integers(big_l // 2, big_l + 1, num_users).astype(np.int32)
    cand_topics = np.empty((num_users, n_cand), np.int64)
    logits = np.empty((num_users, n_cand))
    for u in range(num_users):
        k = int(rng_user.integers(2, 6))
        interests = rng_user.choice(n_topics, size=k, replace=False)
        strength = rng_user.uniform(params.strength_low, params.strength_high, k)
        shares = rng_user.dirichlet(np.ones(k))
        topics = _history(rng_hist, int(lengths[u]), interests, shares, params)
        history[u, big_l - lengths[u]:] = _videos_of(rng_hist, topics, params)

        noise_topics = np.setdiff1d(topics, interests)
        kind = rng_req.random(n_cand)
        ct = rng_req.integers(0, n_topics, n_cand)
        from_interest = kind < params.p_interest
        ct[from_interest] = interests[rng_req.integers(0, k, int(from_interest.sum()))]
        seen = (kind >= params.p_interest) & (kind < params.p_interest + params.p_seen_noise)
        if len(noise_topics):
            ct[seen] = noise_topics[rng_req.integers(0, len(noise_topics), int(seen.sum()))]
        cand_topics[u] = ct
        strength_of = dict(zip(interests.tolist(), strength.tolist()))
        recent = set(topics[-params.recent:].tolist())
        logits[u] = [params.click_bias + strength_of.get(t, 0.0) + params.recent_boost * (t in recent)
                     for t in ct.tolist()]
    candidates = _videos_of(rng_req, cand_topics, params).astype(np.int32)
    p_click = 1.0 / (1.0 + np.exp(-(logits + video_bias[candidates])))
    labels = (rng_req.random(p_click.shape) < p_click).astype(np.float32)
    long_range = long_range_marker(history, lengths, cand_topics, video_topic, params.recent)
    return LifelongData(video_topic=video_topic, history=history, history_length=lengths,
                        candidates=candidates, labels=labels, p_click=p_click.astype(np.float32),
                        long_range=long_range)


EVENT_GAP_MS = 60_000       # one history event a minute
DAY_START_H = 8             # a day's events start at 08:00 UTC+8
REQUEST_H = 20              # the request on the last day, 20:00 UTC+8
EVENT_WATCH_MS = 10_000


def write_logs(data: LifelongData, out_dir: str, days: int = 8, seed: int = 0,
               start_date: str = "2022-04-25") -> Dict[str, object]:
    """The simulation as the simulator's four KuaiRand-format files (module doc);
    side tables from the default simulator's generators (users 0..U-1, videos 0..V).
    Returns writer.write_tables' paths plus ``request_ms`` (the request time, ms)."""
    import pandas as pd

    from data.simulator import writer
    from data.simulator.params import SimParams
    from data.simulator.users import make_users
    from data.simulator.videos import make_videos
    from schemas.kuairand_format import UTC_OFFSET_MS

    users_n, big_l = data.history.shape
    per_day = -(-big_l // (days - 1))
    if days < 2 or per_day * EVENT_GAP_MS > (REQUEST_H - DAY_START_H) * 3_600_000:
        raise ValueError(f"{days} days cannot hold {big_l} events a user one a minute")
    start = dt.date.fromisoformat(start_date)
    day0_ms = int(dt.datetime(start.year, start.month, start.day, tzinfo=dt.timezone.utc).timestamp() * 1000
                  ) - UTC_OFFSET_MS
    rng_user, rng_video = [np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(2)]
    params = SimParams()
    users = make_users(users_n, params, rng_user)[0]
    videos, _, _, duration_ms, _ = make_videos(len(data.video_topic), start, params, rng_video)

    u_idx, v_idx, t_ms, click, play = [], [], [], [], []
    for u in range(users_n):
        n = int(data.history_length[u])
        k = np.arange(n)
        u_idx.append(np.full(n, u))
        v_idx.append(data.history[u, big_l - n:])
        t_ms.append(day0_ms + (k // per_day) * 86_400_000 + DAY_START_H * 3_600_000 + (k % per_day) * EVENT_GAP_MS)
        click.append(np.ones(n, np.int64))
        play.append(np.full(n, EVENT_WATCH_MS))
    request_ms = day0_ms + (days - 1) * 86_400_000 + REQUEST_H * 3_600_000
    n_cand = data.candidates.shape[1]
    u_idx.append(np.repeat(np.arange(users_n), n_cand))
    v_idx.append(data.candidates.reshape(-1))
    t_ms.append(np.full(users_n * n_cand, request_ms))
    click.append(data.labels.reshape(-1).astype(np.int64))
    play.append(np.where(data.labels.reshape(-1) > 0, EVENT_WATCH_MS, 0))
    u_idx, v_idx, t_ms, click, play = (np.concatenate(x).astype(np.int64) for x in (u_idx, v_idx, t_ms, click, play))
    zeros = np.zeros(len(u_idx), np.int64)
    engagement = {k: zeros for k in ("is_like", "is_follow", "is_comment", "is_forward", "is_hate", "long_view",
                                     "comment_stay_time", "is_profile_enter")}
    log = writer.log_table(u_idx, v_idx, t_ms, click, play, duration_ms[v_idx], np.ones(len(u_idx), np.int64),
                           engagement)
    truth = pd.DataFrame({c: zeros for c in writer.TRUTH_COLUMNS})
    truth[["user_id", "video_id", "time_ms"]] = log[["user_id", "video_id", "time_ms"]]
    log, truth = writer.sort_by_time(log, truth)
    return dict(writer.write_tables(out_dir, log, users, videos, truth), request_ms=int(request_ms))
