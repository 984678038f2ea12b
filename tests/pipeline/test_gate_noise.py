"""The blessing gates stay outside the run-to-run noise measured on the default data.

bench/results/gate_noise.json (``make bench-gate-noise``) holds each gated metric's values
over seeds of the default model on the default simulated logs; pipeline/configs/evaluation.py
holds the gates. A change threshold inside that noise makes blessing a coin flip (#34), so
every one must be at least the rule the bench states: max(1.5 x the largest pair
difference, 3 sqrt(2) x std), computed here again from the raw values."""
import itertools
import json
import os

import numpy as np
import pytest

from pipeline import configs

_RESULT = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "results", "gate_noise.json")
_GATES = {"auc_max_drop": "click_prob/auc", "xauc_max_drop": "watch_time_s/xauc",
          "mae_max_rise": "watch_time_s/mean_absolute_error"}


@pytest.mark.parametrize("gate,metric", sorted(_GATES.items()))
def test_each_change_threshold_is_outside_the_measured_noise(gate, metric):
    values = np.asarray(json.load(open(_RESULT))["spread"][metric]["values"], dtype=float)
    assert len(values) >= 3, "the noise needs at least 3 seeds"
    max_pair = max(abs(a - b) for a, b in itertools.combinations(values, 2))
    floor = max(1.5 * max_pair, 3 * np.sqrt(2) * values.std(ddof=1))
    assert configs.EVAL_GATES[gate] >= floor, (gate, configs.EVAL_GATES[gate], floor)
