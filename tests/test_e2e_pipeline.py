"""End-to-end: logs -> every TFX component -> pushed SavedModel -> REST predictions.

Two runs: simulated logs driven through the `tfx` CLI exactly as the README says
(`tfx pipeline create` + `tfx run create`, local engine), and a subset of the real
KuaiRand-Pure logs in-process (skipped when ../shared/data/kuairand-pure is absent).
Both also check the ModelReport (renders in headless Chromium, screenshot under
tests/artifacts/) and the TensorBoard tags under the pipeline root.
"""
import csv
import glob
import os
import subprocess
import sys

import pytest

from tests import e2e_utils
from tests.conftest import KUAIRAND_DIR, ROOT

pytestmark = pytest.mark.e2e


def _tfx_cli(args, env):
    tfx_bin = os.path.join(os.path.dirname(sys.executable), "tfx")
    proc = subprocess.run([tfx_bin] + args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, f"tfx {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return proc.stdout


def test_tfx_cli_local_engine_on_simulated_logs(tmp_path):
    from data.simulator import simulate

    logs = tmp_path / "logs"
    simulate(str(logs), num_users=400, num_videos=300, num_days=5, impressions_per_user_day=8.0, seed=11)
    out = tmp_path / "out"
    env = dict(os.environ, LOGS=str(logs), OUTPUT_DIR=str(out), LOCAL_HOME=str(tmp_path / "tfx_home"),
               TF_USE_LEGACY_KERAS="1", PYTHONPATH=ROOT)

    created = _tfx_cli(["pipeline", "create", "--engine", "local", "--pipeline_path", "local_runner.py"], env)
    assert 'Pipeline "watchtime_ranker" created successfully' in created
    listed = _tfx_cli(["pipeline", "list", "--engine", "local"], env)
    assert "watchtime_ranker" in listed
    _tfx_cli(["run", "create", "--engine", "local", "--pipeline_name", "watchtime_ranker"], env)

    counts = e2e_utils.dead_letter_counts(str(out))
    assert counts["bad_rows"] == 0
    assert e2e_utils.blessed(str(out))
    assert len(e2e_utils.pushed_versions(str(out))) == 1
    metrics = e2e_utils.evaluation_metrics(str(out))
    assert 0.55 < metrics["click_prob/auc"] <= 1.0, metrics
    assert metrics["click_prob/gauc_num_users_used"] > 0 and 0.0 <= metrics["click_prob/gauc"] <= 1.0
    assert 0.5 < metrics["watch_time_s/xauc"] <= 1.0, metrics
    assert metrics["click_prob/example_count"] == counts["splits"]["eval"]
    assert {"tab", "user_active_degree", "duration_bucket"} <= e2e_utils.sliced_features(str(out))
    instances, predictions = e2e_utils.rest_predictions(str(out), n=5)
    e2e_utils.assert_predictions_in_range(instances, predictions)
    e2e_utils.check_report_and_tensorboard(str(out), "model_report_simulated.png", str(tmp_path))


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
    from tfx import v1 as tfx

    import local_runner

    logs = str(tmp_path / "kuairand")
    _kuairand_subset(logs, user_modulo=12)
    out = str(tmp_path / "out")
    tfx.orchestration.LocalDagRunner().run(local_runner.build(logs, out))

    counts = e2e_utils.dead_letter_counts(out)
    assert counts["good_rows"] > 10000
    assert e2e_utils.blessed(out)
    metrics = e2e_utils.evaluation_metrics(out)
    assert 0.55 < metrics["click_prob/auc"] <= 1.0, metrics
    instances, predictions = e2e_utils.rest_predictions(out, n=8)
    e2e_utils.assert_predictions_in_range(instances, predictions)
    e2e_utils.check_report_and_tensorboard(out, "model_report_kuairand.png", str(tmp_path))
