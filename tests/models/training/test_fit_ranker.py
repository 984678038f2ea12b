"""fit_ranker (models/training/run_fn.py) makes the variables of Keras' first training step
up front, so the train function is traced once, and trains exactly as ``model.fit``."""
import numpy as np
import pytest
import tensorflow as tf
import tf_keras as keras

from models.training.input import in_memory_dataset
from models.training.run_fn import fit_ranker
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes
from tests.models.heads.small_ranker import L, small_ranker


def _fit(watch_head, through_fit_ranker):
    keras.utils.set_random_seed(0)
    formula = "click_prob * dqc" if "cqe" in watch_head else "click_prob * watch_time_s"
    model = small_ranker(watch_head=watch_head, formula=formula)
    x, y = random_transformed(200, L, small_vocab_sizes())
    features = {k: v for k, v in x.items() if k in model.input_names}
    labels = {k: v.reshape(-1, 1) for k, v in y.items()}
    for extra in ("cread_logits", "quantiles"):  # the watch-time label feeds every watch output
        if extra in model.output_names:
            labels[extra] = labels["watch_time_s"]
    data = in_memory_dataset(features, labels, 64, True)
    created = []

    def creator(next_creator, **kwargs):  # variables made while a function is traced
        if tf.inside_function():
            created.append(kwargs.get("name"))
        return next_creator(**kwargs)

    with tf.variable_creator_scope(creator):
        if through_fit_ranker:
            history = fit_ranker(model, data, 2, verbose=0, keep_best_epoch=False)
        else:
            history = model.fit(data, epochs=2, verbose=0)
    return (model.train_function.experimental_get_tracing_count(), created, history.history,
            model(features)["click_prob"].numpy())


@pytest.mark.parametrize("watch_head", ["regression", "cread+cqe"])
def test_fit_ranker_traces_the_train_function_once_and_trains_as_model_fit(watch_head):
    traces, created, history, predictions = _fit(watch_head, True)
    fit_traces, fit_created, fit_history, fit_predictions = _fit(watch_head, False)
    assert traces == 1 and created == []
    assert fit_traces == 2 and fit_created  # what Keras does on its own: variables made in the first trace
    assert history == fit_history
    np.testing.assert_array_equal(predictions, fit_predictions)
