"""Re-time the rankers a bench-rankers run exported, without retraining them.

    BENCH_WORK=<the bench-rankers work dir> BENCH_MODELS=din,bst,xdeepfm,dcn \
        BENCH_LATENCY_CALLS=300 .venv/bin/python -m bench.rankers_latency

For each `<work>/export/<model>` SavedModel: `serving_default` and `serving_rank` on the bench's requests
(100 eval rows of the work dir's latest LogExampleGen output, one user's side on every
row: the median-history user and a full-history one, bench/ranker_data.py
`latency_requests`, bench/serving_latency.py), in a fresh process on the server's thread
pools, the same figures bench-rankers records as `serve_p50_ms_100` / `serve_p99_ms_100` (and
`serve_rank_*` for `serving_rank`, the user side sent once). Writes
BENCH_OUT (default bench/results/rankers_latency.json).
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.ranker_data import (NUM_CANDIDATES, eval_latency_requests, request_history_items,  # noqa: E402
                               serve_latency_record)


def main() -> int:
    from pipeline import configs
    from pipeline.artifacts import PipelineStore

    work = os.environ.get("BENCH_WORK", "/tmp/bench_rankers")
    models = [m for m in os.environ.get("BENCH_MODELS", "din,bst,xdeepfm,dcn").split(",") if m]
    calls = int(os.environ.get("BENCH_LATENCY_CALLS", "300"))
    out = os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench", "results", "rankers_latency.json"))
    try:
        examples = PipelineStore.for_output_dir(work).latest_uri("LogExampleGen", "examples")
    except FileNotFoundError:
        examples = None
    if not examples:
        print(f"rankers_latency: no LogExampleGen output under {work} (run bench-rankers first)", file=sys.stderr)
        return 1
    requests = eval_latency_requests(examples, configs.HISTORY_LENGTH)
    load_before, results = os.getloadavg(), {}
    for name in models:  # the keys bench-rankers records
        results[name] = serve_latency_record(os.path.join(work, "export", name), requests, calls,
                                             configs.HISTORY_LENGTH)
        print(name, results[name], flush=True)
    record = {"work": "<tmp>/" + os.path.basename(work.rstrip("/")), "calls": calls, "candidates": NUM_CANDIDATES,
              "request_history_items": {name: request_history_items(rows[0], configs.HISTORY_LENGTH)
                                        for name, rows in requests.items()},
              "load_average_before": [round(x, 2) for x in load_before],
              "load_average_after": [round(x, 2) for x in os.getloadavg()],
              "latency_thread_pools": {k: configs.SERVING.get(k, 0) for k in (
                  "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism")},
              "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "results": results}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(f"rankers_latency: wrote {os.path.relpath(out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
