"""CREAD head wiring: "watch_time_s" is the restoration of its survival probabilities."""
import numpy as np
import tensorflow as tf

from models import heads as H
from models.watch_time import cread as cread_lib
from models.watch_time.cread import restore
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes
from tests.models.heads.small_ranker import L, T, small_ranker


def test_cread_output_is_restoration_of_its_survival_probs():
    model = small_ranker("cread", cread={"restoration": "trapezoid"})
    x, _ = random_transformed(8, L, small_vocab_sizes(), seed=2)
    out = model(x, training=False)
    phi = tf.sigmoid(out["cread_logits"]).numpy()
    np.testing.assert_allclose(out["watch_time_s"].numpy()[:, 0], restore(phi, T, "trapezoid"), rtol=1e-5)
    riemann = small_ranker("cread", cread={"restoration": "riemann"})
    out = riemann(x, training=False)
    np.testing.assert_allclose(out["watch_time_s"].numpy()[:, 0],
                               restore(tf.sigmoid(out["cread_logits"]).numpy(), T, "riemann"), rtol=1e-5)


def test_cread_loss_carries_the_head_settings():
    head = H.CreadWatchHead(T, restoration="riemann", phi0=0.8, lambda_ord=0.0, huber_delta=2.0)
    assert head.output_names == ("cread_logits", "watch_time_s") and head.name == "watch_time_s"
    loss = head.losses()["cread_logits"]
    assert isinstance(loss, cread_lib.CreadLoss) and loss.thresholds == T
    config = loss.get_config()
    assert (config["restoration"], config["phi0"], config["lambda_ord"], config["huber_delta"]) == (
        "riemann", 0.8, 0.0, 2.0)
    assert [m.name for m in head.metrics()["watch_time_s"]] == ["mae"]
