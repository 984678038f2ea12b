"""REST serving latency and throughput: `make bench-serving` -> bench/results/serving.json.

Model: a published DIN ranker version (``--model-dir <version dir>``), or by default an
untrained DIN (same compute as a trained one) exported with run_fn's signatures over a
TF Transform graph analysed on 300 synthetic raw rows, history length L from
pipeline/configs/. Served by the embedded server on loopback (`serving.http_server`).

Scenarios (keep-alive connections, pre-encoded JSON bodies, http.client):
- {row format `serving_default`, columnar `serving_rank`} x {1, 100 candidates} x
  {1, 8 concurrent clients}: p50 / p99 latency (ms) and QPS;
- in-process reference: the same SavedModel signature called directly, through the
  server's own call (numpy feed -> flat call -> numpy) and with keyword tensors;
- hot swaps: 8 clients on serving_rank x 100 while ``--swaps`` new versions are
  published (copy to a temp name, atomic rename): p99 during the swaps, failures.

TensorFlow's thread pools are sized from pipeline/configs SERVING (as ``python -m
serving --tensorflow_intra_op_parallelism … --tensorflow_inter_op_parallelism …``) before
any TensorFlow work, so the server and the in-process reference run on the same pools.
The machine is shared (load average recorded): figures are upper bounds.
"""
import argparse
import http.client
import json
import os
import shutil
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = "watchtime_ranker"


def synthetic_rows(n, history_length, seed=0):
    """Raw rows (models.features.raw_feature_spec) with varied ids and histories."""
    from models import features as F

    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        length = int(rng.integers(0, history_length + 1))
        pad = history_length - length
        hv = [int(v) for v in rng.integers(1, 500, length)]
        row = {k: int(rng.integers(0, 4)) for k in F.RAW_INT_FEATURES}
        row.update({k: float(rng.exponential(20.0)) for k in F.RAW_FLOAT_FEATURES})
        row.update({k: [b"a", b"b", b"c"][int(rng.integers(0, 3))] for k in F.RAW_BYTES_FEATURES})
        row.update(user_id=int(rng.integers(1, 50)), video_id=int(rng.integers(1, 500)),
                   author_id=int(rng.integers(1, 60)), hist_len=length,
                   hist_video_id=hv + [-1] * pad, hist_author_id=[v // 10 for v in hv] + [-1] * pad,
                   hist_is_click=[int(c) for c in rng.integers(0, 2, length)] + [0] * pad,
                   hist_tab=[int(t) for t in rng.integers(0, 4, length)] + [-1] * pad,
                   hist_watch_time_s=[float(w) for w in rng.exponential(10.0, length)] + [0.0] * pad,
                   hist_time_gap_s=[float(g) for g in rng.exponential(3600.0, length)] + [0.0] * pad)
        rows.append(row)
    return rows


def build_model(work, history_length):
    """Exports an untrained DIN over a small TFT graph to <work>/model/1."""
    import functools

    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata, schema_utils

    from models import features as F
    from models.preprocessing import preprocessing_fn
    from models.transform_config import FORCE_TF_COMPAT_V1
    from models.rankers import build_ranker
    from models.training.export import export_serving_model
    from models.training.input import vocab_sizes
    from models.training.run_fn import ead_thresholds_from_transform_output
    from pipeline import configs

    rows = synthetic_rows(300, history_length)
    fn = functools.partial(preprocessing_fn, custom_config=configs.TRANSFORM.to_custom_config())
    metadata = dataset_metadata.DatasetMetadata(
        schema_utils.schema_from_feature_spec(F.raw_feature_spec(history_length)))
    out_dir = os.path.join(work, "transform")
    with tft_beam.Context(temp_dir=os.path.join(work, "tft_tmp"), force_tf_compat_v1=FORCE_TF_COMPAT_V1):
        transform_fn = (rows, metadata) | tft_beam.AnalyzeDataset(fn)
        _ = transform_fn | tft_beam.WriteTransformFn(out_dir)
    tft_output = tft.TFTransformOutput(out_dir)
    tf.random.set_seed(0)
    model = build_ranker(configs.trainer_config("din"), vocab_sizes(tft_output),
                         ead_thresholds=ead_thresholds_from_transform_output(tft_output))
    export_dir = os.path.join(work, "model", "1")
    export_serving_model(model, tft_output, history_length, export_dir)
    return export_dir


def request_bodies(n_candidates, history_length):
    from models import features as F

    rows = synthetic_rows(n_candidates, history_length, seed=n_candidates)
    user = rows[0]
    for r in rows:
        r.update({k: user[k] for k in F.USER_CONTEXT_FEATURES})
    clean = [{k: (v.decode() if isinstance(v, bytes) else v) for k, v in r.items()
              if k in F.SERVING_RAW_FEATURES} for r in rows]
    row_body = json.dumps({"instances": clean}).encode()
    inputs = {k: ([user[k].decode() if isinstance(user[k], bytes) else user[k]]
                  if k in F.USER_CONTEXT_FEATURES else [c[k] for c in clean])
              for k in F.SERVING_RAW_FEATURES}
    rank_body = json.dumps({"signature_name": "serving_rank", "inputs": inputs}).encode()
    return {"row": row_body, "rank": rank_body}, clean


def run_clients(port, body, n_clients, n_requests, stop=None):
    """n_clients keep-alive clients, n_requests each (or until `stop`). -> latencies, errors, wall."""
    lat, errors = [], []
    lock = threading.Lock()
    path = f"/v1/models/{MODEL}:predict"
    headers = {"Content-Type": "application/json"}

    def one():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        mine = []
        i = 0
        while (stop is None and i < n_requests) or (stop is not None and not stop.is_set()):
            t = time.perf_counter()
            try:
                conn.request("POST", path, body, headers)
                r = conn.getresponse()
                data = r.read()
                if r.status != 200:
                    with lock:
                        errors.append(data[:200].decode(errors="replace"))
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    errors.append(repr(e))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            mine.append(time.perf_counter() - t)
            i += 1
        conn.close()
        with lock:
            lat.extend(mine)
    threads = [threading.Thread(target=one) for _ in range(n_clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return lat, errors, time.perf_counter() - t0


def summary(lat, wall):
    ms = np.array(lat) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "qps": round(len(lat) / wall, 1), "requests": len(lat)}


def in_process(export_dir, rows, history_length, n_calls):
    """The same SavedModel called in this process, two ways: ``flat`` = the server's own
    call (`serving.servable.Signature`: numpy feed -> tensors -> flat concrete-function
    call -> numpy), i.e. the REST request without JSON and HTTP; ``keyword`` = the
    signature called with keyword tensors (structured binding; the figure of runs
    before 2026-11-25)."""
    import tensorflow as tf

    from models import features as F
    from serving.servable import Signature

    loaded = tf.saved_model.load(export_dir)
    spec = F.raw_feature_spec(history_length)
    feed = {k: np.array([r[k].encode() if isinstance(r[k], str) else r[k] for r in rows],
                        dtype=object if spec[k].dtype == tf.string else spec[k].dtype.as_numpy_dtype)
            for k in F.SERVING_RAW_FEATURES}
    out = {}
    for name, sig in (("row", "serving_default"), ("rank", "serving_rank")):
        fn = loaded.signatures[sig]
        f = {k: (v[:1] if name == "rank" and k in F.USER_CONTEXT_FEATURES else v)
             for k, v in feed.items()}
        tensors = {k: tf.constant(v, dtype=spec[k].dtype) for k, v in f.items()}
        served = Signature(sig, fn)
        calls = {"flat": lambda: served(f),
                 "keyword": lambda: {k: v.numpy() for k, v in fn(**tensors).items()}}
        for how, call in calls.items():
            for _ in range(5):
                call()
            times = []
            for _ in range(n_calls):
                t = time.perf_counter()
                call()
                times.append(time.perf_counter() - t)
            out[name if how == "flat" else f"{name}_keyword"] = summary(times, sum(times))
    return out


def main(argv=None) -> int:
    from pipeline import configs
    from serving.config import ServingConfig
    from serving.http_server import start_server
    from serving.server_core import configure_tensorflow_threads

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-dir", help="a published version dir (default: build a DIN)")
    p.add_argument("--requests", type=int, default=200, help="requests per client, 1 client")
    p.add_argument("--requests-8", type=int, default=40, help="requests per client, 8 clients")
    p.add_argument("--swaps", type=int, default=20, help="hot swaps under 8 clients (#11: 0 failures across 20)")
    p.add_argument("--work", help="scratch dir, kept (a model built there is reused)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "serving.json"))
    args = p.parse_args(argv)
    # the server's thread pools (pipeline/configs SERVING), sized before any TensorFlow
    # work as `python -m serving` does; the in-process reference runs on the same pools
    config = ServingConfig(**configs.SERVING)
    threads = configure_tensorflow_threads(config)
    L = configs.HISTORY_LENGTH
    load_before = os.getloadavg()
    work = args.work or tempfile.mkdtemp(prefix="bench_serving_")
    t0 = time.time()
    built = os.path.join(work, "model", "1")
    export_dir = args.model_dir or (built if os.path.isdir(built) else build_model(work, L))
    base = os.path.join(work, "serving", MODEL)
    shutil.rmtree(base, ignore_errors=True)
    shutil.copytree(export_dir, os.path.join(base, "1"))
    print(f"[bench-serving] model ready in {time.time() - t0:.0f}s", flush=True)
    server, port = start_server(base, MODEL, poll_wait_seconds=0.2, config=config)
    results = {"rest": [], "in_process": {}, "hot_swaps": {}}
    try:
        steady_p99 = None
        for n_cand in (1, 100):
            bodies, rows = request_bodies(n_cand, L)
            for fmt in ("row", "rank"):
                for clients, n_req in ((1, args.requests), (8, args.requests_8)):
                    run_clients(port, bodies[fmt], 1, 5)  # warm the connection path
                    lat, errors, wall = run_clients(port, bodies[fmt], clients, n_req)
                    rec = dict(format=fmt, candidates=n_cand, clients=clients,
                               body_bytes=len(bodies[fmt]), errors=len(errors), **summary(lat, wall))
                    results["rest"].append(rec)
                    print(f"[bench-serving] {json.dumps(rec)}", flush=True)
                    if (fmt, n_cand, clients) == ("rank", 100, 8):
                        steady_p99 = rec["p99_ms"]
            if n_cand == 100:
                results["in_process"] = in_process(export_dir, rows, L, args.requests)
                print(f"[bench-serving] in-process {results['in_process']}", flush=True)
        bodies, _ = request_bodies(100, L)
        stop = threading.Event()
        box = {}
        th = threading.Thread(target=lambda: box.update(
            r=run_clients(port, bodies["rank"], 8, 0, stop)))
        th.start()
        swap_s = []
        for v in range(2, 2 + args.swaps):
            t = time.perf_counter()
            tmp = os.path.join(base, f".publishing-{v}-{os.getpid()}")
            shutil.copytree(export_dir, tmp)
            os.rename(tmp, os.path.join(base, str(v)))
            while server.managers[MODEL].available_versions() != [v]:
                time.sleep(0.02)
            swap_s.append(time.perf_counter() - t)
        time.sleep(0.5)
        stop.set()
        th.join()
        lat, errors, wall = box["r"]
        results["hot_swaps"] = dict(swaps=args.swaps, clients=8, format="rank", candidates=100,
                                    errors=len(errors), steady_p99_ms=steady_p99,
                                    swap_seconds_mean=round(float(np.mean(swap_s)), 2),
                                    **summary(lat, wall))
        print(f"[bench-serving] hot swaps {results['hot_swaps']}", flush=True)
    finally:
        server.stop()
        if not args.work:
            shutil.rmtree(work, ignore_errors=True)
    results.update(
        command="make bench-serving",
        model=("--model-dir " + os.path.relpath(args.model_dir, ROOT)) if args.model_dir
        else "untrained DIN (pipeline/configs/ trainer_config('din')), TFT graph of 300 synthetic rows",
        tensorflow_threads=dict(intra_op=threads[0], inter_op=threads[1]),
        history_length=L, model_dir="<tmp>/serving/watchtime_ranker/<version>",
        machine=dict(cpus=os.cpu_count(), loadavg_before=[round(x, 2) for x in load_before],
                     loadavg_after=[round(x, 2) for x in os.getloadavg()],
                     note=("loadavg_before >= 1.5: other jobs were running, latencies are upper bounds"
                           if load_before[0] >= 1.5 else "idle at the start; loadavg_after includes the bench's own clients")),
        wall_seconds=round(time.time() - t0, 1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"[bench-serving] wrote {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
