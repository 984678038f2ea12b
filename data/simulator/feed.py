"""The feed: which videos each user is shown, on which day, at what time, in which tab.

Exposure.  User activity is heavy tailed, ``lambda_i ~ LogNormal`` (``users``)
rescaled to mean ``impressions_per_user_day`` (heavy users capped so that nobody
sees more than half of the catalogue); on day d the user sees::

    n_id ~ Poisson(lambda_i * w_weekday(d))

videos (weekday weights normalised to mean 1; no video twice per user), picked by
Gumbel-top-k from::

    P(j | i) ~ pop_j * exp(tau * u_i . v_j),     pop_j ~ LogNormal(0, s_pop^2)

Timestamps.  Per user-day the impressions are cut into ``1 + Poisson(m / 8)``
sessions (m impressions that day); sessions start at hours drawn from the real
KuaiRand hourly activity curve (UTC+8), at least a minute after the previous
session ended; inside a session impressions follow each other by
``W + gap``, ``gap = 1 s + Exp(mean 8 s)`` (W the watch time).  A day that would
spill past midnight is shifted back to end at 23:59:59.999.  ``tab`` is drawn
per session from the real tab frequencies (mostly 1).
"""
from __future__ import annotations

import datetime as dt
from typing import Sequence

import numpy as np

from data.simulator.params import HOURLY_ACTIVITY, TAB_PROBS, TAB_VALUES, WEEKDAY_WEIGHT, SimParams
from schemas.kuairand_format import DAY_MS, UTC_OFFSET_MS


def day_start_ms(day: dt.date) -> int:
    """Epoch ms of 00:00 UTC+8 on ``day``."""
    epoch_days = (day - dt.date(1970, 1, 1)).days
    return epoch_days * DAY_MS - UTC_OFFSET_MS


DENSE_DOT_LIMIT = 200_000_000  # users x videos up to which u . v is one matrix (1M-row bench logs: 1e8)
DOT_CHUNK_USERS = 1024


def user_video_dot(taste, vec):
    """``dot(a, b)`` -> the (b - a, videos) rows of u_i . v_j for users a..b-1: slices of one
    matrix product up to DENSE_DOT_LIMIT elements (the logs of every smaller size stay bit
    for bit what they were), above it computed per chunk of users, so a 4M-row log (80k x
    20k: 12.8 GB as one float64 matrix) needs one chunk at a time."""
    if taste.shape[0] * vec.shape[0] <= DENSE_DOT_LIMIT:
        full = taste @ vec.T
        return lambda a, b: full[a:b]
    return lambda a, b: taste[a:b] @ vec.T


def sample_exposure(dot, activity, popularity, days: Sequence[dt.date],
                    impressions_per_user_day: float, params: SimParams, rng):
    """Impressions per user-day and the videos shown.

    ``dot(a, b)`` gives the rows a..b-1 of the (users, videos) matrix of ``u_i . v_j``
    (``user_video_dot``). Returns ``counts`` (users, days) and the flat ``user_idx``,
    ``video_idx`` of the impressions, user by user, each user's impressions in day order.
    """
    num_users, num_videos = len(activity), len(popularity)
    num_days = len(days)
    day_w = WEEKDAY_WEIGHT[[d.weekday() for d in days]]
    day_w = day_w / day_w.mean()
    max_per_user = max(1, num_videos // 2)
    lam = activity
    cap = max_per_user / (num_days * day_w.max() * 1.5)
    for _ in range(5):  # rescale to the requested mean, capping heavy users
        lam = np.minimum(lam / lam.mean() * impressions_per_user_day, cap)
    counts = rng.poisson(lam[:, None] * day_w[None, :])
    # Keep the first max_per_user impressions of each user.
    cum = np.cumsum(counts, axis=1)
    counts = np.minimum(counts, np.maximum(max_per_user - (cum - counts), 0))

    log_pop = np.log(popularity)[None, :]
    rows_u, rows_v = [], []
    for i in range(num_users):
        if i % DOT_CHUNK_USERS == 0:
            log_w = log_pop + params.exposure_temperature * dot(i, i + DOT_CHUNK_USERS)
        n_i = int(counts[i].sum())
        if n_i == 0:
            continue
        g = log_w[i % DOT_CHUNK_USERS] + rng.gumbel(size=num_videos)
        chosen = np.argsort(-g, kind="stable")[:n_i]
        chosen = rng.permutation(chosen)
        rows_u.append(np.full(n_i, i))
        rows_v.append(chosen)
    return counts, np.concatenate(rows_u), np.concatenate(rows_v)


def sample_timestamps(counts, play_ms, days: Sequence[dt.date], rng):
    """``(time_ms, tab)`` of each impression, in the order of ``sample_exposure``.

    ``play_ms`` is the integer watch time of each impression (it spaces the
    impressions of a session).
    """
    num_users, num_days = counts.shape
    n = play_ms.shape[0]
    time_ms = np.empty(n, dtype=np.int64)
    tab = np.empty(n, dtype=np.int64)
    hour_p = HOURLY_ACTIVITY / HOURLY_ACTIVITY.sum()
    tab_p = TAB_PROBS / TAB_PROBS.sum()
    pos = 0
    for i in range(num_users):
        for d in range(num_days):
            m = int(counts[i, d])
            if m == 0:
                continue
            idx = np.arange(pos, pos + m)
            pos += m
            n_sess = min(m, 1 + rng.poisson(m / 8.0))
            cuts = np.sort(rng.choice(np.arange(1, m), size=n_sess - 1, replace=False)) \
                if n_sess > 1 else np.array([], dtype=np.int64)
            bounds = np.concatenate([[0], cuts, [m]])
            starts = np.sort(rng.choice(24, size=n_sess, p=hour_p) * 3_600_000
                             + rng.integers(0, 3_600_000, n_sess))
            gaps = (1000 + rng.exponential(8000, m)).astype(np.int64)
            step = play_ms[idx] + gaps
            offs = np.empty(m, dtype=np.int64)
            session_end = -60_000
            for s in range(n_sess):
                a, b = bounds[s], bounds[s + 1]
                t0 = max(int(starts[s]), session_end + 60_000)
                within = np.concatenate([[0], np.cumsum(step[a:b - 1])])
                offs[a:b] = t0 + within
                session_end = int(offs[b - 1] + step[b - 1])
                tab[idx[a:b]] = TAB_VALUES[rng.choice(len(TAB_VALUES), p=tab_p)]
            overflow = offs[-1] - (DAY_MS - 1)
            if overflow > 0:
                offs = np.maximum(offs - overflow, 0)
            time_ms[idx] = day_start_ms(days[d]) + offs
    assert pos == n
    return time_ms, tab
