"""Benchmark the rankers on KuaiRand-Pure-format logs -> bench/results/rankers.json.

    make bench-rankers                     # or: .venv/bin/python -m bench.bench_rankers
    LOGS=/path TRAIN_DAYS=20220425-20220502 EVAL_DAYS=20220503-20220504 make bench-rankers

1. Runs the pipeline's own LogExampleGen -> ImportSchemaGen -> Transform once
   (pipeline.runners.build_local(...) with the train/eval days; the other components dropped).
   Transform analyses the train split.
2. Applies the transform graph to the raw examples (so each row keeps its date and
   raw user id) of LogExampleGen's splits: train = the train days but the last,
   validation = the last train day (VALIDATION_LAST_N_TRAIN_DAYS), eval = the eval
   days. Eval days are never used for model selection.
3. Per model (BENCH_MODELS, default lr,baseline,xdeepfm,din,bst; hyperparameters from
   pipeline/configs/): builds it with run_fn.build_ranker, trains with
   run_fn.fit_ranker (up to BENCH_EPOCHS, validation click AUC each epoch, best epoch's
   weights kept), scores the validation and the eval days (AUC, per-user GAUC with users
   used/skipped, request GAUC, frozen-state GAUC, logloss; models/evaluation/metrics.py and
   request_metrics.py), exports with run_fn.export_serving_model and times `serving_default` on
   requests of 100 candidates in a fresh process on the server's thread pools
   (bench/serving_latency.py): `serve_p50_ms_100` / `serve_p99_ms_100` for the eval split's
   median-history user, `*_full_history` for a user with all L items (ranker_data
   `latency_requests`: the rankers skip history padding, so a longer history costs more).
   Every (model, batch size) runs once per seed; `summary` gives mean ± std over seeds.
   Training reads the in-memory split as the Trainer does with input_in_memory
   (models/training/input.py in_memory_dataset); `train_examples_per_sec` is the steady
   state (first train-function calls of each epoch excluded, models/training/train_timer.py),
   `train_epoch_examples_per_sec` whole epochs.

Click calibration (#37, models/heads/calibration.py): the scores above are the model as
trained (its calibration layer the identity); with BENCH_CALIBRATE=1 (default: the
TrainerConfig's calibrate_click) the Platt (a, b) is then fitted on the validation split, as
run_fn does, and `eval_calibrated` scores the eval days again with it (the same trained
weights: a paired comparison; `calibration_fit` holds a, b and the validation figures).

Request GAUC groups a user's impressions within BENCH_REQUEST_WINDOW_S (60) seconds;
frozen-state GAUC re-scores every impression with the user state (history and the
user-side signals, frozen in the raw features: bench/ranker_data.py freeze_user_state)
of the user's first impression of the split (request_metrics.frozen_state_rows). The
`running_click_rate` record scores each impression by its history's click rate alone:
the drift artefact of per-user GAUC, measured without a model.

Variants: "din_dual" (DIN with dual_attention=True; with hist_tab in LOG_SIGNALS it reads
LogExampleGen's hist_tab and is timed like the others; without, the history scenes are
rebuilt from the raw logs here (add_history_scenes, checked against the examples) and
there is no serving latency: the exported signature has no such input), "din_scaled" (scaled target attention),
"din_user_dropout" / "din_user_l2" (DIN's user-side regularisation, models/rankers/din.py).

Env: LOGS, TRAIN_DAYS, EVAL_DAYS (yyyymmdd-yyyymmdd or comma lists), BENCH_MODELS,
BENCH_EPOCHS (3), BENCH_BATCH_SIZES (256,1024; the learning rate scales by
sqrt(batch / the pipeline's BATCH_SIZE), configs.learning_rate_at; with LEARNING_RATE_DECAY
"linear", the default, it decays over the run as in run_fn), BENCH_SEEDS (0,1,2), BENCH_MAX_TRAIN_ROWS (all; a subset for
iteration), BENCH_STEPS_PER_EXECUTION and BENCH_JIT_COMPILE (default: the TrainerConfig's),
BENCH_REQUEST_WINDOW_S (60), BENCH_RANKER_PARAMS (a JSON object merged into every model's
ranker params, after its variant's: one option swept without a new variant), BENCH_WORK
(scratch dir, default /tmp/bench_rankers; the Transform output there is reused when its
days match), BENCH_OUT (default bench/results/rankers.json), BENCH_LATENCY_CALLS (200; 0 = no export
and no latency, e.g. for a LOG_SIGNALS subset scored with a Transform output of more signals).

Signal families (#37): LOG_SIGNALS may name them (models/features.py: a family, "families");
LogExampleGen then writes all of them. To score arms with fewer signals on the same examples
and Transform, run the arm with the most signals first and the others with
LOG_SIGNAL_FAMILIES=all (the work dir's key includes the families) and BENCH_LATENCY_CALLS=0
(the transform graph reads the family inputs, which their serving signature lacks). The data
record names the run's LOG_SIGNALS (`log_signals`) and `signal_families`.
"""
import os
import glob
import json
import sys
import time

import numpy as np

from bench.ranker_data import (add_history_scenes, load_splits, run_example_gen_and_transform,
                               serve_latency_record)
from components.log_example_gen.time_split import parse_days

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LOGS = os.path.join(os.path.dirname(ROOT), "shared", "data", "kuairand-pure")
DEFAULT_MODELS = "lr,baseline,xdeepfm,din,bst,dcn,din_dual"
VARIANTS = {"din_dual": ("din", {"dual_attention": True}),
            "din_scaled": ("din", {"attention_scoring": "scaled_dot"}),
            "din_user_dropout": ("din", {"user_field_dropout": 0.3}),
            "din_user_l2": ("din", {"user_embedding_l2": 0.01}),
            # #38: the Titans memory as a gate (models/rankers/din.py long_memory)
            "din_titans": ("din", {"long_memory": "titans"}),  # one chunk of L = 50, read not normalised
            "din_titans_c16": ("din", {"long_memory": "titans", "long_memory_params": {"chunk_size": 16}}),
            "din_titans_norm_c16": ("din", {"long_memory": "titans",
                                            "long_memory_params": {"chunk_size": 16, "output_norm": True}}),
            "xdeepfm_cin64": ("xdeepfm", {"cin_layer_sizes": [64, 64]}),
            "xdeepfm_cin16": ("xdeepfm", {"cin_layer_sizes": [16, 16]}),
            "xdeepfm_cin32x1": ("xdeepfm", {"cin_layer_sizes": [32]}),
            "xdeepfm_full": ("xdeepfm", {"cin_rank": None}),
            "bst_ffn64": ("bst", {"ffn_units": 64}),
            "bst_ffn32": ("bst", {"ffn_units": 32}),
            **{f"xdeepfm_r{r}": ("xdeepfm", {"cin_rank": r}) for r in (1, 2, 4, 8)}}


def click_rate_drift(splits, window_s):
    """The history click rate alone as a score, per split: AUC, per-user, request and
    frozen-state GAUC (the per-user GAUC artefact of a running per-user statistic)."""
    from models.evaluation import metrics
    from models.evaluation import request_metrics as R

    out = {}
    for split in ("validation", "eval"):
        x, y, meta = splits[split]
        m = x["hist_mask_xf"]
        rate = (x["hist_is_click_xf"] * m).sum(1) / np.maximum(m.sum(1), 1) + 1e-9 * (m.sum(1) == 0)
        yy = y["click_prob"].reshape(-1)
        frozen = rate[R.frozen_state_rows(meta["user"], meta["time_ms"])]
        out[split] = {"auc": round(metrics.auc(yy, rate), 5),
                      "gauc": round(metrics.gauc(meta["user"], yy, rate)["gauc"], 5),
                      "request_gauc": round(R.request_gauc(meta["user"], meta["time_ms"], yy, rate,
                                                           window_s)["request_gauc"], 5),
                      "frozen_gauc": round(metrics.gauc(meta["user"], yy, frozen)["gauc"], 5)}
    return out


def ranking_metrics(model, x, y, meta, window_s):
    """AUC, per-user GAUC (users used/skipped), request GAUC, frozen-state GAUC, logloss."""
    from models.evaluation import metrics
    from models.evaluation import request_metrics as R

    inputs = {k: x[k] for k in model.input_names}
    pred = model.predict(inputs, batch_size=4096, verbose=0)
    p = np.clip(pred["click_prob"].reshape(-1).astype(np.float64), 1e-7, 1 - 1e-7)
    frozen_x = {k: meta["x_frozen"][k] for k in model.input_names}  # bench/ranker_data.freeze_user_state
    p_frozen = model.predict(frozen_x, batch_size=4096, verbose=0)["click_prob"].reshape(-1)
    yy = y["click_prob"].reshape(-1)
    g = metrics.gauc(meta["user"], yy, p)
    r = R.request_gauc(meta["user"], meta["time_ms"], yy, p, window_s)
    return {"auc": round(metrics.auc(yy, p), 5), "gauc": round(g["gauc"], 5),
            "gauc_users_used": g["num_users_used"], "gauc_users_skipped": g["num_users_skipped"],
            "request_gauc": round(r["request_gauc"], 5), "requests_used": r["num_requests_used"],
            "frozen_gauc": round(metrics.gauc(meta["user"], yy, p_frozen)["gauc"], 5),
            "logloss": round(metrics.logloss(yy, p), 5),
            "calibration": round(float(p.mean() / yy.mean()), 4),
            "watch_mae_s": round(metrics.mae(y["watch_time_s"], pred["watch_time_s"]), 3)}


def summarize(records):
    """mean ± std over seeds per (model, batch size)."""
    out = []
    keys = ("auc", "gauc", "request_gauc", "frozen_gauc", "logloss", "calibration", "train_examples_per_sec")
    for name, batch in dict.fromkeys((r["model"], r["batch_size"]) for r in records):
        runs = [r for r in records if r["model"] == name and r["batch_size"] == batch]
        row = {"model": name, "batch_size": batch, "seeds": [r["seed"] for r in runs]}
        for split in ("validation", "eval", "eval_calibrated"):
            if not all(split in r for r in runs):
                continue
            for k in keys:
                v = np.array([r[split][k] if k in r[split] else r[k] for r in runs], np.float64)
                row[f"{split}_{k}"] = [round(float(v.mean()), 5), round(float(v.std(ddof=1)) if v.size > 1 else 0.0, 5)]
        for k in ("serve_p99_ms_100", "serve_p99_ms_100_full_history", "serve_rank_p99_ms_100",
                  "serve_rank_p99_ms_100_full_history"):
            row[k] = runs[0].get(k)
        out.append(row)
    return out


def logs_and_days(bench: str):
    """(LOGS or the shared KuaiRand-Pure copy, TRAIN_DAYS, EVAL_DAYS) of a real-log bench;
    None (after saying why) when the folder holds no logs."""
    from pipeline import configs

    logs = os.environ.get("LOGS") or DEFAULT_LOGS
    if not glob.glob(os.path.join(logs, configs.LOG_FILE_PATTERN)):
        print(f"[{bench}] no logs matching {configs.LOG_FILE_PATTERN} in {logs}", file=sys.stderr)
        return None
    train_days = parse_days(os.environ.get("TRAIN_DAYS") or "20220425-20220502", allow_empty=False)
    eval_days = parse_days(os.environ.get("EVAL_DAYS") or "20220503-20220504", allow_empty=False)
    if len(train_days) < 2:
        raise ValueError("TRAIN_DAYS needs at least two days (the last one validates)")
    return logs, train_days, eval_days


def main() -> int:
    import tensorflow as tf
    import tensorflow_transform as tft
    import tf_keras as keras

    from models import features as F
    from models.heads import calibration
    from models.rankers import build_ranker
    from models.training.export import export_serving_model
    from models.training.input import in_memory_dataset, vocab_sizes
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import fit_ranker
    from models.training.train_timer import TrainTimer
    from pipeline import configs

    found = logs_and_days("bench-rankers")
    if found is None:
        return 2
    logs, train_days, eval_days = found
    env_list = lambda name, default: [v.strip() for v in (os.environ.get(name) or default).split(",") if v.strip()]  # noqa: E731
    models = env_list("BENCH_MODELS", DEFAULT_MODELS)
    batch_sizes = [int(b) for b in env_list("BENCH_BATCH_SIZES", "256,1024")]
    seeds = [int(v) for v in env_list("BENCH_SEEDS", "0,1,2")]
    epochs = int(os.environ.get("BENCH_EPOCHS", "3"))
    max_rows = int(os.environ.get("BENCH_MAX_TRAIN_ROWS", "0"))
    steps_per_execution = int(os.environ.get("BENCH_STEPS_PER_EXECUTION", "0"))  # 0: the config's
    jit_env = os.environ.get("BENCH_JIT_COMPILE", "")  # "": the config's
    jit_compile = None if jit_env == "" else jit_env.lower() in ("1", "true")
    window_s = float(os.environ.get("BENCH_REQUEST_WINDOW_S", "60"))
    calls = int(os.environ.get("BENCH_LATENCY_CALLS", "200"))
    # JSON merged into every model's ranker params (after its variant's): a quick sweep of one option
    override = json.loads(os.environ.get("BENCH_RANKER_PARAMS") or "{}")
    if not isinstance(override, dict):
        raise ValueError(f"BENCH_RANKER_PARAMS must be a JSON object, got {override!r}")
    calibrate = os.environ.get("BENCH_CALIBRATE", "1" if configs.TRAINER.calibrate_click else "0") == "1"
    work = os.path.abspath(os.environ.get("BENCH_WORK") or "/tmp/bench_rankers")
    out_path = os.environ.get("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "rankers.json")
    history_length = configs.HISTORY_LENGTH

    t0 = time.time()
    examples_dir, transform_dir = run_example_gen_and_transform(logs, work, train_days, eval_days)
    tft_output = tft.TFTransformOutput(transform_dir)
    splits, requests, info = load_splits(examples_dir, tft_output, history_length)
    if any(VARIANTS.get(m, (m, {}))[1].get("dual_attention") for m in models) and "hist_tab_xf" not in splits["train"][0]:
        # LOG_SIGNALS without hist_tab: the history scenes rebuilt from the raw logs
        info["hist_tab_match_rate"] = round(add_history_scenes(logs, splits, tft_output, history_length), 5)
    train_x, train_y, _ = splits["train"]
    if max_rows and max_rows < info["train_examples"]:
        keep = np.random.default_rng(0).permutation(info["train_examples"])[:max_rows]
        train_x, train_y = ({k: v[keep] for k, v in d.items()} for d in (train_x, train_y))
    n_train = int(train_y["click_prob"].size)
    data_info = dict(info, logs=os.path.relpath(os.path.abspath(logs), ROOT), eval_days=eval_days, history_length=history_length, train_rows_used=n_train,
                     request_window_s=window_s, log_signals=list(F.ENABLED_SIGNALS),
                     signal_families=list(configs.LOG_EXAMPLE_GEN.signal_families))
    drift = click_rate_drift(splits, window_s)
    print(f"[bench-rankers] data ready in {time.time() - t0:.0f}s: {json.dumps(data_info)}\n"
          f"[bench-rankers] history click rate as a score: {json.dumps(drift)}", flush=True)

    sizes = vocab_sizes(tft_output)
    records = []
    for name in models:
        model_type, extra = VARIANTS.get(name, (name, {}))
        for batch_size in batch_sizes:
            for seed in seeds:
                keras.backend.clear_session()
                tf.random.set_seed(seed)
                base = configs.trainer_config(model_type, watch_head="regression")  # the click benchmark
                params = dict(base.ranker_params, **extra, **override)
                scale = configs.learning_rate_at(batch_size) / configs.LEARNING_RATE  # sqrt(B / BATCH_SIZE)
                if "learning_rate" in params:
                    params["learning_rate"] *= scale
                config = base.replace(ranker_params=params, learning_rate=base.learning_rate * scale,
                                      batch_size=batch_size, seed=seed)
                loadavg_before = [round(v, 2) for v in os.getloadavg()]
                if steps_per_execution:
                    config = config.replace(steps_per_execution=steps_per_execution)
                if jit_compile is not None:
                    config = config.replace(jit_compile=jit_compile)
                model = build_ranker(config, sizes)
                inputs = lambda x: {k: x[k] for k in model.input_names}  # noqa: E731
                # the Trainer's in-memory input (TrainerConfig.input_in_memory): shuffled indices, one gather per batch
                train_ds = in_memory_dataset(inputs(train_x), train_y, batch_size, True, seed=seed)
                val_x, val_y, _ = splits["validation"]
                val_ds = in_memory_dataset(inputs(val_x), val_y, 4096, False)
                timer = TrainTimer(batch_size)
                callbacks = [timer] + decay_callbacks(config, n_train, epochs)  # as run_fn
                history = fit_ranker(model, train_ds, epochs, validation_data=val_ds, callbacks=callbacks,
                                     verbose=0)
                val_auc = history.history.get("val_click_prob_auc", [])
                record = {"model": name, "seed": seed, "batch_size": batch_size,
                          "learning_rate": config.learning_rate, "learning_rate_decay": config.learning_rate_decay,
                          "validation": ranking_metrics(model, *splits["validation"], window_s),
                          "eval": ranking_metrics(model, *splits["eval"], window_s),
                          "train_examples_per_sec": round(timer.steady_examples_per_sec(), 1),
                          "train_epoch_examples_per_sec": round(n_train * timer.epochs / max(timer.seconds, 1e-9), 1),
                          "params": int(model.count_params()), "epochs_run": timer.epochs,
                          "best_epoch": int(np.argmax(val_auc)) + 1 if val_auc else 1,
                          "validation_auc_per_epoch": [round(float(a), 5) for a in val_auc],
                          "ranker_params": config.ranker_params, "steps_per_execution": config.steps_per_execution,
                          "jit_compile": config.jit_compile, "loadavg_before": loadavg_before,
                          "loadavg_after": [round(v, 2) for v in os.getloadavg()]}
                if calibrate:  # Platt (a, b) on the validation split, then the eval days again
                    record["calibration_fit"] = calibration.fit_model(model, val_ds)
                    record["eval_calibrated"] = ranking_metrics(model, *splits["eval"], window_s)
                # a model reading hist_tab_xf serves only if hist_tab is a serving input (LOG_SIGNALS)
                if calls and seed == seeds[0] and ("hist_tab_xf" not in model.input_names or F.HISTORY_TAB_ENABLED):
                    export_dir = os.path.join(work, "export", name)
                    tf.io.gfile.rmtree(export_dir) if tf.io.gfile.exists(export_dir) else None
                    export_serving_model(model, tft_output, history_length, export_dir)
                    record.update(serve_latency_record(export_dir, requests, calls, history_length))
                records.append(record)
                print("[bench-rankers] " + json.dumps({k: record[k] for k in (
                    "model", "seed", "batch_size", "validation", "eval", "train_examples_per_sec",
                    "best_epoch", "loadavg_after")}), flush=True)
                os.makedirs(os.path.dirname(out_path), exist_ok=True)
                tmp = out_path + ".tmp"
                with open(tmp, "w") as f:
                    json.dump({"data": data_info, "history_click_rate_as_score": drift,
                               "machine": "2 cores shared with other jobs (load average per run)",
                               "summary": summarize(records), "runs": records}, f, indent=1)
                os.replace(tmp, out_path)  # atomic: a partial run still leaves valid JSON

    print(f"\n{'model':<11}{'batch':>6}{'val auc':>16}{'val gauc':>16}{'val rgauc':>16}{'val frozen':>16}"
          f"{'eval auc':>16}{'eval rgauc':>16}{'ex/s':>14}")
    fmt = lambda v: f"{v[0]:.4f}±{v[1]:.4f}".rjust(16)  # noqa: E731
    for r in summarize(records):
        print(f"{r['model']:<11}{r['batch_size']:>6}" + "".join(fmt(r[k]) for k in (
            "validation_auc", "validation_gauc", "validation_request_gauc", "validation_frozen_gauc",
            "eval_auc", "eval_request_gauc")) + f"{r['eval_train_examples_per_sec'][0]:>14.0f}")
    print(f"[bench-rankers] wrote {out_path} ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
