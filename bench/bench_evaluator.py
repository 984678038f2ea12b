"""Evaluator throughput: TFMA with the pipeline's EvalConfig on N eval rows (issue #33, item 4).

    python -m bench.bench_evaluator [--rows 50000] [--model tiny | --run DIR] [--paths fast legacy]
        [--out bench/results/evaluator.json]

The EvalConfig is the pipeline's (`pipeline.pipeline.eval_config`: every metric, the 3
slice features, the gates, 100 quantile levels of a CQE head). The examples:

- ``--model tiny`` (default): a synthetic SavedModel with the pipeline's outputs
  (click_prob, watch_time_s, ranking_score, quantiles[100]) computed by a few TF ops
  from the example's features, so the figure is the Evaluator's own cost (reading,
  predict call, slicing, metrics), not a ranker's;
- ``--run DIR``: the trained model and eval split of a pipeline run
  (``python -m pipeline.run_local --out DIR``), the eval examples repeated to N rows.

Each path runs in this process back to back on the same examples: ``fast`` = the
Evaluator's extractors (`models.evaluation.tfma.extractors`: per-slice batches),
``legacy`` = TFMA's default extractors (one extract per example). Reported per path:
wall seconds, rows/s, CPU seconds (user + system: on a loaded machine the steadier
figure) and rows per CPU second, and the overall-slice metric values of both paths with their
largest absolute difference. The machine's load average is recorded with each run: on a
shared machine the figures are upper bounds of the cost.
"""
import argparse
import glob
import json
import os
import resource
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF_USE_LEGACY_KERAS: bench/__init__.py

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_Q = 100


def _cpu_s():
    """CPU seconds (user + system) of this process and its finished children so far."""
    self, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return self.ru_utime + self.ru_stime + children.ru_utime + children.ru_stime


def _loadavg():
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def tiny_examples(n: int, seed: int = 0):
    """Serialized tf.Examples with the features the Evaluator reads (users of ~50 rows)."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(seed)
    user = rng.integers(0, max(n // 50, 1), n)
    x = np.round(rng.normal(size=n), 2).astype(np.float32)
    duration = rng.choice([10.0, 30.0, 60.0, 120.0], n).astype(np.float32)
    click = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(np.int64)
    watch = np.where(click == 1, np.round(duration * rng.beta(1, 2, n)), np.round(rng.uniform(0, 3, n)))
    tab = rng.integers(0, 5, n)
    degree = rng.choice([b"full_active", b"high_active", b"middle_active", b"low_active"], n)
    bucket = rng.choice([b"0-15s", b"15-30s", b"30-60s", b"60s+"], n)
    out = []
    for i in range(n):
        f = {"user_id": [int(user[i])], "video_id": [int(rng.integers(0, 3000))], "tab": [int(tab[i])],
             "time_ms": [int(i * 7_000)], "is_click": [int(click[i])]}
        feats = {k: tf.train.Feature(int64_list=tf.train.Int64List(value=v)) for k, v in f.items()}
        for k, v in (("x", x[i]), ("duration_s", duration[i]), ("watch_time_s", watch[i])):
            feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=[float(v)]))
        for k, v in (("user_active_degree", degree[i]), ("duration_bucket", bucket[i])):
            feats[k] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[v]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feats)).SerializeToString())
    return out


def tiny_model(path: str) -> str:
    import tensorflow as tf

    taus = tf.constant([(i + 1) / (NUM_Q + 1) for i in range(NUM_Q)], tf.float32)

    class Tiny(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
        def serve(self, examples):
            f = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([], tf.float32),
                                               "duration_s": tf.io.FixedLenFeature([], tf.float32)})
            click = (tf.round(tf.sigmoid(f["x"]) * 80.0) + 1.0) / 100.0
            watch = tf.round(f["duration_s"] * click)
            return {"click_prob": click[:, None], "watch_time_s": watch[:, None],
                    "ranking_score": (click * watch)[:, None],
                    "quantiles": watch[:, None] * 2.0 * taus[None, :]}

    m = Tiny()
    tf.saved_model.save(m, path, signatures={"serving_examples": m.serve})
    return path


def run_examples(run_dir: str):
    """(model dir, eval example files) of a pipeline run."""
    models = sorted(glob.glob(os.path.join(run_dir, "**", "Trainer", "model", "*", "Format-Serving"),
                              recursive=True))
    evals = sorted(glob.glob(os.path.join(run_dir, "**", "LogExampleGen", "examples", "*", "Split-eval", "*"),
                             recursive=True))
    if not models or not evals:
        raise SystemExit(f"no Trainer model / eval split under {run_dir}")
    return models[-1], [e for e in evals if os.path.dirname(e) == os.path.dirname(evals[-1])]


def read_records(files):
    import tensorflow as tf

    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP"
                                                        if files[0].endswith(".gz") else "")]


def evaluate(path: str, model_dir: str, data: str, out_dir: str, watch_head: str):
    import apache_beam as beam
    import tensorflow_model_analysis as tfma
    from tfx_bsl.public import tfxio

    from pipeline import configs
    from pipeline.pipeline import eval_config

    config = eval_config(configs.EVAL_GATES, configs.EVAL_SLICE_FEATURES, watch_head=watch_head,
                         num_quantiles=NUM_Q)
    config = tfma.utils.update_eval_config_with_defaults(config, has_baseline=False, rubber_stamp=True)
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=config)
    extractors = None
    if path == "fast":
        from models.evaluation.tfma import extractors as fast

        extractors = fast.custom_extractors(shared, config, None)
    source = tfxio.TFExampleRecord(file_pattern=data, raw_record_column_name=tfma.ARROW_INPUT_COLUMN)
    start, cpu_start = time.time(), _cpu_s()
    with beam.Pipeline(argv=["--direct_running_mode=in_memory", "--direct_num_workers=1"]) as p:
        _ = (p | source.BeamSource() | tfma.ExtractEvaluateAndWriteResults(
            eval_shared_model=shared, eval_config=config, extractors=extractors, output_path=out_dir))
    wall, cpu = time.time() - start, _cpu_s() - cpu_start
    result = tfma.load_eval_result(out_dir)
    overall = {}
    for slice_key, by_output in result.slicing_metrics:
        if slice_key == ():
            for output_name, by_sub in by_output.items():
                for name, v in by_sub[""].items():
                    if "doubleValue" in v:
                        overall[f"{output_name}/{name}"] = v["doubleValue"]
    validation = tfma.load_validation_result(out_dir)
    return wall, cpu, overall, bool(validation.validation_ok), len(result.slicing_metrics)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000)
    ap.add_argument("--model", default="tiny", choices=["tiny"])
    ap.add_argument("--run", help="pipeline run output root (trained model + eval split)")
    ap.add_argument("--paths", nargs="+", default=["fast", "legacy"], choices=["fast", "legacy"])
    ap.add_argument("--out", default=os.path.join(_ROOT, "bench", "results", "evaluator.json"))
    ap.add_argument("--before", help="a JSON this script wrote at an older commit (--paths legacy): its runs "
                                     "are kept in the report as `before`")
    args = ap.parse_args(argv)
    import numpy as np
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        if args.run:
            model_dir, files = run_examples(args.run)
            base = read_records(files)
            watch_head = "cread+cqe"
            source = os.path.relpath(args.run, _ROOT) if not os.path.isabs(args.run) else "pipeline run"
        else:
            model_dir, base, watch_head, source = tiny_model(os.path.join(tmp, "model")), None, "cqe", "tiny"
        records = (tiny_examples(args.rows) if base is None else
                   [base[i % len(base)] for i in range(args.rows)])
        data = os.path.join(tmp, "eval.tfrecord")
        with tf.io.TFRecordWriter(data) as w:
            for r in records:
                w.write(r)
        runs, values = [], {}
        for path in args.paths:
            load_before = _loadavg()
            wall, cpu, overall, ok, slices = evaluate(path, model_dir, data, os.path.join(tmp, path), watch_head)
            runs.append({"path": path, "rows": args.rows, "seconds": round(wall, 2),
                         "rows_per_s": round(args.rows / wall, 1), "cpu_seconds": round(cpu, 2),
                         "rows_per_cpu_s": round(args.rows / cpu, 1), "slices": slices, "validation_ok": ok,
                         "loadavg_before": load_before, "loadavg_after": _loadavg()})
            values[path] = overall
            print(json.dumps(runs[-1]), flush=True)
    report = {"what": "TFMA Evaluator with the pipeline's EvalConfig (pipeline.pipeline.eval_config)",
              "command": "python -m bench.bench_evaluator " + " ".join(argv if argv is not None else sys.argv[1:]),
              "model": source, "runner": "DirectRunner in_memory, 1 worker", "runs": runs,
              "overall_metrics": values}
    if len(values) == 2:
        a, b = values["fast"], values["legacy"]
        common = sorted(set(a) & set(b))
        diffs = {k: abs(a[k] - b[k]) for k in common if np.isfinite(a[k]) and np.isfinite(b[k])}
        report["metric_keys_only_in"] = {"fast": sorted(set(a) - set(b)), "legacy": sorted(set(b) - set(a))}
        report["max_abs_diff"] = max(diffs.values()) if diffs else None
        report["max_abs_diff_metric"] = max(diffs, key=diffs.get) if diffs else None
        by = {r["path"]: r["rows_per_s"] for r in runs}
        report["speedup"] = round(by["fast"] / by["legacy"], 2)
    if args.before:
        with open(args.before) as f:
            old = json.load(f)
        report["before"] = {"command": old["command"], "runs": old["runs"],
                            "overall_metrics": old["overall_metrics"].get("legacy", {})}
        fast = [r for r in runs if r["path"] == "fast"]
        if fast:
            report["speedup_vs_before"] = round(fast[0]["rows_per_s"] / old["runs"][0]["rows_per_s"], 2)
            a, b = values["fast"], report["before"]["overall_metrics"]
            same_rows = old["runs"][0]["rows"] == fast[0]["rows"]  # the metric values compare on the same rows only
            diffs = {k: abs(a[k] - b[k]) for k in set(a) & set(b) if same_rows and np.isfinite(a[k]) and np.isfinite(b[k])}
            report["max_abs_diff_vs_before"] = max(diffs.values()) if diffs else None
            report["max_abs_diff_vs_before_metric"] = max(diffs, key=diffs.get) if diffs else None
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=1, sort_keys=True)
    print(json.dumps({k: v for k, v in report.items() if k != "overall_metrics"}, indent=1))


if __name__ == "__main__":
    main()
