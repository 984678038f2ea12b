"""Blessing gates end to end: a degraded candidate is not blessed and not pushed.

Two LocalDagRunner runs over the same pipeline root and MLMD store with caching on:

1. the configured trainer -> blessed (absolute bounds only: no baseline yet), pushed;
2. the same trainer with ``shuffle_labels_seed`` (run_fn's diagnostic knob: labels
   permuted within each training batch, so the model learns no feature-label link)
   -> evaluated against run 1's model (Resolver, LatestBlessedModelStrategy), fails
   the AUC floor and the allowed AUC drop -> NOT_BLESSED, the Pusher publishes
   nothing, the serving directory still holds run 1's single version.

Run 2 reuses LogExampleGen ... Transform from the cache (checked), so only Trainer,
Evaluator, Pusher and ModelReport run again.
"""
import glob
import os

import pytest

from tests import e2e_utils

def _executions(pipeline_root, component, output):
    return glob.glob(os.path.join(pipeline_root, component, output, "*"))


def test_shuffle_labels_permutes_every_label_together():
    import numpy as np
    import tensorflow as tf

    from models.run_fn import shuffle_labels

    n = 64
    x = np.arange(n, dtype=np.float32)
    ds = tf.data.Dataset.from_tensors(({"x": x}, {"click_prob": x * 2, "watch_time_s": x * 3}))
    features, labels = next(iter(shuffle_labels(ds, seed=1)))
    click, watch = labels["click_prob"].numpy(), labels["watch_time_s"].numpy()
    np.testing.assert_array_equal(features["x"].numpy(), x)
    assert sorted(click) == sorted(x * 2)  # same labels ...
    np.testing.assert_allclose(watch, click * 1.5)  # ... one permutation for all of them
    assert np.mean(click != x * 2) > 0.9  # ... detached from their features


@pytest.mark.e2e
def test_degraded_candidate_is_not_blessed_and_not_pushed(tmp_path):
    from tfx import v1 as tfx

    import local_runner
    from components.model_report import inputs
    from data.simulator import simulate
    from pipeline import configs

    logs, out = str(tmp_path / "logs"), str(tmp_path / "out")
    simulate(logs, num_users=400, num_videos=300, num_days=5, impressions_per_user_day=8.0, seed=11)
    root = configs.output_paths(out)["pipeline_root"]
    good = local_runner.trainer_config()

    tfx.orchestration.LocalDagRunner().run(local_runner.build(logs, out, enable_cache=True, trainer_config=good))
    assert e2e_utils.blessed(out)
    versions = e2e_utils.pushed_versions(out)
    assert len(versions) == 1
    good_auc = e2e_utils.evaluation_metrics(out)["click_prob/auc"]

    degraded = dict(good, shuffle_labels_seed=1)
    tfx.orchestration.LocalDagRunner().run(local_runner.build(logs, out, enable_cache=True, trainer_config=degraded))

    # Upstream outputs came from the cache; the trainer ran again.
    assert len(_executions(root, "LogExampleGen", "examples")) == 1
    assert len(_executions(root, "Transform", "transform_graph")) == 1
    assert len(_executions(root, "Trainer", "model")) == 2

    assert not e2e_utils.blessed(out)
    assert e2e_utils.pushed_versions(out) == versions  # nothing new published
    evaluation = inputs.load_evaluation(sorted(_executions(root, "Evaluator", "evaluation"),
                                               key=lambda d: int(os.path.basename(d)))[-1])
    assert evaluation.has_baseline and not evaluation.validation_ok
    failed = {(g.output, g.metric, g.kind) for g in evaluation.gates if not g.passed}
    assert ("click_prob", "auc", "change") in failed, evaluation.gates
    overall = evaluation.overall()
    assert overall.metrics["click_prob"]["auc"] < good_auc - 0.05
    assert overall.baseline["click_prob"]["auc"] == pytest.approx(good_auc, abs=1e-6)
    # The report of the degraded run says so.
    page = open(os.path.join(e2e_utils.newest_report_dir(out), "index.html"), encoding="utf-8").read()
    assert "NOT BLESSED" in page and 'class="fail"' in page
