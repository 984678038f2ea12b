"""Scaling-law study (#36): is the next gain in more data or a bigger model?
-> bench/results/scaling.json + scaling.png

    make bench-scaling                         # default: ~60 min of training on 2 cores
    BENCH_SCALING_FULL=1 make bench-scaling    # the issue's whole grid: 3 seeds, LR grid (~3.5 h)
    BENCH_SCALING_QUICK=1 make bench-scaling   # a look: fewer points, one seed, no LR grid
    LOGS=/path TRAIN_DAYS=20220425-20220502 EVAL_DAYS=20220503-20220504 make bench-scaling

Data: the pipeline's LogExampleGen + Transform on the bench days and the transformed
train / validation splits, as bench-rankers builds them (bench/ranker_data.py; the
validation split is the last train day). Per ranker (BENCH_MODELS, default din,dcn):

  data axis       fractions 1/32 .. 1 of the data, default size; what a fraction is
                  (bench/scaling_data.py, BENCH_SCALING_DATA_AXIS):
                  logs (default) the pipeline sees only a share f of the logs: the
                    train-period rows whose stable hash of (user_id, video_id, time_ms)
                    is below f (nested), the validation and eval days whole, then
                    LogExampleGen + Transform on BENCH_WORK/logs_f<f>/, so the histories
                    and running signals (LOG_SIGNALS) see only those logs: "what do more
                    logs buy". The validation impressions scored are the same at every f
                  examples  nested random impression subsets of the train split built from
                    all the logs (one permutation; the behaviour before the logs axis):
                    the kept examples' signals still aggregate the dropped impressions
                    (a nearly flat curve with the 12 default signals,
                    bench/results/scaling_signals_quick.json)
  params axis     the non-embedding network scaled by a width multiplier m (DIN: the
                  attention MLP (80, 40)·m and the MLP (200, 80)·m; DCN: the deep MLP
                  (256, 128)·m and low-rank cross layers, projection 64·m), full data;
                  x = non-embedding parameters (bench/model_flops.py)
  embedding axis  embedding_dim 4 .. 32 at the default size, full data
  compute axis    C = 3 · forward FLOPs/example · examples seen by the kept weights,
                  over every run of the ranker; the fit uses the lower envelope (the
                  points no cheaper run beats)

Each run trains with bench-rankers' recipe (run_fn.fit_ranker: up to BENCH_EPOCHS epochs,
early stopping on the validation click AUC, best epoch kept; batch BENCH_BATCH_SIZE,
the Trainer's in-memory input) and is scored on the validation day: log loss and NE
(log loss / H(click rate)), per impression kept for the bootstrap.

Settings (a full-data run 45-150 s here at load ~2, a 1/32 .. 1/8 one 13-25 s):
  default  the four axes above (6 fractions, sizes 0.25 .. 4, widths 4 .. 32) with seed 0,
           and seeds 1 and 2 on both rankers' data axes (the axis the extrapolation check
           and the verdict rest on; its small fractions are cheap): 50 runs, 43 min of
           training at load ~2 (64 min at load 2-6) + ~1 min of GBDT; the config's learning
           rate (the LR grid would triple the 26 full-data points, ~+50 min: FULL only)
  FULL     (BENCH_SCALING_FULL=1) 3 seeds on every point and the learning rate of each
           size chosen from BENCH_LR_GRID (× the config's) on the validation log loss of
           the first seed at full data, the other seeds reusing it: ~3.5 h
  QUICK    (BENCH_SCALING_QUICK=1) 4 fractions, 4 sizes, no embedding axis, one seed

Fits and verdict: bench/scaling_report.py (bench/scaling_law.py does the math).
LOG_SIGNALS picks the model's signal inputs as for the pipeline; runs are cached per
signal set (runs cached without the field had none: LOG_SIGNALS=none) and per data axis
(runs cached without the field: examples; a full-data run is shared, the same computation
in both modes); bench/ranker_data.py's work-dir key holds LOG_SIGNALS, so another signal
set reruns LogExampleGen + Transform in BENCH_WORK (and in each pipeline_f<f>/), and a
transformed split that still lacks a model input is refused. The logs axis adds per
fraction < 1 the thinned logs (BENCH_WORK/logs_f<f>/, rewritten when the source logs, days
or rule change) and a pipeline work dir (BENCH_WORK/pipeline_f<f>/): one more LogExampleGen +
Transform run per fraction < 1 on the first use (5 in the default setting); x of the data
fits is the fraction's own train split size; one fraction's splits are in memory at a time
(the runs go fraction by fraction, seeds within, the GBDT run of a fraction beside them).
Env: LOGS, TRAIN_DAYS, EVAL_DAYS, BENCH_SCALING_DATA_AXIS (logs | examples), BENCH_OUT
(default bench/results/scaling.json; the PNG beside it), BENCH_WORK (default /tmp/bench_scaling), BENCH_MODELS, BENCH_SEEDS,
BENCH_SCALING_QUICK, BENCH_SCALING_FULL, BENCH_BOOTSTRAP (1000; quick 400), BENCH_MAX_RUNS
(stop after so many runs and fit what there is), BENCH_GBDT_MAX_ITER (300: the full data's
validation AUC peaks at 137 trees; 0 = no gradient-boosting reference curve over the data
fractions; it runs single-threaded, as OpenMP barriers at nice 19 beside other jobs made
3,510 rows take 205 s); overrides of the setting: BENCH_SEEDS (every point; also the data
axis's unless BENCH_DATA_SEEDS), BENCH_DATA_SEEDS, BENCH_SCALING_FRACTIONS (e.g. 1/32,1/8,1),
BENCH_SCALING_SIZES, BENCH_SCALING_EMBEDDINGS, BENCH_LR_GRID (multipliers). Runs already in BENCH_WORK (same validation impressions,
same run) are reused, so a larger setting trains only what is missing; with
BENCH_SCALING_CACHED_ONLY=1 nothing is trained: the fits use the cached runs of the setting.
"""
import json
import os
import sys
import time

import numpy as np

from bench.bench_rankers import ROOT, logs_and_days
from bench.scaling_data import cache_axis

# seeds: every point's; data_seeds: the data-axis points' (a superset). DEFAULT fits ~60 min of
# training on the 2-core machine from an empty BENCH_WORK (50 runs: 43 min at load ~2, 64 min
# at the load 2-6 of their first measurement, + ~1 min of GBDT); FULL (BENCH_SCALING_FULL=1) is
# the whole grid, ~3.5 h here (3 seeds everywhere, LR grid).
DEFAULT = {"fractions": [1 / 32, 1 / 16, 1 / 8, 1 / 4, 1 / 2, 1.0], "sizes": [0.25, 0.5, 1.0, 2.0, 4.0],
           "embedding_dims": [4, 8, 16, 32], "seeds": [0], "data_seeds": [0, 1, 2], "lr_grid": [1.0]}
FULL = dict(DEFAULT, seeds=[0, 1, 2], lr_grid=[0.5, 1.0, 2.0])
QUICK = {"fractions": [1 / 32, 1 / 8, 1 / 2, 1.0], "sizes": [0.25, 0.5, 1.0, 2.0],
         "embedding_dims": [], "seeds": [0], "data_seeds": [0], "lr_grid": [1.0]}
BASE_SIZE = 1.0
STUDY_LEARNING_RATE = 1e-3  # Adam at batch 256, constant: the rate every cached run trained at


def _number(text):
    """'1/32' or '0.5' -> float."""
    num, _, den = text.strip().partition("/")
    return float(num) / float(den or 1)


def sized_params(model_type, base, m):
    """The ranker's own hyperparameters with every hidden width × m (see the docstring)."""
    scale = lambda units: [max(1, int(round(u * m))) for u in units]  # noqa: E731
    params = dict(base)
    if model_type == "din":
        params.update(attention_hidden_units=scale(base["attention_hidden_units"]),
                      mlp_hidden_units=scale(base["mlp_hidden_units"]))
    elif model_type == "dcn":
        params.update(deep_hidden_units=scale(base["deep_hidden_units"]), projection_dim=max(1, int(round(64 * m))))
    else:
        raise ValueError(f"bench-scaling: no size rule for {model_type!r} (din, dcn)")
    return params


def _flag(env, name):
    return env.get(name, "0") not in ("", "0")


def choose_setting(env):
    """(name, setting) from BENCH_SCALING_QUICK / BENCH_SCALING_FULL and the per-axis overrides
    (BENCH_SEEDS sets both seed lists unless BENCH_DATA_SEEDS is given; "" = none of the axis)."""
    quick, full = _flag(env, "BENCH_SCALING_QUICK"), _flag(env, "BENCH_SCALING_FULL")
    if quick and full:
        raise ValueError("bench-scaling: BENCH_SCALING_QUICK and BENCH_SCALING_FULL are exclusive")
    name = "quick" if quick else "full" if full else "default"
    setting = dict({"quick": QUICK, "full": FULL, "default": DEFAULT}[name])
    for var, key, cast in (("BENCH_SEEDS", "seeds", int), ("BENCH_DATA_SEEDS", "data_seeds", int),
                           ("BENCH_SCALING_FRACTIONS", "fractions", _number), ("BENCH_SCALING_SIZES", "sizes", _number),
                           ("BENCH_SCALING_EMBEDDINGS", "embedding_dims", int), ("BENCH_LR_GRID", "lr_grid", _number)):
        if env.get(var) is not None:
            setting[key] = [cast(v) for v in env[var].split(",") if v.strip()]
    if env.get("BENCH_SEEDS") is not None and env.get("BENCH_DATA_SEEDS") is None:
        setting["data_seeds"] = list(setting["seeds"])
    setting["data_seeds"] = sorted(set(setting["data_seeds"]) | set(setting["seeds"]))
    return name, setting


def plan(models, setting, base_embedding, seed=None):
    """The runs: (ranker, axis tags, fraction, size, embedding_dim); base_embedding = the config's.
    With `seed`: only the points that seed trains (every point for `seeds`, the data axis's
    for `data_seeds`); a point's axis tags do not depend on the seed."""
    runs = []
    for name in models:
        points = {}
        for f in setting["fractions"]:
            points.setdefault((f, BASE_SIZE, base_embedding), set()).add("data")
        for m in setting["sizes"]:
            points.setdefault((1.0, m, base_embedding), set()).add("params")
        for e in setting["embedding_dims"]:
            points.setdefault((1.0, BASE_SIZE, e), set()).add("embedding")
        for (f, m, e), axes in sorted(points.items(), key=lambda kv: -kv[0][0]):  # full data first: its LR choice
            if seed is not None and seed not in setting["seeds"] and not (
                    "data" in axes and seed in setting.get("data_seeds", ())):
                continue
            runs.append({"ranker": name, "axes": sorted(axes), "fraction": f, "size": m, "embedding_dim": e})
    return runs


def train_one(run, lr_mult, seed, data, keep, sizes, batch_size, epochs, data_axis):
    """Builds, trains and scores one run on the train rows `keep` of data = ((train_x,
    train_y), (val_x, val_y)) (bench/scaling_data.py FractionData) -> (record, per-impression
    validation log loss); the record names the data axis."""
    import tf_keras as keras

    from bench.model_flops import TRAIN_FLOPS_FACTOR, flops_per_example, parameter_counts
    from models.rankers import build_ranker
    from models.training.input import in_memory_dataset
    from models.training.run_fn import fit_ranker
    from pipeline import configs

    (train_x, train_y), (val_x, val_y) = data
    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)
    # the click benchmark at the study's own rate: a constant STUDY_LEARNING_RATE at batch 256 (times the
    # run's lr_mult), as every cached run was measured, not the pipeline's decaying LEARNING_RATE (#37)
    base = configs.trainer_config(run["ranker"], watch_head="regression", learning_rate=STUDY_LEARNING_RATE,
                                  learning_rate_decay="none")
    params = sized_params(run["ranker"], base.ranker_params, run["size"])
    scale = float(np.sqrt(batch_size / 256.0)) * lr_mult
    if "learning_rate" in params:
        params["learning_rate"] *= scale
    config = base.replace(ranker_params=params, learning_rate=base.learning_rate * scale, batch_size=batch_size,
                          seed=seed, embedding_dim=run["embedding_dim"])
    model = build_ranker(config, sizes)
    missing = [k for k in model.input_names if k not in train_x]
    if missing:
        raise ValueError(f"bench-scaling: the transformed splits in BENCH_WORK lack the model inputs {missing}: they "
                         f"were built with other LOG_SIGNALS (now {list(configs.LOG_SIGNALS)}); use another BENCH_WORK")
    inputs = lambda x, rows=None: {k: (x[k] if rows is None else x[k][rows]) for k in model.input_names}  # noqa: E731
    train_ds = in_memory_dataset(inputs(train_x, keep), {k: v[keep] for k, v in train_y.items()}, batch_size, True,
                                 seed=seed)
    val_ds = in_memory_dataset(inputs(val_x), val_y, 4096, False)
    load = open("/proc/loadavg").read().split()[:3]
    t0 = time.time()
    history = fit_ranker(model, train_ds, epochs, validation_data=val_ds, verbose=0)
    seconds = time.time() - t0
    val_auc = history.history.get("val_click_prob_auc", [])
    best_epoch = int(np.argmax(val_auc)) + 1 if val_auc else 1
    p = model.predict(inputs(val_x), batch_size=4096, verbose=0)["click_prob"].reshape(-1).astype(np.float64)
    p = np.clip(p, 1e-7, 1 - 1e-7)
    y = val_y["click_prob"].reshape(-1).astype(np.float64)
    per_example = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    counts = parameter_counts(model)
    flops = flops_per_example(model)
    record = dict(run, seed=seed, lr_multiplier=lr_mult, signals=sorted(configs.LOG_SIGNALS), data_axis=data_axis,
                  batch_size=batch_size, max_epochs=epochs,
                  learning_rate=config.learning_rate,
                  embedding_dim=config.embedding_dim, ranker_params=params, train_examples=int(keep.size),
                  **{f"{k}_params": v for k, v in counts.items()}, forward_flops_per_example=flops,
                  epochs_run=len(val_auc) or epochs, best_epoch=best_epoch,
                  examples_seen=int(best_epoch * keep.size),
                  train_flops=TRAIN_FLOPS_FACTOR * flops * best_epoch * keep.size,
                  val_logloss=float(per_example.mean()), val_auc_per_epoch=[round(float(a), 5) for a in val_auc],
                  seconds=round(seconds, 1), loadavg_before=load, loadavg_after=open("/proc/loadavg").read().split()[:3])
    return record, per_example


class RunCache:
    """Runs already trained on the same validation impressions (BENCH_WORK/scaling_runs.json +
    scaling_losses.npz): a later or larger setting trains only the missing ones."""

    def __init__(self, work, labels):
        self.runs_path, self.loss_path = os.path.join(work, "scaling_runs.json"), os.path.join(work, "scaling_losses.npz")
        self.records, self.losses = [], []
        if os.path.exists(self.runs_path) and os.path.exists(self.loss_path):
            saved = np.load(self.loss_path)
            if saved["labels"].shape == labels.shape and np.array_equal(saved["labels"], labels):
                self.records, self.losses = json.load(open(self.runs_path)), list(saved["losses"])
        self.labels = labels

    @staticmethod
    def key(r):  # runs cached before "signals" was recorded had none (LOG_SIGNALS=none, session 19), before
        # "data_axis" the examples axis; a full-data run is the same in both modes (scaling_data.cache_axis)
        return [r["ranker"], r["fraction"], r["size"], r["embedding_dim"], r.get("lr_multiplier", 1.0), r["seed"],
                r.get("batch_size", 256), r.get("max_epochs", 3), r.get("max_iter"), sorted(r.get("signals", [])),
                cache_axis(r)]

    def get(self, run, lr_mult, seed, batch_size, epochs, max_iter=None, signals=(), data_axis="examples"):
        want = self.key(dict(run, lr_multiplier=lr_mult, seed=seed, batch_size=batch_size, max_epochs=epochs,
                             max_iter=max_iter, signals=list(signals), data_axis=data_axis))
        for rec, loss in zip(self.records, self.losses):
            if self.key(rec) == want:
                return dict(rec, axes=run["axes"], cached=True), loss
        return None

    def put(self, rec, loss):
        rec = dict(rec, cached=False)
        self.records.append(rec)
        self.losses.append(loss)
        np.savez_compressed(self.loss_path, losses=np.array(self.losses), labels=self.labels)
        with open(self.runs_path + ".tmp", "w") as f:
            json.dump(self.records, f)
        os.replace(self.runs_path + ".tmp", self.runs_path)
        return rec, loss


def gbdt_runs(data_for, fractions, max_iter, cache, cached_only=False, signals=(), data_axis="examples"):
    """The gradient-boosting reference (bench/gbdt_reference.py: its design matrix and
    classifier, trees chosen on validation AUC, its parameters) on the same data fractions
    as the deep rankers (data_for: scaling_data.FractionData) -> [(record, per-impression
    validation log loss)]."""
    from threadpoolctl import threadpool_limits

    from bench.gbdt_reference import _classifier, design

    out, built = [], None
    for f in sorted(fractions, reverse=True):  # the logs axis: one fraction's splits at a time
        run = {"ranker": "gbdt", "axes": ["data"], "fraction": f, "size": None, "embedding_dim": None}
        hit = cache.get(run, 1.0, 0, None, None, max_iter, signals, data_axis)
        if hit or cached_only:
            out.extend([hit] if hit else [])
            continue
        if data_axis == "logs":  # hold nothing of the last fraction while the next one loads
            built = train_x = train_y = val_x = val_y = train_matrix = val_matrix = keep = model = None
        ((train_x, train_y), (val_x, val_y)), keep, _ = data_for(f)
        if built is None or built[0] is not train_x:  # the examples axis: one design matrix for every f
            train_matrix, _, is_cat = design(train_x)
            is_cat = is_cat & (train_matrix.max(axis=0) < 254)  # as gbdt_reference.main
            built = (train_x, train_matrix, design(val_x)[0], is_cat)
        _, train_matrix, val_matrix, is_cat = built
        params = dict(learning_rate=0.05, max_iter=max_iter, max_leaf_nodes=31, min_samples_leaf=200,
                      l2_regularization=1.0, categorical_features=is_cat, early_stopping=False, random_state=0)
        y_val = val_y["click_prob"].reshape(-1).astype(np.float64)
        load, t0 = open("/proc/loadavg").read().split()[:3], time.time()
        with threadpool_limits(1):  # OpenMP barriers under nice 19 beside other jobs: 205 s for 3,510 rows
            model, trees, _ = _classifier(params, (train_matrix[keep], train_y["click_prob"].reshape(-1)[keep]),
                                          val_matrix, y_val)
        p = np.clip(model.predict_proba(val_matrix)[:, 1], 1e-7, 1 - 1e-7)
        per_example = -(y_val * np.log(p) + (1 - y_val) * np.log(1 - p))
        out.append(cache.put({**run, "seed": 0, "lr_multiplier": 1.0, "batch_size": None, "max_epochs": None,
                              "signals": sorted(signals), "data_axis": data_axis,
                              "train_examples": int(keep.size), "trees": trees, "max_iter": max_iter,
                     "val_logloss": float(per_example.mean()), "seconds": round(time.time() - t0, 1),
                              "loadavg_before": load, "loadavg_after": open("/proc/loadavg").read().split()[:3]},
                             per_example))
    return out


def run_order(models, setting, base_embedding, data_axis):
    """[(seed, run)]: seed-major (a run cut short leaves whole sweeps); on the logs axis
    fraction-major (each fraction's logs are loaded once), seeds in order within a fraction.
    Full data first either way (the learning-rate choice of the first seed)."""
    queue = [(seed, run) for seed in setting["data_seeds"] for run in plan(models, setting, base_embedding, seed)]
    if data_axis == "logs":
        queue.sort(key=lambda sr: -sr[1]["fraction"])  # stable: seed order kept within a fraction
    return queue


def main() -> int:
    from bench.scaling_data import DATA_AXES, FractionData, data_axis_from_env
    from bench.scaling_report import report
    from pipeline import configs

    found = logs_and_days("bench-scaling")
    if found is None:
        return 2
    logs, train_days, eval_days = found
    try:
        setting_name, setting = choose_setting(os.environ)
        data_axis = data_axis_from_env(os.environ)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    quick = setting_name == "quick"
    models = [m.strip() for m in (os.environ.get("BENCH_MODELS") or "din,dcn").split(",") if m.strip()]
    batch_size = int(os.environ.get("BENCH_BATCH_SIZE", "256"))
    epochs = int(os.environ.get("BENCH_EPOCHS", "3"))
    n_boot = int(os.environ.get("BENCH_BOOTSTRAP", "400" if quick else "1000"))
    max_runs = int(os.environ.get("BENCH_MAX_RUNS", "0"))
    work = os.path.abspath(os.environ.get("BENCH_WORK") or "/tmp/bench_scaling")
    out_path = os.environ.get("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "scaling.json")

    t0 = time.time()
    data_for = FractionData(data_axis, logs, work, train_days, eval_days, setting["fractions"])
    info, val_labels = data_for.info, data_for.val_labels
    print(f"[bench-scaling] data ready in {time.time() - t0:.0f}s ({data_axis} axis): {json.dumps(info)}", flush=True)
    command = " ".join([f"{k}={v}" for k, v in sorted(os.environ.items()) if v and (
        k.startswith("BENCH_") or k in ("LOGS", "TRAIN_DAYS", "EVAL_DAYS", "LOG_SIGNALS"))] + ["make bench-scaling"])
    settings = dict(setting, name=setting_name, models=models, batch_size=batch_size, max_epochs=epochs, bootstrap=n_boot)
    cache = RunCache(work, val_labels)
    signals = sorted(configs.LOG_SIGNALS)
    info["signals"] = signals
    cached = lambda run, m, seed: cache.get(run, m, seed, batch_size, epochs, signals=signals,  # noqa: E731
                                            data_axis=data_axis)
    train = lambda run, m, seed: cached(run, m, seed) or cache.put(  # noqa: E731
        *train_one(run, m, seed, *data_for(run["fraction"]), batch_size, epochs, data_axis))
    cached_only = _flag(os.environ, "BENCH_SCALING_CACHED_ONLY")
    if cached_only:  # refit what BENCH_WORK holds, train nothing
        train = cached
    gbdt_iter = int(os.environ.get("BENCH_GBDT_MAX_ITER", "300"))  # full data peaks at 137 trees (gbdt_reference.json)
    gbdt_left = sorted(setting["fractions"], reverse=True) if gbdt_iter else []
    records, losses, lr_chosen, deep = [], [], {}, 0

    def gbdt_above(fraction):  # the GBDT runs at the fractions > `fraction` (logs axis: while still loaded)
        nonlocal gbdt_left
        todo, gbdt_left = [f for f in gbdt_left if f > fraction], [f for f in gbdt_left if f <= fraction]
        if not todo or (max_runs and deep >= max_runs):
            return
        for rec, per_example in gbdt_runs(data_for, todo, gbdt_iter, cache, cached_only, signals, data_axis):
            print(f"[bench-scaling] gbdt {rec['fraction']:.4f}: {rec['val_logloss']:.5f} ({rec['seconds']} s)", flush=True)
            records.append(rec)
            losses.append(per_example)

    for seed, run in run_order(models, setting, configs.EMBEDDING_DIM, data_axis):
        if max_runs and deep >= max_runs:
            break
        if data_axis == "logs":
            gbdt_above(run["fraction"])
        key = (run["ranker"], run["size"], run["embedding_dim"])
        grid = setting["lr_grid"] if key not in lr_chosen and run["fraction"] == 1.0 else []
        if grid and len(grid) > 1:  # learning rate per size on the validation day, first seed
            pairs = [(m, t) for m in grid if (t := train(run, m, seed))]  # cached_only: the cached ones
            if not pairs:
                continue
            grid, trials = [m for m, _ in pairs], [t for _, t in pairs]
            best = int(np.argmin([rec["val_logloss"] for rec, _ in trials]))
            lr_chosen[key] = grid[best]
            rec, per_example = trials[best]
            rec["lr_trials"] = {str(m): round(r["val_logloss"], 5) for (r, _), m in zip(trials, grid)}
        else:
            rec, per_example = train(run, lr_chosen.get(key, 1.0), seed) or (None, None)
        if rec is None:
            continue
        records.append(rec)
        losses.append(per_example)
        deep += 1
        print("[bench-scaling] " + json.dumps({k: rec[k] for k in (
            "ranker", "axes", "fraction", "size", "embedding_dim", "seed", "lr_multiplier", "non_embedding_params",
            "forward_flops_per_example", "val_logloss", "best_epoch", "seconds", "cached", "loadavg_after")}),
            flush=True)
    gbdt_above(-1.0)
    info["fractions"] = data_for.fraction_info  # the logs axis: log rows kept per fraction (+ its train examples
    # when this run loaded it)
    result = report(records, np.array(losses), val_labels, n_boot, out_path, data_axis)
    trained = [r for r in records if not r.get("cached")]
    result = {"command": command, "data_axis": data_axis, "data_axis_meaning": DATA_AXES[data_axis],
              "data": info, "settings": settings,
              "machine": "2 cores shared with other jobs (load average per run)",
              "seconds": round(time.time() - t0, 1), "runs_trained": len(trained), "runs_cached": len(records) - len(trained),
              "trained_seconds": {"deep": round(sum(r["seconds"] for r in trained if r["ranker"] != "gbdt"), 1),
                                  "gbdt": round(sum(r["seconds"] for r in trained if r["ranker"] == "gbdt"), 1)},
              "loadavg_end": open("/proc/loadavg").read().split()[:3], **result, "runs": records}
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(out_path + ".tmp", out_path)
    print(f"[bench-scaling] verdict: {json.dumps(result['verdict'], indent=1)}\n[bench-scaling] wrote {out_path} "
          f"({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
