"""Baseline ranker (embeddings + pooled history + MLP) and one-hot logistic regression.

Both start from the shared FeatureLayer (models/feature_layer.py) and end in the
pluggable heads (models/heads.py).

Baseline ("baseline"):
    z = MLP([e_1..e_F, numerics, pool])          pool = masked mean of history items
                                                 h_i (video + author emb + outcomes)
Logistic regression ("lr"), a one-hot LR over every categorical value, the history
bags and the numerics (dim-1 embedding tables, DESIGN.md §6 reference point):
    z = [w_1[x_1] .. w_F[x_F], mean_i w_video[hv_i], mean_i w_author[ha_i], numerics]
    logit = c·z + Σ z + b                         (linear in the one-hot inputs)

Outputs {"click_prob": [B, 1], "watch_time_s": [B, 1]} (heads.default_heads()).
"""
import tf_keras as keras

from models.layers.feature_layer import FeatureLayer, mlp, model_inputs, table_rows
from models.heads import CLICK_OUTPUT, WATCH_OUTPUT, compile_ranker, log1p_mse  # noqa: F401


def embedding_input_dims(vocab_sizes: dict, oov_buckets: int) -> dict:
    """Rows per table: vocabulary + OOV buckets + the padding row 0."""
    return table_rows(vocab_sizes, oov_buckets)


def build_baseline(vocab_sizes: dict, history_length: int, embedding_dim: int = 16,
                   hidden_units=(128, 64), oov_buckets: int = 1, learning_rate: float = 1e-3,
                   loss_weights=None, heads=None, embedding_init_std: float = 0.01) -> keras.Model:
    """Builds and compiles the baseline. `vocab_sizes` maps raw feature -> vocabulary size."""
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")(inputs)
    z = keras.layers.Concatenate(name="baseline_input")(
        [feats["fields_flat"], feats["numerics"], feats["history_pooled"]])
    z = mlp(z, hidden_units, "relu", name="mlp")
    return compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                          name="baseline")


def build_logistic_regression(vocab_sizes: dict, history_length: int, oov_buckets: int = 1,
                              learning_rate: float = 1e-3, loss_weights=None, heads=None,
                              linear_init_std: float = 1e-4, embedding_dim=None) -> keras.Model:
    """One-hot logistic regression (dim-1 tables summed + bias). `embedding_dim` is ignored."""
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, oov_buckets=oov_buckets, linear=True, embeddings=False,
                         linear_init_std=linear_init_std, name="features")(inputs)
    z = keras.layers.Concatenate(name="lr_input")([feats["linear_terms"], feats["numerics"]])
    # click logit = c·z + Σ_f w_f + v·numerics + b: still linear in the one-hot inputs
    return compile_ranker(inputs, z, heads, linear_logit=feats["linear_logit"], learning_rate=learning_rate, loss_weights=loss_weights,
                          name="lr")
