"""The bench baselines as heads: WLR (exp of the logit), D2Q (in-group percentile, MSE or L1)
and the watch ratio (capped watch / duration)."""
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


def test_d2q_median_variant_trains_with_l1():
    assert H.D2qPercentileHead("mae").losses() == {"d2q_percentile": "mae"}
    with pytest.raises(ValueError, match="loss"):
        H.D2qPercentileHead("huber")


def test_watch_ratio_label_by_hand():
    # 30/60 = 0.5; 90/30 = 3 capped at 2; duration 0 counts as 1 s: 0.5/1 = 0.5
    np.testing.assert_allclose(H.watch_ratio([30.0, 90.0, 0.5], [60.0, 30.0, 0.0], cap=2.0), [0.5, 2.0, 0.5])


def test_watch_ratio_head_is_a_capped_sigmoid_with_the_chosen_loss():
    z = keras.Input((3,), name="z")
    model = H.compile_ranker(z, z, [H.ClickHead(), H.WatchRatioHead(cap=2.0, loss="mae")])
    x = np.random.default_rng(4).normal(size=(5, 3)).astype(np.float32)
    w, b = model.get_layer("watch_ratio_unit").get_weights()
    want = 2.0 / (1 + np.exp(-(x @ w + b)))
    np.testing.assert_allclose(model(x)["watch_ratio"].numpy(), want, rtol=1e-5)
    r = np.array([[0.0], [0.5], [1.0], [2.0], [1.5]], np.float32)
    res = model.evaluate(x, {"click_prob": np.ones((5, 1), np.float32), "watch_ratio": r}, verbose=0,
                         return_dict=True)
    assert res["watch_ratio_loss"] == pytest.approx(float(np.mean(np.abs(r - want))), rel=1e-4)
    assert H.WatchRatioHead().losses() == {"watch_ratio": "mse"}
    assert "watch_ratio" not in H.OUTPUT_LABELS  # its label comes from the raw duration
    with pytest.raises(ValueError, match="loss"):
        H.WatchRatioHead(loss="huber")
