"""DCN-v2 ranker ("dcn"): cross network + deep network (Wang et al., WWW 2021).

Built on TF Recommenders' `tensorflow_recommenders.layers.feature_interaction.Cross`:

    x_0     = [e_1..e_F, numerics, pool]              pool = masked mean of history
                                                      items h_i (outcomes included)
    x_{l+1} = x_0 ∘ (W_l x_l + b_l) + x_l             (DCN-v2 eq. 1; projection_dim r:
                                                      W_l = U_l V_l^T low rank)
    parallel: z = [x_L, MLP(x_0)]                     (Fig. 1 right)
    stacked:  z = MLP(x_L)                            (Fig. 1 left)

The heads read z (models/heads/).
"""
import tf_keras as keras
from tensorflow_recommenders.layers.feature_interaction import Cross

from models.heads import compile_ranker
from models.layers._utils import positive_int
from models.layers.feature_layer import FeatureLayer, mlp, model_inputs

STRUCTURES = ("parallel", "stacked")


def build_dcn(vocab_sizes: dict, history_length: int, embedding_dim: int = 16, oov_buckets: int = 1,
              learning_rate: float = 1e-3, loss_weights=None, heads=None, num_cross_layers: int = 3,
              projection_dim=None, structure: str = "parallel", deep_hidden_units=(256, 128),
              embedding_init_std: float = 0.01, **compile_options) -> keras.Model:
    num_cross_layers = positive_int("DCN", "num_cross_layers", num_cross_layers)
    projection_dim = positive_int("DCN", "projection_dim", projection_dim, allow_none=True)
    if structure not in STRUCTURES:
        raise ValueError(f"DCN: structure must be one of {STRUCTURES}, got {structure!r}")
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")(inputs)
    x0 = keras.layers.Concatenate(name="dcn_x0")(
        [feats["fields_flat"], feats["numerics"], feats["history_pooled"]])
    x = x0
    for n in range(num_cross_layers):
        x = Cross(projection_dim=projection_dim, kernel_initializer="glorot_uniform",
                  name=f"cross_{n}")(x0, x)
    if structure == "parallel":
        z = keras.layers.Concatenate(name="dcn_z")([x, mlp(x0, deep_hidden_units, "relu", name="deep")])
    else:
        z = mlp(x, deep_hidden_units, "relu", name="deep")
    return compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                          name="dcn", **compile_options)
