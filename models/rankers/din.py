"""DIN ranker: target attention over the behaviour history (Zhou et al., KDD 2018).

    t     = [e_video, e_author]                       target item (query)
    h_i   = [E_video[hv_i], E_author[ha_i]] + W_o·o_i   history items with outcomes
    v_U   = Σ_i m_i a(h_i, t) h_i                     (eq. 3, models/layers/target_attention.py;
                                                      no softmax by default, as the paper;
                                                      pipeline/configs/ turns the masked
                                                      softmax on, see the note there;
                                                      attention_scoring="scaled_dot": the
                                                      scaled variant softmax(t·W h_i / √d))
    z     = MLP_Dice([e_1..e_F, numerics, v_U, pool]) (Dice, models/layers/dice.py, eq. 4-5;
                                                      pool = masked mean of h_i, a cheap
                                                      extra that keeps the outcome average)

The user-side inputs may have 1 row against N candidates (export's serving_rank): the
feature layer, the attention and `din_input` broadcast rows where the two sides meet
(models/layers/row_broadcast.py), so the history is embedded and projected once per
request (`RowConcatenate(one_row_history=True)`, models/layers/row_broadcast.py).

dual_attention=True adds the two-stage cross-scene attention
(models/layers/dual_attention.py) next to v_U:

    [V, V_intent] = DualAttention(t, h, hist_tab, tab, [e_user, e_tab, e_hour, numerics])
    z     = MLP_Dice([e_1..e_F, numerics, v_U, V, V_intent, pool])

User-side regularisation (#15, off by default): the user's identity and profile fields
U = {user_id, user_active_degree, onehot_feat0..17} are what lets a ranker learn *who*
clicks rather than *which video* a user prefers, so two options act on them only:

    user_field_dropout = p:  e_f <- e_f · b_f / (1 - p),  b_f ~ Bernoulli(1 - p) per row
                             and field f in U (a whole field embedding dropped, training only)
    user_embedding_l2 = λ:   loss += λ · mean_b ||E_user[u_b]||²  (the DIN paper's
                             mini-batch aware L2: only the rows the batch gathers)

long_memory="titans" (#38, off by default) adds a Titans neural memory used as a gate
(models/layers/titans_memory.py, MemoryAsGate) next to v_U, written from the history
oldest first and read by the target item:

    m     = σ([t, v_U] W_g + b_g) ⊙ M*(t)
    z     = MLP_Dice([e_1..e_F, numerics, v_U, m, pool])

`long_memory_params` go to TitansMemory (default `TITANS_DEFAULTS`: W_Q = W_K, the read not
normalised, one chunk of the whole history, so M = M_0 − Σ_i c_i ∇ℓ_i(M_0): chosen on the
validation day of KuaiRand-Pure, whose histories are <= 50 events, median 8; an RMS-normalised
read blows a nearly empty memory up to unit size). In serving_rank the memory is written once
from the request's one-row history and read by the N candidates.

Dual attention needs the scene (tab) of every history item as the extra input
`HISTORY_SCENE_INPUT` ([L] int64, the transformed `tab` index, 0 at padding).
LogExampleGen always writes `hist_tab`; Transform maps it to `hist_tab_xf` (tab's
vocabulary) and the serving signatures take it only when LOG_SIGNALS includes hist_tab
(models/features.py), which pipeline/configs/training.py requires for
DIN_DUAL_ATTENTION=1. serving_rank then broadcasts the history to the N candidates
(DualAttention has no one-row form yet).
"""
import tf_keras as keras
import tensorflow as tf

from models import features as F
from models.layers.dice import Dice
from models.layers.dual_attention import DualAttention
from models.layers.feature_layer import CATEGORICAL, FeatureLayer, mlp, model_inputs
from models.heads import compile_ranker
from models.layers.row_broadcast import RowConcatenate
from models.layers.target_attention import TargetAttention
from models.layers.titans_memory import MemoryAsGate

HISTORY_SCENE_INPUT = "hist_tab_xf"
PROFILE_FIELDS = ("user_id", "tab", "hour")  # stage-1 query of the dual attention: U and C
LONG_MEMORIES = ("none", "titans")
# TitansMemory's arguments for long_memory="titans" (bench/README.md, lifelong section);
# chunk_size defaults to the history length (one chunk)
TITANS_DEFAULTS = {"shared_query_key": True, "output_norm": False}
# the user's identity and profile (not the request context tab / hour)
USER_FIELDS = tuple(["user_id", "user_active_degree"] + [f"onehot_feat{i}" for i in range(18)])


def field_embedding(feats, layer: FeatureLayer, key: str):
    """e_key [B, D_key] out of the FeatureLayer's fields_flat (CATEGORICAL order)."""
    start = sum(layer.dims[k] for k in CATEGORICAL[:CATEGORICAL.index(key)])
    return feats["fields_flat"][:, start:start + layer.dims[key]]


def build_din(vocab_sizes: dict, history_length: int, embedding_dim: int = 16, oov_buckets: int = 1,
              learning_rate: float = 1e-3, loss_weights=None, heads=None,
              attention_hidden_units=(80, 40), attention_activation: str = "dice",
              attention_softmax: bool = False, attention_scoring: str = "mlp",
              mlp_hidden_units=(200, 80), mlp_activation: str = "dice", dice_momentum: float = 0.99,
              dual_attention: bool = False, dual_attention_hidden_units=(32,),
              embedding_init_std: float = 0.01, user_field_dropout: float = 0.0,
              user_embedding_l2: float = 0.0, long_memory: str = "none", long_memory_params=None,
              **compile_options) -> keras.Model:
    if mlp_activation not in ("dice", "prelu", "relu"):
        raise ValueError(f"DIN: mlp_activation must be dice, prelu or relu, got {mlp_activation!r}")
    if not 0.0 <= float(user_field_dropout) < 1.0:
        raise ValueError(f"DIN: user_field_dropout must be in [0, 1), got {user_field_dropout!r}")
    if float(user_embedding_l2) < 0.0:
        raise ValueError(f"DIN: user_embedding_l2 must be >= 0, got {user_embedding_l2!r}")
    if long_memory not in LONG_MEMORIES:
        raise ValueError(f"DIN: long_memory must be one of {LONG_MEMORIES}, got {long_memory!r}")
    inputs = model_inputs(history_length)
    layer = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")
    feats = layer(inputs)
    interest = TargetAttention(hidden_units=tuple(attention_hidden_units), activation=attention_activation,
                               use_softmax=attention_softmax, dice_momentum=dice_momentum,
                               scoring=attention_scoring, name="target_attention")(
        feats["target_item"], feats["history"], mask=feats["history_mask"])
    fields = feats["fields_flat"]
    if user_field_dropout or user_embedding_l2:
        def user_field(key):
            e = field_embedding(feats, layer, key)
            if key == "user_id" and user_embedding_l2:  # L2 · Σ e² / batch: the gathered rows only
                e = keras.layers.ActivityRegularization(l2=float(user_embedding_l2), name="user_embedding_l2")(e)
            if user_field_dropout:
                e = keras.layers.Dropout(float(user_field_dropout), noise_shape=(None, 1), name=f"dropout_{key}")(e)
            return e

        fields = keras.layers.Concatenate(name="fields_user_side")(  # same layout as fields_flat
            [user_field(k) if k in USER_FIELDS else field_embedding(feats, layer, k) for k in CATEGORICAL])
    parts = [fields, feats["numerics"], interest]
    if long_memory == "titans":
        memory = dict(TITANS_DEFAULTS, chunk_size=history_length)
        memory.update(long_memory_params or {})
        parts.append(MemoryAsGate(memory, name="titans_mag")(
            feats["target_item"], interest, feats["history"], feats["history_mask"]))
    if dual_attention:
        inputs[HISTORY_SCENE_INPUT] = keras.Input(shape=(history_length,), name=HISTORY_SCENE_INPUT,
                                                  dtype=tf.int64)
        profile = keras.layers.Concatenate(name="dual_profile")(
            [field_embedding(feats, layer, k) for k in PROFILE_FIELDS] + [feats["numerics"]])
        parts.append(DualAttention(hidden_units=tuple(dual_attention_hidden_units),
                                   activation=attention_activation, dice_momentum=dice_momentum,
                                   name="dual_attention")(
            feats["target_item"], feats["history"], inputs[HISTORY_SCENE_INPUT],
            inputs[F.transformed_name("tab")], profile, mask=feats["history_mask"]))
    # serving_rank may feed the user side with 1 row (models/training/export.py): every layer
    # that meets both sides broadcasts rows (not DualAttention yet); the flag is saved in
    # the layer's config, so a reloaded model keeps it
    z = RowConcatenate(name="din_input", one_row_history=not dual_attention)(parts + [feats["history_pooled"]])
    activation = {"dice": lambda name: Dice(momentum=dice_momentum, name=name),
                  "prelu": keras.layers.PReLU}.get(mlp_activation, mlp_activation)
    z = mlp(z, mlp_hidden_units, activation, name="mlp")
    model = compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                           name="din", **compile_options)
    return model
