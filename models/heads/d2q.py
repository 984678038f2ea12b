"""D2Q as a head (bench baseline): the percentile regression of models/watch_time/d2q.py."""
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import D2Q_PERCENTILE_OUTPUT


class D2qPercentileHead(Head):
    """D2Q (Zhan et al., KDD 2022): "d2q_percentile" = σ(w·z + b) [B, 1], MSE against
    the watch time's percentile within its duration group (`D2Q.percentile`, the
    label the caller computes); seconds come back through `D2Q.watch_time` after
    predict."""

    name = D2Q_PERCENTILE_OUTPUT
    output_names = (D2Q_PERCENTILE_OUTPUT,)

    def build(self, representation, linear_logit=None, outputs=None):
        return {D2Q_PERCENTILE_OUTPUT: keras.layers.Dense(1, activation="sigmoid",
                                                          name=D2Q_PERCENTILE_OUTPUT)(representation)}

    def losses(self):
        return {D2Q_PERCENTILE_OUTPUT: "mse"}
