"""`make run`: simulate (or read) logs, run the pipeline locally, serve, predict.

    python -m pipeline.run_local [--logs DIR] [--out DIR] [--model-type NAME]

1. With no --logs, writes simulated KuaiRand-Pure-format logs (data/simulator.py).
2. Runs the whole TFX pipeline with LocalDagRunner (local_runner.build()).
3. Starts the embedded TF-Serving-REST-compatible server on the pushed model.
4. Sends the first few held-back (eval split) log rows as REST `instances` and
   prints each prediction next to what the log says happened.
5. Prints where the model-analysis report (ModelReport's index.html) is and the
   TensorBoard command over the pipeline root.
"""
import argparse
import glob
import json
import os
import sys


def _parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logs", help="folder of KuaiRand-Pure-format files (default: simulated logs)")
    p.add_argument("--out", default="outputs", help="output root (pipeline root, MLMD, serving dir)")
    p.add_argument("--model-type", help="ranker to train (pipeline/configs.py MODEL_TYPE)")
    p.add_argument("--num-predictions", type=int, default=5)
    return p.parse_args(argv)


def held_back_examples(pipeline_root: str, n: int) -> list:
    """The first n serialized eval-split examples of the newest LogExampleGen output."""
    import tensorflow as tf

    runs = sorted(glob.glob(os.path.join(pipeline_root, "LogExampleGen", "examples", "*")),
                  key=lambda d: int(os.path.basename(d)))
    if not runs:
        raise FileNotFoundError(f"no LogExampleGen output under {pipeline_root}")
    files = sorted(glob.glob(os.path.join(runs[-1], "Split-eval", "*")))
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").take(n)
    return [record.numpy() for record in dataset]


def newest_report(pipeline_root: str):
    """index.html of the newest ModelReport output, or None."""
    runs = sorted(glob.glob(os.path.join(pipeline_root, "ModelReport", "report", "*")),
                  key=lambda d: int(os.path.basename(d)))
    index = os.path.join(runs[-1], "index.html") if runs else None
    return index if index and os.path.exists(index) else None


def main(argv=None) -> int:
    args = _parse_args(argv if argv is not None else sys.argv[1:])
    os.environ["OUTPUT_DIR"] = os.path.abspath(args.out)
    if args.logs:
        os.environ["LOGS"] = os.path.abspath(args.logs)
    if args.model_type:
        os.environ["MODEL_TYPE"] = args.model_type
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

    import tensorflow as tf
    from absl import logging
    from tfx import v1 as tfx

    import local_runner
    from models import features as F
    from pipeline import configs
    from serving.client import examples_to_instances, predict
    from serving.server import start_server

    logging.set_verbosity(logging.WARNING)
    local_runner.ensure_simulated_logs()
    print(f"[make run] logs: {configs.DATA_PATH}", flush=True)
    tfx.orchestration.LocalDagRunner().run(local_runner.build())
    report = newest_report(configs.PIPELINE_ROOT)
    print(f"[make run] model analysis report: {report or 'not written'}", flush=True)

    if not glob.glob(os.path.join(configs.SERVING_MODEL_DIR, "*", "saved_model.pb")):
        print(f"[make run] no model was pushed to {configs.SERVING_MODEL_DIR} (not blessed?)", file=sys.stderr)
        return 1
    server, port = start_server(configs.SERVING_MODEL_DIR, configs.MODEL_NAME, port=0)
    try:
        serialized = held_back_examples(configs.PIPELINE_ROOT, args.num_predictions)
        instances = examples_to_instances(serialized, F.SERVING_RAW_FEATURES)
        url = f"http://127.0.0.1:{port}"
        predictions = predict(url, configs.MODEL_NAME, instances)
        print(f"\n[make run] REST predictions from {url}/v1/models/{configs.MODEL_NAME}:predict")
        for raw, pred in zip(serialized, predictions):
            ex = tf.train.Example.FromString(raw)
            f = ex.features.feature
            actual = {"is_click": f[F.LABEL_CLICK].int64_list.value[0],
                      "watch_time_s": round(f[F.LABEL_WATCH].float_list.value[0], 2)}
            shown = {k: [round(x, 4) for x in v] if isinstance(v, list) else v for k, v in pred.items()}
            print(f"  user {f['user_id'].int64_list.value[0]:>6} video {f['video_id'].int64_list.value[0]:>6}: "
                  f"predicted {json.dumps(shown)}  logged {json.dumps(actual)}")
        print(f"\n[make run] pushed models: {configs.SERVING_MODEL_DIR}")
        print(f"[make run] TensorBoard:   {os.path.join(os.path.dirname(sys.executable), 'tensorboard')} "
              f"--logdir {configs.PIPELINE_ROOT}   (training curves + model_analysis/* per slice)")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
