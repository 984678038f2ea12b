"""The Head base class and compile_ranker: declared outputs, order, errors."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models import heads as H


class DoubleHead(H.Head):
    """A minimal custom head: "double" = 2·Dense(z), trained with MSE on its own label."""

    name = "double"
    output_names = ("double",)

    def build(self, representation, linear_logit=None, outputs=None):
        dense = keras.layers.Dense(1, name="double_dense")(representation)
        return {"double": keras.layers.Rescaling(2.0, name="double")(dense)}

    def losses(self):
        return {"double": "mse"}


def _body(k=3):
    z = keras.Input((k,), name="z")
    return z, z


def test_custom_head_builds_compiles_and_trains():
    inputs, z = _body()
    model = H.compile_ranker(inputs, z, [H.ClickHead(), DoubleHead()], loss_weights={"double": 0.5, "nope": 3.0})
    x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    y = {"click_prob": (x[:, :1] > 0).astype(np.float32), "double": x[:, :1]}
    res = model.evaluate(x, y, verbose=0, return_dict=True)
    assert res["loss"] == pytest.approx(res["click_prob_loss"] + 0.5 * res["double_loss"], rel=1e-5)
    kernel, bias = model.get_layer("double_dense").get_weights()
    np.testing.assert_allclose(model(x)["double"].numpy(), 2 * (x @ kernel + bias), rtol=1e-5)
    assert DoubleHead().output_name == "double" and DoubleHead().labels() == {}
    assert DoubleHead().metrics() == {}


def test_default_heads_are_click_and_regression():
    inputs, z = _body()
    model = H.compile_ranker(inputs, z)
    assert set(model.output_names) == {"click_prob", "watch_time_s"}
    assert [type(h) for h in H.default_heads()] == [H.ClickHead, H.WatchTimeRegressionHead]


def test_duplicate_outputs_are_rejected():
    with pytest.raises(ValueError, match="duplicate head outputs"):
        H.check_heads([H.ClickHead(), H.ClickHead()])
    with pytest.raises(ValueError, match=r"duplicate head outputs \['watch_time_s'\]"):
        H.check_heads([H.WatchTimeRegressionHead(), H.CqeWatchHead(num_quantiles=5)])
    assert len(H.check_heads([H.WatchTimeRegressionHead(),
                              H.CqeWatchHead(num_quantiles=5, provides_watch_time=False)])) == 2


def test_only_heads_are_accepted():
    class DuckHead:  # the pre-Head interface
        output_name = "x"

        def outputs(self, z, linear_logit=None):
            return {"x": z}

    inputs, z = _body()
    with pytest.raises(TypeError, match="is not a models.heads.Head"):
        H.compile_ranker(inputs, z, [DuckHead()])


def test_a_head_must_build_what_it_declares():
    class Liar(DoubleHead):
        output_names = ("double", "triple")

    inputs, z = _body()
    with pytest.raises(ValueError, match=r"built outputs \['double'\], declared \['double', 'triple'\]"):
        H.compile_ranker(inputs, z, [Liar()])
    with pytest.raises(NotImplementedError):
        H.Head().build(tf.zeros([1, 2]))


def test_needs_outputs_are_read_from_earlier_heads():
    class Sum(H.Head):
        name, output_names, needs_outputs = "sum", ("sum",), ("double", "click_prob")

        def build(self, representation, linear_logit=None, outputs=None):
            return {"sum": keras.layers.Add(name="sum")([outputs["double"], outputs["click_prob"]])}

    inputs, z = _body()
    model = H.compile_ranker(inputs, z, [H.ClickHead(), DoubleHead(), Sum()])
    out = model(np.ones((2, 3), np.float32))
    np.testing.assert_allclose(out["sum"].numpy(), (out["double"] + out["click_prob"]).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"head 'sum' needs outputs \['double'\]"):
        H.compile_ranker(inputs, z, [H.ClickHead(), Sum(), DoubleHead()])
