"""D2Q as a head (bench baseline): the percentile regression of models/watch_time/d2q.py."""
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import D2Q_PERCENTILE_OUTPUT

D2Q_LOSSES = ("mse", "mae")


class D2qPercentileHead(Head):
    """D2Q (Zhan et al., KDD 2022): "d2q_percentile" = σ(w·z + b) [B, 1], MSE against
    the watch time's percentile within its duration group (`D2Q.percentile`, the
    label the caller computes); seconds come back through `D2Q.watch_time` after
    predict. `loss="mae"`: the median variant, L1 on the percentile: its minimiser is
    the conditional median percentile, which the group's increasing quantile function
    maps to the conditional median watch time."""

    name = D2Q_PERCENTILE_OUTPUT
    output_names = (D2Q_PERCENTILE_OUTPUT,)

    def __init__(self, loss: str = "mse"):
        if loss not in D2Q_LOSSES:
            raise ValueError(f"D2qPercentileHead: loss must be one of {D2Q_LOSSES}, got {loss!r}")
        self.loss = loss

    def build(self, representation, linear_logit=None, outputs=None):
        return {D2Q_PERCENTILE_OUTPUT: keras.layers.Dense(1, activation="sigmoid",
                                                          name=D2Q_PERCENTILE_OUTPUT)(representation)}

    def losses(self):
        return {D2Q_PERCENTILE_OUTPUT: self.loss}
