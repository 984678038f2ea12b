"""End-to-end on real logs: a subset of KuaiRand-Pure (every user with id % 12 == 0)
through every TFX component in-process with DIN and both watch heads (CREAD + CQE):
Transform, Trainer, Evaluator, Publisher, REST predictions, the report and TensorBoard
tags. Skipped when ../shared/data/kuairand-pure is absent. A file of its own so
pytest-xdist (--dist loadfile) runs it beside the simulated-log CLI run."""
import csv
import glob
import os

import pytest

from tests.conftest import KUAIRAND_DIR
from tests.helpers import e2e_utils

pytestmark = pytest.mark.e2e


def _kuairand_subset(dst, user_modulo):
    """Every log row of users with user_id % user_modulo == 0, plus the full side tables."""
    os.makedirs(dst)
    for name in os.listdir(KUAIRAND_DIR):
        src = os.path.join(KUAIRAND_DIR, name)
        if name.startswith("log_"):
            with open(src, newline="") as fin, open(os.path.join(dst, name), "w", newline="") as fout:
                reader, writer = csv.reader(fin), csv.writer(fout)
                writer.writerow(next(reader))
                writer.writerows(r for r in reader if int(r[0]) % user_modulo == 0)
        elif name.endswith(".csv"):
            os.symlink(src, os.path.join(dst, name))


@pytest.mark.skipif(not glob.glob(os.path.join(KUAIRAND_DIR, "log_*.csv")),
                    reason=f"real KuaiRand-Pure logs not found at {KUAIRAND_DIR}")
def test_pipeline_on_real_kuairand_subset(tmp_path):
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner

    from pipeline import configs
    from pipeline.runners import build_local

    logs = str(tmp_path / "kuairand")
    _kuairand_subset(logs, user_modulo=12)
    out = str(tmp_path / "out")
    # DIN with both watch heads: target attention, CREAD (EAD asset) and CQE quantiles
    # through Transform, Trainer, Evaluator, Pusher, REST and the report on real logs
    trainer_config = configs.trainer_config("din", watch_head="cread+cqe")
    LocalDagRunner().run(build_local(logs, out, trainer_config=trainer_config))

    counts = e2e_utils.dead_letter_counts(out)
    assert counts["good_rows"] > 10000 and min(counts["splits"].values()) > 0
    assert e2e_utils.blessed(out)
    metrics = e2e_utils.evaluation_metrics(out)
    assert 0.55 < metrics["click_prob/auc"] <= 1.0, metrics
    assert 0.0 <= metrics["quantiles/mean_coverage_error"] < 0.1, metrics
    e2e_utils.check_published(out)
    instances, predictions = e2e_utils.rest_predictions(out, n=8)
    e2e_utils.assert_predictions_in_range(instances, predictions)
    for pred in predictions:
        q = pred["quantiles"]
        assert len(q) == configs.CQE["num_quantiles"] and all(b >= a for a, b in zip(q, q[1:]))
    e2e_utils.check_report_and_tensorboard(out, "model_report_kuairand.png", str(tmp_path))
    index = os.path.join(e2e_utils.newest_report_dir(out), "index.html")
    assert "plots/quantile_calibration.png" in e2e_utils.image_sources(index)
    tags = e2e_utils.tensorboard_tags(configs.output_paths(out)["pipeline_root"])
    assert {"attention/target_attention/weights", "quantiles/spread", "cread/survival",
            "model_analysis/overall/quantiles/mean_coverage_error"} <= tags, sorted(tags)
