"""DETERMINISTIC=1 (models/training/determinism.py): the same seed and data give
bit-identical predictions across processes; another seed gives other ones.

Each training runs in a subprocess (tests/models/training/determinism_worker.py), as
`make run` does: op determinism is process-global, and TensorFlow's thread pools are
fixed before it starts. Process A trains seed 0 then seed 1, process B seed 0: A's and
B's seed-0 predictions must be equal bit for bit, A's seed 1 must differ (the test can
fail: an ignored seed or a shared model would show)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from pipeline import configs
from tests.conftest import ROOT


def _worker(tmp_path, name, seeds):
    out = tmp_path / f"{name}.npz"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "tests.models.training.determinism_worker", str(out)]
                          + [str(s) for s in seeds], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return dict(np.load(out))


def test_deterministic_training_reproduces_predictions_bit_for_bit(tmp_path):
    a = _worker(tmp_path, "a", [configs.SEED, configs.SEED + 1])
    b = _worker(tmp_path, "b", [configs.SEED])
    for name in ("click_prob", "watch_time_s"):
        assert a[f"{name}_0"].shape == (16, 1)
        assert a[f"{name}_0"].tobytes() == b[f"{name}_0"].tobytes(), name  # bit for bit
        assert not np.array_equal(a[f"{name}_0"], a[f"{name}_1"]), name  # the seed matters


def test_deterministic_knob_reaches_the_trainer_config():
    config = configs.trainer_config(deterministic=True)
    assert config.to_custom_config()["deterministic"] is True
    assert type(config).from_custom_config(config.to_custom_config()).deterministic is True
    assert configs.TRAINER.deterministic is configs.DETERMINISTIC
    with pytest.raises(ValueError, match="deterministic must be a bool"):
        config.replace(deterministic="1")
