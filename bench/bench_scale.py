"""How the whole pipeline's cost grows with the logs: time and memory per component, 0.25M-4M rows.

    make bench-scale                  # BENCH_SCALE_ROWS=250000,1000000,4000000 by default
    BENCH_SCALE_ROWS=50000,200000 BENCH_WORK=/tmp/scale make bench-scale   # a quick look
    BENCH_SCALE_REUSE=1 make bench-scale   # sizes already measured under BENCH_WORK are reused

Each size's result is kept in ``BENCH_WORK/size_<rows>.json`` with the commit it ran
(``commit``), so a long run can be split across sessions; the exponents then compare sizes
measured on the commits named there.

For each size the log simulator writes logs of about that many impressions (10 days,
5 impressions per user-day: users = rows / 50, videos = users / 4, as in the 1M-row run of
issue #33; cached under ``BENCH_WORK``). The configured pipeline (pipeline/configs/, the
same one `make run` builds) then runs **one component per process**: a TFX partial run
(``RunOptions(from_nodes=[node], to_nodes=[node])``) of each node in topological order, the
later ones reading the earlier ones' artifacts through MLMD, so each process's peak RSS
is that component's (its VmHWM, pipeline/process_memory.py; Beam worker processes, when the
Beam flags start any, under ``RUSAGE_CHILDREN``: an upper bound, it includes the
component process's RSS at the fork). Per component and size: wall seconds
(including the process's ~10-20 s of imports, which is why tiny sizes look flat), peak
RSS, CPU seconds (user + system, the process and its children: the figure to compare
when the machine is shared) and rows/s of log rows.

Fitted per component, between the two largest sizes: the time exponent
``k = log(t_2 / t_1) / log(r_2 / r_1)`` (time ∝ rows^k; k = 1 is linear), and
``rss_growth`` = peak RSS at the largest size / at the smallest. The projection to 10^8
rows, ``t(1e8) = t_largest · (1e8 / r_largest)^max(k, 1)`` in worker-hours, is an
extrapolation of a fit over at most a decade and a half, stated as such.

Writes ``bench/results/scale.json`` (``BENCH_OUT``): ``components`` (one entry per
component: ``name``, ``rows``, ``seconds``, ``peak_rss_mb`` (lists, one value per size),
``peak_rss_children_mb``, ``exponent_time``, ``exponent_cpu_time`` (the same fit on CPU
seconds), ``rss_growth``, ``projected_worker_hours_1e8``)
and ``sizes`` (rows, simulator arguments, LogExampleGen's split counts, load averages), and
a PNG beside it (time and memory against rows, log-log, one line per component).
"""
import json
import math
import os
import resource
import subprocess
import sys
import time

from pipeline.process_memory import children_peak_rss_mb, default_onednn_off, peak_rss_mb

default_onednn_off()  # each component's process as `make run` runs it, before TensorFlow loads

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ROWS = (250_000, 1_000_000, 4_000_000)
DAYS, IMPRESSIONS_PER_USER_DAY, VIDEOS_PER_USER = 10, 5.0, 0.25
TARGET_ROWS = 1e8
_SKIP = ("resolver", "importer", "schema_importer")  # bookkeeping nodes: timed, not fitted


def simulator_args(rows: int) -> dict:
    users = max(10, int(round(rows / (DAYS * IMPRESSIONS_PER_USER_DAY))))
    return dict(num_users=users, num_videos=max(20, int(users * VIDEOS_PER_USER)), num_days=DAYS,
                impressions_per_user_day=IMPRESSIONS_PER_USER_DAY, seed=7)


def exponent(rows, seconds) -> float:
    """k of t ∝ r^k between the two largest sizes."""
    (r1, t1), (r2, t2) = sorted(zip(rows, seconds))[-2:]
    return math.log(t2 / t1) / math.log(r2 / r1)


def _rel(path: str) -> str:
    rel = os.path.relpath(os.path.abspath(path), _ROOT)
    return rel if not rel.startswith("../../") else path


def _pipeline(logs: str, out: str):
    from pipeline import runners

    return runners.build_local(data_path=logs, output_dir=out)


def run_node(logs: str, out: str, node: str) -> dict:
    """Child process: a partial run of one node; JSON on the last stdout line."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration import pipeline as pipeline_py

    p = _pipeline(logs, out)
    start = time.time()
    cpu_before = _cpu_seconds()
    LocalDagRunner().run(p, run_options=pipeline_py.RunOptions(from_nodes=[node], to_nodes=[node]))
    return {"name": node, "seconds": round(time.time() - start, 2),
            "cpu_seconds": round(_cpu_seconds() - cpu_before, 2),
            "peak_rss_mb": round(peak_rss_mb(), 1),
            "peak_rss_children_mb": round(children_peak_rss_mb(), 1)}


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


def node_ids(logs: str, out: str) -> list:
    return [c.id for c in _pipeline(logs, out).components]


def _child(*args) -> dict:
    cmd = [sys.executable, "-m", "bench.bench_scale", *args]
    done = subprocess.run(cmd, cwd=_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-6000:])
        raise RuntimeError(f"{' '.join(args)} failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_size(rows: int, work: str) -> dict:
    logs, out = os.path.join(work, f"logs_{rows}"), os.path.join(work, f"run_{rows}")
    sim = simulator_args(rows)
    if not os.path.exists(os.path.join(logs, "DONE")):
        start = time.time()
        _child("--simulate", str(rows), logs)  # in a child: this process stays small (pipeline/process_memory.py)
        open(os.path.join(logs, "DONE"), "w").write(f"{time.time() - start:.1f}\n")
    subprocess.run(["rm", "-rf", out], check=True)
    nodes = _child("--node-ids", logs, out)
    results = []
    for node in nodes:
        load = os.getloadavg()
        r = _child("--node", node, logs, out)
        r["load_average_before"] = [round(x, 2) for x in load]
        results.append(r)
        print(f"  {rows:>9} rows  {node:<32} {r['seconds']:8.1f} s  {r['peak_rss_mb']:8.0f} MB", flush=True)
    counts = _child("--counts", logs, out)
    return {"rows": counts["rows_read"], "target_rows": rows, "simulator": sim, "counts": counts,
            "nodes": results, "commit": commit()}


def machine() -> str:
    """The CPU model and core count, as the results name the machine."""
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return f"{cpu}, {os.cpu_count()} cores"


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def counts_of(out: str) -> dict:
    """LogExampleGen's counts.json (rows read, splits, bad and dropped rows), found through MLMD."""
    from components.log_example_gen.counts import read_counts
    from pipeline.artifacts import PipelineStore

    return read_counts(PipelineStore.for_output_dir(out).latest_uri("LogExampleGen", "dead_letter"))


def summarize(sizes: list) -> list:
    """One entry per component (by name, in the order of its first appearance), over the sizes
    it was measured at (a size run only up to some node lists only those)."""
    names = list(dict.fromkeys(n["name"] for s in sizes for n in s["nodes"]))
    components = []
    for name in names:
        measured = [(s["rows"], n) for s in sizes for n in s["nodes"] if n["name"] == name]
        rows = [r for r, _ in measured]
        nodes = [n for _, n in measured]
        seconds = [n["seconds"] for n in nodes]
        rss = [n["peak_rss_mb"] for n in nodes]
        entry = {"name": name, "rows": rows, "seconds": seconds, "peak_rss_mb": rss,
                 "peak_rss_children_mb": [n["peak_rss_children_mb"] for n in nodes],
                 "cpu_seconds": [n.get("cpu_seconds") for n in nodes],
                 "rows_per_s": [round(r / t, 1) for r, t in zip(rows, seconds)],
                 "bookkeeping": any(k in name for k in _SKIP)}
        if len(rows) >= 2:
            k = exponent(rows, seconds)
            entry["exponent_time"] = round(k, 3)
            cpu = entry["cpu_seconds"]
            if all(c for c in cpu[-2:]):  # the same fit on CPU seconds: robust to a shared machine
                entry["exponent_cpu_time"] = round(exponent(rows, cpu), 3)
            entry["rss_growth"] = round(max(rss[-1], 1e-9) / max(rss[0], 1e-9), 3)
            entry["projected_worker_hours_1e8"] = round(
                seconds[-1] * (TARGET_ROWS / rows[-1]) ** max(k, 1.0) / 3600.0, 2)
        components.append(entry)
    return components


def plot(result: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(12, 5))
    for c in result["components"]:
        if c["bookkeeping"]:
            continue
        ax_t.plot(c["rows"], c["seconds"], "o-", label=f"{c['name']} (k={c.get('exponent_time', 'n/a')})")
        ax_m.plot(c["rows"], c["peak_rss_mb"], "o-", label=c["name"])
    for ax, label in ((ax_t, "wall seconds (own process)"), (ax_m, "peak RSS, MB (own process)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("log rows")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7)
    ax_t.set_title("time per component")
    ax_m.set_title("memory per component")
    fig.suptitle(f"bench-scale on {result['machine']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--node", "--node-ids", "--counts", "--simulate"):  # child processes
        if argv[0] == "--simulate":
            from data.simulator import simulate

            simulate(argv[2], **simulator_args(int(argv[1])))
            print(json.dumps({"logs": argv[2]}))
        elif argv[0] == "--node":
            print(json.dumps(run_node(argv[2], argv[3], argv[1])))
        elif argv[0] == "--node-ids":
            print(json.dumps(node_ids(argv[1], argv[2])))
        else:
            print(json.dumps(counts_of(argv[2])))
        return 0
    sizes_rows = [int(x) for x in os.environ.get("BENCH_SCALE_ROWS", ",".join(map(str, DEFAULT_ROWS))).split(",")]
    work = os.path.abspath(os.environ.get("BENCH_WORK") or os.path.join(_ROOT, "outputs", "bench_scale"))
    out_path = os.environ.get("BENCH_OUT") or os.path.join(_ROOT, "bench", "results", "scale.json")
    os.makedirs(work, exist_ok=True)
    sizes = []
    for rows in sorted(sizes_rows):
        cached = os.path.join(work, f"size_{rows}.json")
        if os.environ.get("BENCH_SCALE_REUSE") == "1" and os.path.exists(cached):
            print(f"[bench-scale] {rows} rows: reusing {cached}", flush=True)
            sizes.append(json.load(open(cached)))
            continue
        print(f"[bench-scale] {rows} rows", flush=True)
        sizes.append(run_size(rows, work))
        with open(cached, "w") as f:
            json.dump(sizes[-1], f, indent=1)
    import platform
    result = {"bench": "scale", "machine": machine(), "python": platform.python_version(),
              "beam_pipeline_args": _beam_args(), "sizes": sizes, "components": summarize(sizes),
              "projection_note": "t(1e8) = t_largest * (1e8 / rows_largest)^max(k, 1): an extrapolation, "
                                 "not a measurement; one machine of this size, one worker"}
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.splitext(out_path)[0] + ".png")
    print(f"[bench-scale] wrote {_rel(out_path)}")
    return 0


def _beam_args() -> list:
    from pipeline import configs

    return list(configs.BEAM_PIPELINE_ARGS)


if __name__ == "__main__":
    sys.exit(main())
