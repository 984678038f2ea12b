"""StatisticsGen's cost and accuracy against its row budget (#33, components/statistics_gen/).

    .venv/bin/python -m bench.bench_scale --node LogExampleGen <logs> <out>     # once
    .venv/bin/python -m bench.bench_statistics_gen <logs> <out> [0,100000,25000]

For each budget (``STATISTICS_SAMPLE_ROWS``; 0 reads every example, TFX's cost) the
configured pipeline's StatisticsGen node runs in its own process on LogExampleGen's
examples in ``<out>`` (bench_scale's partial run: wall and CPU seconds, peak RSS). Its
statistics are then compared with those of the full read (the first budget must be 0):

- per split: examples read and the rate;
- per numeric feature, the sample mean's error in standard errors of a sample of that
  size, |mean_s - mean| / (std / sqrt(n_s)) (max and mean over features: a correct
  uniform sample gives |N(0, 1)|-like values, mean ~0.8, max ~3 over ~60 features, up to
  the finite-population correction sqrt(1 - n_s / N) that makes them smaller);
- per string feature, whether the sample's top-10 values are the full read's (as sets);
- ExampleValidator's verdict: ``tfdv.validate_statistics`` against the pipeline's schema,
  the anomalous features of each (the same list is what a sample must give).

Writes ``bench/results/statistics_gen.json`` (``BENCH_OUT``): ``sizes``, one entry per log
size (a run on another size is added, the same size replaced): ``log_rows``, ``machine``,
``commit``, ``runs`` (``budget``, ``seconds``, ``cpu_seconds``, ``peak_rss_mb``,
``rows_per_s`` (log rows), ``rates``, ``splits``).
"""
import json
import math
import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("BENCH_OUT", os.path.join(_ROOT, "bench", "results", "statistics_gen.json"))


def _latest_statistics(out: str):
    from pipeline.artifacts import PipelineStore

    store = PipelineStore.for_output_dir(out)
    return (store.latest_uri("StatisticsGen", "statistics"),
            store.latest_property("StatisticsGen", "statistics", "sample_rate_by_split"))


def _read(uri: str, split: str):
    from tensorflow_data_validation.utils import stats_util

    return stats_util.load_stats_binary(os.path.join(uri, f"Split-{split}", "FeatureStats.pb"))


def _features(stats):
    out = {}
    for f in stats.datasets[0].features:
        name = ".".join(f.path.step)
        if f.HasField("num_stats"):
            out[name] = ("num", f.num_stats.mean, f.num_stats.std_dev)
        else:
            out[name] = ("str", frozenset(v.value for v in f.string_stats.top_values[:10]))
    return out


def _anomalies(stats, schema) -> list:
    import tensorflow_data_validation as tfdv

    return sorted(tfdv.validate_statistics(stats, schema).anomaly_info)


def compare(full_uri: str, uri: str, splits, schema) -> dict:
    result = {}
    for split in splits:
        full, sample = _read(full_uri, split), _read(uri, split)
        n, n_full = sample.datasets[0].num_examples, full.datasets[0].num_examples
        ff, fs = _features(full), _features(sample)
        errors = [abs(fs[k][1] - v[1]) / (v[2] / math.sqrt(n)) for k, v in ff.items()
                  if v[0] == "num" and v[2] > 0 and k in fs]
        tops = [fs.get(k) == v for k, v in ff.items() if v[0] == "str"]
        result[split] = {"examples_read": n, "examples": n_full,
                         "mean_error_se_max": round(max(errors), 2) if errors else None,
                         "mean_error_se_mean": round(sum(errors) / len(errors), 2) if errors else None,
                         "numeric_features": len(errors),
                         "string_top10_equal": f"{sum(tops)}/{len(tops)}",
                         "anomalies": _anomalies(sample, schema), "anomalies_full": _anomalies(full, schema)}
    return result


def main(logs: str, out: str, budgets) -> dict:
    import platform

    from tfx.utils import io_utils

    from bench.bench_scale import _child, commit, counts_of, machine
    from pipeline import configs

    if budgets[0] != 0:
        raise ValueError("the first budget must be 0: the full read the samples are compared with")
    schema = io_utils.SchemaReader().read(os.path.join(configs.SCHEMA_PATH, "schema.pbtxt"))
    rows = counts_of(out)["rows_read"]
    runs, full_uri = [], None
    for budget in budgets:
        os.environ["STATISTICS_SAMPLE_ROWS"] = str(budget)
        load = [float(v) for v in open("/proc/loadavg").read().split()[:3]]
        r = _child("--node", "StatisticsGen", logs, out)
        uri, rates = _latest_statistics(out)
        full_uri = full_uri or uri
        run = {"budget": budget, **{k: r[k] for k in ("seconds", "cpu_seconds", "peak_rss_mb")},
               "rows_per_s": round(rows / r["seconds"]), "loadavg_before": load, "rates": rates,
               "splits": compare(full_uri, uri, list(rates), schema)}
        runs.append(run)
        print(json.dumps(run), flush=True)
    size = {"log_rows": rows, "machine": machine(), "python": platform.python_version(),
            "commit": commit(), "runs": runs,
            "command": "python -m bench.bench_statistics_gen <logs> <out> " + ",".join(map(str, budgets))}
    result = json.load(open(OUT)) if os.path.exists(OUT) else {"bench": "statistics_gen", "sizes": []}
    result["sizes"] = sorted([s for s in result["sizes"] if s["log_rows"] != rows] + [size],
                             key=lambda s: s["log_rows"])
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1], sys.argv[2],
         [int(b) for b in (sys.argv[3] if len(sys.argv) > 3 else "0,100000,25000").split(",")])
