"""Watch-time discretizations the report compares: EAD against equal frequency and width.

One concept: given training watch times (and, when Transform exported them, the EAD
thresholds of the transform graph), produce the threshold sets t_1..t_M the report
draws, each with its EAD objective J = A_w + beta A_b (models/watch_time/ead.py) on the same
empirical CDF, so the page shows why EAD was chosen:

- ``EAD``: the transform graph's ``ead_thresholds.json`` when present ("transform
  graph"), else :func:`models.watch_time.ead.search_thresholds` on the training watch times
  ("computed on train watch times");
- ``equal frequency``: ``t_m = Psi^{-1}(m / M)`` (EAD's alpha = 0 candidate);
- ``equal width``: ``t_m = m T_max / M``.

All three use the same M and the same T_max (the ``t_max_quantile`` quantile).
"""
from __future__ import annotations

import dataclasses
from typing import List, Optional, Sequence

import numpy as np

from models.watch_time import ead

EAD = "EAD"
EQUAL_FREQUENCY = "equal frequency"
EQUAL_WIDTH = "equal width"


@dataclasses.dataclass
class Discretization:
    name: str
    thresholds: List[float]
    J: Optional[float]  # EAD objective on the training CDF (None if it cannot be computed)
    source: str = ""


def compare(train_watch: Sequence[float], num_thresholds: int, beta: float,
            t_max_quantile: float = 0.99, ead_asset: Optional[dict] = None,
            num_quantiles: int = 1000) -> List[Discretization]:
    """[EAD, equal frequency, equal width] thresholds on ``train_watch``.

    With ``ead_asset`` (see :func:`inputs.load_ead_asset`) its thresholds are EAD's and
    its ``beta`` / ``M`` (when present) replace ``beta`` / ``num_thresholds`` so the
    comparison uses the settings Transform used.
    """
    x = np.asarray(train_watch, dtype=np.float64).reshape(-1)
    x = x[np.isfinite(x)]
    if x.size < 2:
        raise ValueError(f"need at least 2 finite watch times, got {x.size}")
    if ead_asset:
        beta = float(ead_asset.get("beta", beta))
        num_thresholds = int(ead_asset.get("M", num_thresholds))
        t_max_quantile = float(ead_asset.get("t_max_quantile", t_max_quantile))
    boundaries = ead.boundaries_from_samples(x, num_buckets=min(num_quantiles, max(2, x.size)))
    cdf = ead.cdf_from_boundaries(boundaries, t_max_quantile=t_max_quantile)

    def objective(thresholds) -> Optional[float]:
        t = np.asarray(thresholds, dtype=np.float64)
        if t.size == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0:
            return None
        return float(ead.ead_objective(t, cdf, beta)["J"])

    if ead_asset:
        ead_t = list(ead_asset["thresholds"])
        source = "transform graph asset"
    else:
        ead_t = ead.search_thresholds(cdf, num_thresholds, beta).thresholds
        source = f"computed on {x.size} train watch times"
    out = [Discretization(EAD, [float(t) for t in ead_t], objective(ead_t), source)]
    for name, alpha in ((EQUAL_FREQUENCY, 0.0), (EQUAL_WIDTH, None)):
        t = ead.candidate_thresholds(cdf, num_thresholds, alpha)
        out.append(Discretization(name, t.tolist(), objective(t), f"M = {num_thresholds}"))
    return out
