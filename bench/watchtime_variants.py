"""Issue #13 diagnostics of bench/bench_watchtime.py: CQE variants with split-conformal
offsets, and CREAD's EAD against equal-frequency buckets over (M, beta)."""
import os

import numpy as np

# CQE variants (changes to configs.CQE); every CQE model is reported before and after its
# split-conformal offsets (fitted on the validation split, models/watch_time/conformal.py)
CQE_VARIANTS = {"cqe": {},
                "cqe_shared": {"tower_units": [], "stop_gradient": False, "loss_space": "seconds"},  # before #13
                "cqe_tower_seconds": {"loss_space": "seconds"},
                "cqe_sum": {"batch_reduction": "sum"},
                "cqe_d2q": {"loss_space": "seconds"}}  # label: the D2Q in-group percentile
# EAD against equal frequency (CREAD's claim): (M, beta) of the sweep; EF once per M
SWEEP = ((10, 100.0), (20, 10.0), (20, 100.0), (20, 1000.0), (50, 100.0))


def sweep_points():
    """SWEEP, or env BENCH_SWEEP="M:beta,M:beta" (a bounded run)."""
    text = os.environ.get("BENCH_SWEEP", "")
    return tuple((int(m), float(b)) for m, b in (p.split(":") for p in text.split(",") if p)) or SWEEP


def expand_methods(methods):
    """``cread_sweep`` -> one CREAD model per bucketing of SWEEP (EF per M, EAD per (M, beta))."""
    out = []
    for m in methods:
        if m != "cread_sweep":
            out.append(m)
            continue
        points = sweep_points()
        for M in sorted({M for M, _ in points}):
            out.append(f"cread_ef_m{M}")
            out += [f"cread_ead_m{M}_b{b:g}" for MM, b in points if MM == M]
    return out


def sweep_thresholds(method, train_watch):
    """Thresholds of a sweep method from the train split's watch times (same settings as
    Transform's EAD: EAD_NUM_QUANTILES boundaries, EAD_ALPHAS, T_max = EAD_T_MAX_QUANTILE)."""
    from models.watch_time import ead
    from pipeline import configs

    parts = method.split("_")  # cread_ef_m10 | cread_ead_m20_b100
    M = int(parts[2][1:])
    beta = float(parts[3][1:]) if parts[1] == "ead" else 100.0
    result = ead.search_thresholds(ead.boundaries_from_samples(train_watch, configs.EAD_NUM_QUANTILES), M, beta,
                                   alphas=configs.EAD_ALPHAS, t_max_quantile=configs.EAD_T_MAX_QUANTILE)
    if parts[1] == "ef":
        return _thresholds_of(result, "alpha=0"), {"M": M, "bucketing": "equal_frequency"}
    return result.thresholds, {"M": M, "beta": beta, "bucketing": "ead", "chosen": result.chosen,
                               "J": next(c["J"] for c in result.candidates if c["name"] == result.chosen),
                               "J_equal_frequency": next(c["J"] for c in result.candidates if c["name"] == "alpha=0")}


def cqe_predictions(method, model, d2q, split, pred) -> dict:
    """Quantiles (seconds) before and after the split-conformal offsets fitted on the
    validation split, and the CSE / CDE point estimates of the calibrated ones."""
    from models.watch_time import conformal, cqe
    from pipeline import configs

    duration_key, val_x, val_y, eval_x = split
    taus = cqe.quantile_levels(configs.CQE["num_quantiles"])
    val_q = model.predict(val_x, batch_size=4096, verbose=0)["quantiles"]  # offsets are still 0
    raw = pred["quantiles"]
    if d2q is not None:  # percentile quantiles -> seconds through each row's group quantile function
        raw = np.stack([d2q.watch_time(eval_x[duration_key], raw[:, i]) for i in range(taus.size)], 1)
        val_q = np.stack([d2q.watch_time(val_x[duration_key], val_q[:, i]) for i in range(taus.size)], 1)
    offsets = conformal.fit_offsets(val_y["watch_time_s"], val_q, taus)
    q = conformal.apply_offsets(raw, offsets)
    return {f"{method}_cde": cqe.conditional_expectation(q), f"{method}_cse": cqe.interpolate_quantile(q, 0.25, taus),
            "quantiles": q, "quantiles_raw": raw, "raw_cde": cqe.conditional_expectation(raw),
            "offsets": offsets}


def _thresholds_of(result, name):
    return next(c for c in result.candidates if c["name"] == name)["thresholds"]
