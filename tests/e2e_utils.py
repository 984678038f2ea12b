"""Shared checks for end-to-end runs: the pushed model answers REST predictions."""
import glob
import json
import math
import os

from models import features as F
from pipeline import configs


def pushed_versions(output_dir: str) -> list:
    base = configs.output_paths(output_dir)["serving_model_dir"]
    return sorted(glob.glob(os.path.join(base, "*", "saved_model.pb")))


def rest_predictions(output_dir: str, n: int = 5):
    """Starts the embedded server on the pushed model, predicts n held-back eval rows."""
    from pipeline.run_local import held_back_examples
    from serving.client import examples_to_instances, predict
    from serving.server import start_server

    paths = configs.output_paths(output_dir)
    server, port = start_server(paths["serving_model_dir"], configs.MODEL_NAME, port=0)
    try:
        serialized = held_back_examples(paths["pipeline_root"], n)
        instances = examples_to_instances(serialized, F.SERVING_RAW_FEATURES)
        predictions = predict(f"http://127.0.0.1:{port}", configs.MODEL_NAME, instances)
    finally:
        server.stop()
    return instances, predictions


def assert_predictions_in_range(instances, predictions):
    assert len(predictions) == len(instances) > 0
    for pred in predictions:
        click = pred["click_prob"][0] if isinstance(pred["click_prob"], list) else pred["click_prob"]
        watch = pred["watch_time_s"][0] if isinstance(pred["watch_time_s"], list) else pred["watch_time_s"]
        assert 0.0 <= click <= 1.0, pred
        assert math.isfinite(watch) and 0.0 <= watch < 3600.0, pred


def evaluation_metrics(output_dir: str) -> dict:
    """Overall-slice metrics of the newest Evaluator run, as {output/metric: value}."""
    import tensorflow_model_analysis as tfma

    root = configs.output_paths(output_dir)["pipeline_root"]
    runs = sorted(glob.glob(os.path.join(root, "Evaluator", "evaluation", "*")), key=lambda d: int(os.path.basename(d)))
    result = tfma.load_eval_result(runs[-1])
    metrics = {}
    for slice_key, by_output in result.slicing_metrics:
        if slice_key != ():
            continue
        for output, by_sub in by_output.items():
            for metric, value in by_sub[""].items():
                if "doubleValue" in value:
                    metrics[f"{output}/{metric}"] = value["doubleValue"]
    return metrics


def blessed(output_dir: str) -> bool:
    root = configs.output_paths(output_dir)["pipeline_root"]
    runs = sorted(glob.glob(os.path.join(root, "Evaluator", "blessing", "*")), key=lambda d: int(os.path.basename(d)))
    return os.path.exists(os.path.join(runs[-1], "BLESSED"))


def dead_letter_counts(output_dir: str) -> dict:
    root = configs.output_paths(output_dir)["pipeline_root"]
    found = sorted(glob.glob(os.path.join(root, "LogExampleGen", "*", "*", "counts.json")))
    with open(found[-1]) as f:
        return json.load(f)
