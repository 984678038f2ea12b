"""Shared checks for end-to-end runs: the pushed model answers REST predictions."""
import glob
import json
import math
import os

from models import features as F
from pipeline import configs
from pipeline.artifacts import PipelineStore, held_back_examples


def pushed_versions(output_dir: str) -> list:
    base = configs.output_paths(output_dir)["serving_model_dir"]
    return sorted(glob.glob(os.path.join(base, "*", "saved_model.pb")))


def rest_predictions(output_dir: str, n: int = 5):
    """Starts the embedded server on the pushed model, predicts n held-back eval rows."""
    from serving.client import examples_to_instances, predict
    from serving.http_server import start_server

    paths = configs.output_paths(output_dir)
    server, port = start_server(paths["serving_model_dir"], configs.MODEL_NAME, port=0)
    try:
        serialized = held_back_examples(PipelineStore.for_output_dir(output_dir).examples_uri(), n)
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


def _eval_result(output_dir: str):
    import tensorflow_model_analysis as tfma

    return tfma.load_eval_result(PipelineStore.for_output_dir(output_dir).latest_uri("Evaluator", "evaluation"))


def sliced_features(output_dir: str) -> set:
    """Feature names the newest evaluation has slices for."""
    return {name for key, _ in _eval_result(output_dir).slicing_metrics for name, _ in key}


def evaluation_metrics(output_dir: str) -> dict:
    """Overall-slice metrics of the newest Evaluator run, as {output/metric: value}."""
    result = _eval_result(output_dir)
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
    blessing = PipelineStore.for_output_dir(output_dir).latest_uri("Evaluator", "blessing")
    return os.path.exists(os.path.join(blessing, "BLESSED"))


def statistics_sample(output_dir: str):
    """StatisticsGen's rate per split, the examples its statistics counted per split, and
    ExampleValidator's anomalous features per split (newest runs)."""
    from tensorflow_data_validation.utils import anomalies_util, stats_util

    store = PipelineStore.for_output_dir(output_dir)
    rates = store.latest_property("StatisticsGen", "statistics", "sample_rate_by_split")
    stats, anomalies = store.latest_uri("StatisticsGen", "statistics"), store.latest_uri("ExampleValidator", "anomalies")
    counted = {s: stats_util.load_stats_binary(os.path.join(stats, f"Split-{s}", "FeatureStats.pb")).datasets[0]
               .num_examples for s in rates}
    found = {s: sorted(anomalies_util.load_anomalies_binary(os.path.join(anomalies, f"Split-{s}", "SchemaDiff.pb"))
                       .anomaly_info) for s in rates}
    return rates, counted, found


def dead_letter_counts(output_dir: str) -> dict:
    dead_letter = PipelineStore.for_output_dir(output_dir).latest_uri("LogExampleGen", "dead_letter")
    with open(os.path.join(dead_letter, "counts.json")) as f:
        return json.load(f)


# ---------------------------------------------------------------- model analysis report

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARTIFACTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "artifacts")  # git-ignored


def newest_report_dir(output_dir: str) -> str:
    report = PipelineStore.for_output_dir(output_dir).latest_uri("ModelReport", "report")
    assert report, f"no ModelReport output in the MLMD store of {output_dir}"
    return report


def image_sources(index_html: str) -> list:
    """Every <img src> of a page."""
    from html.parser import HTMLParser

    class _Images(HTMLParser):
        def __init__(self):
            super().__init__()
            self.srcs = []

        def handle_starttag(self, tag, attrs):
            if tag == "img":
                self.srcs.append(dict(attrs).get("src"))

    parser = _Images()
    with open(index_html, encoding="utf-8") as f:
        parser.feed(f.read())
    return parser.srcs


def broken_images(index_html: str) -> list:
    """<img src> of the page that are missing, empty or not relative files."""
    base = os.path.dirname(index_html)
    return [src for src in image_sources(index_html)
            if not src or "://" in src or not os.path.isfile(os.path.join(base, src))
            or os.path.getsize(os.path.join(base, src)) == 0]


def chromium_screenshot(index_html: str, png: str, tmp_dir: str, timeout: int = 120) -> str:
    """Opens the page in headless Chromium and screenshots it; returns Chromium's stderr.

    Fails if Chromium exits non-zero or writes no PNG. Console errors (e.g. a resource
    that failed to load) are in the returned log (--enable-logging=stderr).
    """
    import subprocess
    import tempfile

    assert os.path.exists(CHROMIUM), f"{CHROMIUM} not found: run `make chromium` (Debian package chromium)"
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_dir)
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--enable-logging=stderr", "--v=0",
           f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000",
           "file://" + os.path.abspath(index_html)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"chromium exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    assert os.path.isfile(png) and os.path.getsize(png) > 0, f"no screenshot written:\n{proc.stderr[-4000:]}"
    return proc.stderr


def console_errors(chromium_log: str) -> list:
    """Lines of a Chromium log that report a page error (failed resource, JS error)."""
    markers = ("ERR_FILE_NOT_FOUND", "Failed to load resource", "Uncaught", ":CONSOLE")  # page's console
    return [line for line in chromium_log.splitlines() if any(m in line for m in markers)]


def png_is_blank(png: str) -> bool:
    """True when the image is (almost) a single colour."""
    from PIL import Image

    with Image.open(png) as img:
        gray = img.convert("L")
        lo, hi = gray.getextrema()
        colours = gray.getcolors(maxcolors=1 << 16) or []
    return hi - lo < 32 or len(colours) < 8


def tensorboard_tags(logdir: str) -> set:
    """Every summary tag of the event files under logdir (recursively)."""
    import tensorflow as tf

    tags = set()
    for path in glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"), recursive=True):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                tags.add(value.tag)
    return tags


def check_report_and_tensorboard(output_dir: str, screenshot_name: str, tmp_dir: str, blessed: bool = True) -> str:
    """The newest ModelReport: page renders in headless Chromium (screenshot kept under
    tests/artifacts/), every image exists, the blessing is the Evaluator's; TensorBoard
    event files under the pipeline root hold training and model-analysis tags.
    Returns the screenshot path."""
    report_dir = newest_report_dir(output_dir)
    index = os.path.join(report_dir, "index.html")
    assert os.path.isfile(index), index
    assert broken_images(index) == []
    srcs = image_sources(index)
    assert "plots/watch_time_distribution.png" in srcs and "plots/click_calibration.png" in srcs, srcs
    with open(os.path.join(report_dir, "report.json")) as f:
        assert json.load(f)["blessed"] is blessed
    with open(index, encoding="utf-8") as f:
        page = f.read()
    assert ("NOT BLESSED" not in page) if blessed else ("NOT BLESSED" in page)
    os.makedirs(ARTIFACTS_DIR, exist_ok=True)
    png = os.path.join(ARTIFACTS_DIR, screenshot_name)
    if os.path.exists(png):
        os.remove(png)
    log = chromium_screenshot(index, png, tmp_dir)
    assert console_errors(log) == []
    assert not png_is_blank(png)
    print(f"model report {index}; screenshot {png}")

    root = configs.output_paths(output_dir)["pipeline_root"]
    tags = tensorboard_tags(root)  # what `tensorboard --logdir <pipeline root>` shows
    assert {"epoch_loss", "epoch_click_prob_loss", "learning_rate"} <= tags, sorted(tags)[:50]  # Trainer
    assert {"model_analysis/overall/click_prob/auc", "model_analysis/overall/watch_time_s/xauc",
            "model_analysis/overall/watch_time_s/mean_absolute_error", "model_analysis/blessed"} <= tags
    for feature in configs.EVAL_SLICE_FEATURES:
        assert any(t.startswith(f"model_analysis/{feature}=") and t.endswith("/click_prob/auc") for t in tags), feature
    return png


def check_published(out):
    """The Publisher (#10) published an int8 version that passed its gates, with a warmup
    file, and the report has its section."""
    from pipeline.artifacts import PipelineStore

    from components.publisher.publish import candidate_fractions
    from models.publishing.config import PublishConfig

    report = PipelineStore.for_output_dir(out).publish_report()
    assert report["decision"] == "published", report["reason"]
    assert report["deltas"]["ne_loss"] <= report["config"]["max_ne_loss"]
    assert any(t["quantized"] for t in report["tables"].values())
    # int8 rows (16 B + scale for 64 B fp32) halve the embeddings before any pruning
    assert report["embedding_bytes_published"] * 2 < report["embedding_bytes_fp32"]
    # pruning went as far as the gates allow on this trained model: the largest swept
    # fraction that passes them (after any refused ones), and no further; how far that is
    # depends on the model (the 2-thread training is not bit-reproducible)
    config = PublishConfig.from_json_dict(report["config"])
    expected = candidate_fractions(config, report["sweep"])[len(report["prune_fallbacks"])] or 0.0
    assert report["prune_fraction_chosen"] == expected, (report["prune_fraction_chosen"], expected)
    assert (report["rows_kept"] < report["rows"]) == (expected > 0)
    version_dir = os.path.dirname(pushed_versions(out)[-1])
    assert report["path"] == version_dir
    assert os.path.exists(os.path.join(version_dir, "assets.extra", "tf_serving_warmup_requests"))
    assert not [n for n in os.listdir(os.path.dirname(version_dir)) if not n.isdigit()]  # no temp left
    page = open(os.path.join(newest_report_dir(out), "index.html"), encoding="utf-8").read()
    assert "<h2>Published model</h2>" in page
