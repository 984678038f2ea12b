"""CQE head wiring: quantiles + CSE/DQC/CDE outputs, watch time = CDE when CQE is alone."""
import numpy as np

from models import heads as H
from models.watch_time import cqe as cqe_lib
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes
from tests.models.heads.small_ranker import L, small_ranker


def test_cqe_alone_serves_cde_as_watch_time():
    model = small_ranker("cqe")
    x, _ = random_transformed(8, L, small_vocab_sizes(), seed=4)
    out = {k: v.numpy() for k, v in model(x, training=False).items()}
    assert out["quantiles"].shape == (8, 9) and out["cse"].shape == out["dqc"].shape == (8, 1)
    np.testing.assert_allclose(out["cde"][:, 0], cqe_lib.conditional_expectation(out["quantiles"]), rtol=1e-5)
    np.testing.assert_array_equal(out["watch_time_s"], out["cde"])
    assert np.all(np.diff(out["quantiles"], axis=-1) >= 0)


def test_cqe_beside_cread_leaves_watch_time_to_cread():
    head = H.CqeWatchHead(num_quantiles=7, provides_watch_time=False)
    assert head.output_names == ("quantiles", "cse", "dqc", "cde") and head.metrics() == {}
    alone = H.CqeWatchHead(num_quantiles=7)
    assert "watch_time_s" in alone.output_names and [m.name for m in alone.metrics()["watch_time_s"]] == ["mae"]
    loss = alone.losses()["quantiles"]
    assert isinstance(loss, cqe_lib.PinballLoss) and loss.num_quantiles == 7
