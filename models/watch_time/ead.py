"""Error Adaptive Discretization (EAD) of watch time, the bucketing step of CREAD.

Paper: Sun et al., "CREAD: A Classification-Restoration Framework with Error
Adaptive Discretization for Watch Time Prediction in Video Recommender Systems",
AAAI 2024 (section "Error Adaptive Discretization").

CREAD predicts the survival probabilities ``phi_m = P(y > t_m)`` at M thresholds
``0 = t_0 < t_1 < ... < t_M = T_max`` and restores ``E[y]``. The thresholds trade
two errors off:

- learning error (narrow, data-poor buckets are hard to classify), and
- restoration / discretization error (wide buckets lose resolution).

With ``Psi`` the empirical CDF of watch time on ``[0, T_max]``,
``dPsi_m = Psi(t_m) - Psi(t_{m-1})`` and ``dt_m = t_m - t_{m-1}``::

    A_w(D) = (sum_m dPsi_m^2) * (sum_m dt_m^2 / dPsi_m)
    A_b(D) = (sum_m dPsi_m^2) * (sum_m dt_m^2)
    J(D)   = A_w(D) + beta * A_b(D)

Candidates are the one-parameter family ``t_m = Psi^{-1}(gamma(m/M; alpha))`` with::

    gamma(z; alpha) = (1 - exp(-alpha z)) / (1 - exp(-alpha))      (alpha -> 0: z)

(``alpha = 0`` is equal frequency; ``alpha > 0`` moves thresholds towards equal
width for a decreasing density) plus the equal-width grid ``t_m = m T_max / M``.
The search keeps the candidate with the lowest J and reports J for every candidate.

Conventions (chosen here, documented so callers can rely on them)
-----------------------------------------------------------------
- ``Psi`` is the CDF of watch time *conditioned on* ``y <= T_max`` (renormalised to
  reach 1 at ``T_max``), as in the paper's truncated examples such as
  ``Psi(t) = (1 - e^{-5t}) / (1 - e^{-5})`` on ``[0, 1]``. Samples above ``T_max``
  (a share ``1 - t_max_quantile``) have every label ``y_m = 1``; they only add the
  tail error of restoration.
- ``Psi(t_0) := 0``: bucket 1 is the closed interval ``[0, t_1]``, so a point mass
  at 0 counts in bucket 1.
- ``Psi^{-1}(u) = inf{t : Psi(t) >= u}`` (generalised inverse), so a point mass
  (many identical values, e.g. zeros or full plays) makes several levels map to
  the same t. Repeated thresholds are **dropped** (first occurrence kept,
  comparison at float32 precision because thresholds are served as float32):
  M may shrink, the result reports ``M_eff``; emitted thresholds are always
  strictly increasing.
- Buckets with ``dPsi_m = 0`` (possible for equal width on a CDF with a gap) are
  skipped in ``sum dt_m^2 / dPsi_m`` instead of making J infinite: such a bucket
  holds no samples, its label ``y_m`` equals ``y_{m-1}`` for every sample (no new
  classification problem) and the survival function is flat on it (no
  discretization error). ``n_empty_buckets`` reports how many were skipped.
  Inverse-CDF candidates never have empty buckets after deduplication.

Math lives here, in pure NumPy functions; models/watch_time/ead_analyzer.py only wires
the search into TF Transform (``ead_thresholds_analyzer``) so the thresholds become
constants of the transform graph, and reads its JSON asset back (``read_ead_result``).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Optional, Sequence

import numpy as np

DEFAULT_ALPHAS = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0)
EQUAL_WIDTH = "equal_width"
_TINY_ALPHA = 1e-8


# --------------------------------------------------------------------------- CDF
class PiecewiseLinearCdf:
    """Monotone piecewise-linear CDF ``Psi`` through knots ``(values[k], levels[k])``.

    ``values`` and ``levels`` are non-decreasing; repeated values (vertical steps)
    encode point masses, ``Psi`` is right-continuous there. ``Psi(t) = 0`` below the
    first knot and ``levels[-1]`` (normally 1) from the last knot on.
    """

    def __init__(self, values: Sequence[float], levels: Sequence[float]):
        v = np.asarray(values, dtype=np.float64)
        p = np.asarray(levels, dtype=np.float64)
        if v.ndim != 1 or v.shape != p.shape or v.size < 2:
            raise ValueError(f"need >= 2 knots with matching 1-d shapes, got {v.shape} and {p.shape}")
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(p))):
            raise ValueError("knots must be finite")
        if np.any(np.diff(v) < 0) or np.any(np.diff(p) < 0):
            raise ValueError("knot values and levels must be non-decreasing")
        if p[0] < 0 or p[-1] > 1 + 1e-12:
            raise ValueError(f"levels must lie in [0, 1], got [{p[0]}, {p[-1]}]")
        self.values = v
        self.levels = p

    @property
    def t_max(self) -> float:
        return float(self.values[-1])

    def __call__(self, t) -> np.ndarray:
        """``Psi(t)`` (right-continuous at vertical steps)."""
        t = np.asarray(t, dtype=np.float64)
        v, p = self.values, self.levels
        idx = np.searchsorted(v, t, side="right") - 1  # last knot with v <= t
        out = np.where(idx < 0, 0.0, p[np.clip(idx, 0, None)])
        inner = (idx >= 0) & (idx < v.size - 1)
        i = np.clip(idx, 0, v.size - 2)
        width = v[i + 1] - v[i]  # > 0 whenever inner (v[i] <= t < v[i+1])
        frac = np.where(inner, (t - v[i]) / np.where(width > 0, width, 1.0), 0.0)
        return np.where(inner, p[i] + (p[i + 1] - p[i]) * frac, out)

    def inverse(self, u) -> np.ndarray:
        """Generalised inverse ``Psi^{-1}(u) = inf{t : Psi(t) >= u}``, u clipped to [0, levels[-1]]."""
        u = np.clip(np.asarray(u, dtype=np.float64), 0.0, self.levels[-1])
        v, p = self.values, self.levels
        j = np.searchsorted(p, u, side="left")  # first knot with p >= u
        j = np.clip(j, 1, p.size - 1)
        dp = p[j] - p[j - 1]
        frac = np.where(dp > 0, (u - p[j - 1]) / np.where(dp > 0, dp, 1.0), 1.0)
        t = v[j - 1] + (v[j] - v[j - 1]) * np.clip(frac, 0.0, 1.0)
        return np.where(u <= p[0], v[0], t)

    def to_dict(self) -> Dict[str, List[float]]:
        return {"values": self.values.tolist(), "levels": self.levels.tolist()}


def cdf_from_boundaries(boundaries: Sequence[float], t_max_quantile: float = 1.0,
                        lower: float = 0.0,
                        levels: Optional[Sequence[float]] = None) -> PiecewiseLinearCdf:
    """Piecewise-linear ``Psi`` on ``[lower, T_max]`` from quantile boundaries.

    ``boundaries`` b_1 <= ... <= b_K are quantiles at ``levels`` (default
    ``k / (K + 1)``, what ``tft.quantiles(x, num_buckets=K + 1, ...)`` returns: the
    min and max are not part of its output). A knot ``(lower, 0)`` is prepended
    (watch time is >= 0). Then ``T_max = Psi_raw^{-1}(t_max_quantile)`` (levels above
    the last boundary clamp to ``b_K``), the CDF is cut at ``T_max`` and renormalised
    to 1 there (``Psi = Psi_raw / Psi_raw(T_max)``; see the module docstring).
    """
    b = np.asarray(boundaries, dtype=np.float64).reshape(-1)
    if b.size < 1:
        raise ValueError("need at least one quantile boundary")
    if np.any(np.diff(b) < 0):
        raise ValueError("quantile boundaries must be non-decreasing")
    if not 0.0 < t_max_quantile <= 1.0:
        raise ValueError(f"t_max_quantile must be in (0, 1], got {t_max_quantile}")
    p = (np.arange(1, b.size + 1, dtype=np.float64) / (b.size + 1) if levels is None
         else np.asarray(levels, dtype=np.float64).reshape(-1))
    if p.shape != b.shape:
        raise ValueError(f"levels shape {p.shape} != boundaries shape {b.shape}")
    b = np.maximum(b, lower)  # watch time below `lower` is impossible; clamp noise
    raw = PiecewiseLinearCdf(np.concatenate([[lower], b]), np.concatenate([[0.0], p]))
    q = min(t_max_quantile, float(p[-1]))
    t_max = float(raw.inverse(q))
    if t_max <= lower:
        raise ValueError(f"degenerate distribution: T_max = {t_max} <= lower = {lower}")
    q = float(raw(t_max))  # mass up to and including T_max (includes a point mass at T_max)
    keep = raw.values <= t_max  # knots at T_max keep a point mass there (vertical step)
    values, lv = raw.values[keep], raw.levels[keep]
    if values[-1] < t_max:
        values, lv = np.append(values, t_max), np.append(lv, q)
    return PiecewiseLinearCdf(values, np.minimum(lv / q, 1.0))


def boundaries_from_samples(x: Sequence[float], num_buckets: int = 1000,
                            method: str = "higher") -> np.ndarray:
    """``num_buckets - 1`` empirical quantiles at levels ``k / num_buckets``.

    ``method="higher"`` (sorted ``x[ceil(p (n - 1))]``) reproduces
    ``tft.quantiles(x, num_buckets, epsilon)`` exactly when its summary is exact
    (small n) and n is a multiple of num_buckets: it then returns ``x[k n / num_buckets]``
    (checked in tests/models/watch_time/test_ead_analyzer.py). Other n differ by at most one rank.
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("no samples")
    lv = np.arange(1, num_buckets, dtype=np.float64) / num_buckets
    return np.quantile(x, lv, method=method)


# ------------------------------------------------------------------ thresholds
def gamma(z, alpha: float) -> np.ndarray:
    """``gamma(z; alpha) = (1 - e^{-alpha z}) / (1 - e^{-alpha})`` on z in [0, 1].

    Computed with ``expm1``; ``|alpha| < 1e-8`` uses the expansion
    ``z + alpha z (1 - z) / 2`` (limit ``z`` = equal frequency); negative alpha uses
    ``gamma(z; -a) = 1 - gamma(1 - z; a)`` so large |alpha| never overflows.
    """
    z = np.asarray(z, dtype=np.float64)
    a = float(alpha)
    if not np.isfinite(a):
        raise ValueError(f"alpha must be finite, got {alpha}")
    if abs(a) < _TINY_ALPHA:
        return z + a * z * (1.0 - z) / 2.0
    if a < 0:
        return 1.0 - gamma(1.0 - z, -a)
    return np.expm1(-a * z) / np.expm1(-a)


def dedup_thresholds(t: Sequence[float], t0: float = 0.0) -> np.ndarray:
    """Drop thresholds not strictly above the last kept one (and ``t0``), compared at
    float32 precision. Keeps the first occurrence; the result is strictly increasing
    as float32 and as float64 (values are returned float32-rounded)."""
    t32 = np.asarray(t, dtype=np.float32).reshape(-1)
    out = []
    last = np.float32(t0)
    for v in t32:
        if v > last:
            out.append(v)
            last = v
    return np.asarray(out, dtype=np.float64)


def candidate_thresholds(cdf, M: int, alpha: Optional[float]) -> np.ndarray:
    """t_1..t_M for ``alpha`` (``Psi^{-1}(gamma(m/M; alpha))``) or equal width
    (``alpha=None``: ``m T_max / M``); deduplicated, last one is T_max."""
    if M < 1:
        raise ValueError(f"M must be >= 1, got {M}")
    z = np.arange(1, M + 1, dtype=np.float64) / M
    if alpha is None:
        t = z * cdf.t_max
    else:
        t = cdf.inverse(gamma(z, alpha))
    t[-1] = cdf.t_max  # gamma(1) = 1 exactly up to rounding
    return dedup_thresholds(t)


def ead_objective(thresholds: Sequence[float], cdf, beta: float) -> Dict[str, float]:
    """``J = A_w + beta A_b`` for thresholds t_1..t_M (t_0 = 0, Psi(t_0) := 0).

    ``cdf`` is a callable Psi (e.g. :class:`PiecewiseLinearCdf`). Buckets with
    ``dPsi_m = 0`` are skipped in the ``dt^2 / dPsi`` sum (module docstring).
    """
    t = np.concatenate([[0.0], np.asarray(thresholds, dtype=np.float64).reshape(-1)])
    psi = np.asarray(cdf(t), dtype=np.float64)
    psi[0] = 0.0
    d_psi = np.diff(psi)
    d_t = np.diff(t)
    if np.any(d_t <= 0):
        raise ValueError("thresholds must be strictly increasing and > 0")
    nonempty = d_psi > 0
    s_psi2 = float(np.sum(d_psi ** 2))
    a_w = s_psi2 * float(np.sum(d_t[nonempty] ** 2 / d_psi[nonempty]))
    a_b = s_psi2 * float(np.sum(d_t ** 2))
    return {"J": a_w + beta * a_b, "A_w": a_w, "A_b": a_b,
            "n_empty_buckets": int(np.sum(~nonempty))}


@dataclasses.dataclass
class EadResult:
    """Outcome of :func:`search_thresholds`. ``thresholds`` = t_1..t_{M_eff}
    (t_0 = 0 implicit, last = T_max); ``candidates`` holds every candidate's J.

    Read back from an older transform graph whose asset held only the thresholds
    (``ead_analyzer.parse_ead_asset``), ``chosen``, ``M``, ``beta`` and
    ``t_max_quantile`` are None and ``candidates`` is empty."""
    thresholds: List[float]
    chosen: Optional[str]
    chosen_alpha: Optional[float]
    M: Optional[int]
    M_eff: int
    beta: Optional[float]
    t_max: float
    t_max_quantile: Optional[float]
    candidates: List[Dict]

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)

    def to_json(self, **kwargs) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_json(cls, s: str) -> "EadResult":
        return cls(**json.loads(s))


def _candidate_name(alpha: Optional[float]) -> str:
    return EQUAL_WIDTH if alpha is None else f"alpha={float(alpha):g}"


def search_thresholds(boundaries_or_cdf, M: int,
                      beta: float, alphas: Sequence[float] = DEFAULT_ALPHAS,
                      t_max_quantile: float = 0.99, lower: float = 0.0) -> EadResult:
    """EAD search: the candidate (each alpha, plus equal width) with the lowest J.

    ``boundaries_or_cdf``: quantile boundaries (see :func:`cdf_from_boundaries`; then
    ``t_max_quantile`` clips the CDF) or a ready CDF on ``[0, T_max]`` used as is:
    any object with ``__call__`` (Psi), ``inverse`` (Psi^{-1}) and ``t_max``, e.g.
    :class:`PiecewiseLinearCdf` or an analytic CDF. Ties go to the earlier candidate (alphas in the
    given order, equal width last).
    """
    if M < 1:
        raise ValueError(f"M must be >= 1, got {M}")
    if not np.isfinite(beta) or beta < 0:
        raise ValueError(f"beta must be finite and >= 0, got {beta}")
    if hasattr(boundaries_or_cdf, "inverse"):
        cdf = boundaries_or_cdf
        tq = 1.0
    else:
        cdf = cdf_from_boundaries(boundaries_or_cdf, t_max_quantile=t_max_quantile, lower=lower)
        tq = float(t_max_quantile)
    if not cdf.t_max > 0:
        raise ValueError(f"T_max must be > 0, got {cdf.t_max}")
    cands = []
    for a in list(alphas) + [None]:
        t = candidate_thresholds(cdf, M, a)
        obj = ead_objective(t, cdf, beta)
        cands.append({"name": _candidate_name(a), "alpha": None if a is None else float(a),
                      "M_eff": int(t.size), "thresholds": t.tolist(), **obj})
    best = int(np.argmin([c["J"] for c in cands]))
    c = cands[best]
    return EadResult(thresholds=list(c["thresholds"]), chosen=c["name"], chosen_alpha=c["alpha"],
                     M=int(M), M_eff=c["M_eff"], beta=float(beta), t_max=float(cdf.t_max),
                     t_max_quantile=tq, candidates=cands)
