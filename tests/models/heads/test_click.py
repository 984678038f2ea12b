"""Click head: p = σ(w·z + b [+ linear logit]) by hand, BCE loss, AUC."""
import numpy as np
import tf_keras as keras

from models import heads as H


def test_click_probability_by_hand_with_and_without_linear_logit():
    z = keras.Input((3,), name="z")
    linear = keras.Input((1,), name="linear")
    x = np.random.default_rng(0).normal(size=(5, 3)).astype(np.float32)
    lin = np.random.default_rng(1).normal(size=(5, 1)).astype(np.float32)
    sigmoid = lambda t: 1.0 / (1.0 + np.exp(-t))  # noqa: E731

    model = H.compile_ranker([z, linear], z, [H.ClickHead()], linear_logit=linear)
    w, b = model.get_layer("click_logit").get_weights()
    np.testing.assert_allclose(model([x, lin])["click_prob"].numpy(), sigmoid(x @ w + b + lin), rtol=1e-5)
    assert model.get_layer("click_logit_plus_linear") is not None

    plain = H.compile_ranker(z, z, [H.ClickHead()])
    w, b = plain.get_layer("click_logit").get_weights()
    np.testing.assert_allclose(plain(x)["click_prob"].numpy(), sigmoid(x @ w + b), rtol=1e-5)


def test_click_loss_and_metric():
    head = H.ClickHead()
    assert head.name == "click_prob" and head.output_names == ("click_prob",)
    assert isinstance(head.losses()["click_prob"], keras.losses.BinaryCrossentropy)
    assert [m.name for m in head.metrics()["click_prob"]] == ["auc"]
