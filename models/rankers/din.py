"""DIN ranker: target attention over the behaviour history (Zhou et al., KDD 2018).

    t     = [e_video, e_author]                       target item (query)
    h_i   = [E_video[hv_i], E_author[ha_i]] + W_o·o_i   history items with outcomes
    v_U   = Σ_i m_i a(h_i, t) h_i                     (eq. 3, models/layers/target_attention.py;
                                                      no softmax by default, as the paper;
                                                      pipeline/configs.py turns the masked
                                                      softmax on, see the note there)
    z     = MLP_Dice([e_1..e_F, numerics, v_U, pool]) (Dice, models/layers/dice.py, eq. 4-5;
                                                      pool = masked mean of h_i, a cheap
                                                      extra that keeps the outcome average)
"""
import tf_keras as keras

from models.layers.dice import Dice
from models.layers.feature_layer import FeatureLayer, mlp, model_inputs
from models.heads import compile_ranker
from models.layers.target_attention import TargetAttention


def build_din(vocab_sizes: dict, history_length: int, embedding_dim: int = 16, oov_buckets: int = 1,
              learning_rate: float = 1e-3, loss_weights=None, heads=None,
              attention_hidden_units=(80, 40), attention_activation: str = "dice",
              attention_softmax: bool = False, mlp_hidden_units=(200, 80),
              mlp_activation: str = "dice", dice_momentum: float = 0.99,
              embedding_init_std: float = 0.01) -> keras.Model:
    if mlp_activation not in ("dice", "prelu", "relu"):
        raise ValueError(f"DIN: mlp_activation must be dice, prelu or relu, got {mlp_activation!r}")
    inputs = model_inputs(history_length)
    feats = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")(inputs)
    interest = TargetAttention(hidden_units=tuple(attention_hidden_units), activation=attention_activation,
                               use_softmax=attention_softmax, dice_momentum=dice_momentum,
                               name="target_attention")(
        feats["target_item"], feats["history"], mask=feats["history_mask"])
    z = keras.layers.Concatenate(name="din_input")(
        [feats["fields_flat"], feats["numerics"], interest, feats["history_pooled"]])
    activation = {"dice": lambda name: Dice(momentum=dice_momentum, name=name),
                  "prelu": keras.layers.PReLU}.get(mlp_activation, mlp_activation)
    z = mlp(z, mlp_hidden_units, activation, name="mlp")
    return compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                          name="din")
