"""Outcome of an impression: click, watch time (sampler + exact truth), rarer events.

With the affinity ``a_ij = u_i . v_j + b_i + b_j`` (``users``, ``videos``) and
``l_j = ln(D_j / 71 s)``::

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

Truth: computed exactly, not by Monte-Carlo.  ``expected_watch_time`` is
E[W | i, j] in closed form (capped-lognormal means, exponential means) with the
logit-normal mean by 64-node Gauss-Hermite quadrature (error < 1e-12).
``watch_time_quantiles`` inverts the closed-form mixture CDF F(x | i, j)
(``watch_time_cdf``) by bisection (64 halvings): q = inf{x : F(x) >= level}, so
point masses (W = 0, W = D) give exact quantiles.  ``play_time_ms`` is W rounded
to integer ms.

Other outcomes (``sample_engagement``).  ``long_view = 1`` iff
``play_time_ms >= 18000`` or ``play_time_ms >= duration_ms`` (reproduces 99.7% of
the real labels).  Likes, follows, forwards, hates, comments and profile entries
are rare Bernoulli events rising with affinity and watched fraction
``r = min(W / D, 3)``, e.g. ``P(like) = sigmoid(-5.5 + 1.4 r + 0.5 a)``; a
comment section is opened on 9% of clicks (stay time ``6 s * LogNormal(0, 0.9^2)``)
and 6% of those leave a comment.
"""
from __future__ import annotations

import dataclasses
from typing import Dict, Sequence

import numpy as np
from scipy import special

from data.simulator.params import LONG_VIEW_MIN_PLAY_MS, QUANTILE_LEVELS, SimParams


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


def sample_engagement(affinity, is_click, watch_s, play_ms, duration_ms,
                      rng: np.random.Generator) -> Dict[str, np.ndarray]:
    """The log's other outcome columns (int64 arrays): likes, follows, ..., long_view."""
    n = affinity.shape[0]
    ratio = np.minimum(watch_s / (duration_ms / 1000.0), 3.0)
    r = rng.random((n, 7))
    is_like = (r[:, 0] < special.expit(-5.5 + 1.4 * ratio + 0.5 * affinity)).astype(np.int64)
    is_follow = (r[:, 1] < special.expit(-8.6 + 1.2 * ratio + 0.5 * affinity)).astype(np.int64)
    is_forward = (r[:, 2] < special.expit(-8.0 + 1.0 * ratio + 0.4 * affinity)).astype(np.int64)
    is_hate = (r[:, 3] < special.expit(-7.6 - 0.5 * affinity)).astype(np.int64)
    comment_open = (is_click == 1) & (r[:, 4] < 0.09)
    comment_stay = np.where(
        comment_open, np.round(6000 * np.exp(0.9 * rng.standard_normal(n))), 0
    ).astype(np.int64)
    is_comment = (comment_open & (r[:, 5] < 0.06)).astype(np.int64)
    is_profile_enter = ((is_click == 1)
                        & (r[:, 6] < special.expit(-3.6 + 0.3 * affinity))).astype(np.int64)
    long_view = ((play_ms >= LONG_VIEW_MIN_PLAY_MS) | (play_ms >= duration_ms)).astype(np.int64)
    return {
        "is_like": is_like,
        "is_follow": is_follow,
        "is_comment": is_comment,
        "is_forward": is_forward,
        "is_hate": is_hate,
        "long_view": long_view,
        "comment_stay_time": comment_stay,
        "is_profile_enter": is_profile_enter,
    }
