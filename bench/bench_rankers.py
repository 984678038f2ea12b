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
   pipeline/configs.py): builds it with run_fn.build_ranker, trains with
   run_fn.fit_ranker (up to BENCH_EPOCHS, validation click AUC each epoch, best epoch's
   weights kept), scores the eval days (AUC, GAUC with users used/skipped, logloss;
   models/evaluation/metrics.py), exports with run_fn.export_serving_model, reloads it with
   tf.saved_model.load and times `serving_default` on requests of 100 candidates.

Env: LOGS, TRAIN_DAYS, EVAL_DAYS (yyyymmdd-yyyymmdd or comma lists), BENCH_MODELS,
BENCH_EPOCHS (3), BENCH_BATCH_SIZE (256), BENCH_WORK (scratch dir, default
/tmp/bench_rankers; the Transform output there is reused when its days match),
BENCH_OUT (default bench/results/rankers.json), BENCH_LATENCY_CALLS (200).
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import glob  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from components.log_example_gen.time_split import parse_days  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LOGS = os.path.join(os.path.dirname(ROOT), "shared", "data", "kuairand-pure")
DEFAULT_MODELS = "lr,baseline,xdeepfm,din,bst"
NUM_CANDIDATES = 100


def run_example_gen_and_transform(logs, work, train_days, eval_days):
    """The pipeline's LogExampleGen + ImportSchemaGen + Transform; returns their output dirs."""
    from tfx import v1 as tfx

    import dataclasses

    from pipeline import configs
    from pipeline.artifacts import PipelineStore
    from pipeline.runners import build_local

    stamp = os.path.join(work, "bench_days.json")
    key = {"logs": os.path.abspath(logs), "train_days": train_days, "eval_days": eval_days,
           "splits": "train,validation,eval"}

    def latest():
        store = PipelineStore.for_output_dir(work)
        return store.latest_uri("LogExampleGen", "examples"), store.latest_uri("Transform", "transform_graph")

    if os.path.exists(stamp) and json.load(open(stamp)) == key:
        try:
            examples, transform_graph = latest()
            if examples and transform_graph:
                return examples, transform_graph
        except FileNotFoundError:
            pass
    example_gen_config = dataclasses.replace(configs.LOG_EXAMPLE_GEN, train_days=train_days, eval_days=eval_days)
    full = build_local(logs, work, example_gen_config=example_gen_config)
    keep = [c for c in full.components if c.id in ("LogExampleGen", "ImportSchemaGen", "Transform")]
    for node in keep:  # detach the dropped downstream components (StatisticsGen, Trainer, ...)
        for down in list(node.downstream_nodes):
            if down not in keep:
                node.remove_downstream_node(down)
    partial = tfx.dsl.Pipeline(pipeline_name=full.pipeline_info.pipeline_name,
                               pipeline_root=full.pipeline_info.pipeline_root, components=keep,
                               enable_cache=False, metadata_connection_config=full.metadata_connection_config,
                               beam_pipeline_args=full.beam_pipeline_args)
    tfx.orchestration.LocalDagRunner().run(partial)
    os.makedirs(work, exist_ok=True)
    json.dump(key, open(stamp, "w"))
    return latest()


def load_split(examples_dir, split, tft_output, history_length, batch=4096):
    """Raw examples of a split -> (transformed inputs, labels, dates, raw user ids, serialized)."""
    import tensorflow as tf

    from models import features as F

    files = sorted(glob.glob(os.path.join(examples_dir, f"Split-{split}", "*")))
    needed = F.SERVING_RAW_FEATURES + F.LABELS + ["date", "user_id"]
    spec = {k: v for k, v in F.raw_feature_spec(history_length).items() if k in needed}
    layer = tft_output.transform_features_layer()

    @tf.function
    def transform(serialized):
        raw = tf.io.parse_example(serialized, spec)
        out = layer({k: raw[k] for k in F.SERVING_RAW_FEATURES + F.LABELS})
        return out, raw["date"], raw["user_id"]

    parts, dates, users, serialized = [], [], [], []
    for records in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch):
        out, date, user = transform(records)
        parts.append({k: v.numpy() for k, v in out.items()})
        dates.append(date.numpy())
        users.append(user.numpy())
        if len(serialized) < NUM_CANDIDATES:
            serialized += list(records.numpy()[:NUM_CANDIDATES - len(serialized)])
    data = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    labels = {"click_prob": data.pop(F.LABEL_CLICK).astype(np.float32),
              "watch_time_s": data.pop(F.LABEL_WATCH).astype(np.float32)}
    return data, labels, np.concatenate(dates), np.concatenate(users), serialized


def load_splits(examples_dir, tft_output, history_length):
    """The pipeline's train / validation / eval splits (LogExampleGen: validation = the
    last train day(s)) -> ((train_x, train_y, val_x, val_y), eval split as load_split
    returns it, info)."""
    train_x, train_y, train_dates, _, _ = load_split(examples_dir, "train", tft_output, history_length)
    val_x, val_y, val_dates, _, _ = load_split(examples_dir, "validation", tft_output, history_length)
    eval_split = load_split(examples_dir, "eval", tft_output, history_length)
    eval_y = eval_split[1]
    info = {"train_days": sorted({int(d) for d in train_dates}),
            "validation_days": sorted({int(d) for d in val_dates}),
            "train_examples": int(train_y["click_prob"].size), "validation_examples": int(val_y["click_prob"].size),
            "eval_examples": int(eval_y["click_prob"].size)}
    return (train_x, train_y, val_x, val_y), eval_split, info


class _TrainTimer:
    """Wall time of the training batches only (excludes per-epoch validation)."""

    def __init__(self):
        import tf_keras as keras

        timer = self

        class Callback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                timer.t0 = time.perf_counter()

            def on_test_begin(self, logs=None):
                timer.seconds += time.perf_counter() - timer.t0
                timer.epochs += 1

        self.seconds, self.epochs, self.t0 = 0.0, 0, 0.0
        self.callback = Callback()


def serving_latency_ms(export_dir, serialized, calls, history_length):
    """p50/p99 latency (ms) of serving_default on one request of len(serialized) candidates."""
    import tensorflow as tf

    from models import features as F

    loaded = tf.saved_model.load(export_dir)
    serve = loaded.signatures["serving_default"]
    spec = {k: v for k, v in F.raw_feature_spec(history_length).items() if k in F.SERVING_RAW_FEATURES}
    request = tf.io.parse_example(tf.constant(serialized), spec)
    for _ in range(5):
        serve(**request)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        out = serve(**request)
        _ = out["click_prob"].numpy()
        times.append((time.perf_counter() - t0) * 1000.0)
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def main() -> int:
    import tensorflow as tf
    import tensorflow_transform as tft
    import tf_keras as keras

    from models.evaluation import metrics
    from models.rankers import build_ranker
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from models.training.run_fn import fit_ranker
    from pipeline import configs

    logs = os.environ.get("LOGS") or DEFAULT_LOGS
    if not glob.glob(os.path.join(logs, configs.LOG_FILE_PATTERN)):
        print(f"[bench-rankers] no logs matching {configs.LOG_FILE_PATTERN} in {logs}", file=sys.stderr)
        return 2
    train_days = parse_days(os.environ.get("TRAIN_DAYS") or "20220425-20220502", allow_empty=False)
    eval_days = parse_days(os.environ.get("EVAL_DAYS") or "20220503-20220504", allow_empty=False)
    if len(train_days) < 2:
        raise ValueError("TRAIN_DAYS needs at least two days (the last one validates)")
    models = [m.strip() for m in (os.environ.get("BENCH_MODELS") or DEFAULT_MODELS).split(",") if m.strip()]
    epochs = int(os.environ.get("BENCH_EPOCHS", "3"))
    batch_size = int(os.environ.get("BENCH_BATCH_SIZE", "256"))
    calls = int(os.environ.get("BENCH_LATENCY_CALLS", "200"))
    work = os.path.abspath(os.environ.get("BENCH_WORK") or "/tmp/bench_rankers")
    out_path = os.environ.get("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "rankers.json")
    history_length = configs.HISTORY_LENGTH

    t0 = time.time()
    examples_dir, transform_dir = run_example_gen_and_transform(logs, work, train_days, eval_days)
    tft_output = tft.TFTransformOutput(transform_dir)
    (train_x, train_y, val_x, val_y), eval_split, info = load_splits(examples_dir, tft_output, history_length)
    eval_x, eval_y, _, eval_users, serialized = eval_split
    data_info = dict(info, logs=os.path.abspath(logs), eval_days=eval_days, history_length=history_length)
    print(f"[bench-rankers] data ready in {time.time() - t0:.0f}s: {json.dumps(data_info)}", flush=True)

    sizes = vocab_sizes(tft_output)
    n_train = data_info["train_examples"]
    records = []
    for model_type in models:
        keras.backend.clear_session()
        tf.random.set_seed(0)
        config = configs.trainer_config(model_type, watch_head="regression")  # the click benchmark
        model = build_ranker(config, sizes)
        train_ds = (tf.data.Dataset.from_tensor_slices((train_x, train_y))
                    .shuffle(n_train, seed=0, reshuffle_each_iteration=True)
                    .batch(batch_size).prefetch(2))
        val_ds = tf.data.Dataset.from_tensor_slices((val_x, val_y)).batch(4096)
        timer = _TrainTimer()
        history = fit_ranker(model, train_ds, epochs, validation_data=val_ds, callbacks=[timer.callback])
        val_auc = history.history.get("val_click_prob_auc", [])
        best_epoch = int(np.argmax(val_auc)) + 1 if val_auc else 1
        pred = model.predict(eval_x, batch_size=4096, verbose=0)
        p = np.clip(pred["click_prob"].reshape(-1).astype(np.float64), 1e-7, 1 - 1e-7)
        y = eval_y["click_prob"].reshape(-1)
        g = metrics.gauc(eval_users, y, p)
        export_dir = os.path.join(work, "export", model_type)
        tf.io.gfile.rmtree(export_dir) if tf.io.gfile.exists(export_dir) else None
        export_serving_model(model, tft_output, history_length, export_dir)
        p50, p99 = serving_latency_ms(export_dir, serialized, calls, history_length)
        record = {
            "model": model_type,
            "auc": round(metrics.auc(y, p), 5),
            "gauc": round(g["gauc"], 5),
            "gauc_users_used": g["num_users_used"],
            "gauc_users_skipped": g["num_users_skipped"],
            "gauc_impressions_used": g["num_impressions_used"],
            "logloss": round(metrics.logloss(y, p), 5),
            "watch_mae_s": round(metrics.mae(eval_y["watch_time_s"], pred["watch_time_s"]), 3),
            "train_examples_per_sec": round(n_train * timer.epochs / max(timer.seconds, 1e-9), 1),
            "serve_p50_ms_100": round(p50, 3),
            "serve_p99_ms_100": round(p99, 3),
            "params": int(model.count_params()),
            "epochs_run": timer.epochs,
            "best_epoch": best_epoch,
            "validation_auc_per_epoch": [round(float(a), 5) for a in val_auc],
            "batch_size": batch_size,
            "ranker_params": config.ranker_params,
            **data_info,
        }
        records.append(record)
        print("[bench-rankers] " + json.dumps({k: record[k] for k in (
            "model", "auc", "gauc", "gauc_users_used", "gauc_users_skipped", "logloss",
            "train_examples_per_sec", "serve_p50_ms_100", "serve_p99_ms_100", "params",
            "best_epoch", "validation_auc_per_epoch")}), flush=True)
        os.makedirs(os.path.dirname(out_path), exist_ok=True)
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(records, f, indent=1)
        os.replace(tmp, out_path)  # atomic: a partial run still leaves valid JSON

    print(f"\n{'model':<10}{'auc':>8}{'gauc':>8}{'users':>12}{'logloss':>9}{'ex/s':>9}"
          f"{'p50ms':>8}{'p99ms':>8}{'params':>10}")
    for r in records:
        print(f"{r['model']:<10}{r['auc']:>8.4f}{r['gauc']:>8.4f}"
              f"{r['gauc_users_used']:>6}/{r['gauc_users_used'] + r['gauc_users_skipped']:<5}"
              f"{r['logloss']:>9.4f}{r['train_examples_per_sec']:>9.0f}{r['serve_p50_ms_100']:>8.2f}"
              f"{r['serve_p99_ms_100']:>8.2f}{r['params']:>10}")
    print(f"[bench-rankers] wrote {out_path} ({time.time() - t0:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
