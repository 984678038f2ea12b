"""`make run-continuous`: the pipeline span after span on one MLMD store (continuous training, #14).

    python -m pipeline.continuous --spans N [--first-span K] [--logs DIR] [--out DIR]
                                  [--model-type NAME] [--watch-head NAME] [--no-serve]

Span k covers ``[origin + k·SPAN_HOURS, origin + (k+1)·SPAN_HOURS)`` of log time
(components/log_example_gen/span.py; origin: ``SPAN_ORIGIN_MS`` or 00:00 UTC+8 of the
first log date); its validation / eval rows are the ``SPAN_HOLDOUT_HOURS`` after it (the
next span trains on them). Each span is one LocalDagRunner run of pipeline/pipeline.py:

- **full** (``run_mode="full"``) on span k when ``k % CONTINUOUS_TRANSFORM_EVERY == 0`` or no
  TransformGraph exists yet: Transform analyses spans 0..k (vocabularies on a growing
  window; a second LogExampleGen, "VocabLogExampleGen", writes it when k > 0);
- **delta** otherwise: the latest TransformGraph is reused (Resolver), so every vocabulary
  index stays fixed and ids first seen since then fall into the OOV hash buckets
  (``VOCAB_OOV_BUCKETS``) until the next full run;
- both warm-start the Trainer from the latest Model (Resolver -> ``base_model``; weights and
  Adam state, rows remapped by token after a new Transform: models/training/warm_start.py)
  and train one pass over the span; the Publisher then publishes a full version or a
  delta (its own decision, components/publisher/; a new Transform forces a full one).

With serving on (the default), the embedded TF-Serving-compatible server
(serving/http_server.py) serves the serving base from the first published version on;
its model manager assembles each delta into the next version and swaps it in.
The run prints one line per span; the full log goes to ``<out>/make_run_continuous.log``.
"""
import argparse
import dataclasses
import glob
import json
import logging
import os
import sys
import threading
import time
from typing import Callable, List, Optional

from pipeline import configs


def log_origin_ms(data_path: str, log_file_pattern: str = configs.LOG_FILE_PATTERN) -> int:
    """00:00 UTC+8 of the first ``date`` in the log files (the start of span 0)."""
    import pandas as pd

    from components.log_example_gen.row_rules import day_start_ms

    files = sorted(glob.glob(os.path.join(data_path, log_file_pattern)))
    if not files:
        raise ValueError(f"no log file matches {os.path.join(data_path, log_file_pattern)!r}")
    first = min(int(pd.read_csv(f, usecols=["date"])["date"].min()) for f in files if os.path.getsize(f))
    return day_start_ms(first)


def span_example_gen_config(k: int, origin_ms: int, base=None, span_hours: float = None,
                            holdout_hours: float = None, from_span: Optional[int] = None):
    """configs.LOG_EXAMPLE_GEN (or `base`) restricted to span k; `from_span`: train on spans
    from_span..k instead (the growing window Transform analyses in a full run)."""
    from components.log_example_gen.span import span_window

    span_hours, holdout_hours = span_hours or configs.SPAN_HOURS, holdout_hours or configs.SPAN_HOLDOUT_HOURS
    w = span_window(k, origin_ms, span_hours, holdout_hours)
    start = w.start_ms if from_span is None else span_window(from_span, origin_ms, span_hours, holdout_hours).start_ms
    return dataclasses.replace(base or configs.LOG_EXAMPLE_GEN, span_index=w.index, span_start_ms=start,
                               span_end_ms=w.end_ms, span_holdout_ms=w.holdout_ms)


def run_mode_for(k: int, output_dir: str, transform_every: int = None) -> str:
    """"full" on spans k % transform_every == 0 (default CONTINUOUS_TRANSFORM_EVERY) and while no
    TransformGraph exists, else "delta"."""
    from pipeline.artifacts import PipelineStore

    transform_every = int(transform_every or configs.CONTINUOUS_TRANSFORM_EVERY)
    if transform_every < 1:
        raise ValueError(f"transform_every must be >= 1, got {transform_every}")
    if k % transform_every == 0:
        return "full"
    metadata = configs.output_paths(output_dir)["metadata_path"]
    has_graph = os.path.exists(metadata) and PipelineStore(metadata).latest_uri("Transform", "transform_graph")
    return "delta" if has_graph else "full"


def run_span(k: int, data_path: str, output_dir: str, origin_ms: int, mode: Optional[str] = None,
             span_hours: float = None, holdout_hours: float = None, transform_every: int = None,
             **overrides) -> dict:
    """One pipeline run on span k; returns {"span", "mode", "seconds", "blessed", "publish", "warm_start"}.
    `transform_every`: run_mode_for's; `overrides`: create_pipeline arguments (tests: small trainer,
    lenient gates)."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import runners
    from pipeline.artifacts import PipelineStore

    mode = mode or run_mode_for(k, output_dir, transform_every)
    base = overrides.pop("example_gen_config", None)
    example_gen_config = span_example_gen_config(k, origin_ms, base, span_hours, holdout_hours)
    if mode == "full" and k > 0:  # vocabularies on the growing window: every span so far
        overrides.setdefault("vocab_example_gen_config",
                             span_example_gen_config(k, origin_ms, base, span_hours, holdout_hours, from_span=0))
    overrides.setdefault("model_report", False)
    started = time.time()
    LocalDagRunner().run(runners.build_local(
        data_path, output_dir, example_gen_config=example_gen_config, run_mode=mode, **overrides))
    store = PipelineStore.for_output_dir(output_dir)
    history_path = os.path.join(store.latest_uri("Trainer", "model_run") or "", "history.json")
    warm = None
    if os.path.exists(history_path):
        with open(history_path) as f:
            warm = json.load(f).get("warm_start")
    return {"span": k, "mode": mode, "seconds": round(time.time() - started, 1), "blessed": store.blessed(),
            "publish": store.publish_report() or {}, "warm_start": warm,
            "window_ms": [example_gen_config.span_start_ms, example_gen_config.span_end_ms]}


class _Traffic(threading.Thread):
    """A client predicting a few held-back eval rows every `interval` s (no retries) while the
    spans run, so every version swap happens under traffic: each failed request is recorded."""

    def __init__(self, url: str, instances: list, interval: float = 0.5):
        super().__init__(daemon=True)
        self.url, self.instances, self.interval = url, instances, interval
        self.ok, self.failures, self.stopped = 0, [], threading.Event()

    def run(self):
        from serving.client import predict

        while not self.stopped.wait(self.interval):
            try:
                if len(predict(self.url, configs.MODEL_NAME, self.instances, retries=0, timeout=30)) != \
                        len(self.instances):
                    raise ValueError("wrong number of predictions")
                self.ok += 1
            except Exception as e:  # noqa: BLE001 - counted and reported per span
                self.failures.append(repr(e)[:300])

    def counts(self) -> dict:
        return {"ok": self.ok, "failed": len(self.failures), "first_failures": self.failures[:3]}


def _start_traffic(server, output_dir: str) -> Optional[_Traffic]:
    from models import features as F
    from pipeline.artifacts import PipelineStore, held_back_examples
    from serving.client import examples_to_instances

    examples = held_back_examples(PipelineStore.for_output_dir(output_dir).examples_uri(), 4)
    if not examples:
        return None
    traffic = _Traffic(server.url, examples_to_instances(examples, F.SERVING_RAW_FEATURES))
    traffic.start()
    return traffic


def run_continuous(num_spans: int, data_path: str, output_dir: str, first_span: int = 0, serve: bool = True,
                   on_run: Optional[Callable[[dict, object], None]] = None, traffic: bool = True,
                   transform_every: int = None, **overrides) -> List[dict]:
    """Spans first_span .. first_span + num_spans - 1, one run each (module doc). With `serve`
    the embedded server runs on the serving base from the first published version on (with
    `traffic`, a client predicts held-back rows every 0.5 s; each summary's "requests" counts
    its requests so far, ok and failed); `on_run(summary, server)` is called after every run.
    Returns the run summaries."""
    from serving.http_server import start_server
    from serving.model_manager import list_versions

    origin = configs.SPAN_ORIGIN_MS if configs.SPAN_ORIGIN_MS is not None else log_origin_ms(data_path)
    serving_dir = overrides.get("serving_model_dir") or configs.output_paths(output_dir)["serving_model_dir"]
    server, client, summaries = None, None, []
    try:
        for k in range(first_span, first_span + num_spans):
            summary = run_span(k, data_path, output_dir, origin, transform_every=transform_every, **dict(overrides))
            if serve and server is None and os.path.isdir(serving_dir) and list_versions(serving_dir):
                server, _ = start_server(serving_dir, configs.MODEL_NAME, port=0)
                client = _start_traffic(server, output_dir) if traffic else None
            if server is not None:
                manager = server.managers[configs.MODEL_NAME]
                manager.poll()  # assemble and swap in what this run published now (the poller would too)
                summary["served_version"] = manager.current.version if manager.current else None
                summary["server_url"] = server.url
            if client is not None:
                time.sleep(1.0)  # requests against the version just swapped in too
                summary["requests"] = client.counts()
            summaries.append(summary)
            if on_run is not None:
                on_run(summary, server)
    finally:
        if client is not None:
            client.stopped.set()
            client.join(timeout=60)
        if server is not None:
            server.stop()
    return summaries


def _line(s: dict) -> str:
    p, w = s["publish"], s.get("warm_start") or {}
    warm = (f"warm start: first-batch loss {w['loss_before']:.4f} (cold) -> {w['loss_after']:.4f} (restored)"
            if w else "cold start")
    published = (f"published {p['kind']} v{p['version']} ({p.get('bytes') or 0:,} bytes)"
                 if p.get("kind") and p.get("version") else "published nothing")
    rungs = p.get("delta_rungs") or []
    if rungs:  # the adaptive delta budget: rungs tried, the one sent (or why none)
        tried = ", ".join(f"{r['fraction']:g}+{r['dense']}" + (f" {r['full_share']:.1%} of full" if r.get("full_share")
                                                                else "")
                          + (f" NE {100 * r['ne_loss']:+.3f} % AUC drop {r['auc_drop']:+.4f}" if "ne_loss" in r else "")
                          + (" ok" if r.get("passed") else "") for r in rungs)
        published += f"  delta rungs [{tried}]" + (f", {p['delta_full_share']:.1%} of the full version"
                                                   if p.get("kind") == "delta" and p.get("delta_full_share") else "")
    requests = s.get("requests")
    served = f"served v{s.get('served_version') or '-'}" + (
        f" ({requests['ok']} requests ok, {requests['failed']} failed so far)" if requests else "")
    return (f"span {s['span']:>3} [{s['mode']:>5}] {s['seconds']:7.1f} s  blessed {bool(s['blessed'])!s:<5} "
            f"{published}  {served}  {warm}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spans", type=int, default=3, help="number of spans to run")
    p.add_argument("--first-span", type=int, default=0)
    p.add_argument("--logs", help="folder of KuaiRand-Pure-format files (default: simulated logs)")
    p.add_argument("--out", default="outputs/continuous", help="output root (pipeline root, MLMD, serving dir)")
    p.add_argument("--model-type")
    p.add_argument("--watch-head")
    p.add_argument("--no-serve", action="store_true", help="do not run the embedded server")
    args = p.parse_args(argv if argv is not None else sys.argv[1:])
    out = os.path.abspath(args.out)
    from pipeline.run_local import _Console  # the terminal kept aside, everything else to the log

    console = _Console(os.path.join(out, "make_run_continuous.log"))
    console.say(f"[run-continuous] full log: {os.path.join(args.out, 'make_run_continuous.log')}")
    from absl import logging as absl_logging

    from pipeline import runners

    absl_logging.set_verbosity(absl_logging.INFO)
    data_path = runners.ensure_simulated_logs(os.path.abspath(args.logs) if args.logs else None)
    trainer = configs.trainer_config(args.model_type, **({"watch_head": args.watch_head} if args.watch_head else {}))
    console.say(f"[run-continuous] logs {data_path}; ranker {trainer.model_type} + {trainer.watch_head}; "
                f"{args.spans} spans of {configs.SPAN_HOURS} h from span {args.first_span}; "
                f"Transform every {configs.CONTINUOUS_TRANSFORM_EVERY} spans")
    try:
        summaries = run_continuous(args.spans, data_path, out, first_span=args.first_span, serve=not args.no_serve,
                                   on_run=lambda s, _: console.say("[run-continuous] " + _line(s)),
                                   trainer_config=trainer)
        with open(os.path.join(out, "continuous_summary.json"), "w") as f:  # every span's publish report
            json.dump(summaries, f, indent=1, default=str)
    except Exception as e:  # noqa: BLE001 - one line on the terminal, the traceback in the log
        console.err.write(f"[run-continuous] FAILED: {type(e).__name__}: {str(e)[:2000]}\n")
        logging.exception("run-continuous failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
