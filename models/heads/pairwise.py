"""Watch-time head with a pairwise ranking term: log1p regression + RankNet over the batch.

XAUC, the watch-time metric the benches rank heads by, is the share of impression pairs
that a prediction orders as their watch times are ordered. The regression heads learn it
only through their pointwise loss; this one adds the pairwise logistic loss of RankNet
(Burges et al., ICML 2005) over every ordered pair of the batch, on the same log1p scale:

    ℓ_i = log1p(y_i),  s_i = log1p(ŷ_i),  P = {(i, j): ℓ_i > ℓ_j}   (ties are no pair)

    L = (1/B) Σ_i (ℓ_i − s_i)²  +  λ · (1/|P|) Σ_{(i,j)∈P} log(1 + exp(−(s_i − s_j)))

The pointwise part keeps ŷ in seconds (the regression head's target, the geometric
mean); the pairwise part only moves the order. In-batch pairs are mostly of two users, so
it targets XAUC more than the per-user XGAUC. λ = 0 is `log1p_mse` exactly.

On KuaiRand-Pure (bench/README.md, "A pairwise (RankNet) term for XAUC") XAUC plateaus at
0.684 from λ = 3 on (+0.001 over λ = 0) while XGAUC and MAE get worse: a bench method
(`pairwise_l<λ>`), not a pipeline watch head.

Example:

>>> head = WatchTimePairwiseHead(weight=1.0)        # "watch_time_s" [B, 1], seconds
>>> loss = log1p_mse_pairwise(1.0)                    # Keras loss fn(y [B, 1], ŷ [B, 1]) -> [B]
"""
import tensorflow as tf

from models.heads.outputs import WATCH_OUTPUT
from models.heads.regression import WatchTimeRegressionHead, log1p_mse


def pairwise_logistic(log_true, log_pred):
    """(1/|P|) Σ_{ℓ_i > ℓ_j} softplus(s_j − s_i) over the batch ([B] each; 0 without pairs)."""
    ordered = tf.cast(log_true[:, None] > log_true[None, :], log_pred.dtype)  # [B, B], ℓ_i > ℓ_j
    losses = tf.nn.softplus(log_pred[None, :] - log_pred[:, None])  # softplus(s_j − s_i)
    return tf.math.divide_no_nan(tf.reduce_sum(ordered * losses), tf.reduce_sum(ordered))


def log1p_mse_pairwise(weight: float = 1.0):
    """Loss fn(y, ŷ) ([B, 1] each) -> [B]: row i's squared log1p error plus λ times the
    batch's pairwise term (module docstring), so the batch mean is L."""
    weight = float(weight)
    if not weight >= 0.0:
        raise ValueError(f"log1p_mse_pairwise: weight must be >= 0, got {weight}")

    def loss(y_true, y_pred):
        y_pred = tf.convert_to_tensor(y_pred)
        pointwise = log1p_mse(y_true, y_pred)
        if weight == 0.0:
            return pointwise
        log_true = tf.reshape(tf.math.log1p(tf.maximum(tf.cast(y_true, y_pred.dtype), 0.0)), [-1])
        log_pred = tf.reshape(tf.math.log1p(tf.maximum(y_pred, 0.0)), [-1])
        return pointwise + weight * pairwise_logistic(log_true, log_pred)

    loss.__name__ = f"log1p_mse_pairwise_{weight:g}"
    return loss


class WatchTimePairwiseHead(WatchTimeRegressionHead):
    """`WatchTimeRegressionHead` (same output "watch_time_s", seconds) trained with
    `log1p_mse_pairwise(weight)` (module docstring)."""

    def __init__(self, weight: float = 1.0):
        self.loss_fn = log1p_mse_pairwise(weight)

    def losses(self):
        return {WATCH_OUTPUT: self.loss_fn}
