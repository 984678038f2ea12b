"""Ingestion throughput of LogExampleGen on KuaiRand-Pure-format logs: 1 vs 2 workers.

    python -m bench.bench_ingestion [--logs ../shared/data/kuairand-pure] [--workers 1 2]
        [--range-bytes 4194304] [--max-rows-per-file N] [--out bench/results/ingestion.json]

``--max-rows-per-file N`` bounds the run: the first N rows of each log file (side tables whole).

Each worker count runs in a fresh Python process (so memory figures do not mix):
DirectRunner ``in_memory`` for 1 worker, ``multi_processing`` with
``direct_num_workers=N`` for N > 1, the executor's whole Beam pipeline (byte-range
reads, parsing, joins, GroupByKey histories, tf.Example writes). Reported per run:
wall seconds, log rows/s (rows read / wall), CPU seconds of the run (driver + finished
worker processes) and CPU µs per row (the cost when the machine is shared), the counts.json totals (identical across
worker counts, or the bench fails), and peak resident memory: of the driver process
(its VmHWM, pipeline/process_memory.py) and of the largest worker process (ru_maxrss of
RUSAGE_CHILDREN: an upper bound, it includes the driver's RSS when the worker was forked;
for in_memory the driver is the worker). The machine's load average is recorded: on a
shared machine the figures are upper bounds of the cost, not of the speed-up.

``scaling`` (when 1 and N > 1 workers ran): the efficiency of N workers, rows/s(N) /
(N · rows/s(1)), and the machine's ceiling for it: N copies of the 1-worker run at once
(bench_ingestion._side_by_side).

The measuring process freezes what its imports loaded before the run
(pipeline/process_memory.freeze_loaded_objects), as `make run`'s process does before its
components run, so collections do not walk TensorFlow's and Beam's objects
(``BENCH_NO_FREEZE=1``: without; one worker, real logs: ~5 % slower).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

from bench.bench_scale import commit, machine
from pipeline.process_memory import children_peak_rss_mb, freeze_loaded_objects, peak_rss_mb

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LOGS = os.path.join(os.path.dirname(_ROOT), "shared", "data", "kuairand-pure")


def _rel(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), _ROOT)
    return rel if not rel.startswith("../../") else path


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (the workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_once(logs: str, workers: int, range_bytes: int) -> dict:
    import dataclasses

    import apache_beam as beam
    from tfx.types import standard_artifacts

    from components.log_example_gen.artifacts import DeadLetterRows
    from components.log_example_gen.executor import run_log_example_gen
    from pipeline import configs

    config = dataclasses.replace(configs.LOG_EXAMPLE_GEN, read_range_bytes=range_bytes)
    args = (["--direct_running_mode=in_memory", "--direct_num_workers=1"] if workers == 1 else
            ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"])
    if os.environ.get("BENCH_NO_FREEZE") != "1":
        freeze_loaded_objects()  # as local_runner.py and pipeline/run_local.py do before the components run
    with tempfile.TemporaryDirectory() as tmp:
        examples, dead_letter = standard_artifacts.Examples(), DeadLetterRows()
        examples.uri, dead_letter.uri = os.path.join(tmp, "examples"), os.path.join(tmp, "dead_letter")
        start, cpu_start = time.time(), _cpu_s()
        counts = run_log_example_gen(beam.Pipeline(argv=args), logs, config, examples, dead_letter)
        wall, cpu = time.time() - start, _cpu_s() - cpu_start
    return {
        "workers": workers, "beam_args": args, "wall_s": round(wall, 2),
        "rows_per_s": round(counts["rows_read"] / wall, 1),
        "cpu_s": round(cpu, 2), "cpu_us_per_row": round(1e6 * cpu / max(counts["rows_read"], 1), 1),
        "counts": {k: counts[k] for k in ("rows_read", "good_rows", "bad_rows", "dropped_rows", "splits",
                                          "dropped_rows_by_rule", "bad_rows_by_reason")},
        "peak_rss_driver_mb": round(peak_rss_mb(), 1),
        "peak_rss_largest_worker_mb": round(children_peak_rss_mb(), 1)
        if workers > 1 else None,
    }


def _head_copy(logs: str, dst: str, n: int) -> str:
    """The first n rows of every log file (+ header) and links to the side tables."""
    import glob

    for path in glob.glob(os.path.join(logs, "*.csv")):
        name = os.path.basename(path)
        if name.startswith("log_"):
            with open(path) as src, open(os.path.join(dst, name), "w") as out:
                for i, line in enumerate(src):
                    if i > n:
                        break
                    out.write(line)
        else:
            os.symlink(os.path.abspath(path), os.path.join(dst, name))
    return dst


def _measure(logs: str, workers: int, range_bytes: int, copies: int) -> list:
    """``copies`` fresh processes measuring ``workers`` at once (run_once's dicts, one each)."""
    procs = [subprocess.Popen([sys.executable, "-m", "bench.bench_ingestion", "--logs", logs, "--one",
                               str(workers), "--range-bytes", str(range_bytes)],
                              cwd=_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(copies)]
    runs = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode:
            raise RuntimeError(f"measurement failed (exit {proc.returncode}):\n{err[-4000:]}")
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return runs


def _side_by_side(logs: str, range_bytes: int, runs: list) -> dict:
    """Scaling efficiency of N workers and the machine's ceiling for it.

    efficiency(N) = rows/s(N workers) / (N · rows/s(1 worker)), medians over the runs of each
    count (``--workers 1 2 1 2`` alternates them). The ceiling runs N copies of the whole
    1-worker pipeline at once, independent processes sharing nothing but the machine (cores,
    caches, memory bandwidth, disk): ceiling(N) = wall(1 alone) / max wall(N copies at once).
    No split of the same work over N processes on this machine can beat it by more than the
    per-copy fixed costs (planning, side tables), so efficiency / ceiling is what the runner's
    multi-processing itself keeps.
    """
    by_workers = {}
    for r in runs:
        by_workers.setdefault(r["workers"], []).append(r)
    n = max(by_workers)
    if 1 not in by_workers or n < 2:
        return {}
    one_rate = statistics.median([r["rows_per_s"] for r in by_workers[1]])
    one_wall = statistics.median([r["wall_s"] for r in by_workers[1]])
    load = os.getloadavg()
    copies = _measure(logs, 1, range_bytes, copies=n)
    ceiling = one_wall / max(c["wall_s"] for c in copies)
    efficiency = {str(k): round(statistics.median([r["rows_per_s"] for r in rs]) / (k * one_rate), 3)
                  for k, rs in sorted(by_workers.items()) if k > 1}
    print(f"{n} copies of 1 worker side by side: walls {[c['wall_s'] for c in copies]} s, "
          f"ceiling {ceiling:.3f}; efficiency {efficiency}", flush=True)
    return {"efficiency": efficiency, f"ceiling_{n}_copies": round(ceiling, 3),
            "efficiency_of_ceiling": {k: round(v / ceiling, 3) for k, v in efficiency.items()},
            "side_by_side_load_average_before": [round(x, 2) for x in load], "runs": copies}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", default=os.environ.get("LOGS") or DEFAULT_LOGS)
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--range-bytes", type=int, default=None, help="default: configs.READ_RANGE_BYTES")
    p.add_argument("--out", default=os.path.join(_ROOT, "bench", "results", "ingestion.json"))
    p.add_argument("--max-rows-per-file", type=int, default=None)
    p.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.range_bytes is None:
        from pipeline import configs
        args.range_bytes = configs.READ_RANGE_BYTES
    if args.one is not None:  # child: one measurement, JSON on the last stdout line
        print(json.dumps(run_once(args.logs, args.one, args.range_bytes)))
        return
    if not os.path.isdir(args.logs):
        sys.exit(f"no logs at {args.logs} (set --logs or LOGS)")
    logs_dir, tmp = args.logs, None
    if args.max_rows_per_file:
        tmp = tempfile.TemporaryDirectory()
        logs_dir = _head_copy(args.logs, tmp.name, args.max_rows_per_file)
    runs = []
    for n in args.workers:
        load = os.getloadavg()
        run = _measure(logs_dir, n, args.range_bytes, copies=1)[0]
        run["load_average_before"] = [round(x, 2) for x in load]
        runs.append(run)
        print(f"{n} worker(s): {run['rows_per_s']} rows/s ({run['wall_s']} s)", flush=True)
    side_by_side = _side_by_side(logs_dir, args.range_bytes, runs)
    first = runs[0]["counts"]
    assert all(r["counts"] == first for r in runs + side_by_side.get("runs", [])), \
        "counts differ between worker counts"
    result = {
        "bench": "ingestion", "machine": machine(), "commit": commit(), "logs": _rel(args.logs),
        "max_rows_per_file": args.max_rows_per_file,
        "read_range_bytes": args.range_bytes,
        "cpu_count": os.cpu_count(), "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "note": "2-core machine: compare load_average_before of each run; times under load are upper bounds",
        "runs": runs,
        "scaling": side_by_side,
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {_rel(args.out)}")


if __name__ == "__main__":
    main()
