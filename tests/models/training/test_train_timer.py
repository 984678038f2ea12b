"""TrainTimer's steady state against hand-counted batches (models/training/train_timer.py)."""
import numpy as np
import pytest
import tf_keras as keras

from models.training.train_timer import TrainTimer


def _fit(steps_per_execution, epochs, validation):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile("sgd", "mse", steps_per_execution=steps_per_execution)
    x, y = np.ones((85, 3), np.float32), np.zeros((85, 1), np.float32)  # 10 batches of 8 and one of 5
    timer = TrainTimer(8)
    model.fit(x, y, batch_size=8, epochs=epochs, verbose=0, callbacks=[timer],
              validation_data=(x[:8], y[:8]) if validation else None)
    return timer


@pytest.mark.parametrize("validation", [True, False])
def test_steady_state_leaves_out_the_warm_up_calls_and_the_last_batch(validation):
    # calls end at batches 0..10: the steady interval runs from the end of the 3rd call
    # (batch 2) to the end of the 10th (batch 9): 7 batches of 8, per epoch
    timer = _fit(1, 2, validation)
    s = timer.summary()
    assert s["epochs"] == 2 and s["steady_examples"] == 2 * 7 * 8 and s["batch_size"] == 8
    assert 0 < s["steady_seconds"] < s["seconds"]
    assert s["steady_examples_per_sec"] == pytest.approx(s["steady_examples"] / timer.steady_seconds, rel=1e-3)


def test_calls_of_several_steps_count_their_batches():
    # steps_per_execution=2: calls end at batches 1, 3, 5, 7, 9, 10; from batch 5 to batch 9
    s = _fit(2, 1, True).summary()
    assert s["epochs"] == 1 and s["steady_examples"] == 4 * 8


def test_too_short_an_epoch_has_no_steady_state():
    timer = TrainTimer(8)
    model = keras.Sequential([keras.layers.Dense(1, input_shape=(3,))])
    model.compile("sgd", "mse")
    model.fit(np.ones((32, 3)), np.zeros((32, 1)), batch_size=8, verbose=0, callbacks=[timer])  # 4 calls
    assert timer.summary()["steady_examples"] == 0 and timer.steady_examples_per_sec() == 0.0
    assert timer.epochs == 1 and timer.seconds > 0
