"""Benchmark the watch-time heads -> bench/results/watchtime.json.

    make bench-watchtime                   # or: .venv/bin/python -m bench.bench_watchtime
    LOGS=/path TRAIN_DAYS=20220425-20220502 EVAL_DAYS=20220503-20220504 make bench-watchtime

One ranker (BENCH_RANKER, default "baseline"), trained BENCH_EPOCHS (default 1) per
method, same data machinery as bench/bench_rankers.py (the pipeline's LogExampleGen +
Transform once, then the transform graph applied to the raw examples; train = train
days but the last, validation = last train day, eval = eval days). Methods:

- ``marginal``: no model, a reference: every eval row gets the train split's
  marginal mean (``marginal_mean``) and marginal quantiles, so its coverage error is
  what the shift between train and eval days alone costs a perfectly calibrated
  unconditional model;
- ``regression``: direct regression on log1p(y) (heads.WatchTimeRegressionHead);
- ``wlr``: weighted logistic regression (Covington et al., YouTube 2016) adapted to
  watch time: every impression is a positive with weight y and a negative with
  weight 1, so the odds e^logit converge to E[y | x]; prediction exp(logit);
- ``cread_equal_frequency``, ``cread_equal_width``, ``cread_ead``: CREAD with the
  α = 0, equal-width and chosen EAD candidates of the Transform asset (never
  recomputed), restoration = configs.CREAD["restoration"];
- ``cqe_cde``, ``cqe_cse``: one CQE model (configs.CQE), CDE (eq. 8) and CSE (t_0.25), with
  the split-conformal levels fitted on the validation split (models/watch_time/conformal.py;
  ``*_raw`` fields: before them; ``*_additive``: CQR's additive offsets instead, the
  calibration before the levels; ``coverage_error_randomized``: ties at y = t = 0 counted
  as the randomized PIT does, models.evaluation.quantile_metrics.randomized_coverage);
  variants (BENCH_METHODS, CQE_VARIANTS): ``cqe_shared``
  (the head before #13: on the shared layers, pinball in seconds), ``cqe_tower_seconds``,
  ``cqe_sum`` (sum-over-batch pinball), ``cqe_d2q`` (quantiles of D2Q's in-group percentile,
  mapped back through each duration group's quantile function);
- ``d2q``: duration-deconfounded quantiles (Zhan et al. 2022; models/watch_time/d2q.py), the
  in-group percentile regressed and mapped back (watchtime_methods.D2Q_GROUPS groups of the train split);
- ``cread_sweep``: CREAD with equal-frequency vs EAD thresholds at the (M, beta) of SWEEP;
- ``median``: the conditional median (MAE's minimiser): heads.WatchTimeQuantileHead, pinball
  at τ = 0.5 on log1p(y) (``quantile_t<τ>``, e.g. quantile_t0.45: another τ, tuned on the
  validation day); ``median_seconds``: the same head with L1 in seconds (the error MAE
  measures); ``median_tower``: with its own ReLU layer (watchtime_methods.MEDIAN_TOWER); every CQE method
  also reports ``<method>_median`` (its t_0.5);
- ``d2q_median``: D2Q with L1 on the in-group percentile (the median percentile, mapped back);
- ``watch_ratio`` / ``watch_ratio_median``: heads.WatchRatioHead, label min(watch /
  max(duration, 1 s), signals.WATCH_RATIO_CAP), MSE / L1, seconds = ratio × max(duration, 1 s) (raw
  duration of the examples); ``marginal`` also gives ``marginal_median`` and
  ``duration_group_median`` (each D2Q duration group's train median: no model).

Per method, on the eval days and (``validation``, the day to tune on) the validation day:
mae (s), xauc, xauc_click_pairs (the XAUC of pairs of two clicks, two skips and one of each, with
their shares of the pairs: xauc_pairs.xauc_by_label_pairs), xgauc (per-user XAUC, impression-weighted; users with one label value
skipped), mean_calibration_gap (sum_b n_b |mean pred_b - mean y_b| / n over prediction
deciles: the E[y] error that real logs can measure), click_auc (of the multi-task click
head), coverage_error = mean_τ |P(y <= t_τ) − τ| over τ ∈ {0.1, ..., 0.9} (CQE only), and
the ``ead`` block (α, β, M, thresholds, J of every candidate, from the transform graph
asset). The ``simulator`` block repeats the methods on simulated logs (data/simulator/;
BENCH_SIM_* sizes) and adds the error against the true conditional mean (mae_vs_true_mean)
and true quantiles (CQE: mean |t̂_τ − t_τ| at τ ∈ {0.1, 0.25, 0.5, 0.75, 0.9}), plus the
restoration bias of both CREAD rules fed the TRUE survival function at each threshold set
(cread.restoration_bias: isolates discretization from learning error).

Env: LOGS, TRAIN_DAYS, EVAL_DAYS, BENCH_RANKER, BENCH_EPOCHS (1), BENCH_BATCH_SIZE
(256), BENCH_METHODS (comma list), BENCH_SIM (1: run the simulator block),
BENCH_SIM_USERS/VIDEOS/DAYS (400/300/6), BENCH_SIM_EPOCHS (5: the simulated data
are ~100x smaller; validation click AUC still picks the best epoch), BENCH_REAL (0:
keep the real-data block of an existing BENCH_OUT, rerun the simulator only), BENCH_WORK (/tmp/bench_watchtime),
BENCH_OUT (bench/results/watchtime.json), BENCH_LOSS_WEIGHT_CQE (configs.LOSS_WEIGHT_CQE),
BENCH_TRAIN_ROWS (0 = all: a random subset of the real train split, for bounded runs),
BENCH_PRED_DIR (unset: off; a folder for <block>_<method>[_s<seed>].npz, each method's validation
and eval predictions), BENCH_SEEDS (TF seeds, default 0: every method is trained once per seed,
each record carries its ``seed``; training on 2 CPU threads is not bit-reproducible either),
LOG_SIGNALS (models/features.py: the leakage-free signals as model inputs, recorded as
``log_signals``; use a BENCH_WORK per setting, the cached Transform does not key on it).
"""
import os
import glob
import json
import sys
import time

import numpy as np

from components.log_example_gen.time_split import parse_days

from bench.bench_rankers import (DEFAULT_LOGS, ROOT, load_splits,
                                 run_example_gen_and_transform)
from bench.watchtime_methods import candidate_thresholds, train_and_predict
from bench.watchtime_metrics import point_metrics
from bench.watchtime_variants import expand_methods

METHODS = ("marginal", "regression", "wlr", "cread_equal_frequency", "cread_equal_width", "cread_ead", "cqe",
           "d2q", "cqe_shared", "cqe_tower_seconds", "cqe_sum", "cqe_d2q", "cread_sweep",
           "median", "median_seconds", "median_tower", "d2q_median", "watch_ratio", "watch_ratio_median",
           "pairwise")
DEFAULT_METHODS = METHODS[:8]  # the table; the #13 diagnostics (CQE variants, EAD sweep) by BENCH_METHODS
RAW_COLUMNS = ("user_id", "video_id", "time_ms", "duration_s")  # raw columns of every split (split_columns)
COVERAGE_TAUS = tuple(np.round(np.arange(1, 10) / 10.0, 2))
SIM_TRUTH_TAUS = (0.10, 0.25, 0.50, 0.75, 0.90)  # data/simulator/ QUANTILE_LEVELS


# --------------------------------------------------------------------------- math
def at_levels(quantiles, taus, eval_taus=COVERAGE_TAUS) -> np.ndarray:
    """[n, len(eval_taus)]: the quantiles on grid `taus` interpolated at `eval_taus`, for
    models.evaluation.quantile_metrics.quantile_coverage / mean_coverage_error."""
    from models.watch_time.cqe import interpolate_quantile

    return np.stack([interpolate_quantile(quantiles, t, taus) for t in eval_taus], axis=1)


def ead_block(report) -> dict:
    return {"chosen": report.chosen, "alpha": report.chosen_alpha, "beta": report.beta, "M": report.M,
            "M_eff": report.M_eff, "t_max": report.t_max, "thresholds": [round(t, 4) for t in report.thresholds],
            "candidates": [{"name": c["name"], "alpha": c["alpha"], "M_eff": c["M_eff"], "J": c["J"],
                            "A_w": c["A_w"], "A_b": c["A_b"]} for c in report.candidates]}


# ------------------------------------------------------------------------ training
def evaluate_methods(methods, report, sizes, data, eval_y, epochs, batch_size, history_length,
                     tag, user_ids, truth=None, records=None, on_record=lambda: None, seeds=(0,)):
    """Records of every method on one data set (truth: optional simulator ground truth),
    appended to `records` (on_record() after each: the bench writes partial results).
    Every record carries the same point metrics on the validation day (``validation``:
    the day to tune on; CQE's conformal levels are fitted there, so its validation
    figures are in-sample for the levels)."""
    from models.evaluation import metrics, quantile_metrics
    from models.watch_time import cqe
    from pipeline import configs

    y = eval_y["watch_time_s"].reshape(-1).astype(np.float64)
    val_y = data[3]
    val_watch = val_y["watch_time_s"].reshape(-1).astype(np.float64)
    val_users = data[5]["validation"]["user_id"]
    taus = cqe.quantile_levels(configs.CQE["num_quantiles"])
    records = [] if records is None else records

    def coverage(q):
        q_eval = at_levels(q, taus)  # share(y <= t_tau): above tau = quantiles too high
        return (round(quantile_metrics.mean_coverage_error(y, q_eval, COVERAGE_TAUS), 5),
                {str(t): round(float(c), 4) for t, c in zip(COVERAGE_TAUS,
                                                            quantile_metrics.quantile_coverage(y, q_eval, COVERAGE_TAUS))})

    def randomized_coverage_error(q):  # ties at y = t = 0 counted tau / F0 (quantile_metrics.randomized_coverage)
        c = quantile_metrics.randomized_coverage(y, at_levels(q, taus), COVERAGE_TAUS, quantile_metrics.zero_cdf(q, taus))
        return round(float(np.mean(np.abs(c - np.asarray(COVERAGE_TAUS)))), 5)

    pred_dir = os.environ.get("BENCH_PRED_DIR", "")
    if pred_dir:
        os.makedirs(pred_dir, exist_ok=True)
        raw = data[5]
        np.savez(os.path.join(pred_dir, f"{tag}_labels.npz"), eval_watch=y, validation_watch=val_watch,
                 eval_click=eval_y["click_prob"].reshape(-1), validation_click=val_y["click_prob"].reshape(-1),
                 eval_user=user_ids, validation_user=val_users, eval_duration=raw["eval"]["duration_s"],
                 validation_duration=raw["validation"]["duration_s"])
    for seed, method in ((s, m) for s in seeds for m in expand_methods(methods)):
        res = train_and_predict(method, report, sizes, data, epochs, batch_size, history_length, seed=seed)
        if pred_dir:  # the point estimates of both days, for analyses without retraining
            names = [k for k in res.get("validation", {}) if k != "click_prob"]
            suffix = f"_s{seed}" if seed else ""
            np.savez(os.path.join(pred_dir, f"{tag}_{method}{suffix}.npz"), eval_click_prob=res["click_prob"],
                     validation_click_prob=res["validation"]["click_prob"],
                     **{f"eval_{k}": res[k] for k in names}, **{f"validation_{k}": res["validation"][k] for k in names})
        for name, pred in res.items():
            if name in ("train_seconds", "quantiles", "click_prob", "quantiles_raw", "raw_cde", "levels", "extra",
                        "quantiles_additive",
                        "validation"):
                continue
            pred = np.asarray(pred, np.float64)
            # mean_calibration_gap: by prediction decile, seconds
            rec = {"method": name, "seed": seed,
                   **point_metrics(y, pred, user_ids, eval_y["click_prob"], res["click_prob"]),
                   "coverage_error": None, "train_seconds": round(res["train_seconds"], 1), **res["extra"]}
            if name in res.get("validation", {}):
                rec["validation"] = point_metrics(val_watch, res["validation"][name], val_users,
                                                  val_y["click_prob"], res["validation"]["click_prob"])
            if "quantiles" in res:
                rec["coverage_error"], rec["coverage_by_tau"] = coverage(res["quantiles"])
                rec["coverage_error_raw"], rec["coverage_by_tau_raw"] = coverage(res["quantiles_raw"])
                rec["mae_raw_cde"] = round(metrics.mae(y, res["raw_cde"]), 4)
                rec["coverage_error_randomized"] = randomized_coverage_error(res["quantiles"])
                if "quantiles_additive" in res:  # the additive CQR offsets used before the levels
                    rec["coverage_error_additive"], rec["coverage_by_tau_additive"] = coverage(res["quantiles_additive"])
                rec["conformal_levels_at_deciles"] = [round(float(np.interp(t, taus, res["levels"])), 4)
                                                       for t in COVERAGE_TAUS]
            if truth is not None:
                rec["mae_vs_true_mean"] = round(float(np.mean(np.abs(pred - truth["mean"]))), 4)
                if "quantiles" in res:
                    rec["quantile_mae_vs_truth"] = {
                        str(t): round(float(np.mean(np.abs(cqe.interpolate_quantile(res["quantiles"], t, taus)
                                                           - truth["q"][:, i]))), 4)
                        for i, t in enumerate(SIM_TRUTH_TAUS)}
            records.append(rec)
            print(f"[bench-watchtime] {tag} " + json.dumps(rec), flush=True)
        on_record()
    return records


def prepare(logs, work, train_days, eval_days, history_length):
    """Transform once (cached) -> tft_output, EAD report, data tuple, eval labels, eval keys."""
    import tensorflow_transform as tft

    from models.training.input import vocab_sizes
    from models.watch_time import ead_analyzer

    examples_dir, transform_dir = run_example_gen_and_transform(logs, work, train_days, eval_days)
    tft_output = tft.TFTransformOutput(transform_dir)
    report = ead_analyzer.read_ead_result(tft_output)
    splits, _, info = load_splits(examples_dir, tft_output, history_length)
    (train_x, train_y, _), (val_x, val_y, _), (eval_x, eval_y, _) = (splits[k] for k in ("train", "validation",
                                                                                        "eval"))
    raw = {k: split_columns(examples_dir, k) for k in ("train", "validation", "eval")}
    for k, (_, _, meta) in splits.items():  # same rows, same order as load_splits
        if not np.array_equal(raw[k]["user_id"], meta["user"]) or not np.array_equal(raw[k]["time_ms"],
                                                                                      meta["time_ms"]):
            raise RuntimeError(f"split {k}: the raw columns are not in load_splits' row order")
    path = os.path.abspath(logs)
    info = dict(info, logs=("<tmp>" + path[len("/tmp"):]) if path.startswith("/tmp/") else os.path.relpath(path, ROOT),
                eval_days=eval_days)
    return (vocab_sizes(tft_output), report, (train_x, train_y, val_x, val_y, eval_x, raw), eval_y,
            raw["eval"], info)


def split_columns(examples_dir, split, columns=RAW_COLUMNS):
    """Raw columns (RAW_COLUMNS: user_id, video_id, time_ms, duration_s) of a split's
    examples, in load_split's order."""
    import tensorflow as tf

    from models import features as F

    files = sorted(glob.glob(os.path.join(examples_dir, f"Split-{split}", "*")))
    spec = {k: F.raw_feature_spec(1)[k] for k in columns}
    cols = {k: [] for k in spec}
    for records in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096):
        parsed = tf.io.parse_example(records, spec)
        for k in spec:
            cols[k].append(parsed[k].numpy())
    return {k: np.concatenate(v) for k, v in cols.items()}


def restoration_bias_on_simulator(report, n=20000, seed=0) -> dict:
    """Both restoration rules fed the simulator's TRUE survival S(t_m) at each threshold
    set (EAD / equal frequency / equal width): bias vs E[y] and vs E[min(y, T_max)]."""
    from data import simulator as S
    from models.watch_time import cread

    p = S.SimParams()
    rng = np.random.default_rng(seed)
    dur = np.clip(p.duration_median_s * np.exp(p.duration_sigma * rng.standard_normal(n)),
                  p.duration_min_s, p.duration_max_s)
    wp = S.WatchParams.from_affinity(rng.standard_normal(n), dur, p)
    col = S.WatchParams(**{k: np.asarray(getattr(wp, k))[:, None] for k in
                           ("p_click", "p_early", "p_complete", "frac_loc", "duration_s")})
    ey = S.expected_watch_time(wp, p)
    out = {}
    for name, t in (("ead", report.thresholds), ("equal_frequency", candidate_thresholds(report, "alpha=0")),
                    ("equal_width", candidate_thresholds(report, "equal_width"))):
        t = np.asarray(t, np.float64)
        surv = 1.0 - S.watch_time_cdf(t[None, :], col, p)
        grid = np.linspace(0.0, t[-1], 4001)
        ey_capped = np.trapz(1.0 - S.watch_time_cdf(grid[None, :], col, p), grid, axis=1)
        out[name] = {"vs_mean": cread.restoration_bias(surv, t, ey),
                     "vs_capped_mean": cread.restoration_bias(surv, t, ey_capped)}
    return out


def main() -> int:
    from pipeline import configs

    logs = os.environ.get("LOGS") or DEFAULT_LOGS
    methods = [m.strip() for m in (os.environ.get("BENCH_METHODS") or ",".join(DEFAULT_METHODS)).split(",")
               if m.strip()]
    unknown = {m for m in methods if m not in METHODS and not m.startswith(("quantile_t", "pairwise_l"))}
    if unknown:
        raise ValueError(f"unknown BENCH_METHODS {sorted(unknown)}; known: {METHODS}")
    epochs = int(os.environ.get("BENCH_EPOCHS", "1"))
    batch_size = int(os.environ.get("BENCH_BATCH_SIZE", "256"))
    work = os.path.abspath(os.environ.get("BENCH_WORK") or "/tmp/bench_watchtime")
    out_path = os.environ.get("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "watchtime.json")
    h = configs.HISTORY_LENGTH
    seeds = [int(v) for v in os.environ.get("BENCH_SEEDS", "0").split(",") if v.strip()]
    result = {"ranker": os.environ.get("BENCH_RANKER", "baseline"), "epochs": epochs,
              "load_average_start": [round(x, 2) for x in os.getloadavg()],
              "loss_weight_cqe": float(os.environ.get("BENCH_LOSS_WEIGHT_CQE", configs.LOSS_WEIGHT_CQE)),
              "cread": configs.CREAD, "cqe": configs.CQE, "coverage_taus": list(COVERAGE_TAUS),
              "log_signals": list(configs.LOG_SIGNALS),
              "seeds": seeds}

    def write():
        result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        with open(out_path + ".tmp", "w") as f:
            json.dump(result, f, indent=1)
        os.replace(out_path + ".tmp", out_path)  # atomic

    t0 = time.time()
    if os.environ.get("BENCH_REAL", "1") == "0":  # keep a previous run's real-data block
        if os.path.exists(out_path):
            previous = json.load(open(out_path))
            if "real" in previous:
                result["real"] = previous["real"]
    elif glob.glob(os.path.join(logs, configs.LOG_FILE_PATTERN)):
        train_days = parse_days(os.environ.get("TRAIN_DAYS") or "20220425-20220502", allow_empty=False)
        eval_days = parse_days(os.environ.get("EVAL_DAYS") or "20220503-20220504", allow_empty=False)
        sizes, report, data, eval_y, keys, info = prepare(logs, os.path.join(work, "real"), train_days, eval_days, h)
        rows = int(os.environ.get("BENCH_TRAIN_ROWS", "0"))
        if 0 < rows < info["train_examples"]:  # a bounded run: a random subset of the train split
            pick = np.sort(np.random.default_rng(0).choice(info["train_examples"], rows, replace=False))
            data = ({k: v[pick] for k, v in data[0].items()}, {k: v[pick] for k, v in data[1].items()}) + data[2:5] + (
                dict(data[5], train={k: v[pick] for k, v in data[5]["train"].items()}),)
            info = dict(info, train_examples_used=rows)
        result["real"] = {"data": info, "ead": ead_block(report), "methods": []}
        evaluate_methods(methods, report, sizes, data, eval_y, epochs, batch_size, h, "real", keys["user_id"],
                         records=result["real"]["methods"], on_record=write, seeds=seeds)
        write()
    else:
        print(f"[bench-watchtime] no logs in {logs}: real-data block skipped", file=sys.stderr)

    if os.environ.get("BENCH_SIM", "1") != "0":
        import pandas as pd

        from data.simulator import TRUTH_FILE, simulate

        sim_logs = os.path.join(work, "sim_logs")
        n_days = int(os.environ.get("BENCH_SIM_DAYS", "6"))
        if not os.path.exists(os.path.join(sim_logs, TRUTH_FILE)):
            simulate(sim_logs, num_users=int(os.environ.get("BENCH_SIM_USERS", "400")),
                     num_videos=int(os.environ.get("BENCH_SIM_VIDEOS", "300")), num_days=n_days,
                     impressions_per_user_day=8.0, seed=11)
        log = pd.read_csv(sorted(glob.glob(os.path.join(sim_logs, configs.LOG_FILE_PATTERN)))[0],
                          usecols=["date"])
        days = sorted(int(d) for d in log["date"].unique())
        sizes, report, data, eval_y, keys, info = prepare(sim_logs, os.path.join(work, "sim"), days[:-2],
                                                          days[-2:], h)
        truth = pd.read_csv(os.path.join(sim_logs, TRUTH_FILE))
        on = ["user_id", "video_id", "time_ms"]
        order = pd.DataFrame({k: keys[k] for k in on}).merge(truth, on=on, how="left")
        if order["expected_watch_time_s"].isna().any():
            raise RuntimeError("simulator truth does not cover every eval example")
        qcols = [c for c in truth.columns if c.startswith("q") and c.endswith("_s")]
        sim_truth = {"mean": order["expected_watch_time_s"].to_numpy(), "q": order[qcols].to_numpy()}
        sim_epochs = int(os.environ.get("BENCH_SIM_EPOCHS", "5"))
        result["simulator"] = {"data": info, "epochs": sim_epochs, "ead": ead_block(report),
                               "restoration_bias_true_survival": restoration_bias_on_simulator(report),
                               "methods": []}
        evaluate_methods(methods, report, sizes, data, eval_y, sim_epochs, batch_size, h, "sim", keys["user_id"],
                         truth=sim_truth, records=result["simulator"]["methods"], on_record=write, seeds=seeds)
        write()

    for block in ("real", "simulator"):
        if block not in result:
            continue
        print(f"\n[{block}] {'method':<24}{'mae':>9}{'xauc':>8}{'xgauc':>8}{'calib':>8}{'cov_err':>9}{'raw':>8}"
              + (f"{'mae_vs_E':>10}" if block == "simulator" else f"{'val_mae':>9}{'val_xauc':>9}{'val_xg':>8}"))
        for r in result[block]["methods"]:
            cov = "-" if r["coverage_error"] is None else f"{r['coverage_error']:.4f}"
            raw = f"{r['coverage_error_raw']:.4f}" if "coverage_error_raw" in r else "-"
            print(f"{'':>{len(block) + 3}}{r['method']:<24}{r['mae']:>9.3f}{r['xauc']:>8.4f}{r['xgauc']:>8.4f}"
                  f"{r['mean_calibration_gap']:>8.2f}{cov:>9}{raw:>8}"
                  + (f"{r['mae_vs_true_mean']:>10.3f}" if block == "simulator" else
                     "".join(f"{r['validation'][k]:>{w}.4f}" for k, w in (("mae", 9), ("xauc", 9), ("xgauc", 8)))
                     if "validation" in r else ""))
    print(f"[bench-watchtime] wrote {out_path} ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
