"""xDeepFM ranker: linear + plain DNN + CIN (Lian et al., KDD 2018, eq. 15).

    X^0   = [e_1, .., e_F, pool_video, pool_author]   [B, m, D]  field embeddings; the
            pooled history item (video and author halves, outcomes included) adds two
            fields so the explicit crosses see the user's history
    ŷ     = σ(w_linear^T a + w_dnn^T x_dnn + w_cin^T p^+ + b)            (eq. 15)
            a: one-hot first-order part (FeatureLayer(linear=True): dim-1 tables,
               N(0, 1e-4²) initialised, history bags masked-mean pooled) + numerics
            x_dnn = DNN([flatten(X^0), numerics]),  p^+ = CIN(X^0)  (models/layers/cin.py;
            `cin_rank` r: every map's weights W^{k,h} = U V^T of rank r, same equation)

The click head adds the linear logit to w·[x_dnn, p^+] + b; other heads (watch time,
later CREAD/CQE) read z = [x_dnn, p^+].
"""
import tf_keras as keras

from models import features as F
from models.layers.cin import CIN
from models.layers.feature_layer import FeatureLayer, mlp, model_inputs
from models.heads import compile_ranker


def build_xdeepfm(vocab_sizes: dict, history_length: int, embedding_dim: int = 16, oov_buckets: int = 1,
                  learning_rate: float = 1e-3, loss_weights=None, heads=None,
                  cin_layer_sizes=(64, 64), cin_split_half: bool = True, cin_rank=None,
                  dnn_hidden_units=(128, 64), embedding_init_std: float = 0.01,
                  linear_init_std: float = 1e-4, **compile_options) -> keras.Model:
    inputs = model_inputs(history_length)
    layer = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, linear=True,
                         linear_init_std=linear_init_std, name="features")
    if not layer.uniform:
        raise ValueError("xDeepFM: CIN needs every field at the same width; "
                         f"features.EMBEDDING_DIMS gives {sorted(set(layer.dims.values()))}")
    feats = layer(inputs)
    n_item = len(F.ITEM_ENTITIES)
    history_fields = keras.layers.Reshape((n_item, embedding_dim), name="history_fields")(
        feats["history_pooled"])
    x0 = keras.layers.Concatenate(axis=1, name="cin_fields")([feats["fields"], history_fields])
    p_plus = CIN(layer_sizes=tuple(cin_layer_sizes), split_half=cin_split_half, rank=cin_rank,
                 name="cin")(x0)
    dnn_in = keras.layers.Concatenate(name="dnn_input")(
        [keras.layers.Flatten(name="flat_fields")(x0), feats["numerics"]])
    x_dnn = mlp(dnn_in, dnn_hidden_units, "relu", name="dnn")
    z = keras.layers.Concatenate(name="xdeepfm_z")([x_dnn, p_plus])
    return compile_ranker(inputs, z, heads, linear_logit=feats["linear_logit"],
                          learning_rate=learning_rate, loss_weights=loss_weights, name="xdeepfm",
                          **compile_options)
