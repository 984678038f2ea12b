"""In-process latency of SavedModels on one request, in a process sized as the server is.

    .venv/bin/python -m bench.serving_latency --requests <tfrecord of tf.Examples> \
        --calls 300 --history-length 50 --signature serving_rank <export dir> [<export dir> ...]

TensorFlow's thread pools are process-wide and fixed once TensorFlow runs, so a bench
that trains first (bench/bench_publish.py) cannot time its models on the pools they are
served with (pipeline/configs/serving.py `SERVING`, `--tensorflow_intra_op_parallelism`
/ `--tensorflow_inter_op_parallelism`): it runs this module in a fresh process instead
(`interleaved_latency_ms`). The models are called in turn (call i of every model back to
back, each round starting one model later, so no model always runs first), so a load
change on a shared machine hits them alike. The order the models are loaded in moves
their latency by ~2 % (the same SavedModel loaded three times in one process, calls
rotated: p50 6.96 / 6.92 / 6.80 ms), so `interleaved_latency_ms` runs one process per order (as
given, then reversed) and pools the calls. `paired_ratio` compares two models call by
call: within a round the two calls are back to back, so the ratio of their times cancels
the machine's drift, which moves pooled percentiles by ±2 % between runs. Prints one JSON line:
{"p50_p99_ms": [[p50, p99] per model], "times_ms": [[ms per call] per model],
"tensorflow_threads": [intra, inter]}.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(export_dirs, serialized, calls, history_length, signature="serving_default"):
    """[[ms per call]] of `signature` per SavedModel on one request: the first row's user
    (user, context and history features) with the len(serialized) rows' candidates,
    as a ranking request is; `serving_default` gets the user side repeated on every row,
    `serving_rank` once (batch 1). In this process, through the embedded server's own call
    (serving/servable.py `Signature`: numpy feed in, numpy outputs out)."""
    import tensorflow as tf

    from models import features as F
    from serving.servable import ServedVersion

    spec = {k: v for k, v in F.raw_feature_spec(history_length).items() if k in F.SERVING_RAW_FEATURES}
    request = {k: v.numpy() for k, v in tf.io.parse_example(tf.constant(serialized), spec).items()}
    n = len(serialized)
    user = 1 if signature == "serving_rank" else n
    request = {k: (np.repeat(v[:1], user, axis=0) if k in F.USER_CONTEXT_FEATURES else v)
               for k, v in request.items()}
    serves = [ServedVersion(1, d, enable_warmup=False).signatures[signature] for d in export_dirs]
    for serve in serves:
        for _ in range(5):
            serve(request)
    times = [[] for _ in serves]
    for i in range(calls):
        for slot in range(len(serves)):
            m = (i + slot) % len(serves)  # every model takes every slot of a round equally often
            t0 = time.perf_counter()
            serves[m](request)
            times[m].append((time.perf_counter() - t0) * 1000.0)
    return times


def p50_p99(times):
    return float(np.percentile(times, 50)), float(np.percentile(times, 99))


def paired_ratio(base_ms, other_ms, resamples=2000, seed=0):
    """Median over rounds of other_i / base_i (the two calls of round i back to back) with
    a bootstrap 95 % interval of that median (rounds resampled with replacement):
    {"median", "ci95": [lo, hi], "rounds"}. An interval below 1 means `other` is faster."""
    base, other = np.asarray(base_ms, float), np.asarray(other_ms, float)
    if base.shape != other.shape or base.ndim != 1 or base.size == 0:
        raise ValueError(f"paired_ratio: two equally long, non-empty series of rounds, got {base.shape} and {other.shape}")
    ratio = other / base
    rng = np.random.default_rng(seed)
    medians = np.median(ratio[rng.integers(0, ratio.size, size=(resamples, ratio.size))], axis=1)
    lo, hi = np.percentile(medians, [2.5, 97.5])
    return {"median": float(np.median(ratio)), "ci95": [float(lo), float(hi)], "rounds": int(ratio.size)}


def interleaved_latency_ms(export_dirs, serialized, calls, history_length, signature="serving_default",
                           return_times=False):
    """[(p50, p99)] per model: `measure` in fresh processes on the server's thread pools,
    `calls` calls per model in each of two load orders (module docstring). With
    `return_times`, also the pooled [[ms per call]] per model, aligned by round (for
    `paired_ratio`)."""
    import tensorflow as tf

    orders = [list(range(len(export_dirs)))]
    if len(export_dirs) > 1:
        orders.append(orders[0][::-1])
    pooled = [[] for _ in export_dirs]
    with tempfile.TemporaryDirectory(prefix="serving_latency_") as tmp:
        requests = os.path.join(tmp, "requests.tfrecord")
        with tf.io.TFRecordWriter(requests) as w:
            for s in serialized:
                w.write(s)
        for order in orders:
            out = subprocess.run([sys.executable, "-m", "bench.serving_latency", "--requests", requests,
                                  "--calls", str(calls), "--history-length", str(history_length),
                                  "--signature", signature, *[export_dirs[i] for i in order]],
                                 cwd=ROOT, capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(f"bench.serving_latency failed ({out.returncode}):\n{out.stderr[-3000:]}")
            times = json.loads(out.stdout.strip().splitlines()[-1])["times_ms"]
            for i, t in zip(order, times):
                pooled[i].extend(t)
    stats = [p50_p99(t) for t in pooled]
    return (stats, pooled) if return_times else stats


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("export_dirs", nargs="+")
    p.add_argument("--requests", required=True, help="TFRecord of serialized tf.Examples (one request)")
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--history-length", type=int, required=True)
    p.add_argument("--signature", default="serving_default")
    args = p.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from pipeline import configs
    from serving.config import ServingConfig
    from serving.server_core import configure_tensorflow_threads

    threads = configure_tensorflow_threads(ServingConfig(**configs.SERVING))  # before any TF work
    import tensorflow as tf

    serialized = [r.numpy() for r in tf.data.TFRecordDataset(args.requests)]
    times = measure(args.export_dirs, serialized, args.calls, args.history_length, args.signature)
    print(json.dumps({"p50_p99_ms": [p50_p99(t) for t in times], "times_ms": times,
                      "tensorflow_threads": list(threads)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
