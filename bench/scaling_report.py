"""Fits, verdict and plot of the scaling benchmark (bench/bench_scaling.py, #36).

Per ranker × axis × metric (validation log loss and NE): the points (one per distinct
x; the loss is the mean over seeds), L(x) = E + A·x^(−α) (bench/scaling_law.py), 80 %
bootstrap intervals (impressions and seeds resampled), the extrapolation check (refit
without the largest x) and whether the curve is monotone. The compute axis fits the
lower envelope of all the ranker's runs. The verdict compares, at the ranker's default
point (full data, default size and embedding width),

    gain_data  = L(D₀) − L(2·D₀)   from the data fit
    gain_model = L(N₀) − L(2·N₀)   from the params fit (N₀ = non-embedding parameters)

each with its 80 % interval, against the noise floor: the standard error of the
validation log loss, sd(ℓ_i)/√n over the impressions of the default point's runs
(seed-averaged), and states the reducible share (L₀ − E)/L₀.
"""
import numpy as np

from bench import scaling_law as S
from bench.scaling_data import DATA_AXES, cache_axis

AXES = {"data": "train_examples", "params": "non_embedding_params", "embedding": "embedding_dim",
        "compute": "train_flops"}
LEVEL = 0.8


def axis_points(records, ranker, axis):
    """[(x, run indices)] of one ranker's axis, sorted by x; compute: the lower envelope."""
    key = AXES[axis]
    groups = {}
    for i, r in enumerate(records):
        if r["ranker"] != ranker or (axis != "compute" and axis not in r["axes"]) or r.get(key) is None:
            continue
        groups.setdefault((r["fraction"], r["size"], r["embedding_dim"]), []).append(i)
    points = sorted((float(np.mean([records[i][key] for i in runs])), runs) for runs in groups.values())
    if axis == "compute":
        envelope, best = [], np.inf
        for x, runs in points:
            loss = np.mean([records[i]["val_logloss"] for i in runs])
            if loss < best:
                envelope.append((x, runs))
                best = loss
        points = envelope
    return points


def fit_axis(x, runs, losses, labels, metric, n_boot, rng, extra_x=()):
    """One fit record: points, E / A / alpha with intervals, extrapolation check."""
    lab = labels if metric == "ne" else None
    means = losses.mean(1) / (S.binary_entropy(labels.mean()) if metric == "ne" else 1.0)
    y = np.array([means[r].mean() for r in runs])
    out = {"points": [{"x": xi, "loss": round(float(yi), 6), "seed_losses": [round(float(means[i]), 6) for i in r]}
                      for xi, yi, r in zip(x, y, runs)],
           "monotone_decreasing": bool(np.all(np.diff(y) < 0))}
    try:
        fit = S.fit_power_law(x, y)
    except ValueError as e:
        return dict(out, skipped=str(e)), None
    y_boot = S.resampled_means(losses, runs, rng, n_boot, labels=lab)
    grid = np.geomspace(min(x) / 1.5, max(x) * 2.0, 30)
    boot = S.bootstrap_fits(x, y_boot, predict_at=list(grid) + list(extra_x))
    edge = fit["alpha"] <= S.ALPHA_GRID[1] or fit["alpha"] >= S.ALPHA_GRID[-2]
    out.update(alpha=fit["alpha"], alpha_at_grid_edge=bool(edge),  # a flat or a one-step curve: alpha not identified
               alpha_interval=S.interval(boot["alpha"], LEVEL), E=fit["E"],
               E_interval=S.interval(boot["E"], LEVEL), A=fit["A"], interval_level=LEVEL,
               curve={"x": grid.tolist(), "fit": S.power_law(grid, fit["E"], fit["A"], fit["alpha"]).tolist(),
                      "band": [S.interval(boot["pred"][:, j], LEVEL) for j in range(grid.size)]})
    try:
        out["extrapolation"] = S.extrapolation_check(x, y, y_boot, LEVEL)
    except ValueError as e:
        out["extrapolation"] = {"skipped": str(e)}
    start = monotone_tail_start(y)
    if start > 0 and y.size - start >= S.N_PARAMS:  # the small-data end flattens (Hestness): refit without it
        tail = S.fit_power_law(x[start:], y[start:])
        tb = S.bootstrap_fits(x[start:], y_boot[:, start:])
        out["monotone_tail_fit"] = dict(tail, points_dropped=int(start), alpha_interval=S.interval(tb["alpha"], LEVEL),
                                        E_interval=S.interval(tb["E"], LEVEL))
    return out, {"fit": fit, "boot_extra": boot["pred"][:, grid.size:]}


def monotone_tail_start(y):
    """The first index from which the losses strictly decrease to the end."""
    start = len(y) - 1
    while start > 0 and y[start - 1] > y[start]:
        start -= 1
    return start


def _gain(fit_and_boot, x0):
    """L(x0) − L(2·x0) and its interval (the last two bootstrap predictions)."""
    if fit_and_boot is None:
        return None
    f, pred = fit_and_boot["fit"], fit_and_boot["boot_extra"]
    gain = S.power_law(x0, f["E"], f["A"], f["alpha"]) - S.power_law(2 * x0, f["E"], f["A"], f["alpha"])
    return {"x0": x0, "gain": float(gain), "interval": S.interval(pred[:, 0] - pred[:, 1], LEVEL)}


def verdict(ranker, records, losses, fits, extras):
    base = [i for i, r in enumerate(records) if r["ranker"] == ranker and r["fraction"] == 1.0
            and "data" in r["axes"]]
    if not base:
        return {"ranker": ranker, "skipped": "no full-data run at the default size"}
    per = losses[base].mean(0)
    floor = float(per.std(ddof=1) / np.sqrt(per.size))
    l0 = float(per.mean())
    out = {"ranker": ranker, "default_point_logloss": round(l0, 5), "noise_floor_logloss_se": round(floor, 5),
           "seed_sd": round(float(np.std([records[i]["val_logloss"] for i in base], ddof=1)), 5) if len(base) > 1 else None}
    words = []
    for axis, label in (("data", "doubling the data"), ("params", "doubling the non-embedding network")):
        g = extras.get((axis, "logloss"))
        if g is None:
            out[f"{axis}_doubling"] = None
            words.append(f"{label}: no fit")
            continue
        out[f"{axis}_doubling"] = dict(g, gain_over_noise_floor=round(g["gain"] / floor, 2))
        lo, hi = g["interval"]
        words.append(f"{label} (from {g['x0']:.3g}) is predicted to lower the validation log loss by "
                     f"{g['gain']:.5f} (80 % interval {lo:.5f} .. {hi:.5f}), {g['gain'] / floor:.2f}x the noise floor "
                     f"{floor:.5f}" + ("" if lo > floor else " (the interval reaches below the noise floor: "
                                        "not detectable on this validation day)"))
    emb = embedding_reading(fits.get(("embedding", "logloss")), floor)
    if emb:
        out["embedding"] = emb
        words.append(emb["text"])
    data_fit = fits.get(("data", "logloss"))
    if data_fit and "E" in data_fit:
        share = (l0 - data_fit["E"]) / l0
        e_lo, e_hi = data_fit["E_interval"]
        out["reducible_share_data_fit"] = [round(share, 4), [round((l0 - e_hi) / l0, 4), round((l0 - e_lo) / l0, 4)]]
        words.append(f"reducible share (L - E)/L from the data fit {share:.3f} "
                     f"(80 % interval {(l0 - e_hi) / l0:.3f} .. {(l0 - e_lo) / l0:.3f})")
    d, m = out.get("data_doubling"), out.get("params_doubling")
    if d and m:
        better = "data" if d["gain"] > m["gain"] else "model"
        overlap = d["interval"][0] <= m["interval"][1] and m["interval"][0] <= d["interval"][1]
        words.append(f"the larger predicted gain is from more {better}" +
                     (" but the two intervals overlap" if overlap else " (intervals disjoint)"))
    out["text"] = f"{ranker}: " + "; ".join(words) + "."
    return out


def embedding_reading(fit, floor):
    """The embedding axis in words, in units of the noise floor: flat if the narrowest width
    is within 2 floors of the best; else collapse if the widest is > 2 floors above the best,
    still falling if the widest is the best, saturated otherwise."""
    if not fit or len(fit["points"]) < 2:
        return None
    xs, ys = [p["x"] for p in fit["points"]], [p["loss"] for p in fit["points"]]
    best = int(np.argmin(ys))
    span, excess = (ys[0] - ys[best]) / floor, (ys[-1] - ys[best]) / floor
    shape = ("flat (every width within 2 noise floors of the best)" if span <= 2 and excess <= 2 else
             "turns up past the best width (collapse)" if excess > 2 else
             "still falling at the widest" if best == len(ys) - 1 else
             "saturated (the widest within 2 noise floors of the best)")
    losses = " / ".join(f"{y:.4f}" for y in ys)
    return {"best_width": xs[best], "narrowest_minus_best_over_noise_floor": round(float(span), 2),
            "widest_minus_best_over_noise_floor": round(float(excess), 2), "shape": shape,
            "text": f"embedding widths {' / '.join(f'{x:g}' for x in xs)}: log loss {losses}, best at {xs[best]:g} "
                    f"({span:.2f}x the noise floor below the narrowest), {shape}"}


def report(records, losses, labels, n_boot, out_path, data_axis="examples"):
    """{"fits", "joint", "verdict", "gbdt"} for bench_scaling.main; writes the PNG. The verdict
    text opens with what a data fraction meant (data_axis, bench/scaling_data.py)."""
    rng = np.random.default_rng(0)
    rankers = list(dict.fromkeys(r["ranker"] for r in records))
    fits, verdicts, joint = [], [], []
    for ranker in rankers:
        by_axis, extras = {}, {}
        base_runs = [r for r in records if r["ranker"] == ranker and r["fraction"] == 1.0 and "data" in r["axes"]]
        x0 = {"data": float(base_runs[0]["train_examples"]) if base_runs else None,
              "params": float(base_runs[0]["non_embedding_params"]) if base_runs and ranker != "gbdt" else None}
        for axis in AXES:
            points = axis_points(records, ranker, axis)
            if not points:
                continue
            x, runs = [p[0] for p in points], [p[1] for p in points]
            for metric in ("logloss", "ne"):
                extra = (x0[axis], 2 * x0[axis]) if x0.get(axis) and metric == "logloss" else ()
                rec, fb = fit_axis(x, runs, losses, labels, metric, n_boot, rng, extra)
                rec = {"ranker": ranker, "axis": axis, "metric": metric, "x_name": AXES[axis], **rec}
                fits.append(rec)
                by_axis[(axis, metric)] = rec
                if extra and fb is not None:
                    extras[(axis, metric)] = _gain(fb, x0[axis])
        verdicts.append(verdict(ranker, records, losses, by_axis, extras))
        if ranker == "gbdt":
            continue
        arm = [r for r in records if r["ranker"] == ranker and {"data", "params"} & set(r["axes"])
               and r.get("non_embedding_params")]
        if len(arm) >= S.MIN_JOINT_RUNS:
            try:
                joint.append(dict(S.fit_joint([r["non_embedding_params"] for r in arm],
                                              [r["train_examples"] for r in arm], [r["val_logloss"] for r in arm]),
                                  ranker=ranker))
            except ValueError as e:
                joint.append({"ranker": ranker, "skipped": str(e)})
        else:
            joint.append({"ranker": ranker, "skipped": f"{len(arm)} runs on the data and params axes; the joint "
                                                       f"law needs at least {S.MIN_JOINT_RUNS}"})
    crossings = gbdt_crossings(fits)
    plot(fits, out_path[:-5] + ".png" if out_path.endswith(".json") else out_path + ".png")
    axis_text = f"Data axis: {data_axis} ({DATA_AXES[data_axis]})."
    text = " ".join([axis_text] + [v.get("text", "") for v in verdicts] + [c["text"] for c in crossings])
    return {"fits": fits, "joint": joint, "verdict": {"text": text, "data_axis": data_axis, "per_ranker": verdicts,
                                                      "gbdt_crossing": crossings}}


def gbdt_crossings(fits, reach=100.0):
    """Where each deep ranker's data fit crosses the gradient-boosting one, searched from
    the smallest measured size to `reach` × the largest (log grid)."""
    data = {f["ranker"]: f for f in fits if f["axis"] == "data" and f["metric"] == "logloss" and "alpha" in f}
    if "gbdt" not in data:
        return []
    g = data.pop("gbdt")
    out = []
    for ranker, f in data.items():
        xs = [p["x"] for p in f["points"]]
        grid = np.geomspace(min(xs), max(xs) * reach, 400)
        diff = S.power_law(grid, f["E"], f["A"], f["alpha"]) - S.power_law(grid, g["E"], g["A"], g["alpha"])
        change = np.flatnonzero(np.diff(np.sign(diff)) != 0)
        at = float(grid[change[0] + 1]) if change.size else None
        now = "below" if diff[np.searchsorted(grid, max(xs)) - 1] < 0 else "above"
        text = (f"{ranker}'s data fit crosses the gradient-boosting fit at {at:.3g} training impressions"
                if at else f"{ranker}'s data fit does not cross the gradient-boosting fit up to "
                           f"{reach:g}x the data (it stays {now} it)")
        out.append({"ranker": ranker, "crossing_train_examples": at, "deep_at_full_data": now, "text": text + "."})
    return out


def plot(fits, path):
    """Log loss against each axis, log-log: seed points, means, fit + 80 % band, held-out point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_names = [a for a in AXES if any(f["axis"] == a and f["metric"] == "logloss" for f in fits)]
    fig, axs = plt.subplots(1, len(axes_names), figsize=(4.5 * len(axes_names), 4), squeeze=False)
    colors = {}
    for ax, axis in zip(axs[0], axes_names):
        for f in (f for f in fits if f["axis"] == axis and f["metric"] == "logloss"):
            c = colors.setdefault(f["ranker"], f"C{len(colors)}")
            xs = [p["x"] for p in f["points"]]
            for p in f["points"]:
                ax.scatter([p["x"]] * len(p["seed_losses"]), p["seed_losses"], s=8, color=c, alpha=0.4)
            ax.plot(xs, [p["loss"] for p in f["points"]], "o", color=c, label=f["ranker"])
            if "curve" in f:
                cv = f["curve"]
                ax.plot(cv["x"], cv["fit"], "-", color=c, lw=1,
                        label=f"{f['ranker']}: α={f['alpha']:.2f} [{f['alpha_interval'][0]:.2f}, "
                              f"{f['alpha_interval'][1]:.2f}]")
                ax.fill_between(cv["x"], [b[0] for b in cv["band"]], [b[1] for b in cv["band"]], color=c, alpha=0.15)
            ex = f.get("extrapolation", {})
            if "held_out_point" in ex:
                h, (lo, hi) = ex["held_out_point"], ex["predicted_interval"]
                ax.errorbar([h["x"] * 1.04], [ex["predicted"]], yerr=[[ex["predicted"] - lo], [hi - ex["predicted"]]],
                            fmt="x", color=c, capsize=3)
                ax.plot([h["x"]], [h["loss"]], "*", ms=12, color=c, mec="k")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(AXES[axis])
        ax.set_ylabel("validation log loss")
        ax.set_title(f"{axis} (★ held out, × its extrapolated 80 % interval)", fontsize=8)
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def refit(work, json_path, n_boot):
    """Refit an existing result from the runs cached in `work` (no TensorFlow): the runs
    listed in `json_path` (every cached run if it does not exist) are looked up by key in
    BENCH_WORK's cache, fits / verdict / PNG redone."""
    import json
    import os

    cached = json.load(open(f"{work}/scaling_runs.json"))
    saved = np.load(f"{work}/scaling_losses.npz")
    if os.path.exists(json_path):
        result = json.load(open(json_path))
    else:  # a run cut short: every cached run of the data axis BENCH_SCALING_DATA_AXIS (default logs)
        from bench.scaling_data import data_axis_from_env

        axis = data_axis_from_env(os.environ)
        result = {"command": f"python -m bench.scaling_report {os.path.basename(work)} <out> (the runs cached in "
                             "BENCH_WORK by make bench-scaling)", "data_axis": axis, "data_axis_meaning": DATA_AXES[axis],
                  "data": {"train_examples": max(r["train_examples"] for r in cached),
                           "validation_examples": int(saved["labels"].size)},
                  "runs": [r for r in cached if cache_axis(r) in ("full", axis)]}
    key = lambda r: (r["ranker"], r["fraction"], r["size"], r["embedding_dim"], r.get("lr_multiplier"), r["seed"],  # noqa: E731
                     cache_axis(r))
    index = {key(r): i for i, r in enumerate(cached)}
    losses = saved["losses"][[index[key(r)] for r in result["runs"]]]
    result.update(report(result["runs"], losses, saved["labels"], n_boot, json_path, result.get("data_axis", "examples")),
                  refit_command=f"python -m bench.scaling_report <BENCH_WORK> {os.path.relpath(json_path)} {n_boot}")
    with open(json_path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(json_path + ".tmp", json_path)
    return result


if __name__ == "__main__":  # python -m bench.scaling_report <BENCH_WORK> <scaling.json> [bootstrap]
    import sys

    print(refit(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1000)["verdict"]["text"])
