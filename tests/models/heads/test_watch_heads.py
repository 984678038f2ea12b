"""Watch-time heads in the rankers: config -> heads, ranking score formulas, labels,
and run_fn building CREAD from the transform graph's EAD asset (not recomputing it).
Export/reload of every head on every ranker: tests/test_rankers.py."""
import numpy as np
import pytest
import tensorflow as tf

from models import features as F
from models import heads as H
from models.watch_time.cread import restore
from models.training.run_fn import build_ranker, ead_thresholds_from_transform_output, label_keys_for, split_labels
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes

L = 5
T = [1.0, 3.0, 10.0, 30.0, 90.0]


def _model(watch_head="regression", formula="click_prob * watch_time_s", **hp):
    tf.random.set_seed(0)
    return build_ranker("baseline", small_vocab_sizes(), L,
                        {"embedding_dim": 4, "watch_head": watch_head, "ranking_score": formula,
                         "cqe": {"num_quantiles": 9}, **hp}, ead_thresholds=T)


@pytest.mark.parametrize("formula", sorted(H.RANKING_FORMULAS))
def test_ranking_score_formulas(formula):
    model = _model("cread+cqe", formula)
    x, _ = random_transformed(16, L, small_vocab_sizes(), seed=1)
    out = {k: v.numpy().astype(np.float64) for k, v in model(x, training=False).items()}
    p, w = out["click_prob"], out["watch_time_s"]
    want = {"click_prob * watch_time_s": p * w, "watch_time_s": w, "click_prob": p,
            "click_prob * log1p(watch_time_s)": p * np.log1p(w), "click_prob * dqc": p * out["dqc"],
            "dqc": out["dqc"], "click_prob * cse": p * out["cse"]}[formula]
    assert out["ranking_score"].shape == (16, 1)
    np.testing.assert_allclose(out["ranking_score"], want, rtol=1e-5, atol=1e-7)


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="unknown ranking score formula"):
        _model(formula="__import__('os')")
    with pytest.raises(ValueError, match="needs outputs"):
        _model("cread", "click_prob * dqc")
    with pytest.raises(ValueError, match="unknown watch_head"):
        _model("wlr")
    with pytest.raises(ValueError, match="needs the EAD thresholds"):
        build_ranker("baseline", small_vocab_sizes(), L, {"watch_head": "cread"})


def test_cread_output_is_restoration_of_its_survival_probs():
    model = _model("cread", cread={"restoration": "trapezoid"})
    x, _ = random_transformed(8, L, small_vocab_sizes(), seed=2)
    out = model(x, training=False)
    phi = tf.sigmoid(out["cread_logits"]).numpy()
    np.testing.assert_allclose(out["watch_time_s"].numpy()[:, 0], restore(phi, T, "trapezoid"), rtol=1e-5)
    riemann = _model("cread", cread={"restoration": "riemann"})
    out = riemann(x, training=False)
    np.testing.assert_allclose(out["watch_time_s"].numpy()[:, 0],
                               restore(tf.sigmoid(out["cread_logits"]).numpy(), T, "riemann"), rtol=1e-5)


def test_losses_and_weights_per_head():
    model = _model("cread+cqe", loss_weight_click=0.5, loss_weight_cread=2.0, loss_weight_cqe=0.25)
    assert label_keys_for(model) == {"click_prob": F.LABEL_CLICK, "watch_time_s": F.LABEL_WATCH,
                                     "cread_logits": F.LABEL_WATCH, "quantiles": F.LABEL_WATCH}
    x, y = random_transformed(64, L, small_vocab_sizes(), seed=3)
    labels = H.training_labels(model.output_names, y["click_prob"], y["watch_time_s"])
    res = model.evaluate(x, labels, batch_size=64, verbose=0, return_dict=True)
    assert set(res) >= {"click_prob_loss", "cread_logits_loss", "quantiles_loss", "watch_time_s_mae"}
    assert "watch_time_s_loss" not in res  # CREAD's loss sits on the logits
    total = 0.5 * res["click_prob_loss"] + 2.0 * res["cread_logits_loss"] + 0.25 * res["quantiles_loss"]
    assert res["loss"] == pytest.approx(total, rel=1e-4)


def test_split_labels_drops_every_label_key():
    batch = {"video_id_xf": tf.constant([1, 2]), F.LABEL_CLICK: tf.constant([0.0, 1.0]),
             F.LABEL_WATCH: tf.constant([3.0, 4.0]), F.WATCH_BUCKET_LABEL: tf.constant([1, 2], tf.int64)}
    feats, labels = split_labels(batch, {"click_prob": F.LABEL_CLICK, "cread_logits": F.LABEL_WATCH,
                                         "quantiles": F.LABEL_WATCH})
    assert set(feats) == {"video_id_xf"}
    assert set(labels) == {"click_prob", "cread_logits", "quantiles"}
    np.testing.assert_array_equal(labels["quantiles"].numpy(), [3.0, 4.0])
    feats, labels = split_labels(batch)  # default: click + watch
    assert set(feats) == {"video_id_xf"} and set(labels) == {"click_prob", "watch_time_s"}


def test_thresholds_come_from_the_transform_graph_asset(tmp_path):
    """The asset holds the very thresholds the transform graph buckets with."""
    from tests.helpers.ranker_utils import build_transform_output, raw_batch, raw_rows

    rows = raw_rows(40, L, seed=4)
    tft_output = build_transform_output(rows, L, str(tmp_path / "tmp"), str(tmp_path / "out"))
    t = np.asarray(ead_thresholds_from_transform_output(tft_output))
    assert t.size >= 2 and np.all(np.diff(t) > 0)
    raw = {k: tf.constant(v) for k, v in raw_batch(rows, L).items()}
    raw[F.LABEL_WATCH] = tf.constant([r[F.LABEL_WATCH] for r in rows], tf.float32)
    raw[F.LABEL_CLICK] = tf.constant([r[F.LABEL_CLICK] for r in rows], tf.int64)
    out = tft_output.transform_raw_features(raw)
    y = np.array([r[F.LABEL_WATCH] for r in rows], np.float32)
    np.testing.assert_array_equal(out[F.WATCH_BUCKET_LABEL].numpy(),
                                  (y[:, None] > t.astype(np.float32)[None, :]).sum(1))
