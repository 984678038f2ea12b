"""Run-to-run noise of the blessing gates' metrics -> bench/results/gate_noise.json.

    make bench-gate-noise                                    # default simulated logs, seeds 0-4
    .venv/bin/python -m bench.bench_gate_noise --seeds 0,1,2,3,4 [--logs DIR] [--out DIR]

The default pipeline (pipeline/configs/: ranker, watch head, data) runs once per
Trainer seed over ONE pipeline root with caching on, so LogExampleGen ... Transform
run once and each seed re-runs the Trainer and the Evaluator (no baseline, and an
unreachable AUC floor, so no candidate is blessed and the Publisher, whose pruning sweep
would double a seed's time, publishes nothing; the metrics are the Evaluator's all the same). For each gated metric of the
overall eval slice (pipeline/configs/evaluation.py EVAL_GATES: click AUC, watch-time
XAUC, watch-time MAE) the record holds the per-seed values, their standard deviation
(ddof = 1) and the largest |difference| between two seeds: the change a candidate
trained the same way on the same data shows against its incumbent. A change threshold
must sit outside that spread, or blessing is a coin flip (issue #34: MAE moved 1.22 s
between two identical runs against a 1.0 s gate).

``--from-output DIR`` (the quick mode: e.g. `outputs` after `make run`): reuses that
run's Transform outputs (found through MLMD), trains each seed with the Trainer's own
``run_fn`` in this process, and scores the eval split with the exact metrics of
models/evaluation/metrics.py (click AUC, watch-time XAUC and MAE: the gated metrics;
TFMA's AUC interpolates over 10k thresholds, the gap is far below the spread), as the
Publisher's verification does. No Evaluator run per seed: about half the time.

On your own logs: ``--logs DIR`` (and MODEL_TYPE / WATCH_HEAD as for `make run`), then
set EVAL_GATES' ``*_max_drop`` / ``mae_max_rise`` above the printed max pairwise
|difference| (README "Blessing gates").
"""
import os

import argparse
import itertools
import json
import statistics
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (output, metric, EVAL_GATES change key) of the gated metrics
GATED = [("click_prob", "auc", "auc_max_drop"), ("watch_time_s", "xauc", "xauc_max_drop"),
         ("watch_time_s", "mean_absolute_error", "mae_max_rise")]
# also recorded (not gated): how much the other headline metrics move
EXTRA = [("click_prob", "gauc"), ("click_prob", "calibration"), ("ranking_score", "ndcg_watch@10"),
         ("quantiles", "mean_coverage_error")]


def spread(values: list) -> dict:
    """std (ddof = 1) and max |a - b| over pairs of `values`."""
    pairs = [abs(a - b) for a, b in itertools.combinations(values, 2)]
    return {"values": values, "mean": statistics.fmean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "max_pair_abs_diff": max(pairs) if pairs else 0.0}


def overall_metrics(evaluation_uri: str) -> dict:
    import tensorflow_model_analysis as tfma

    result = tfma.load_eval_result(evaluation_uri)
    found = {}
    for slice_key, by_output in result.slicing_metrics:
        if slice_key == ():
            for output, by_sub in by_output.items():
                for metric, value in by_sub[""].items():
                    if "doubleValue" in value:
                        found[(output, metric)] = value["doubleValue"]
    return found


def trainer_only_metrics(output_dir: str, seed: int, work: str) -> dict:
    """--from-output: one seed trained by run_fn on `output_dir`'s newest examples through its
    newest transform graph (as the pipeline's Trainer does), scored on its eval split (components/publisher/verification.py)."""
    import glob

    from tfx.components.trainer.fn_args_utils import DataAccessor, FnArgs
    from tfx_bsl.public import tfxio

    from components.publisher import verification
    from models.training.run_fn import run_fn
    from pipeline import configs
    from pipeline.artifacts import PipelineStore, split_files

    store = PipelineStore.for_output_dir(output_dir)
    examples = store.examples_uri()
    graph = store.latest_uri("Transform", "transform_graph")

    def factory(file_pattern, options, schema):
        return tfxio.TFExampleRecord(file_pattern=file_pattern, schema=schema).TensorFlowDataset(options)

    run_dir = os.path.join(work, f"seed{seed}")
    run_fn(FnArgs(train_files=glob.glob(os.path.join(examples, "Split-train", "*")),
                  eval_files=glob.glob(os.path.join(examples, "Split-validation", "*")),
                  transform_output=graph, serving_model_dir=os.path.join(run_dir, "serving"),
                  model_run_dir=os.path.join(run_dir, "run"), train_steps=None, eval_steps=None,
                  custom_config=configs.trainer_config(seed=seed).to_custom_config(),
                  data_accessor=DataAccessor(tf_dataset_factory=factory, record_batch_factory=None,
                                             data_view_decode_fn=None)))
    import tensorflow as tf

    serialized = verification.read_examples(split_files(store.examples_uri(), "eval"), 10**9)
    y = verification.labels(serialized)
    model = tf.saved_model.load(os.path.join(run_dir, "serving"))
    pred = verification.score(model.signatures, serialized)
    m = verification.model_metrics(y, pred)
    return {"click_prob/auc": m["auc"], "watch_time_s/xauc": m["xauc"], "watch_time_s/mean_absolute_error": m["mae"],
            "click_prob/calibration": float(pred["click_prob"].sum() / max(y["is_click"].sum(), 1e-9)),
            "click_prob/mean_prediction": float(pred["click_prob"].mean()),
            "click_prob/mean_label": float(y["is_click"].mean()), "eval_rows": len(serialized)}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--logs", help="KuaiRand-Pure-format folder (default: the default simulated logs)")
    p.add_argument("--out", default=os.path.join(ROOT, "outputs", "gate_noise"))
    p.add_argument("--result", default=os.path.join(ROOT, "bench", "results", "gate_noise.json"))
    p.add_argument("--from-output", help="quick mode: an existing pipeline output (module docstring)")
    args = p.parse_args(argv)
    if args.logs:
        os.environ["LOGS"] = os.path.abspath(args.logs)

    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import configs, runners
    from pipeline.artifacts import PipelineStore

    data_path = runners.ensure_simulated_logs()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    for seed in seeds:
        started = time.time()
        if args.from_output:
            metrics = trainer_only_metrics(args.from_output, seed, args.out)
            runs.append({"seed": seed, "seconds": round(time.time() - started, 1), "metrics": metrics})
            print(json.dumps(runs[-1]), flush=True)
            continue
        pipeline = runners.build_local(data_path, args.out, enable_cache=True, compare_to_blessed=False,
                                       model_report=False, trainer_config=configs.trainer_config(seed=seed),
                                       eval_gates=dict(configs.EVAL_GATES, auc_floor=2.0))  # never blessed
        LocalDagRunner().run(pipeline)
        store = PipelineStore.for_output_dir(args.out)
        metrics = overall_metrics(store.latest_uri("Evaluator", "evaluation"))
        runs.append({"seed": seed, "seconds": round(time.time() - started, 1),
                     "metrics": {f"{o}/{m}": metrics.get((o, m)) for o, m, _ in GATED}
                     | {f"{o}/{m}": metrics.get((o, m)) for o, m in EXTRA}})
        print(json.dumps(runs[-1]), flush=True)
    names = [f"{o}/{m}" for o, m, _ in GATED] + [f"{o}/{m}" for o, m in EXTRA]
    if args.from_output:
        names = [n for n in names if n in runs[0]["metrics"]] + ["click_prob/mean_prediction"]
    record = {
        "command": "make bench-gate-noise  (.venv/bin/python -m bench.bench_gate_noise --seeds "
                   f"{args.seeds}{' --logs ' + os.path.relpath(args.logs) if args.logs else ''}"
                   f"{' --from-output ' + os.path.relpath(args.from_output) if args.from_output else ''})",
        "mode": "trainer only (run_fn + exact metrics)" if args.from_output else "pipeline (Trainer + TFMA Evaluator)",
        "logs": os.path.relpath(data_path, ROOT) if not args.logs else os.path.relpath(args.logs),
        "model_type": configs.TRAINER.model_type, "watch_head": configs.TRAINER.watch_head,
        "seeds": seeds, "loadavg": open("/proc/loadavg").read().split()[:3],
        "gates_at_measurement": dict(configs.EVAL_GATES),
        "gate_of": {f"{o}/{m}": key for o, m, key in GATED},
        "spread": {n: spread([r["metrics"][n] for r in runs if r["metrics"].get(n) is not None]) for n in names},
        "runs": runs,
    }
    os.makedirs(os.path.dirname(args.result), exist_ok=True)
    with open(args.result, "w") as f:
        json.dump(record, f, indent=1)
    for n in names:
        s = record["spread"][n]
        print(f"{n:<36} std {s['std']:.4f}  max |pair diff| {s['max_pair_abs_diff']:.4f}")
    print(f"wrote {os.path.relpath(args.result)}")


if __name__ == "__main__":
    main()
