"""Watch-ratio head (bench baseline): the capped watch ratio, seconds = ratio × duration."""
import numpy as np
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import WATCH_RATIO_OUTPUT

RATIO_LOSSES = ("mse", "mae")


def watch_ratio(watch_s, duration_s, cap: float = 2.0, min_duration_s: float = 1.0) -> np.ndarray:
    """The label r = min(watch / max(duration, min_duration_s), cap) (the capped ratio of
    LogExampleGen's watch-ratio signals)."""
    watch = np.asarray(watch_s, np.float64)
    return np.minimum(watch / np.maximum(np.asarray(duration_s, np.float64), float(min_duration_s)), float(cap))


class WatchRatioHead(Head):
    """"watch_ratio" = cap · σ(w·z + b) [B, 1] in (0, cap), against the label `watch_ratio`
    (computed by the caller from the raw duration, like D2Q's percentile). Loss "mse"
    (E[r | x]) or "mae" (the median of r; with the duration known, ratio × duration is
    then the median of min(y, cap·duration)). Seconds: ratio × max(duration, 1 s), after
    predict."""

    name = WATCH_RATIO_OUTPUT
    output_names = (WATCH_RATIO_OUTPUT,)

    def __init__(self, cap: float = 2.0, loss: str = "mse"):
        if not float(cap) > 0:
            raise ValueError(f"WatchRatioHead: cap must be > 0, got {cap}")
        if loss not in RATIO_LOSSES:
            raise ValueError(f"WatchRatioHead: loss must be one of {RATIO_LOSSES}, got {loss!r}")
        self.cap, self.loss = float(cap), loss

    def build(self, representation, linear_logit=None, outputs=None):
        p = keras.layers.Dense(1, activation="sigmoid", name="watch_ratio_unit")(representation)
        cap = self.cap
        return {WATCH_RATIO_OUTPUT: keras.layers.Lambda(lambda t: cap * t, name=WATCH_RATIO_OUTPUT)(p)}

    def losses(self):
        return {WATCH_RATIO_OUTPUT: self.loss}
