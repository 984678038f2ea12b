"""Baseline ranker ("baseline"): embeddings + pooled history + MLP.

Starts from the shared FeatureLayer (models/layers/feature_layer.py) and ends in the
pluggable heads (models/heads/):

    z = MLP([e_1..e_F, numerics, pool])          pool = masked mean of history items
                                                 h_i (video + author emb + outcomes)

Outputs {"click_prob": [B, 1], "watch_time_s": [B, 1]} (heads.default_heads()).
"""
import tf_keras as keras

from models.layers.feature_layer import FeatureLayer, mlp, model_inputs
from models.heads import compile_ranker


def build_baseline(vocab_sizes: dict, history_length: int, embedding_dim: int = 16,
                   hidden_units=(128, 64), oov_buckets: int = 1, learning_rate: float = 1e-3,
                   loss_weights=None, heads=None, embedding_init_std: float = 0.01,
                   **compile_options) -> keras.Model:
    """Builds and compiles the baseline. `vocab_sizes` maps raw feature -> vocabulary size."""
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")(inputs)
    z = keras.layers.Concatenate(name="baseline_input")(
        [feats["fields_flat"], feats["numerics"], feats["history_pooled"]])
    z = mlp(z, hidden_units, "relu", name="mlp")
    return compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                          name="baseline", **compile_options)
