"""Benchmark the Publisher on KuaiRand-Pure-format logs -> bench/results/publish.json.

    make bench-publish                      # or: .venv/bin/python -m bench.bench_publish
    LOGS=/path BENCH_MODELS=din,bst,xdeepfm make bench-publish

1. LogExampleGen + Transform once (bench/bench_rankers.py run_example_gen_and_transform;
   reused when the days match), splits transformed in memory.
2. Per model (BENCH_MODELS, default din): builds it from pipeline/configs/, trains one
   epoch (BENCH_EPOCHS) on the train split with validation on the last train day (best
   epoch kept), reads the per-row optimizer state (models/publishing/row_importance.py),
   and scores the eval days with the trained fp32 model.
3. Rewrites in memory (models/publishing/rewrite.py), each scored on the validation day
   AND the eval days (NE loss %, AUC / XAUC drops, embedding bytes): the sweep of pruned
   fraction per table x criterion {opt_state, l2_norm} (the old allocation), and across
   tables (PUBLISH_ALLOCATION, PUBLISH_CRITERION, PUBLISH_DEFAULT_ROW, int8 on).
4. The Publisher's prune_auto on the validation day only: the largest swept fraction
   <= PUBLISH_PRUNE_FRACTION passing the gates there; at that fraction the variants
   published / pruned only / int8 only / per-table allocation / other default rows.
5. Exports the trained and the published SavedModels with export_serving_model, times
   `serving_default` and `serving_rank` on requests of 100 candidates in a fresh process
   on the server's thread pools (bench/serving_latency.py; the two models called in turn,
   so a load change on a shared machine hits both alike; `published_over_fp32_paired`:
   the median ratio of the back-to-back calls with its bootstrap 95 % interval) and counts the
   ops of the functions `serving_default` runs in each (load-independent:
   `serving_default_ops`).

Env: LOGS, TRAIN_DAYS, EVAL_DAYS, BENCH_MODELS, BENCH_EPOCHS (1), BENCH_MAX_TRAIN_ROWS,
BENCH_MAX_EVAL_ROWS (all; caps the validation day too), BENCH_FRACTIONS
(0,0.25,0.5,0.6,0.7,0.75), BENCH_LATENCY_CALLS
(1000: the paired ratio then resolves ~0.5 %), BENCH_WORK (/tmp/bench_publish), BENCH_OUT (bench/results/publish.json).
"""
import os
import json
import sys
import time

import numpy as np

from bench import bench_rankers as br
from bench.serving_latency import interleaved_latency_ms, paired_ratio

ROOT = br.ROOT
SERVING_OPS = ("ResourceGather", "Cast", "Mul", "AddV2", "StridedSlice", "Identity")  # the lookups' ops


def _rel(path: str) -> str:
    rel = os.path.relpath(path, ROOT)
    return rel if not rel.startswith("../..") else "<tmp>/" + os.path.basename(path)


def _batches(x, y, n=4096):
    size = len(next(iter(x.values())))
    for i in range(0, size, n):
        yield {k: v[i:i + n] for k, v in x.items()}, {k: v[i:i + n] for k, v in y.items()}


def graph_ops(export_dir: str, signature: str = "serving_default") -> dict:
    """{op type: count} of the nodes of every function `signature` reaches in the
    SavedModel (the graph TF Serving runs, before Grappler): a load-independent cost."""
    from collections import Counter

    from tensorflow.core.protobuf import saved_model_pb2

    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(export_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    graph = sm.meta_graphs[0].graph_def
    library = {fn.signature.name: fn for fn in graph.library.function}
    outputs = {t.name.split(":")[0] for t in sm.meta_graphs[0].signature_def[signature].outputs.values()}
    todo = [n.attr["f"].func.name for n in graph.node if n.name in outputs and "f" in n.attr]
    seen, ops = set(), Counter()
    while todo:
        name = todo.pop()
        if name in seen or name not in library:
            continue
        seen.add(name)
        for node in library[name].node_def:
            ops[node.op] += 1
            todo += [v.func.name for v in node.attr.values() if v.func.name]
    return dict(sorted(ops.items()))


def bench_model(name, splits, tft_output, serialized, work, epochs, fractions, latency_calls):
    import tensorflow as tf

    from components.publisher.verification import gate_failures
    from models.evaluation import metrics
    from models.publishing import row_importance, rewrite, sweep
    from models.heads import training_labels
    from models.rankers.registry import build_ranker
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import ead_thresholds_from_transform_output, fit_ranker
    from pipeline import configs

    config = configs.trainer_config(name)
    tf.random.set_seed(config.seed)
    x_tr, y_tr, _ = splits["train"]
    x_va, y_va, _ = splits["validation"]
    x_ev, y_ev, _ = splits["eval"]
    thresholds = ead_thresholds_from_transform_output(tft_output) if "cread" in config.watch_head else None
    model = build_ranker(config, vocab_sizes(tft_output), ead_thresholds=thresholds)
    keys = model.input_names
    # every output with a loss gets its label (CREAD logits and CQE quantiles train on the
    # watch time too): the same {output: label} run_fn's input_fn gives the Trainer
    fit_tr, fit_va = (training_labels(model.output_names, y["click_prob"], y["watch_time_s"]) for y in (y_tr, y_va))
    t0 = time.time()
    fit_ranker(model, tf.data.Dataset.from_tensor_slices(({k: x_tr[k] for k in keys}, fit_tr))
               .shuffle(len(y_tr["click_prob"]), seed=0).batch(config.batch_size), epochs,
               validation_data=tf.data.Dataset.from_tensor_slices(({k: x_va[k] for k in keys}, fit_va)).batch(4096),
               callbacks=decay_callbacks(config, len(y_tr["click_prob"]), epochs), verbose=0)  # as run_fn
    train_s = time.time() - t0
    importance = row_importance.compute_row_importance(model, _batches({k: x_tr[k] for k in keys}, fit_tr))
    sets = {"validation": ({k: x_va[k] for k in keys}, y_va["click_prob"].astype(np.float64),
                           y_va["watch_time_s"].astype(np.float64)),
            "eval": ({k: x_ev[k] for k in keys}, y_ev["click_prob"].astype(np.float64),
                     y_ev["watch_time_s"].astype(np.float64))}
    x, click, watch = sets["eval"]
    base = sweep.predict(model, x)
    trained = {"ne": metrics.ne(click, base["click_prob"]), "auc": metrics.auc(click, base["click_prob"]),
               "xauc": metrics.xauc(watch, base["watch_time_s"])}
    publish = configs.PUBLISHER

    def measure(cfg, fractions, criteria, allocations=()):
        """prune_sweep on the validation day and on the eval days: one row per setting,
        the NE loss / AUC / XAUC drops of each split side by side."""
        got = {split: sweep.prune_sweep(model, importance["tables"], cfg, *data, fractions, criteria, allocations)
               for split, data in sets.items()}
        rows = []
        for va, ev in zip(got["validation"], got["eval"]):
            gates = {k: {"ne_loss": r["ne_loss"], "auc_drop": r["auc_drop"], "xauc_drop": r["xauc_drop"],
                         "max_abs_delta_click_prob": r["max_abs_delta_click_prob"]}
                     for k, r in (("validation", va), ("eval", ev))}
            rows.append({**{k: v for k, v in ev.items() if k not in gates["eval"]}, **gates})
        return rows

    # the sweep: the old per-table allocation (both criteria the issue names) and the
    # configured one (global, by saliency per byte, centroid default rows)
    old = publish.replace(default_row="oov")  # the previous default: per table, pruned ids to the OOV row
    sweep_rows = measure(old, [f for f in fractions if f <= 0.5], ["opt_state", "l2_norm"], ["per_table"])
    sweep_rows += measure(publish, fractions, [publish.criterion], [publish.allocation])
    # the Publisher's prune_auto, on the validation day only: the largest swept fraction
    # <= PUBLISH_PRUNE_FRACTION whose validation figures pass the gates; eval reports it
    passing = [r["fraction"] for r in sweep_rows
               if r["allocation"] == publish.allocation and r["criterion"] == publish.criterion
               and r["fraction"] <= publish.prune_fraction
               and not gate_failures(r["validation"], publish.max_ne_loss, publish.max_auc_drop, publish.max_xauc_drop)]
    chosen = max(passing) if passing else 0.0
    publish = publish.replace(prune_fraction=chosen or None)
    variants = {}
    for label, changes in (("published", {}), ("pruned_only", dict(quantize=False)),
                           ("int8_only", dict(prune_fraction=None)),
                           # ablation at the same fraction, from the previous default up
                           ("per_table_opt_state_oov", dict(allocation="per_table", criterion="opt_state",
                                                            default_row="oov")),
                           ("global_opt_state_oov", dict(criterion="opt_state", default_row="oov")),
                           ("default_oov", dict(default_row="oov")), ("default_zeros", dict(default_row="zeros")),
                           ("default_mean", dict(default_row="mean"))):
        cfg = publish.replace(**changes)
        variants[label] = measure(cfg, [cfg.prune_fraction or 0.0], [cfg.criterion], [cfg.allocation])[0]
    # latency: trained fp32 vs published (pruned + int8), 100 candidates, in-process
    inference_bytes = int(sum(w.numpy().nbytes for w in model.weights))
    trained_dir = os.path.join(work, name, "trained")
    export_serving_model(model, tft_output, config.history_length, trained_dir)
    # rewritten in place after the trained export (a model holding the TFT layer cannot be cloned)
    tables = rewrite.publish_tables(rewrite.drop_optimizer(model), importance["tables"], publish)
    published_dir = os.path.join(work, name, "published")
    export_serving_model(model, tft_output, config.history_length, published_dir)
    latency = {}
    for signature in ("serving_default", "serving_rank"):
        (fp32, pub), (fp32_t, pub_t) = interleaved_latency_ms([trained_dir, published_dir], serialized,
                                                              latency_calls, config.history_length,
                                                              signature=signature, return_times=True)
        latency[signature] = {"fp32_p50": fp32[0], "fp32_p99": fp32[1], "published_p50": pub[0],
                              "published_p99": pub[1], "published_over_fp32_paired": paired_ratio(fp32_t, pub_t)}
    ops = {"fp32": graph_ops(trained_dir), "published": graph_ops(published_dir)}
    return {
        "model": name, "optimizer": importance["optimizer"], "train_seconds": round(train_s, 1),
        "eval_examples": int(click.size), "trained": trained,
        "bytes": {"all_weights_fp32": inference_bytes,
                  "published_variables_dir": rewrite.variables_bytes(published_dir),
                  "trained_variables_dir_with_optimizer": rewrite.variables_bytes(trained_dir),
                  **rewrite.tables_summary(tables)},
        "variants": variants, "sweep": sweep_rows,
        "serving_default_ops": {k: {"total": sum(v.values()), **{o: v.get(o, 0) for o in SERVING_OPS}}
                                for k, v in ops.items()},
        "latency_ms_100_candidates": latency["serving_default"],
        "latency_ms_100_candidates_serving_rank": latency["serving_rank"],
        "chosen_fraction_on_validation": chosen, "publish_config": publish.to_json_dict(),
    }


def main() -> int:
    from pipeline import configs

    logs = os.environ.get("LOGS") or br.DEFAULT_LOGS
    if not os.path.isdir(logs):
        print(f"bench-publish: no logs at {logs} (set LOGS)", file=sys.stderr)
        return 1
    train_days = os.environ.get("TRAIN_DAYS", "20220425-20220502")
    eval_days = os.environ.get("EVAL_DAYS", "20220503-20220504")
    work = os.environ.get("BENCH_WORK", "/tmp/bench_publish")
    models = [m for m in os.environ.get("BENCH_MODELS", "din").split(",") if m]
    epochs = int(os.environ.get("BENCH_EPOCHS", "1"))
    fractions = [float(f) for f in os.environ.get("BENCH_FRACTIONS", "0,0.25,0.5,0.6,0.7,0.75").split(",")]
    calls = int(os.environ.get("BENCH_LATENCY_CALLS", "1000"))
    max_train = int(os.environ.get("BENCH_MAX_TRAIN_ROWS", "0"))
    max_eval = int(os.environ.get("BENCH_MAX_EVAL_ROWS", "0"))
    out = os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench", "results", "publish.json"))
    started, load_before = time.time(), os.getloadavg()
    import tensorflow_transform as tft

    examples, transform_graph = br.run_example_gen_and_transform(logs, work, train_days, eval_days)
    tft_output = tft.TFTransformOutput(transform_graph)
    splits, requests, info = br.load_splits(examples, tft_output, configs.HISTORY_LENGTH)
    serialized = requests["median_history"]  # the eval split's median-history user (ranker_data)
    for split, cap in (("train", max_train), ("validation", max_eval), ("eval", max_eval)):
        if cap:
            x, y, meta = splits[split]
            splits[split] = ({k: v[:cap] for k, v in x.items()}, {k: v[:cap] for k, v in y.items()}, meta)
    results = []
    for name in models:
        results.append(bench_model(name, splits, tft_output, serialized, work, epochs, fractions, calls))
        print(json.dumps({k: results[-1][k] for k in ("model", "trained", "bytes", "variants", "serving_default_ops",
                                                     "latency_ms_100_candidates",
                                                     "latency_ms_100_candidates_serving_rank")}, default=float), flush=True)
    record = {"logs": _rel(logs) if os.path.isabs(logs) else logs, "train_days": train_days,
              "eval_days": eval_days, "work": "<tmp>/" + os.path.basename(work), "info": info,
              "max_train_rows": max_train or None, "max_eval_rows": max_eval or None, "epochs": epochs,
              "load_average_before": [round(x, 2) for x in load_before], "load_average_after": [round(x, 2) for x in os.getloadavg()],
              "note": ("loaded at the start: latencies are rough" if load_before[0] >= 1.5 else "idle at the start"),
              "latency_thread_pools": {k: configs.SERVING.get(k, 0) for k in (
                  "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism")},
              "seconds": round(time.time() - started, 1), "results": results}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(record, f, indent=1, default=float)
    print(f"bench-publish: wrote {_rel(out)} in {record['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
