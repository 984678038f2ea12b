"""Output names and labels: which label every lossy output trains on."""
import numpy as np
import tensorflow as tf

from models import features as F
from models import heads as H
from models.training.input import split_labels


def test_training_labels_pick_the_label_of_every_lossy_output():
    click, watch = np.array([0.0, 1.0]), np.array([3.0, 4.0])
    names = ["click_prob", "watch_time_s", "cread_logits", "quantiles", "cse", "ranking_score"]
    labels = H.training_labels(names, click, watch)
    assert set(labels) == {"click_prob", "watch_time_s", "cread_logits", "quantiles"}
    assert labels["click_prob"] is click and labels["quantiles"] is watch and labels["cread_logits"] is watch
    assert H.TRAINING_ONLY_OUTPUTS == ("cread_logits", "wlr_logit")
    assert H.OUTPUT_LABELS["click_prob"] == F.LABEL_CLICK and H.OUTPUT_LABELS["watch_time_s"] == F.LABEL_WATCH


def test_head_labels_are_those_of_its_lossy_outputs():
    assert H.ClickHead().labels() == {"click_prob": F.LABEL_CLICK}
    assert H.CreadWatchHead([1.0, 2.0]).labels() == {"cread_logits": F.LABEL_WATCH}
    assert H.CqeWatchHead(num_quantiles=5).labels() == {"quantiles": F.LABEL_WATCH}
    assert H.RankingScoreHead().labels() == {}


def test_split_labels_drops_every_label_key():
    # models/training/input.py, keyed by the heads' outputs (belongs with the Trainer input tests)
    batch = {"video_id_xf": tf.constant([1, 2]), F.LABEL_CLICK: tf.constant([0.0, 1.0]),
             F.LABEL_WATCH: tf.constant([3.0, 4.0]), F.WATCH_BUCKET_LABEL: tf.constant([1, 2], tf.int64)}
    feats, labels = split_labels(batch, {"click_prob": F.LABEL_CLICK, "cread_logits": F.LABEL_WATCH,
                                         "quantiles": F.LABEL_WATCH})
    assert set(feats) == {"video_id_xf"}
    assert set(labels) == {"click_prob", "cread_logits", "quantiles"}
    np.testing.assert_array_equal(labels["quantiles"].numpy(), [3.0, 4.0])
    feats, labels = split_labels(batch)  # default: click + watch
    assert set(feats) == {"video_id_xf"} and set(labels) == {"click_prob", "watch_time_s"}
