"""Every ranker x watch head through the real pipeline -> bench/results/pipeline_matrix*.json.

    make bench-pipeline                                   # simulated logs
    make bench-pipeline LOGS=../shared/data/kuairand-pure # real logs
    .venv/bin/python -m bench.bench_pipeline_matrix --logs DIR --rankers din,bst --heads cqe

For each (ranker, head) the whole TFX pipeline runs with LocalDagRunner over ONE
pipeline root and MLMD store with caching on, so LogExampleGen ... Transform run once
and each configuration re-runs Trainer -> Evaluator -> Pusher -> ModelReport only.
The Evaluator gates on the absolute bounds alone (create_pipeline(compare_to_blessed=
False)): the latest blessed model is another configuration, not a predecessor.

Per configuration the record holds: blessed, pushed (a new version in the serving
dir), the overall-slice TFMA metrics of the Evaluator (click AUC, GAUC with users
used, NE, nDCG, ECS, XAUC, XGAUC, MAE, RMSE, quantile coverage error, ...), the
signature outputs a REST `predict` on the pushed version returned (the embedded
TF-Serving-compatible server; with CQE also the `serving_dqc` signature with a per-
request k), the ModelReport path, and the run's wall time. Train/eval days follow
pipeline/configs/ (the last EVAL_LAST_N_DAYS days are eval), as in `make run`.
"""
import os
import argparse
import glob
import json
import math
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RANKERS = "xdeepfm,din,bst"
HEADS = "regression,cread,cqe,cread+cqe"
# (output, metric) pairs of the overall slice shown in the table (models/evaluation/tfma names)
TABLE_METRICS = [
    ("click_prob", "auc"), ("click_prob", "gauc"), ("click_prob", "gauc_num_users_used"),
    ("click_prob", "normalized_entropy"), ("ranking_score", "ndcg_watch@10"), ("watch_time_s", "xauc"),
    ("watch_time_s", "mean_absolute_error"), ("watch_time_s", "rmse"), ("quantiles", "mean_coverage_error"),
    ("quantiles", "coverage_error_deciles"),
]


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", default=os.environ.get("LOGS") or None,
                   help="KuaiRand-Pure-format folder (default: simulated logs, pipeline/configs/ SIM_*)")
    p.add_argument("--rankers", default=os.environ.get("BENCH_RANKERS", RANKERS))
    p.add_argument("--heads", default=os.environ.get("BENCH_HEADS", HEADS))
    p.add_argument("--work", default=None, help="output root (default /tmp/bench_pipeline_<sim|real>)")
    p.add_argument("--results", default=None,
                   help="JSON out (default bench/results/pipeline_matrix_<sim|real>.json)")
    return p.parse_args(argv)


def _finite(x):
    return x if isinstance(x, (int, float)) and math.isfinite(x) else None


def rest_check(serving_dir: str, model_name: str, examples_uri: str, n: int = 8) -> dict:
    """Serves the newest pushed version and predicts n eval rows through REST."""
    from models import features as F
    from pipeline.artifacts import held_back_examples
    from serving.client import examples_to_instances, predict
    from serving.http_server import start_server

    server, port = start_server(serving_dir, model_name, port=0)
    url = f"http://127.0.0.1:{port}"
    try:
        instances = examples_to_instances(held_back_examples(examples_uri, n), F.SERVING_RAW_FEATURES)
        preds = predict(url, model_name, instances)
        out = {"outputs": sorted(preds[0]), "first": {k: v for k, v in preds[0].items() if k != "quantiles"}}
        if "quantiles" in preds[0]:
            q = preds[0]["quantiles"]
            out["num_quantiles"] = len(q)
            out["quantiles_monotone"] = all(b >= a for p in preds for a, b in zip(p["quantiles"], p["quantiles"][1:]))
            dqc = predict(url, model_name, [dict(i, dqc_k=1.0) for i in instances], signature_name="serving_dqc")
            # k = 1 makes DQC the low quantile, i.e. CSE
            out["dqc_k1_equals_cse"] = all(abs(d["dqc"][0] - p["cse"][0]) < 1e-4 for d, p in zip(dqc, preds))
        out["click_prob_in_range"] = all(0.0 <= p["click_prob"][0] <= 1.0 for p in preds)
        out["watch_time_finite"] = all(math.isfinite(p["watch_time_s"][0]) and p["watch_time_s"][0] >= 0
                                       for p in preds)
        return out
    finally:
        server.stop()


def run_one(logs: str, work: str, model_type: str, watch_head: str) -> dict:
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from components.model_report import inputs
    from pipeline import configs
    from pipeline.artifacts import PipelineStore
    from pipeline.runners import build_local

    paths = configs.output_paths(work)
    trainer_config = configs.trainer_config(model_type, watch_head=watch_head)
    before = set(glob.glob(os.path.join(paths["serving_model_dir"], "*")))
    t0 = time.time()
    LocalDagRunner().run(build_local(
        logs, work, enable_cache=True, compare_to_blessed=False, trainer_config=trainer_config))
    seconds = time.time() - t0
    store = PipelineStore.for_output_dir(work)
    evaluation = inputs.load_evaluation(store.latest_uri("Evaluator", "evaluation"))
    blessed = bool(store.blessed())
    pushed = sorted(set(glob.glob(os.path.join(paths["serving_model_dir"], "*"))) - before)
    overall = evaluation.overall().metrics
    with open(os.path.join(store.latest_uri("Trainer", "model_run"), "history.json")) as f:
        history = json.load(f)
    record = {
        "model_type": model_type, "watch_head": watch_head, "blessed": blessed, "pushed": bool(pushed),
        "seconds": round(seconds, 1), "params": history["params"],
        "metrics": {out: {m: _finite(v) for m, v in by.items()} for out, by in overall.items()},
        "failed_gates": [f"{g.output}/{g.metric} {g.kind}: {g.message}" for g in evaluation.gates if not g.passed],
        "report": store.report_index() or "",
    }
    if pushed:
        record["rest"] = rest_check(paths["serving_model_dir"], configs.MODEL_NAME, store.examples_uri())
    return record


def coverage_error_deciles(quantile_metrics: dict):
    """mean |c_i - tau_i| over the grid levels nearest 0.1, ..., 0.9 (the watch-time
    benchmark's definition) from TFMA's per-level `quantile_coverage@<tau>` metrics;
    TFMA's `mean_coverage_error` averages all N levels, the extreme ones included."""
    import numpy as np

    levels = {float(k.split("@")[1]): v for k, v in quantile_metrics.items()
              if k.startswith("quantile_coverage@") and v is not None}
    if not levels:
        return None
    taus = np.array(sorted(levels))
    nearest = [float(taus[np.argmin(np.abs(taus - d))]) for d in np.arange(1, 10) / 10.0]
    return float(np.mean([abs(levels[t] - t) for t in nearest]))


def markdown_table(records) -> str:
    head = "| ranker | head | blessed | " + " | ".join(f"{m}" for _, m in TABLE_METRICS) + " | s |"
    lines = [head, "|" + "---|" * (len(TABLE_METRICS) + 4)]
    for r in records:
        cells = []
        for out, m in TABLE_METRICS:
            v = r["metrics"].get(out, {}).get(m)
            if m == "coverage_error_deciles":
                v = coverage_error_deciles(r["metrics"].get(out, {}))
            cells.append("" if v is None else (f"{v:.0f}" if m.endswith("users_used") else f"{v:.4f}"))
        lines.append(f"| {r['model_type']} | {r['watch_head']} | {'yes' if r['blessed'] else 'NO'} | "
                     + " | ".join(cells) + f" | {r['seconds']:.0f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    args = _parse_args(argv if argv is not None else sys.argv[1:])
    kind = "real" if args.logs else "sim"
    work = os.path.abspath(args.work or f"/tmp/bench_pipeline_{kind}")
    results = args.results or os.path.join(ROOT, "bench", "results", f"pipeline_matrix_{kind}.json")
    from absl import logging

    from pipeline import configs

    logging.set_verbosity(logging.WARNING)
    logs = os.path.abspath(args.logs) if args.logs else os.path.join(work, "logs")
    if not args.logs and not os.path.isdir(logs):
        from data.simulator import simulate

        simulate(logs, num_users=configs.SIM_NUM_USERS, num_videos=configs.SIM_NUM_VIDEOS,
                 num_days=configs.SIM_NUM_DAYS, impressions_per_user_day=configs.SIM_IMPRESSIONS_PER_USER_DAY,
                 seed=configs.SIM_SEED)
    records = []
    for model_type in args.rankers.split(","):
        for head in args.heads.split(","):
            print(f"[bench-pipeline] {model_type} x {head} ...", flush=True)
            try:
                record = run_one(logs, work, model_type, head)
            except Exception as e:  # one failing configuration is reported, the others still run
                record = {"model_type": model_type, "watch_head": head, "blessed": False, "pushed": False,
                          "seconds": 0.0, "metrics": {}, "error": f"{type(e).__name__}: {e}"[:2000]}
            records.append(record)
            print(f"[bench-pipeline] {json.dumps({k: v for k, v in record.items() if k != 'metrics'})}", flush=True)
            os.makedirs(os.path.dirname(results), exist_ok=True)
            with open(results, "w") as f:  # written after every configuration: a long run keeps what it has
                json.dump({"logs": logs, "work": work, "eval_last_n_days": configs.EVAL_LAST_N_DAYS,
                           "records": records}, f, indent=1)
    print(markdown_table(records))
    print(f"[bench-pipeline] wrote {results}")
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
