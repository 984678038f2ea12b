"""Issue #13 diagnostics of bench/bench_watchtime.py: CQE variants with split-conformal
levels, and CREAD's EAD against equal-frequency buckets over (M, beta)."""
import os

import numpy as np

# CQE variants (changes to configs.CQE); every CQE model is reported before and after its
# split-conformal levels (fitted on the validation split, models/watch_time/conformal.py)
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


def additive_cqr(val_y, val_q, eval_q, taus):
    """The calibration the CQE head had before the levels (kept here as the bench's
    comparison): CQR's additive offsets ``o_i = (y - t_i)_(k)``, ``k = ceil((n + 1) tau_i)``
    on the validation rows, served as ``q_i = max_{j <= i} max(t_j + o_j, 0)`` (clipped at
    0 and made monotone). Returns the eval quantiles [n, N]."""
    from models.watch_time.conformal import conformal_rank

    s = np.sort(np.asarray(val_y, np.float64).reshape(-1)[:, None] - val_q, axis=0)
    k = np.array([min(conformal_rank(s.shape[0], t), s.shape[0]) for t in taus]) - 1
    return np.maximum.accumulate(np.maximum(eval_q + s[k, np.arange(len(taus))], 0.0), axis=1)


def cqe_predictions(method, model, d2q, split, pred) -> dict:
    """Quantiles (seconds) before and after the split-conformal levels fitted on the
    validation split, and the CSE / CDE / median point estimates of the calibrated ones
    (eval, and ``validation``: the validation split's, with its click probabilities)."""
    from models.watch_time import conformal, cqe
    from pipeline import configs

    duration_key, val_x, val_y, eval_x = split
    taus = cqe.quantile_levels(configs.CQE["num_quantiles"])
    val_pred = model.predict(val_x, batch_size=4096, verbose=0)  # levels are still the grid
    val_q, pred_val_click = val_pred["quantiles"], {"click_prob": val_pred["click_prob"].reshape(-1)}
    raw = pred["quantiles"]
    if d2q is not None:  # percentile quantiles -> seconds through each row's group quantile function
        raw = np.stack([d2q.watch_time(eval_x[duration_key], raw[:, i]) for i in range(taus.size)], 1)
        val_q = np.stack([d2q.watch_time(val_x[duration_key], val_q[:, i]) for i in range(taus.size)], 1)
    levels = conformal.fit_levels(val_y["watch_time_s"], val_q, taus)
    q = conformal.apply_levels(raw, levels, taus)

    def points(quantiles):  # CDE (eq. 8), CSE (t_0.25) and the median t_0.5 (what MAE rewards)
        return {f"{method}_cde": cqe.conditional_expectation(quantiles),
                f"{method}_cse": cqe.interpolate_quantile(quantiles, 0.25, taus),
                f"{method}_median": cqe.interpolate_quantile(quantiles, 0.5, taus)}

    # validation: with the levels fitted on it (in-sample for the levels)
    return {**points(q), "quantiles": q, "quantiles_raw": raw, "raw_cde": cqe.conditional_expectation(raw),
            "quantiles_additive": additive_cqr(val_y["watch_time_s"], val_q, raw, taus),
            "levels": levels, "validation": dict(pred_val_click, **points(conformal.apply_levels(val_q, levels, taus)))}


def _thresholds_of(result, name):
    return next(c for c in result.candidates if c["name"] == name)["thresholds"]


# ----------------------------------------------------- post-hoc analyses of saved predictions
def median_calibration(pred_fit, y_fit, num_bins: int = 20):
    """A monotone map fitted to MAE on one split: prediction quantile bins (num_bins, by
    `pred_fit`), per bin (median prediction, median label), the labels' running max (so the
    map is non-decreasing), linear interpolation between the bins, flat beyond them.
    Returns fn(pred) -> calibrated pred."""
    pred_fit, y_fit = np.asarray(pred_fit, np.float64), np.asarray(y_fit, np.float64)
    edges = np.quantile(pred_fit, np.linspace(0.0, 1.0, num_bins + 1))
    bins = np.clip(np.searchsorted(edges, pred_fit, side="right") - 1, 0, num_bins - 1)
    xs, ys = [], []
    for b in range(num_bins):
        rows = bins == b
        if rows.any():
            xs.append(np.median(pred_fit[rows]))
            ys.append(np.median(y_fit[rows]))
    xs, ys = np.asarray(xs), np.maximum.accumulate(np.asarray(ys))
    xs, keep = np.unique(xs, return_index=True)
    return lambda p: np.interp(np.asarray(p, np.float64), xs, ys[keep])


def analyse_predictions(pred_dir, ensembles=(), num_bins: int = 20, block: str = "real") -> dict:
    """From the BENCH_PRED_DIR files of one run: every estimate's validation / eval metrics,
    each ensemble (the mean of log1p of its members' estimates, back with expm1; click
    probability: the members' mean) and the median calibration of each (fitted on the whole
    validation day for eval; its validation figure 2-fold cross-fitted by user parity)."""
    import glob

    from bench.watchtime_metrics import point_metrics

    labels = np.load(os.path.join(pred_dir, f"{block}_labels.npz"))
    est = {}  # name -> {split: (seconds, click_prob)}
    for path in sorted(glob.glob(os.path.join(pred_dir, f"{block}_*.npz"))):
        if path.endswith("_labels.npz"):
            continue
        z = np.load(path)
        for key in z.files:
            if key.startswith("validation_") and key != "validation_click_prob":
                name = key[len("validation_"):]
                est[name] = {s: (z[f"{s}_{name}"].astype(np.float64), z[f"{s}_click_prob"].astype(np.float64))
                             for s in ("validation", "eval")}
    for members in ensembles:
        missing = [m for m in members if m not in est]
        if missing:
            raise ValueError(f"ensemble {members}: no predictions of {missing} in {pred_dir}")
        est["ens(" + "+".join(members) + ")"] = {
            s: (np.expm1(np.mean([np.log1p(np.maximum(est[m][s][0], 0.0)) for m in members], 0)),
                np.mean([est[m][s][1] for m in members], 0)) for s in ("validation", "eval")}

    def scores(split, pred, click):
        return point_metrics(labels[f"{split}_watch"], pred, labels[f"{split}_user"], labels[f"{split}_click"], click)

    out = {}
    val_y, val_user = labels["validation_watch"], labels["validation_user"]
    fold = (val_user % 2).astype(int)
    for name, s in est.items():
        out[name] = {"validation": scores("validation", *s["validation"]), "eval": scores("eval", *s["eval"])}
        (vp, vc), (ep, ec) = s["validation"], s["eval"]
        cross = np.empty_like(vp)
        for f in (0, 1):
            cross[fold == f] = median_calibration(vp[fold != f], val_y[fold != f], num_bins)(vp[fold == f])
        out[name + "+median_cal"] = {"validation": scores("validation", cross, vc),
                                     "eval": scores("eval", median_calibration(vp, val_y, num_bins)(ep), ec)}
    return out


def main(argv) -> int:
    """python -m bench.watchtime_variants <BENCH_PRED_DIR> <out.json> [a+b+c ...]: the
    post-hoc analyses (analyse_predictions) of a bench run's saved predictions."""
    import json

    pred_dir, out_path = argv[0], argv[1]
    ensembles = [tuple(e.split("+")) for e in argv[2:]]
    shown = os.path.abspath(pred_dir)
    shown = "<tmp>" + shown[len("/tmp"):] if shown.startswith("/tmp/") else pred_dir
    res = {"pred_dir": shown, "ensembles": [list(e) for e in ensembles], "median_calibration_bins": 20,
           "estimates": analyse_predictions(pred_dir, ensembles)}
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)
    for name, r in res["estimates"].items():
        v, e = r["validation"], r["eval"]
        print(f"{name:<60} val {v['mae']:.3f} {v['xauc']:.4f} {v['xgauc']:.4f} {v['click_auc']:.4f}"
              f" | eval {e['mae']:.3f} {e['xauc']:.4f} {e['xgauc']:.4f} {e['click_auc']:.4f}")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
