"""Tests of data/simulator/marginals.py."""
import numpy as np
import pandas as pd
import pytest

from data.simulator.marginals import measure_marginals


def test_click_auc_of_true_p_matches_pairwise_count():
    """The AUC marginal (models.evaluation.metrics.auc) counts tied scores as 1/2."""
    rng = np.random.default_rng(0)
    score = rng.integers(0, 5, 60).astype(float)  # ties on purpose
    label = rng.integers(0, 2, 60)
    pos, neg = score[label == 1], score[label == 0]
    brute = ((pos[:, None] > neg[None, :]).sum()
             + 0.5 * (pos[:, None] == neg[None, :]).sum()) / (pos.size * neg.size)
    log = pd.DataFrame({"user_id": np.arange(60) % 7, "video_id": np.arange(60),
                        "is_click": label, "play_time_ms": np.zeros(60, dtype=np.int64),
                        "long_view": np.zeros(60, dtype=np.int64),
                        "duration_ms": np.full(60, 10_000)})
    truth = pd.DataFrame({"p_click": score, "expected_watch_time_s": np.zeros(60)})
    assert measure_marginals(log, truth)["click_auc_of_true_p"] == pytest.approx(brute)
