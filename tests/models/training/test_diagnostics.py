"""TrainingDiagnostics: hand-computed helpers, and the TensorBoard events a fit writes
for DIN (target attention) and BST (self-attention) with CREAD + CQE heads."""
import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from models.training import diagnostics as D
from models.rankers import build_ranker
from models.training.input import label_keys_for
from pipeline import configs
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config

L = 5
T = [1.0, 3.0, 10.0, 30.0, 90.0]


def test_valid_attention_weights_and_max_weight_by_hand():
    w = np.array([[0.5, 0.3, 0.2, 0.0], [0.0, 0.0, 0.0, 0.0]])
    m = np.array([[1, 1, 1, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(D.valid_attention_weights(w, m), [0.5, 0.3, 0.2])
    assert D.mean_max_weight(w, m) == pytest.approx(0.5)  # the row without valid items is left out
    # self-attention [B=1, H=1, S=3, S=3], position 2 padded: valid pairs are (0|1) x (0|1)
    s = np.array([[[[0.6, 0.4, 0.0], [0.1, 0.9, 0.0], [0.3, 0.3, 0.4]]]])
    sm = np.array([[1, 1, 0]])
    np.testing.assert_allclose(np.sort(D.valid_attention_weights(s, sm)), [0.1, 0.4, 0.6, 0.9])
    assert D.mean_max_weight(s, sm) == pytest.approx((0.6 + 0.9) / 2)
    with pytest.raises(ValueError, match="attention weights must be"):
        D.valid_attention_weights(np.zeros((2, 2, 2)), np.ones((2, 2)))


def test_quantile_spread_uses_levels_nearest_0p1_and_0p9():
    taus = np.arange(1, 10) / 10.0  # 0.1 .. 0.9
    q = np.cumsum(np.ones((2, 9)), axis=1) * np.array([[1.0], [2.0]])
    np.testing.assert_allclose(D.quantile_spread(q, taus), [8.0, 16.0])


def test_current_learning_rate_evaluates_schedules():
    import tf_keras as keras

    assert D.current_learning_rate(keras.optimizers.Adam(0.003)) == pytest.approx(0.003)
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=1, decay_rate=0.5)
    opt = keras.optimizers.Adam(schedule)
    opt.iterations.assign(2)
    assert D.current_learning_rate(opt) == pytest.approx(0.025)


def _events(logdir):
    """{tag: [(step, value or histogram count)]} of the event files under logdir."""
    out = {}
    for path in glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"), recursive=True):
        for event in tf.compat.v1.train.summary_iterator(path):
            for v in event.summary.value:
                t = tf.make_ndarray(v.tensor) if v.HasField("tensor") else None
                out.setdefault(v.tag, []).append((event.step, t))
    return out


@pytest.mark.parametrize("model_type,attention", [("din", "target_attention"), ("bst", "transformer_0")])
def test_fit_writes_learning_rate_attention_and_quantile_summaries(model_type, attention, tmp_path):
    import tf_keras as keras

    tf.random.set_seed(0)
    config = trainer_config(model_type, L, watch_head="cread+cqe", learning_rate=0.002,
                            cqe=dict(configs.CQE, num_quantiles=9), ranker_params=configs.RANKER_PARAMS[model_type])
    model = build_ranker(config, small_vocab_sizes(), ead_thresholds=T)
    x, y = random_transformed(64, L, small_vocab_sizes(), seed=4)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    keys = label_keys_for(model)
    data = data.map(lambda f, l: (f, {o: l["watch_time_s" if o != "click_prob" else "click_prob"] for o in keys}))
    probe = {k: v[:16] for k, v in x.items()}
    log_dir = str(tmp_path / "run")
    model.fit(data, epochs=2, verbose=0,
              callbacks=[keras.callbacks.TensorBoard(log_dir), D.TrainingDiagnostics(log_dir, probe)])

    events = _events(log_dir)
    for tag in ("learning_rate", f"attention/{attention}/weights", f"attention/{attention}/max_weight",
                "quantiles/spread", "quantiles/spread_mean", "quantiles/all", "cread/survival"):
        assert [s for s, _ in events.get(tag, [])] == [0, 1], (tag, sorted(events))
    assert "epoch_click_prob_loss" in events and "epoch_quantiles_loss" in events  # per-head training curves
    assert float(events["learning_rate"][0][1]) == pytest.approx(0.002)
    # histogram bucket counts sum to the number of valid attention weights of the probe batch
    n_valid = int(probe["hist_mask_xf"].sum())
    hist = events[f"attention/{attention}/weights"][-1][1]  # [buckets, 3]: left, right, count
    if model_type == "din":
        assert hist[:, 2].sum() == pytest.approx(n_valid)
    else:  # BST: sequence = target + history; heads x valid (query, key) pairs
        per_row = 1 + probe["hist_mask_xf"].sum(axis=1)
        assert hist[:, 2].sum() == pytest.approx(model.get_layer(attention).num_heads * float((per_row ** 2).sum()))
    assert 0.0 < float(events[f"attention/{attention}/max_weight"][-1][1]) <= 1.0  # softmax weights
    assert float(events["quantiles/spread_mean"][-1][1]) >= 0.0  # CQE quantiles are monotone
    survival = events["cread/survival"][-1][1]
    assert survival[:, 2].sum() == pytest.approx(16 * len(T))
