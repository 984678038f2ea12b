"""Command line of the embedded server: ``python -m serving`` with TF Serving's flags.

    python -m serving --model_base_path outputs/serving_model/watchtime_ranker \
        --model_name watchtime_ranker --port 8501
    python -m serving --model_config_file serving/models.config --port 8501

Serves until SIGINT/SIGTERM, then stops the pollers and closes the socket.
"""
import argparse
import logging
import os
import signal
import sys
import threading

from serving.config import ServingConfig
from serving.http_server import make_server
from serving.model_config import read_model_config

log = logging.getLogger(__name__)


def build_arg_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m serving",
        description="TF-Serving-REST-compatible server for pushed SavedModel versions.")
    p.add_argument("--model_base_path", help="directory holding <version>/saved_model.pb")
    p.add_argument("--model_name", default="default",
                   help="name in /v1/models/<name> (TF Serving's default: 'default')")
    p.add_argument("--model_config_file",
                   help="TF Serving text ModelServerConfig (several models); "
                        "replaces --model_name/--model_base_path")
    p.add_argument("--port", "--rest_api_port", dest="port", type=int, default=8501,
                   help="REST port (0 = any free port)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (0.0.0.0 for all)")
    d = ServingConfig()  # TF Serving's flag defaults
    p.add_argument("--file_system_poll_wait_seconds", type=float,
                   default=d.file_system_poll_wait_seconds,
                   help="seconds between scans for new versions (<= 0: never rescan)")
    p.add_argument("--model_config_file_poll_wait_seconds", type=float,
                   default=d.model_config_file_poll_wait_seconds,
                   help="seconds between re-reads of --model_config_file (0: read once)")
    p.add_argument("--max_num_load_retries", type=int, default=d.max_num_load_retries)
    p.add_argument("--load_retry_interval_micros", type=int,
                   default=int(d.load_retry_interval_seconds * 1e6))
    p.add_argument("--enable_model_warmup", type=lambda v: v.lower() in ("1", "true"),
                   default=d.enable_model_warmup)
    p.add_argument("--num_request_iterations_for_warmup", type=int,
                   default=d.num_request_iterations_for_warmup)
    p.add_argument("--rest_api_timeout_in_ms", type=int,
                   default=int(d.read_timeout_seconds * 1000),
                   help="socket read timeout of a request (ms)")
    p.add_argument("--allow_version_labels_for_unavailable_models",
                   type=lambda v: v.lower() in ("1", "true"),
                   default=d.allow_version_labels_for_unavailable_models)
    p.add_argument("--tensorflow_intra_op_parallelism", type=int,
                   default=d.tensorflow_intra_op_parallelism,
                   help="threads within one op (0: TensorFlow picks, one per core)")
    p.add_argument("--tensorflow_inter_op_parallelism", type=int,
                   default=d.tensorflow_inter_op_parallelism,
                   help="threads running independent ops (0: TensorFlow picks)")
    p.add_argument("--python_switch_interval_ms", type=float, default=d.python_switch_interval_ms,
                   help="CPython's GIL switch interval while serving (<= 0: Python's 5 ms)")
    p.add_argument("--verbose", action="store_true", help="log every request")
    return p


def main(argv=None) -> int:
    args = build_arg_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.model_config_file:
        models = read_model_config(args.model_config_file)
    elif args.model_base_path:
        models = {args.model_name: args.model_base_path}
    else:
        print("error: give --model_base_path (and --model_name) or --model_config_file",
              file=sys.stderr)
        return 2
    for name, base in models.items():
        if not os.path.isdir(base):
            print(f"error: model base path of '{name}' does not exist: {base}",
                  file=sys.stderr)
            return 2
    config = ServingConfig(
        file_system_poll_wait_seconds=args.file_system_poll_wait_seconds,
        model_config_file_poll_wait_seconds=args.model_config_file_poll_wait_seconds,
        max_num_load_retries=args.max_num_load_retries,
        load_retry_interval_seconds=args.load_retry_interval_micros / 1e6,
        enable_model_warmup=args.enable_model_warmup,
        num_request_iterations_for_warmup=args.num_request_iterations_for_warmup,
        read_timeout_seconds=args.rest_api_timeout_in_ms / 1000,
        allow_version_labels_for_unavailable_models=(
            args.allow_version_labels_for_unavailable_models),
        tensorflow_intra_op_parallelism=args.tensorflow_intra_op_parallelism,
        tensorflow_inter_op_parallelism=args.tensorflow_inter_op_parallelism,
        python_switch_interval_ms=args.python_switch_interval_ms)
    server = make_server(models, args.port, args.host, config=config,
                         model_config_file=args.model_config_file)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    server.start_background()
    intra, inter = server.core.tensorflow_threads
    print(f"TensorFlow thread pools: intra-op {intra or 'one per core'}, "
          f"inter-op {inter or 'one per core'}", flush=True)
    for name, m in server.managers.items():
        cur = m.current
        print(f"Serving model '{name}' ({'version ' + str(cur.version) if cur else 'no version yet'}) "
              f"at {server.url}/v1/models/{name}", flush=True)
    while not stop.wait(0.5):
        pass
    log.info("shutting down")
    server.stop()
    log.info("stopped")
    return 0
