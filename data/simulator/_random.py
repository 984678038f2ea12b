"""Sampling helpers shared by the user and video tables."""
from __future__ import annotations

import numpy as np


def zipf_probs(n, exponent, rng):
    """Zipf(exponent) probabilities over ``n`` items, randomly assigned to the items."""
    p = 1.0 / np.arange(1, n + 1) ** exponent
    return rng.permutation(p / p.sum())
