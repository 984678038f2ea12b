"""One-hot logistic regression ("lr"): the DESIGN.md §6 reference point.

A one-hot LR over every categorical value, the history bags and the numerics
(dim-1 embedding tables of the shared FeatureLayer):

    z = [w_1[x_1] .. w_F[x_F], mean_i w_video[hv_i], mean_i w_author[ha_i], numerics]
    logit = c·z + Σ z + b                         (linear in the one-hot inputs)
"""
import tf_keras as keras

from models.heads import compile_ranker
from models.layers.feature_layer import FeatureLayer, model_inputs


def build_logistic_regression(vocab_sizes: dict, history_length: int, oov_buckets: int = 1,
                              learning_rate: float = 1e-3, loss_weights=None, heads=None,
                              linear_init_std: float = 1e-4, embedding_dim=None, **compile_options) -> keras.Model:
    """One-hot logistic regression (dim-1 tables summed + bias). `embedding_dim` is ignored."""
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, oov_buckets=oov_buckets, linear=True, embeddings=False,
                         linear_init_std=linear_init_std, name="features")(inputs)
    z = keras.layers.Concatenate(name="lr_input")([feats["linear_terms"], feats["numerics"]])
    # click logit = c·z + Σ_f w_f + v·numerics + b: still linear in the one-hot inputs
    return compile_ranker(inputs, z, heads, linear_logit=feats["linear_logit"], learning_rate=learning_rate,
                          loss_weights=loss_weights, name="lr", **compile_options)
