"""Deterministic short-video log simulator writing KuaiRand-Pure-format files.

``simulate(out_dir, ...)`` writes four CSV files whose column names, order and
value kinds follow the public KuaiRand-Pure release (Gao et al., CIKM 2022)::

    log_standard_sim.csv          impressions, sorted by time_ms
    user_features_sim.csv         one row per user id 0..num_users-1
    video_features_basic_sim.csv  one row per video id 0..num_videos-1
    truth_sim.csv                 per log row: true p_click, E[watch], quantiles

The file prefixes (``log_``, ``user_features``, ``video_features_basic``) are how
the ingestion finds the tables; ``truth_sim.csv`` deliberately does not match them.
The same seed gives byte-identical files; another seed gives other files.

Generative model
----------------
Latent factors (dimension K, T topics, all draws from ``numpy.random.default_rng``
streams spawned from the seed)::

    u_i ~ N(0, s_u^2 / K * I_K)                       user taste
    c_t ~ N(0, I_K),  t_j ~ Zipf(T)                    topic centroids, video topic
    v_j = c_{t_j} + s_v * N(0, I_K)                    video vector
    b_i = s_bu * N(0,1) + beta_f0 * (onehot_feat0_i - 1/2)   user bias (centred)
    b_j = s_bv * N(0,1) + topic_bias_{t_j}                   video bias (centred)
    a_ij = u_i . v_j + b_i + b_j                       affinity
    D_j = clip(exp(N(ln 71 s, s_D^2)), 5 s, 1200 s),   l_j = ln(D_j / 71 s)

Exposure (what the feed shows).  User activity is heavy tailed,
``lambda_i ~ LogNormal`` rescaled to mean ``impressions_per_user_day``; on day d
the user sees ``n_id ~ Poisson(lambda_i * w_weekday(d))`` videos (no video twice
per user), picked by Gumbel-top-k from ``P(j | i) ~ pop_j * exp(tau * u_i . v_j)``
with ``pop_j ~ LogNormal(0, s_pop^2)``.

Outcome of impression (i, j)::

    p_click = sigmoid(c0 + c_a * a_ij - c_l * l_j)
    click ~ Bernoulli(p_click)

Watch time W (seconds) is a mixture; feed videos autoplay, so a non-click still
has a short preview play::

    no click (1 - p_click):   W = 0                                   w.p. z0
                              W = min(X, D),  X ~ LogNormal(ln m_s, s_s^2) | X < P
                                                                      otherwise
    click (p_click), with  e = sigmoid(e0 - e_a * a),  f = sigmoid(f0 + f_a * a - f_l * l):
      early exit  (e):           W = min(LogNormal(ln m_e, s_e^2), D)
      completion  ((1-e) f):     W = D * (1 + R),
                                 R ~ (1-rho) Exp(mean r1) + rho Exp(mean r2)   (overrun / loops)
      partial     ((1-e)(1-f)):  W = t0 + (D - t0) * sigmoid(g0 + g_a * a - g_l * l + s_g * N(0,1)),
                                 t0 = min(P, D / 2)

P = 7 s is the autoplay preview length: in KuaiRand-Pure nearly all non-click
plays are shorter than 7 s (99.8%) and 96% of click plays are longer (a click is
"stayed past the preview"), and 18% of non-click plays are 0 ms.  So the
quick-skip mass (1 - p_click) and early exits fall with affinity, the watched
fraction rises with affinity and falls with duration, and completions carry the
long tail (W > D: re-plays and loops).

Truth file: computed exactly, not by Monte-Carlo.  ``expected_watch_time_s`` is
E[W | i, j] in closed form (capped-lognormal means, exponential means) with the
logit-normal mean by 64-node Gauss-Hermite quadrature (error < 1e-12).
``q10_s..q90_s`` invert the closed-form mixture CDF F(x | i, j) by bisection
(64 halvings): q = inf{x : F(x) >= level}, so point masses (W = 0, W = D) give
exact quantiles.  ``play_time_ms`` is W rounded to integer ms.

Other log columns.  ``date``/``hourmin`` use UTC+8 (Asia/Shanghai): in the
real release 99.1% of rows have ``date`` equal to the UTC+8 calendar day of
``time_ms`` (the first 20220425 row, 1650812741436, is 2022-04-24 23:05 UTC+8,
the release labels run a few minutes ahead near hour ends) and ``hourmin`` is
always a whole hour (HH*100, never e.g. 1530); here both are exact floor values
of UTC+8 time.  Timestamps: per user-day, sessions start at hours drawn from the
real KuaiRand hourly activity curve; inside a session impressions follow each
other by W + gap.  ``long_view = 1`` iff ``play_time_ms >= 18000`` or
``play_time_ms >= duration_ms`` (reproduces 99.7% of the real labels).
``tab`` is drawn per session from the real tab frequencies (mostly 1).  Likes,
follows, forwards, hates, comments and profile entries are rare Bernoulli events
rising with affinity and watched fraction; ``profile_stay_time`` is 0 (as in
99.99% of real rows); ``is_rand = 0``.  ``duration_ms`` equals the video's
``video_duration``.

Example::

    python -m data.simulator --out data/generated/sim --users 300 --videos 400 \\
        --days 6 --seed 7
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import sys
from typing import Dict, Optional, Sequence

import numpy as np
import pandas as pd
from scipy import special

from schemas.kuairand_format import DAY_MS, LOG_COLUMNS, USER_COLUMNS, UTC_OFFSET_MS, VIDEO_COLUMNS

QUANTILE_LEVELS = (0.10, 0.25, 0.50, 0.75, 0.90)
TRUTH_COLUMNS = [
    "user_id", "video_id", "time_ms", "expected_watch_time_s", "p_click",
    "q10_s", "q25_s", "q50_s", "q75_s", "q90_s",
]
LOG_FILE = "log_standard_sim.csv"
USER_FILE = "user_features_sim.csv"
VIDEO_FILE = "video_features_basic_sim.csv"
TRUTH_FILE = "truth_sim.csv"

LONG_VIEW_MIN_PLAY_MS = 18_000

# Share of impressions per hour of day (UTC+8), measured on KuaiRand-Pure 04-25..04-30.
HOURLY_ACTIVITY = np.array([
    0.0352, 0.0214, 0.0141, 0.0092, 0.0079, 0.0105, 0.0195, 0.0272, 0.0328, 0.0378,
    0.0429, 0.0487, 0.0567, 0.0540, 0.0479, 0.0499, 0.0537, 0.0605, 0.0574, 0.0575,
    0.0623, 0.0683, 0.0659, 0.0587,
])
# Relative traffic by weekday (Mon..Sun); the real window peaks at the weekend.
WEEKDAY_WEIGHT = np.array([1.0, 0.98, 0.97, 0.95, 1.07, 1.43, 1.38])
# Real KuaiRand-Pure tab frequencies.
TAB_VALUES = np.array([1, 0, 4, 6, 2, 8, 5, 12, 3, 11, 9, 7, 13, 10, 14])
TAB_PROBS = np.array([
    0.7386, 0.0945, 0.0637, 0.0602, 0.0285, 0.0047, 0.0031, 0.0022, 0.0015,
    0.0009, 0.0007, 0.0007, 0.0003, 0.0003, 0.0001,
])
UPLOAD_TYPES = np.array([
    "LongImport", "Web", "ShortImport", "Kmovie", "LongPicture", "UNKNOWN",
    "PictureSet", "LongCamera", "ShortCamera", "ShareFromOtherApp", "FollowShoot",
])
UPLOAD_TYPE_PROBS = np.array([
    0.3857, 0.3186, 0.1209, 0.1159, 0.0189, 0.0105, 0.0096, 0.0084, 0.0057,
    0.0038, 0.0020,
])
TAG_IDS = np.array([39, 3, 9, 6, 20, 7, 12, 1, 2, 5, 8, 11, 28, 49, 68, 31])
# (width, height, probability) of the common real frame sizes.
FRAME_SIZES = [(720.0, 1280.0, 0.70), (1280.0, 720.0, 0.18), (960.0, 1280.0, 0.04),
               (1080.0, 1920.0, 0.03), (720.0, 1440.0, 0.03), (540.0, 960.0, 0.02)]
ONEHOT_CARDINALITY = [2, 7, 50, 1471, 15, 34, 3, 118, 454, 7, 5, 5, 2, 2, 2, 2, 2, 2]
ONEHOT_FLOAT = {4, 12, 13, 14, 15, 16, 17}  # written as 1.0/NaN, as in the release

# Value ranges of the release's *_range columns: (label, lower bound inclusive).
FOLLOW_BINS = [("0", 0), ("(0,10]", 1), ("(10,50]", 11), ("(50,100]", 51),
               ("(100,150]", 101), ("(150,250]", 151), ("(250,500]", 251), ("500+", 501)]
FANS_BINS = [("0", 0), ("[1,10)", 1), ("[10,100)", 10), ("[100,1k)", 100),
             ("[1k,5k)", 1000), ("[5k,1w)", 5000), ("[1w,10w)", 10_000),
             ("[10w,100w)", 100_000), ("[100w,1000w)", 1_000_000)]
FRIEND_BINS = [("0", 0), ("[1,5)", 1), ("[5,30)", 5), ("[30,60)", 30), ("[60,120)", 60),
               ("[120,250)", 120), ("250+", 250)]
REGISTER_BINS = [("8-14", 8), ("15-30", 15), ("31-60", 31), ("61-90", 61),
                 ("91-180", 91), ("181-365", 181), ("366-730", 366), ("730+", 731)]


@dataclasses.dataclass(frozen=True)
class SimParams:
    """Constants of the generative model (see the module docstring for symbols).

    Defaults are tuned so that the default-size run matches the KuaiRand-Pure
    marginals: click rate 0.44, watch time p30 1.8 s / p50 4.5 s / p80 30 s /
    p99 208 s, duration median 71 s.
    """

    latent_dim: int = 8            # K
    num_topics: int = 12           # T
    user_scale: float = 0.6        # s_u
    video_noise: float = 0.7       # s_v
    user_bias_scale: float = 0.85  # s_bu
    user_feat0_effect: float = 0.4  # beta_f0
    video_bias_scale: float = 0.7  # s_bv
    topic_bias_scale: float = 0.3
    duration_median_s: float = 71.0
    duration_sigma: float = 1.0    # s_D
    duration_min_s: float = 5.0
    duration_max_s: float = 1200.0
    activity_sigma: float = 1.4    # log-sd of user activity
    popularity_sigma: float = 1.0  # s_pop
    exposure_temperature: float = 0.4  # tau
    # click
    click_bias: float = -0.48      # c0
    click_affinity: float = 0.85   # c_a
    click_log_duration: float = 0.2  # c_l
    # no-click preview play
    preview_s: float = 7.0         # P
    skip_zero_prob: float = 0.18   # z0
    skip_median_s: float = 2.3     # m_s
    skip_sigma: float = 0.9        # s_s
    # click: early exit
    early_bias: float = -3.0       # e0
    early_affinity: float = 0.5    # e_a
    early_median_s: float = 3.5    # m_e
    early_sigma: float = 0.6       # s_e
    # click: completion and tail
    complete_bias: float = -1.7    # f0
    complete_affinity: float = 0.6  # f_a
    complete_log_duration: float = 0.9  # f_l
    overrun_mean: float = 0.12     # r1
    loop_prob: float = 0.12        # rho
    loop_mean: float = 0.8         # r2
    # click: partial view fraction (logit-normal)
    frac_bias: float = -1.4        # g0
    frac_affinity: float = 0.5     # g_a
    frac_log_duration: float = 0.4  # g_l
    frac_scale: float = 1.6        # s_g


@dataclasses.dataclass(frozen=True)
class WatchParams:
    """Per-impression parameters of the watch-time mixture (arrays of one shape)."""

    p_click: np.ndarray
    p_early: np.ndarray
    p_complete: np.ndarray
    frac_loc: np.ndarray
    duration_s: np.ndarray

    @classmethod
    def from_affinity(cls, affinity, duration_s, params: SimParams) -> "WatchParams":
        a = np.asarray(affinity, dtype=np.float64)
        d = np.asarray(duration_s, dtype=np.float64)
        log_d = np.log(d / params.duration_median_s)
        return cls(
            p_click=special.expit(params.click_bias + params.click_affinity * a
                                  - params.click_log_duration * log_d),
            p_early=special.expit(params.early_bias - params.early_affinity * a),
            p_complete=special.expit(params.complete_bias + params.complete_affinity * a
                                     - params.complete_log_duration * log_d),
            frac_loc=params.frac_bias + params.frac_affinity * a
            - params.frac_log_duration * log_d,
            duration_s=d,
        )


def _capped_lognormal_cdf(x, median_s, sigma, cap, trunc=np.inf):
    """P(min(X, cap) <= x) for X ~ LogNormal(ln median, sigma^2) conditioned on X < trunc."""
    with np.errstate(divide="ignore"):
        z = (np.log(np.maximum(x, 0.0)) - np.log(median_s)) / sigma
    mass = special.ndtr((np.log(trunc) - np.log(median_s)) / sigma)
    return np.where(x >= cap, 1.0, np.where(x > 0, np.minimum(special.ndtr(z) / mass, 1.0), 0.0))


def _capped_lognormal_mean(median_s, sigma, cap, trunc=np.inf):
    """E[min(X, cap)] for X ~ LogNormal(ln median, sigma^2) conditioned on X < trunc."""
    mu = np.log(median_s)
    b = np.minimum(cap, trunc)
    log_b = np.log(b)
    below_t = special.ndtr((np.log(trunc) - mu) / sigma)
    below_b = special.ndtr((log_b - mu) / sigma)
    return (np.exp(mu + 0.5 * sigma ** 2) * special.ndtr((log_b - mu - sigma ** 2) / sigma)
            + b * (below_t - below_b)) / below_t


def _partial_start(duration_s, params):
    """t0 = min(P, D/2): a clicked partial view starts after the preview."""
    return np.minimum(params.preview_s, 0.5 * duration_s)


def watch_time_cdf(x, wp: WatchParams, params: SimParams) -> np.ndarray:
    """F(x) = P(W <= x | impression) of the watch-time mixture; x broadcasts with wp."""
    x = np.asarray(x, dtype=np.float64)
    d = wp.duration_s
    skip = params.skip_zero_prob + (1 - params.skip_zero_prob) * _capped_lognormal_cdf(
        x, params.skip_median_s, params.skip_sigma, d, params.preview_s)
    early = _capped_lognormal_cdf(x, params.early_median_s, params.early_sigma, d)
    excess = np.maximum(x / d - 1.0, 0.0)
    complete = np.where(
        x >= d,
        1.0 - (1 - params.loop_prob) * np.exp(-excess / params.overrun_mean)
        - params.loop_prob * np.exp(-excess / params.loop_mean),
        0.0)
    t0 = _partial_start(d, params)
    frac = np.clip((x - t0) / (d - t0), 1e-300, 1.0)
    with np.errstate(divide="ignore"):
        partial = np.where(
            x >= d, 1.0,
            np.where(x > t0, special.ndtr((special.logit(frac) - wp.frac_loc) / params.frac_scale),
                     0.0))
    e, f = wp.p_early, wp.p_complete
    clicked = e * early + (1 - e) * f * complete + (1 - e) * (1 - f) * partial
    return (1 - wp.p_click) * skip + wp.p_click * clicked


_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite.hermgauss(64)


def expected_watch_time(wp: WatchParams, params: SimParams) -> np.ndarray:
    """E[W | impression] in seconds (closed form + Gauss-Hermite for the logit-normal)."""
    d = wp.duration_s
    skip = (1 - params.skip_zero_prob) * _capped_lognormal_mean(
        params.skip_median_s, params.skip_sigma, d, params.preview_s)
    early = _capped_lognormal_mean(params.early_median_s, params.early_sigma, d)
    complete = d * (1 + (1 - params.loop_prob) * params.overrun_mean
                    + params.loop_prob * params.loop_mean)
    loc = np.asarray(wp.frac_loc)[..., None]
    mean_frac = (special.expit(loc + params.frac_scale * np.sqrt(2.0) * _GH_NODES)
                 @ _GH_WEIGHTS) / np.sqrt(np.pi)
    t0 = _partial_start(d, params)
    partial = t0 + (d - t0) * mean_frac
    e, f = wp.p_early, wp.p_complete
    clicked = e * early + (1 - e) * f * complete + (1 - e) * (1 - f) * partial
    return (1 - wp.p_click) * skip + wp.p_click * clicked


def watch_time_quantiles(wp: WatchParams, params: SimParams,
                         levels: Sequence[float] = QUANTILE_LEVELS) -> np.ndarray:
    """inf{x : F(x) >= level} for each impression and level; shape (n, len(levels))."""
    levels = np.asarray(levels, dtype=np.float64)[None, :]
    cols = {k: np.asarray(getattr(wp, k), dtype=np.float64)[:, None]
            for k in ("p_click", "p_early", "p_complete", "frac_loc", "duration_s")}
    wp2 = WatchParams(**cols)
    n = cols["duration_s"].shape[0]
    lo = np.zeros((n, levels.shape[1]))
    # Beyond D * (1 + 40 r2) the CDF is 1 - rho * e^-40 > any requested level.
    hi = np.broadcast_to(cols["duration_s"] * (1 + 40 * max(params.loop_mean,
                                                           params.overrun_mean)),
                         lo.shape).copy()
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        above = watch_time_cdf(mid, wp2, params) >= levels
        hi = np.where(above, mid, hi)
        lo = np.where(above, lo, mid)
    at_zero = watch_time_cdf(np.zeros_like(lo), wp2, params) >= levels
    return np.where(at_zero, 0.0, hi)


def sample_watch_time(wp: WatchParams, params: SimParams, rng: np.random.Generator):
    """Draw (is_click, watch_time_s) for each impression of ``wp`` (1-d arrays)."""
    d = np.asarray(wp.duration_s, dtype=np.float64)
    n = d.shape[0]
    u = rng.random((n, 4))
    z = rng.standard_normal((n, 2))
    click = u[:, 0] < wp.p_click
    # Preview play: inverse-CDF draw of the lognormal truncated below P.
    mass = special.ndtr((np.log(params.preview_s) - np.log(params.skip_median_s))
                        / params.skip_sigma)
    preview = params.skip_median_s * np.exp(params.skip_sigma * special.ndtri(u[:, 3] * mass))
    skip = np.where(u[:, 1] < params.skip_zero_prob, 0.0, np.minimum(preview, d))
    early = np.minimum(params.early_median_s * np.exp(params.early_sigma * z[:, 0]), d)
    tail_mean = np.where(u[:, 2] < params.loop_prob, params.loop_mean, params.overrun_mean)
    complete = d * (1 - tail_mean * np.log1p(-u[:, 3]))
    t0 = _partial_start(d, params)
    partial = t0 + (d - t0) * special.expit(wp.frac_loc + params.frac_scale * z[:, 1])
    is_early = u[:, 1] < wp.p_early
    is_complete = ~is_early & (u[:, 1] < wp.p_early + (1 - wp.p_early) * wp.p_complete)
    clicked = np.where(is_early, early, np.where(is_complete, complete, partial))
    return click.astype(np.int64), np.where(click, clicked, skip)


def _auc(score, label) -> float:
    label = np.asarray(label).astype(bool)
    ranks = pd.Series(score).rank(method="average").to_numpy()
    n1 = label.sum()
    n0 = label.size - n1
    if n1 == 0 or n0 == 0:
        return float("nan")
    return float((ranks[label].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _bin_labels(values, bins):
    lows = np.array([b[1] for b in bins])
    labels = np.array([b[0] for b in bins], dtype=object)
    return labels[np.searchsorted(lows, values, side="right") - 1]


def _zipf_probs(n, exponent, rng):
    p = 1.0 / np.arange(1, n + 1) ** exponent
    return rng.permutation(p / p.sum())


def _make_users(num_users, params: SimParams, rng):
    """User table + latent taste/bias/activity."""
    K = params.latent_dim
    taste = rng.normal(0, params.user_scale / np.sqrt(K), (num_users, K))
    activity = np.exp(params.activity_sigma * rng.standard_normal(num_users))

    onehot = {}
    for k, card in enumerate(ONEHOT_CARDINALITY):
        if k == 5:  # mostly 0 in the release
            vals = np.where(rng.random(num_users) < 0.99, 0, rng.integers(0, card, num_users))
        else:
            vals = rng.choice(card, size=num_users, p=_zipf_probs(card, 1.1, rng))
        onehot[k] = vals
    bias = (params.user_bias_scale * rng.standard_normal(num_users)
            + params.user_feat0_effect * (onehot[0] - 0.5))
    bias -= bias.mean()  # keeps the click rate stable across seeds

    # Activity rank decides the degree label (heaviest users are full_active).
    order = np.argsort(-activity, kind="stable")
    rank_share = np.empty(num_users)
    rank_share[order] = (np.arange(num_users) + 0.5) / num_users
    rare = np.array(["low_active", "2_14_day_new", "single_low_active"], dtype=object)
    degree = np.where(rank_share < 0.66, "full_active",
                      np.where(rank_share < 0.89, "high_active",
                               np.where(rank_share < 0.97, "middle_active",
                                        rare[rng.integers(0, 3, num_users)])))

    def count(median, sigma, zero_prob, cap):
        x = np.floor(median * np.exp(sigma * rng.standard_normal(num_users)))
        x = np.where(rng.random(num_users) < zero_prob, 0, np.clip(x, 0, cap))
        return x.astype(np.int64)

    follow = count(155, 1.5, 0.007, 5003)
    fans = count(48, 1.8, 0.04, 1_986_249)
    friend = count(16, 1.6, 0.12, 4995)
    register = np.where(rng.random(num_users) < 0.73,
                        rng.integers(731, 3625, num_users),
                        np.exp(rng.uniform(np.log(15), np.log(731), num_users)).astype(np.int64))
    register = np.minimum(register, 3624)

    df = pd.DataFrame({
        "user_id": np.arange(num_users, dtype=np.int64),
        "user_active_degree": degree,
        "is_lowactive_period": np.zeros(num_users, dtype=np.int64),
        "is_live_streamer": np.where(rng.random(num_users) < 0.23, 1, -124).astype(np.int64),
        "is_video_author": (rng.random(num_users) < 0.82).astype(np.int64),
        "follow_user_num": follow,
        "follow_user_num_range": _bin_labels(follow, FOLLOW_BINS),
        "fans_user_num": fans,
        "fans_user_num_range": _bin_labels(fans, FANS_BINS),
        "friend_user_num": friend,
        "friend_user_num_range": _bin_labels(friend, FRIEND_BINS),
        "register_days": register,
        "register_days_range": _bin_labels(register, REGISTER_BINS),
    })
    feat4_nan = rng.random(num_users) < 0.03
    group_nan = rng.random(num_users) < 0.026
    for k in range(18):
        vals = onehot[k]
        if k in ONEHOT_FLOAT:
            vals = vals.astype(np.float64)
            vals[feat4_nan if k == 4 else group_nan] = np.nan
        df[f"onehot_feat{k}"] = vals
    return df[USER_COLUMNS], taste, bias, activity


def _make_videos(num_videos, start: dt.date, params: SimParams, rng):
    """Video table + latent vector/bias/duration/popularity."""
    K, T = params.latent_dim, params.num_topics
    centroids = rng.standard_normal((T, K))
    topic_bias = params.topic_bias_scale * rng.standard_normal(T)
    topic = rng.choice(T, size=num_videos, p=_zipf_probs(T, 0.8, rng))
    vec = centroids[topic] + params.video_noise * rng.standard_normal((num_videos, K))
    bias = params.video_bias_scale * rng.standard_normal(num_videos) + topic_bias[topic]
    bias -= bias.mean()
    duration_s = np.clip(
        params.duration_median_s * np.exp(params.duration_sigma * rng.standard_normal(num_videos)),
        params.duration_min_s, params.duration_max_s)
    duration_ms = np.round(duration_s * 1000).astype(np.int64)
    popularity = np.exp(params.popularity_sigma * rng.standard_normal(num_videos))

    topic_tag = TAG_IDS[:T] if T <= len(TAG_IDS) else TAG_IDS[np.arange(T) % len(TAG_IDS)]
    n_tags = rng.choice(3, size=num_videos, p=[0.76, 0.236, 0.004]) + 1
    extra = rng.choice(TAG_IDS, size=(num_videos, 2))
    tags = []
    for j in range(num_videos):
        ids = [int(topic_tag[topic[j]])]
        for t in extra[j, : n_tags[j] - 1]:
            if int(t) not in ids:
                ids.append(int(t))
        tags.append(",".join(str(t) for t in ids))
    tags = np.array(tags, dtype=object)
    tags[rng.random(num_videos) < 0.013] = np.nan

    num_authors = max(1, int(0.86 * num_videos))
    authors = rng.choice(np.arange(100_000, 8_733_984), size=num_authors, replace=False)
    author_id = authors[rng.choice(num_authors, size=num_videos,
                                   p=_zipf_probs(num_authors, 0.5, rng))]
    is_ad = rng.random(num_videos) < 0.01
    music_id = rng.integers(9_100_000_000, 9_170_219_000, num_videos)
    music_id[is_ad | (rng.random(num_videos) < 0.02)] = 0
    music_type = rng.choice([9.0, 4.0, 8.0, 7.0, 11.0], size=num_videos,
                            p=[0.905, 0.085, 0.006, 0.003, 0.001])
    music_type[is_ad | (rng.random(num_videos) < 0.017)] = np.nan
    upload = [(start - dt.timedelta(days=int(k))).isoformat()
              for k in rng.choice([14, 15, 16], size=num_videos, p=[0.45, 0.37, 0.18])]
    sizes = np.array([(w, h) for w, h, _ in FRAME_SIZES])
    size_p = np.array([share for *_, share in FRAME_SIZES])
    size_idx = rng.choice(len(FRAME_SIZES), size=num_videos, p=size_p / size_p.sum())

    df = pd.DataFrame({
        "video_id": np.arange(num_videos, dtype=np.int64),
        "author_id": author_id.astype(np.int64),
        "video_type": np.where(is_ad, "AD", "NORMAL"),
        "upload_dt": upload,
        "upload_type": rng.choice(UPLOAD_TYPES, size=num_videos,
                                  p=UPLOAD_TYPE_PROBS / UPLOAD_TYPE_PROBS.sum()),
        "visible_status": np.zeros(num_videos),
        "video_duration": duration_ms.astype(np.float64),
        "server_width": sizes[size_idx, 0],
        "server_height": sizes[size_idx, 1],
        "music_id": music_id.astype(np.int64),
        "music_type": music_type,
        "tag": tags,
    })
    return df[VIDEO_COLUMNS], vec, bias, duration_ms, popularity


def _day_start_ms(day: dt.date) -> int:
    """Epoch ms of 00:00 UTC+8 on ``day``."""
    epoch_days = (day - dt.date(1970, 1, 1)).days
    return epoch_days * DAY_MS - UTC_OFFSET_MS


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

    users, taste, user_bias, activity = _make_users(num_users, params, rng_user)
    videos, vec, video_bias, duration_ms, popularity = _make_videos(
        num_videos, start, params, rng_video)

    # --- exposure: impressions per user-day, distinct videos per user ---------
    days = [start + dt.timedelta(days=k) for k in range(num_days)]
    day_w = WEEKDAY_WEIGHT[[d.weekday() for d in days]]
    day_w = day_w / day_w.mean()
    max_per_user = max(1, num_videos // 2)
    lam = activity
    cap = max_per_user / (num_days * day_w.max() * 1.5)
    for _ in range(5):  # rescale to the requested mean, capping heavy users
        lam = np.minimum(lam / lam.mean() * impressions_per_user_day, cap)
    counts = rng_expo.poisson(lam[:, None] * day_w[None, :])
    # Keep the first max_per_user impressions of each user.
    cum = np.cumsum(counts, axis=1)
    counts = np.minimum(counts, np.maximum(max_per_user - (cum - counts), 0))

    dot = taste @ vec.T
    log_w = np.log(popularity)[None, :] + params.exposure_temperature * dot
    rows_u, rows_v, rows_day = [], [], []
    for i in range(num_users):
        n_i = int(counts[i].sum())
        if n_i == 0:
            continue
        g = log_w[i] + rng_expo.gumbel(size=num_videos)
        chosen = np.argsort(-g, kind="stable")[:n_i]
        chosen = rng_expo.permutation(chosen)
        rows_u.append(np.full(n_i, i))
        rows_v.append(chosen)
        rows_day.append(np.repeat(np.arange(num_days), counts[i]))
    u_idx = np.concatenate(rows_u)
    v_idx = np.concatenate(rows_v)
    day_idx = np.concatenate(rows_day)
    n = u_idx.size

    # --- outcomes ----------------------------------------------------------------
    affinity = dot[u_idx, v_idx] + user_bias[u_idx] + video_bias[v_idx]
    dur_ms = duration_ms[v_idx]
    wp = WatchParams.from_affinity(affinity, dur_ms / 1000.0, params)
    is_click, watch_s = sample_watch_time(wp, params, rng_outcome)
    play_ms = np.round(watch_s * 1000).astype(np.int64)

    # --- timestamps: sessions per user-day ------------------------------------
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
            n_sess = min(m, 1 + rng_time.poisson(m / 8.0))
            cuts = np.sort(rng_time.choice(np.arange(1, m), size=n_sess - 1, replace=False)) \
                if n_sess > 1 else np.array([], dtype=np.int64)
            bounds = np.concatenate([[0], cuts, [m]])
            starts = np.sort(rng_time.choice(24, size=n_sess, p=hour_p) * 3_600_000
                             + rng_time.integers(0, 3_600_000, n_sess))
            gaps = (1000 + rng_time.exponential(8000, m)).astype(np.int64)
            step = play_ms[idx] + gaps
            offs = np.empty(m, dtype=np.int64)
            session_end = -60_000
            for s in range(n_sess):
                a, b = bounds[s], bounds[s + 1]
                t0 = max(int(starts[s]), session_end + 60_000)
                within = np.concatenate([[0], np.cumsum(step[a:b - 1])])
                offs[a:b] = t0 + within
                session_end = int(offs[b - 1] + step[b - 1])
                tab[idx[a:b]] = TAB_VALUES[rng_time.choice(len(TAB_VALUES), p=tab_p)]
            overflow = offs[-1] - (DAY_MS - 1)
            if overflow > 0:
                offs = np.maximum(offs - overflow, 0)
            time_ms[idx] = _day_start_ms(days[d]) + offs
    assert pos == n

    # --- rare engagement events ------------------------------------------------
    ratio = np.minimum(watch_s / (dur_ms / 1000.0), 3.0)
    r = rng_extra.random((n, 7))
    is_like = (r[:, 0] < special.expit(-5.5 + 1.4 * ratio + 0.5 * affinity)).astype(np.int64)
    is_follow = (r[:, 1] < special.expit(-8.6 + 1.2 * ratio + 0.5 * affinity)).astype(np.int64)
    is_forward = (r[:, 2] < special.expit(-8.0 + 1.0 * ratio + 0.4 * affinity)).astype(np.int64)
    is_hate = (r[:, 3] < special.expit(-7.6 - 0.5 * affinity)).astype(np.int64)
    comment_open = (is_click == 1) & (r[:, 4] < 0.09)
    comment_stay = np.where(
        comment_open, np.round(6000 * np.exp(0.9 * rng_extra.standard_normal(n))), 0
    ).astype(np.int64)
    is_comment = (comment_open & (r[:, 5] < 0.06)).astype(np.int64)
    is_profile_enter = ((is_click == 1)
                        & (r[:, 6] < special.expit(-3.6 + 0.3 * affinity))).astype(np.int64)
    long_view = ((play_ms >= LONG_VIEW_MIN_PLAY_MS) | (play_ms >= dur_ms)).astype(np.int64)

    local = pd.to_datetime(time_ms + UTC_OFFSET_MS, unit="ms")
    log = pd.DataFrame({
        "user_id": u_idx.astype(np.int64),
        "video_id": v_idx.astype(np.int64),
        "date": (local.year * 10000 + local.month * 100 + local.day).to_numpy(np.int64),
        "hourmin": (local.hour * 100).to_numpy(np.int64),
        "time_ms": time_ms,
        "is_click": is_click,
        "is_like": is_like,
        "is_follow": is_follow,
        "is_comment": is_comment,
        "is_forward": is_forward,
        "is_hate": is_hate,
        "long_view": long_view,
        "play_time_ms": play_ms,
        "duration_ms": dur_ms.astype(np.int64),
        "profile_stay_time": np.zeros(n, dtype=np.int64),
        "comment_stay_time": comment_stay,
        "is_profile_enter": is_profile_enter,
        "is_rand": np.zeros(n, dtype=np.int64),
        "tab": tab,
    })[LOG_COLUMNS]

    quant = watch_time_quantiles(wp, params)
    truth = pd.DataFrame({
        "user_id": log["user_id"], "video_id": log["video_id"], "time_ms": time_ms,
        "expected_watch_time_s": np.round(expected_watch_time(wp, params), 6),
        "p_click": np.round(wp.p_click, 6),
    })
    for k, col in enumerate(TRUTH_COLUMNS[5:]):
        truth[col] = np.round(quant[:, k], 6)

    order = np.lexsort((log["video_id"].to_numpy(), log["user_id"].to_numpy(), time_ms))
    log = log.iloc[order].reset_index(drop=True)
    truth = truth.iloc[order].reset_index(drop=True)

    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "log": os.path.join(out_dir, LOG_FILE),
        "user_features": os.path.join(out_dir, USER_FILE),
        "video_features": os.path.join(out_dir, VIDEO_FILE),
        "truth": os.path.join(out_dir, TRUTH_FILE),
    }
    for key, df in (("log", log), ("user_features", users),
                    ("video_features", videos), ("truth", truth)):
        tmp = paths[key] + ".tmp"
        df.to_csv(tmp, index=False, lineterminator="\n")
        os.replace(tmp, paths[key])

    return dict(paths, marginals=measure_marginals(log, truth, videos))


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
        "click_auc_of_true_p": _auc(truth["p_click"].to_numpy(), log["is_click"].to_numpy()),
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m data.simulator",
        description="Write simulated KuaiRand-Pure-format logs (+ truth) into --out.")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--users", type=int, default=300)
    parser.add_argument("--videos", type=int, default=400)
    parser.add_argument("--days", type=int, default=6)
    parser.add_argument("--impressions-per-user-day", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--start-date", default="2022-04-25")
    args = parser.parse_args(argv)
    result = simulate(args.out, num_users=args.users, num_videos=args.videos,
                      num_days=args.days, impressions_per_user_day=args.impressions_per_user_day,
                      seed=args.seed, start_date=args.start_date)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
