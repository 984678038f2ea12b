"""Baseline ranker: embeddings + masked mean-pooled history + MLP, two heads.

    e_f     = E_f[x_f]                                  (one table per id feature;
                                                          history ids share the
                                                          target's table)
    h_i     = [E_video[hv_i], E_author[ha_i], W_v·(click_i, log1p watch_i, log1p gap_i)]
    pool    = Σ_i m_i h_i / max(Σ_i m_i, 1)              (m = history mask)
    z       = MLP([e_1..e_F, numerics, pool, log1p(hist_len)])
    p_click = σ(w_c·z + b_c)
    watch   = expm1(softplus(w_w·z + b_w))              (trained on log1p(y) with MSE)

Outputs a dict {"click_prob": [B, 1], "watch_time_s": [B, 1]} so TFMA can address
each head by output name. Later rankers (xDeepFM, DIN, BST) replace this model;
the inputs and output names stay.
"""
import tf_keras as keras
import tensorflow as tf

from models import features as F

CLICK_OUTPUT = "click_prob"
WATCH_OUTPUT = "watch_time_s"


def embedding_input_dims(vocab_sizes: dict, oov_buckets: int) -> dict:
    """Rows per table: vocabulary + OOV buckets + the padding row 0."""
    return {key: size + oov_buckets + 1 for key, size in vocab_sizes.items()}


def model_inputs(history_length: int) -> dict:
    inputs = {}
    for key in F.ID_FEATURES + F.STRING_FEATURES:
        inputs[F.transformed_name(key)] = keras.Input(shape=(), name=F.transformed_name(key), dtype=tf.int64)
    for key in F.NUMERIC_FEATURES + [F.HISTORY_LEN_FEATURE]:
        inputs[F.transformed_name(key)] = keras.Input(shape=(), name=F.transformed_name(key), dtype=tf.float32)
    for key in F.HISTORY_ID_FEATURES:
        inputs[F.transformed_name(key)] = keras.Input(shape=(history_length,), name=F.transformed_name(key), dtype=tf.int64)
    for key in F.HISTORY_VALUE_FEATURES + ["hist_mask"]:
        inputs[F.transformed_name(key)] = keras.Input(shape=(history_length,), name=F.transformed_name(key), dtype=tf.float32)
    return inputs


def build_baseline(vocab_sizes: dict, history_length: int, embedding_dim: int = 16,
                   hidden_units=(128, 64), oov_buckets: int = 1, learning_rate: float = 1e-3,
                   loss_weights=None) -> keras.Model:
    """Builds and compiles the baseline. `vocab_sizes` maps raw feature -> vocabulary size."""
    if embedding_dim <= 0:
        raise ValueError(f"embedding_dim must be positive, got {embedding_dim}")
    dims = embedding_input_dims(vocab_sizes, oov_buckets)
    inputs = model_inputs(history_length)
    init = keras.initializers.RandomNormal(stddev=0.01)

    tables = {}
    for key in F.ID_FEATURES + F.STRING_FEATURES:
        tables[key] = keras.layers.Embedding(dims[key], embedding_dim, embeddings_initializer=init,
                                             name=f"emb_{key}")
    parts = [tables[k](inputs[F.transformed_name(k)]) for k in F.ID_FEATURES + F.STRING_FEATURES]
    numerics = keras.layers.Lambda(lambda xs: tf.stack(xs, axis=-1), name="numerics")(
        [inputs[F.transformed_name(k)] for k in F.NUMERIC_FEATURES])
    parts.append(numerics)

    mask = inputs["hist_mask_xf"]
    hist_items = [tables[F.ID_SHARED_VOCAB[k]](inputs[F.transformed_name(k)]) for k in F.HISTORY_ID_FEATURES]
    hist_values = keras.layers.Lambda(lambda xs: tf.stack(xs, axis=-1), name="hist_values")(
        [inputs[F.transformed_name(k)] for k in F.HISTORY_VALUE_FEATURES])
    hist_items.append(keras.layers.Dense(embedding_dim, name="hist_value_proj")(hist_values))
    hist = keras.layers.Concatenate(axis=-1)(hist_items)

    def masked_mean(args):
        h, m = args
        m = m[:, :, tf.newaxis]
        return tf.reduce_sum(h * m, axis=1) / tf.maximum(tf.reduce_sum(m, axis=1), 1.0)

    parts.append(keras.layers.Lambda(masked_mean, name="hist_pool")([hist, mask]))
    parts.append(keras.layers.Lambda(lambda n: tf.math.log1p(n)[:, tf.newaxis], name="hist_len_log")(
        inputs[F.transformed_name(F.HISTORY_LEN_FEATURE)]))

    z = keras.layers.Concatenate(axis=-1)(parts)
    for i, units in enumerate(hidden_units):
        z = keras.layers.Dense(units, activation="relu", name=f"mlp_{i}")(z)
    click = keras.layers.Dense(1, activation="sigmoid", name=CLICK_OUTPUT)(z)
    log_watch = keras.layers.Dense(1, activation="softplus", name="log1p_watch")(z)
    watch = keras.layers.Lambda(lambda x: tf.math.expm1(x), name=WATCH_OUTPUT)(log_watch)

    model = keras.Model(inputs=inputs, outputs={CLICK_OUTPUT: click, WATCH_OUTPUT: watch})
    loss_weights = loss_weights or {CLICK_OUTPUT: 1.0, WATCH_OUTPUT: 1.0}
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss={CLICK_OUTPUT: keras.losses.BinaryCrossentropy(),
              WATCH_OUTPUT: log1p_mse},
        loss_weights=loss_weights,
        metrics={CLICK_OUTPUT: [keras.metrics.AUC(name="auc")],
                 WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]},
    )
    return model


def log1p_mse(y_true, y_pred):
    """Squared error in log1p space: (log1p(y) - log1p(ŷ))²."""
    y_true = tf.cast(y_true, tf.float32)
    return tf.reduce_mean(tf.square(tf.math.log1p(y_true) - tf.math.log1p(tf.maximum(y_pred, 0.0))), axis=-1)
