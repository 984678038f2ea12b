"""Scaling-law fits for the scaling benchmark (bench/bench_scaling.py, #36).

Power law plus a constant in one resource x (examples, non-embedding parameters,
embedding width, training FLOPs), as Ardalani et al. 2022 and Hestness et al. 2017:

    L(x) = E + A · x^(−α)            E ≥ 0 (irreducible loss), A ≥ 0, α > 0

Fit (variable projection, as `vpnls`): for every α of a log grid, (E, A) solve a
bounded weighted least squares in relative error r_i = (L(x_i) − y_i) / y_i (the
first-order log residual), 0 ≤ E ≤ min(y) (E stays below the lowest observed loss)
and A ≥ 0, reweighted for the Huber loss (IRLS, δ = HUBER_DELTA, Chinchilla's 1e−3);
α is the grid point (refined on a finer grid around it) of the smallest exact objective

    Σ_i huber_δ(log L(x_i) − log y_i)

x is divided by its geometric mean while fitting (conditioning); A is reported for raw x.

Intervals: `bootstrap_fits` resamples the validation impressions (one multinomial
draw shared by every run: the runs are scored on the same impressions) and, per point,
the seeds (with replacement), then refits; percentiles give α, E and prediction
intervals. `extrapolation_check` refits without the largest x and asks whether the
held-out measurement falls inside the predicted interval (Alabdulmohsin et al. 2022:
judge a law by its extrapolation). `fit_joint` fits

    L(N, D) = E + A · N^(−α) + B · D^(−β)

on a grid of (α, β) with (E, A, B) by bounded least squares, only from MIN_JOINT_RUNS runs.
"""
import numpy as np

HUBER_DELTA = 1e-3
ALPHA_GRID = np.geomspace(1e-3, 3.0, 120)
IRLS_STEPS = 12
MIN_JOINT_RUNS = 15
N_PARAMS = 3


def power_law(x, E, A, alpha):
    """L(x) = E + A · x^(−α)."""
    return E + A * np.asarray(x, np.float64) ** (-alpha)


def huber(r, delta=HUBER_DELTA):
    """huber_δ(r) = r²/2 for |r| ≤ δ, δ(|r| − δ/2) beyond."""
    a = np.abs(r)
    return np.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))


def _check(x, y, n_params):
    x, y = np.asarray(x, np.float64).reshape(-1), np.asarray(y, np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"scaling fit: {x.size} x values but {y.size} losses")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError(f"scaling fit: non-finite values (x={x.tolist()}, loss={y.tolist()})")
    if np.any(x <= 0) or np.any(y <= 0):
        raise ValueError("scaling fit: x and losses must be > 0 (a log-space fit)")
    if np.unique(x).size < n_params:
        raise ValueError(f"scaling fit: {np.unique(x).size} distinct x values for {n_params} parameters "
                         f"(E, A, alpha...); need at least {n_params}")
    return x, y


def _bounded_wls(f, y, w, e_max):
    """min_{0≤E≤e_max, A≥0} Σ w (E + A f − y)² for every row of f ([G, n]); w [G, n].
    A convex quadratic in two variables: the interior solution if feasible, else the best
    of the faces' clipped one-dimensional solutions."""
    sw, swf, swff = w.sum(1), (w * f).sum(1), (w * f * f).sum(1)
    swy, swfy = (w * y).sum(1), (w * f * y).sum(1)

    def obj(E, A):
        return (w * (E[:, None] + A[:, None] * f - y) ** 2).sum(1)

    det = sw * swff - swf ** 2
    ok = det > 1e-12 * np.maximum(sw * swff, 1e-300)
    safe = np.where(ok, det, 1.0)
    E0 = np.where(ok, (swff * swy - swf * swfy) / safe, 0.0)
    A0 = np.where(ok, (sw * swfy - swf * swy) / safe, 0.0)
    interior = ok & (E0 >= 0) & (E0 <= e_max) & (A0 >= 0)
    cands = []
    for E in (np.zeros_like(sw), np.full_like(sw, e_max)):  # faces E = 0 and E = e_max
        A = np.maximum((swfy - E * swf) / np.maximum(swff, 1e-300), 0.0)
        cands.append((E, A))
    cands.append((np.clip(swy / sw, 0.0, e_max), np.zeros_like(sw)))  # face A = 0
    best_E, best_A = cands[0]
    best = obj(best_E, best_A)
    for E, A in cands[1:]:
        o = obj(E, A)
        better = o < best
        best_E, best_A, best = np.where(better, E, best_E), np.where(better, A, best_A), np.minimum(o, best)
    return np.where(interior, E0, best_E), np.where(interior, A0, best_A)


def _fit_grid(xn, y, alphas, delta):
    """(E, A, objective) per alpha for normalised x."""
    f = xn[None, :] ** (-alphas[:, None])
    yy = np.broadcast_to(y, f.shape)
    w = np.broadcast_to(1.0 / y ** 2, f.shape)
    e_max = float(y.min())
    E, A = _bounded_wls(f, yy, w, e_max)
    for _ in range(IRLS_STEPS):
        r = np.log(np.maximum(E[:, None] + A[:, None] * f, 1e-300)) - np.log(y)
        hw = np.where(np.abs(r) <= delta, 1.0, delta / np.maximum(np.abs(r), 1e-300))
        E, A = _bounded_wls(f, yy, w * hw, e_max)
    r = np.log(np.maximum(E[:, None] + A[:, None] * f, 1e-300)) - np.log(y)
    return E, A, huber(r, delta).sum(1)


def fit_power_law(x, y, alphas=ALPHA_GRID, delta=HUBER_DELTA, fine_points=41):
    """Fit L(x) = E + A·x^(−α) to losses y (see the module docstring) ->
    {"E", "A", "alpha", "objective"}; raises ValueError for fewer distinct x than the
    three parameters, non-finite or non-positive values."""
    x, y = _check(x, y, N_PARAMS)
    scale = float(np.exp(np.log(x).mean()))
    xn = x / scale
    alphas = np.asarray(alphas, np.float64)
    E, A, o = _fit_grid(xn, y, alphas, delta)
    i = int(np.argmin(o))
    lo, hi = alphas[max(i - 1, 0)], alphas[min(i + 1, alphas.size - 1)]
    fine = np.geomspace(lo, hi, fine_points)
    E2, A2, o2 = _fit_grid(xn, y, fine, delta)
    j = int(np.argmin(o2))
    alpha = float(fine[j])
    return {"E": float(E2[j]), "A": float(A2[j] * scale ** alpha), "alpha": alpha, "objective": float(o2[j])}


def resampled_means(per_example, seeds_of_point, rng, n_boot, labels=None):
    """Bootstrap replicates of each point's loss.

    per_example: [R, n] per-impression losses of R runs on the same n impressions;
    seeds_of_point: list of run-index arrays, one per point (the point's seeds).
    One replicate draws the impressions (multinomial counts, shared by all runs) and, per
    point, its seeds with replacement: y_b[p] = mean_{s ∈ S_b(p)} Σ_i c_bi ℓ_si / n.
    With `labels` (click labels of the n impressions) the loss is NE: divided by the
    entropy of the replicate's click rate. Returns [n_boot, P]."""
    per_example = np.asarray(per_example, np.float64)
    n = per_example.shape[1]
    counts = rng.multinomial(n, np.full(n, 1.0 / n), size=n_boot).astype(np.float64)  # [B, n]
    run_means = counts @ per_example.T / n  # [B, R]
    out = np.empty((n_boot, len(seeds_of_point)))
    for p, runs in enumerate(seeds_of_point):
        runs = np.asarray(runs)
        pick = runs[rng.integers(0, runs.size, size=(n_boot, runs.size))]  # [B, S]
        out[:, p] = np.take_along_axis(run_means, pick, 1).mean(1)
    if labels is not None:
        out /= binary_entropy(counts @ np.asarray(labels, np.float64) / n)[:, None]
    return out


def binary_entropy(p):
    """H(p) = −p log p − (1 − p) log(1 − p) (nats): NE's denominator."""
    p = np.clip(np.asarray(p, np.float64), 1e-12, 1 - 1e-12)
    return -(p * np.log(p) + (1 - p) * np.log(1 - p))


def bootstrap_fits(x, y_boot, predict_at=(), alphas=ALPHA_GRID, delta=HUBER_DELTA):
    """Refit every bootstrap replicate: y_boot [B, P] (resampled_means) at the P x values
    -> {"alpha", "E", "A": [B] arrays, "pred": [B, len(predict_at)]}."""
    alphas = np.geomspace(alphas[0], alphas[-1], 60)  # coarser: B refits
    fits = [fit_power_law(x, yb, alphas, delta, fine_points=21) for yb in np.asarray(y_boot)]
    out = {k: np.array([f[k] for f in fits]) for k in ("alpha", "E", "A")}
    out["pred"] = np.array([[power_law(v, f["E"], f["A"], f["alpha"]) for v in predict_at] for f in fits])
    return out


def interval(values, level=0.8):
    """The central `level` percentile interval."""
    q = (1 - level) / 2
    lo, hi = np.quantile(np.asarray(values, np.float64), [q, 1 - q])
    return [float(lo), float(hi)]


def extrapolation_check(x, y, y_boot, level=0.8):
    """Refit without the largest x (point and bootstrap replicates) and check whether the
    held-out measurement falls inside the `level` interval of the refits' prediction there.
    Also the paired check: the interval of pred_b − y_b(held out) contains 0 (the shared
    impression noise cancels). Needs N_PARAMS + 1 distinct x."""
    x, y = _check(x, y, N_PARAMS + 1)
    y_boot = np.asarray(y_boot, np.float64)
    held = int(np.argmax(x))
    keep = np.arange(x.size) != held
    fit = fit_power_law(x[keep], y[keep])
    boot = bootstrap_fits(x[keep], y_boot[:, keep], predict_at=[x[held]])
    pred_b = boot["pred"][:, 0]
    lo, hi = interval(pred_b, level)
    d_lo, d_hi = interval(pred_b - y_boot[:, held], level)
    point = float(power_law(x[held], fit["E"], fit["A"], fit["alpha"]))
    return {"held_out_point": {"x": float(x[held]), "loss": float(y[held])},
            "predicted": point, "predicted_interval": [lo, hi], "level": level,
            "held_out_inside_interval": bool(lo <= y[held] <= hi),
            "paired_difference_interval": [d_lo, d_hi], "paired_inside": bool(d_lo <= 0.0 <= d_hi),
            "relative_error": float((point - y[held]) / y[held]), "fit_without_held_out": fit}


def fit_joint(n, d, y, grid=np.geomspace(1e-2, 2.0, 25), delta=HUBER_DELTA):
    """L(N, D) = E + A·N^(−α) + B·D^(−β), (α, β) on `grid` × `grid`, (E, A, B) by bounded
    weighted least squares in relative error with Huber reweighting; needs MIN_JOINT_RUNS runs."""
    from scipy.optimize import lsq_linear

    n, d, y = (np.asarray(v, np.float64).reshape(-1) for v in (n, d, y))
    if y.size < MIN_JOINT_RUNS:
        raise ValueError(f"joint fit: {y.size} runs; the joint law needs at least {MIN_JOINT_RUNS}")
    _check(n, y, 2)
    _check(d, y, 2)
    sn, sd = np.exp(np.log(n).mean()), np.exp(np.log(d).mean())
    best = None
    for a in grid:
        for b in grid:
            M = np.stack([np.ones_like(y), (n / sn) ** -a, (d / sd) ** -b], 1) / y[:, None]
            hw = np.ones_like(y)
            for _ in range(4):
                s = np.sqrt(hw)
                sol = lsq_linear(M * s[:, None], s, bounds=([0, 0, 0], [y.min(), np.inf, np.inf])).x
                r = np.log(np.maximum(M @ sol * y, 1e-300)) - np.log(y)
                hw = np.where(np.abs(r) <= delta, 1.0, delta / np.maximum(np.abs(r), 1e-300))
            o = float(huber(r, delta).sum())
            if best is None or o < best[0]:
                best = (o, a, b, sol)
    o, a, b, (E, A, B) = best
    return {"E": float(E), "A": float(A * sn ** a), "alpha": float(a), "B": float(B * sd ** b), "beta": float(b),
            "objective": o, "runs": int(y.size)}
