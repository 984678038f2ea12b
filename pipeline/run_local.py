"""`make run`: simulate (or read) logs, run the pipeline locally, serve, predict.

    python -m pipeline.run_local [--logs DIR] [--out DIR] [--model-type NAME] [--watch-head NAME]

1. With no --logs, writes simulated KuaiRand-Pure-format logs (data/simulator/).
2. Runs the whole TFX pipeline with LocalDagRunner (pipeline/runners.py), printing
   one line per component with its elapsed time and the process's peak RSS so far (all
   components run in this one process, so the line where it grows names the component that
   raised it; the figures also go to `<out>/make_run_summary.json`); everything TF, Beam and TFX log
   goes to `<out>/make_run.log` (its path is printed first).
   Caching is on (TFX's MLMD cache): a rerun on unchanged logs and knobs reuses
   every component whose inputs and parameters are unchanged, and its line says
   "(cached)"; a changed knob re-runs its component and everything downstream.
3. Finds the outputs through MLMD (pipeline/artifacts.py): the blessing, the pushed
   version and the model-analysis report.
4. Starts the embedded TF-Serving-REST-compatible server on the newest version of the
   serving directory, sends the first few held-back (eval split) rows as REST
   `instances` and prints each prediction next to what the log says happened.
   A candidate the Evaluator did not bless is a normal outcome: the incumbent (the
   version an earlier run published) keeps serving, the run says which thresholds held
   the candidate back and exits 0. It exits 1 only when nothing can serve.
5. Prints the TensorBoard command over the pipeline root.

DETERMINISTIC=1 (environment, read by pipeline/configs/training.py) trains with
TensorFlow's deterministic ops and fixed one-thread pools: the same seed and data give
bit-identical predictions (README "Reproducible runs").
"""
import argparse
import json
import logging
import os
import sys
import time

from pipeline.process_memory import (COMPONENT_EVENT, default_onednn_off, freeze_loaded_objects, peak_rss_mb,
                                     release_free_memory, rss_mb)


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", help="folder of KuaiRand-Pure-format files (default: simulated logs)")
    p.add_argument("--out", default="outputs", help="output root (pipeline root, MLMD, serving dir)")
    p.add_argument("--model-type", help="ranker to train (pipeline/configs/ MODEL_TYPE)")
    p.add_argument("--watch-head", help="watch-time head (pipeline/configs/ WATCH_HEAD)")
    p.add_argument("--num-predictions", type=int, default=5)
    return p.parse_args(argv)


def _relative(path: str) -> str:
    """Paths as the user typed them: relative to the working directory when inside it."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


class _Console:
    """The user's terminal, kept aside while file descriptors 1 and 2 go to the log
    file (TF's C++ start-up messages, Beam and TFX logging, warnings)."""

    def __init__(self, log_path: str):
        os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        self.out = os.fdopen(os.dup(1), "w", buffering=1)
        self.err = os.fdopen(os.dup(2), "w", buffering=1)
        self._log = open(log_path, "a", buffering=1)
        os.dup2(self._log.fileno(), 1)
        os.dup2(self._log.fileno(), 2)

    def say(self, message: str = "") -> None:
        self.out.write(message + "\n")
        print(message, flush=True)  # the log gets it too


class _ComponentProgress(logging.Handler):
    """One console line per TFX component, from LocalDagRunner's own log records
    ("Component X is running." / "... is finished.", "A cached execution ... is used."),
    with the process's peak RSS so far; after each component the heap's freed pages go
    back to the OS (process_memory.release_free_memory: every component runs in this one
    process, and glibc would keep what the Trainer or the Publisher freed). `components`
    keeps each line's figures (`<out>/make_run_summary.json`)."""

    _EVENT = COMPONENT_EVENT

    def __init__(self, console: _Console):
        super().__init__(level=logging.INFO)
        self.console = console
        self.started = {}
        self.cached = False
        self.current = None
        self.components = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad log record must not stop the run
            return
        if message.startswith("A cached execution"):
            self.cached = True
            return
        match = self._EVENT.search(message)
        if not match:
            return
        node, event = match.groups()
        if event == "running":
            self.started[node], self.cached, self.current = time.time(), False, node
        else:
            seconds = time.time() - self.started.pop(node, time.time())
            self.current = None
            peak = peak_rss_mb()
            release_free_memory()
            self.components.append({"name": node, "seconds": round(seconds, 1), "cached": self.cached,
                                    "process_peak_rss_mib": round(peak), "rss_after_mib": round(rss_mb())})
            self.console.say(f"  {node:<32} {seconds:7.1f} s   process peak RSS {peak / 1024:5.2f} GiB"
                             f"{'  (cached)' if self.cached else ''}")


def _print_predictions(console, store, serving_dir, model_name, n) -> None:
    import tensorflow as tf

    from models import features as F
    from pipeline import configs
    from pipeline.artifacts import held_back_examples
    from serving.client import examples_to_instances, predict
    from serving.config import ServingConfig
    from serving.http_server import start_server

    # in the pipeline's process TensorFlow's thread pools are already fixed: keep them
    config = ServingConfig(**configs.SERVING).replace(tensorflow_intra_op_parallelism=0,
                                                      tensorflow_inter_op_parallelism=0)
    server, port = start_server(serving_dir, model_name, port=0, config=config)
    try:
        serialized = held_back_examples(store.examples_uri(), n)
        instances = examples_to_instances(serialized, F.SERVING_RAW_FEATURES)
        url = f"http://127.0.0.1:{port}"
        predictions = predict(url, model_name, instances)
        console.say(f"\n[make run] REST predictions from {url}/v1/models/{model_name}:predict (held-back eval rows)")
        for raw, pred in zip(serialized, predictions):
            f = tf.train.Example.FromString(raw).features.feature
            actual = {"is_click": f[F.LABEL_CLICK].int64_list.value[0],
                      "watch_time_s": round(f[F.LABEL_WATCH].float_list.value[0], 2)}
            shown = {k: round(v[0] if isinstance(v, list) else v, 3) for k, v in pred.items() if k != "quantiles"}
            if "quantiles" in pred:  # deciles of the predicted watch-time distribution, not all N levels
                q = pred["quantiles"]
                shown["q10/q50/q90"] = [round(q[int(len(q) * t)], 1) for t in (0.1, 0.5, 0.9)]
            console.say(f"  user {f['user_id'].int64_list.value[0]:>6} video {f['video_id'].int64_list.value[0]:>6}: "
                        f"predicted {json.dumps(shown)}")
            console.say(f"  {'':>25}logged    {json.dumps(actual)}")
    finally:
        server.stop()


def what_serves(serving_dir: str, pushed_dir, blessed):
    """(version directory a server over `serving_dir` loads, console line): the highest
    numeric version, as TF Serving's latest-version policy, or None when there is none.
    `pushed_dir`: this run's push (None: nothing pushed); `blessed`: the Evaluator's verdict."""
    from components.publisher.versioning import list_versions

    versions = list_versions(serving_dir)
    if not versions:
        return None, (f"nothing to serve: no model version under {_relative(serving_dir)} "
                      f"(no run has blessed and pushed one yet)")
    serving = os.path.join(serving_dir, str(max(versions)))
    if pushed_dir and os.path.normpath(pushed_dir) == os.path.normpath(serving):
        return serving, f"serving {_relative(serving)} (this run's model)"
    why = "was not blessed" if blessed is False else "was not pushed"
    return serving, f"serving the incumbent {_relative(serving)}: this run's candidate {why} and is held back"


def main(argv=None) -> int:
    args = _parse_args(argv if argv is not None else sys.argv[1:])
    os.environ["OUTPUT_DIR"] = os.path.abspath(args.out)
    if args.logs:
        os.environ["LOGS"] = os.path.abspath(args.logs)
    if args.model_type:
        os.environ["MODEL_TYPE"] = args.model_type
    if args.watch_head:
        os.environ["WATCH_HEAD"] = args.watch_head
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    # oneDNN's caches kept ~0.9 GiB after the Trainer, which every later component of this
    # one process sat on (#33, README "Scale"); TF_ENABLE_ONEDNN_OPTS=1 has them back.
    default_onednn_off()

    log_path = os.path.join(os.path.abspath(args.out), "make_run.log")
    console = _Console(log_path)
    console.say(f"[make run] full log: {_relative(log_path)}")
    started = time.time()

    from absl import logging as absl_logging
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import configs, runners
    from pipeline.artifacts import PipelineStore

    if configs.DETERMINISTIC:  # before any TensorFlow op starts its thread pools
        from models.training.determinism import enable_determinism

        enable_determinism()
        console.say("[make run] DETERMINISTIC=1: deterministic ops, one-thread TensorFlow pools")

    absl_logging.set_verbosity(absl_logging.INFO)
    progress = _ComponentProgress(console)
    logging.getLogger().addHandler(progress)  # absl's records propagate to the root logger

    data_path = runners.ensure_simulated_logs()
    kind = "real" if args.logs else "simulated"
    console.say(f"[make run] {kind} logs: {_relative(data_path)}")
    trainer = configs.TRAINER
    console.say(f"[make run] pipeline {configs.PIPELINE_NAME}: ranker {trainer.model_type}, "
                f"watch head {trainer.watch_head}, ranking score '{trainer.ranking_score}'")
    try:
        dag = runners.build_local(enable_cache=True)
        freeze_loaded_objects()
        LocalDagRunner().run(dag)
    except Exception as e:  # noqa: BLE001 - report where it failed, then the log holds the rest
        where = f" in {progress.current}" if progress.current else ""
        console.err.write(f"[make run] FAILED{where}: {type(e).__name__}: {str(e)[:2000]}\n"
                          f"[make run] full log: {_relative(log_path)}\n")
        logging.exception("make run failed")
        return 1
    finally:
        logging.getLogger().removeHandler(progress)
    seconds = time.time() - started
    console.say(f"[make run] pipeline finished in {seconds:.0f} s")
    with open(os.path.join(os.path.abspath(args.out), "make_run_summary.json"), "w") as f:
        json.dump({"logs": _relative(data_path), "pipeline_seconds": round(seconds, 1),
                   "process_peak_rss_mib": round(peak_rss_mb()), "components": progress.components}, f, indent=1)

    store = PipelineStore(configs.METADATA_PATH)
    blessed = store.blessed()
    report = store.report_index()
    version_dir = store.pushed_version_dir()
    console.say(f"[make run] blessed: {'yes' if blessed else 'no'}; "
                f"pushed version: {_relative(version_dir) if version_dir else 'none'}")
    if blessed is False:  # say which threshold the Evaluator held the candidate to
        for line in store.blessing_failures():
            console.say(f"[make run]   not blessed: {line}")
    published = store.publish_report() or {}
    if published.get("embedding_bytes_fp32"):
        console.say(f"[make run] publisher: {published['decision']} ({published['reason']}); embedding tables "
                    f"{published['embedding_bytes_fp32']:,} -> {published['embedding_bytes_published']:,} bytes, "
                    f"NE loss {100 * published['deltas']['ne_loss']:+.4f} %, "
                    f"golden max |dp| {published.get('golden_max_abs_delta_click_prob')}")
    console.say(f"[make run] model analysis report: {_relative(report) if report else 'not written'}")
    tensorboard = os.path.join(os.path.dirname(sys.executable), "tensorboard")
    tb_line = (f"[make run] TensorBoard: {_relative(tensorboard)} --logdir {_relative(configs.PIPELINE_ROOT)}"
               f"   (training curves + model_analysis/* per slice)")
    serving, line = what_serves(configs.SERVING_MODEL_DIR, version_dir, blessed)
    if serving is None:
        console.say(tb_line)
        console.err.write(f"[make run] {line}\n")
        return 1
    console.say(f"[make run] {line}")
    _print_predictions(console, store, configs.SERVING_MODEL_DIR, configs.MODEL_NAME, args.num_predictions)
    console.say("")
    console.say(tb_line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
