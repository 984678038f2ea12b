"""The bench baselines as heads: WLR (exp of the logit) and D2Q (in-group percentile)."""
import numpy as np
import pytest
import tf_keras as keras

from models import heads as H
from models.watch_time import wlr as wlr_lib


def test_wlr_head_predicts_exp_of_its_logit_and_trains_the_logit():
    z = keras.Input((3,), name="z")
    model = H.compile_ranker(z, z, [H.ClickHead(), H.WlrWatchHead(scale=10.0), H.RankingScoreHead("click_prob")])
    x = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    out = model(x)
    np.testing.assert_allclose(out["watch_time_s"].numpy(), np.exp(out["wlr_logit"].numpy()), rtol=1e-5)
    y = {"click_prob": np.ones((6, 1), np.float32), "watch_time_s": np.full((6, 1), 5.0, np.float32)}
    labels = H.training_labels(model.output_names, y["click_prob"], y["watch_time_s"])
    assert set(labels) == {"click_prob", "watch_time_s", "wlr_logit"}  # watch_time_s: the MAE metric
    res = model.evaluate(x, labels, verbose=0, return_dict=True)
    want = float(np.mean(wlr_lib.wlr_loss(labels["wlr_logit"], out["wlr_logit"]).numpy())) / 10.0
    assert res["wlr_logit_loss"] == pytest.approx(want, rel=1e-4)
    assert "wlr_logit" in H.TRAINING_ONLY_OUTPUTS and H.WlrWatchHead().labels() == {"wlr_logit": "watch_time_s"}
    with pytest.raises(ValueError, match="scale"):
        H.WlrWatchHead(scale=-1.0)


def test_d2q_head_is_a_sigmoid_percentile():
    z = keras.Input((3,), name="z")
    model = H.compile_ranker(z, z, [H.ClickHead(), H.D2qPercentileHead()])
    x = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    w, b = model.get_layer("d2q_percentile").get_weights()
    np.testing.assert_allclose(model(x)["d2q_percentile"].numpy(), 1 / (1 + np.exp(-(x @ w + b))), rtol=1e-5)
    assert H.D2qPercentileHead().losses() == {"d2q_percentile": "mse"}
    assert "d2q_percentile" not in H.OUTPUT_LABELS  # its label comes from the duration groups
