"""Shared feature layer: transformed features -> embeddings, items, history, numerics.

Every ranker (baseline, LR, xDeepFM, DIN, BST) starts from this layer, so the
embedding tables, the item representation and the masks are defined once. It is
driven by models/features.py (kinds, shared tables, item entities, dims).

    e_f   = E_{table(f)}[x_f]                    one table per entity; a history id
                                                 looks up its target's table
    t     = [e_video, e_author]                  target item, width D_item = 2·D
    h_i   = [E_video[hv_i], E_author[ha_i]] + W_o·o_i + b_o
            o_i = (click_i, log1p watch_i, log1p gap_i)   outcome of history item i
    m_i   = hist_mask_i                          1 = real item, 0 = padding
    pool  = Σ_i m_i h_i / max(Σ_i m_i, 1)
    num   = [z-scored numerics, log1p(hist_len)]
    (linear=True) first-order terms  w_f = W_{table(f)}[x_f] (dim-1 tables; history
            ids: masked mean over items) and linear_logit = Σ_f w_f + v·num

Tables are initialised explicitly with N(0, embedding_init_std²) and the
first-order tables with N(0, linear_init_std²) (default 1e-4: DESIGN.md §6, the
FuxiCTR pitfall of std-1 linear weights summed over 50 history items). Lookups use
`tf.nn.embedding_lookup`, which also accepts the ShardedVariables that
ParameterServerStrategy's `variable_partitioner` creates for large tables; the fields go
through `lookup_tables`, which looks a published model's table batches (its int8 tables
in one variable, its small fp32 ones in another) up in one gather per batch
(models/publishing/table_batch.py).

Output: a dict of tensors
    fields          [B, F, D]   every id/string feature (only if all widths are equal)
    fields_flat     [B, Σ D_f]
    numerics        [B, N + 1]
    target_item     [B, D_item]
    history         [B, L, D_item]
    history_mask    [B, L]       float 0/1
    history_pooled  [B, D_item]
    history_gap_s   [B, L]       seconds (0 at padding; BST's time-gap position)
    linear_terms    [B, F + H]   (linear=True) per-field first-order weights
    linear_logit    [B, 1]       (linear=True)

Example:

>>> layer = FeatureLayer(vocab_sizes, embedding_dim=16)
>>> feats = layer(transformed_inputs)   # keras.Input dict, see model_inputs()
>>> feats["history"].shape               # [B, 50, 32]
"""
import tf_keras as keras
import tensorflow as tf

from models import features as F
from models.layers._utils import masked_mean, positive_int
from models.layers.row_broadcast import concat_rows

CATEGORICAL = F.ID_FEATURES + F.STRING_FEATURES


def table_rows(vocab_sizes: dict, oov_buckets: int) -> dict:
    """Rows per table: vocabulary + OOV buckets + the padding row 0."""
    return {key: int(size) + int(oov_buckets) + 1 for key, size in vocab_sizes.items()}


def lookup_tables(tables, ids, stacked: bool = False):
    """[E_t[x_t]] for tables[t], ids[t]: `tf.nn.embedding_lookup` per table, except that the
    tables of one published batch (a `table_batch` attribute: models/publishing/table_batch.py)
    are looked up together, one gather for all of them. The trained tables have none.
    `stacked`: one S × T × D tensor instead of the list (ids of one shape S): each batch's
    rows come out stacked, the parts are concatenated and, when the batches interleave in
    `tables`, put back in order with one gather."""
    groups = {}  # id(batch or None) -> (batch, [positions]), in order of first appearance
    for i, table in enumerate(tables):
        batch = getattr(table, "table_batch", None)
        groups.setdefault(id(batch) if batch is not None else None, (batch, []))[1].append(i)
    parts, order = [], []
    for batch, members in groups.values():
        part = None
        if batch is not None and stacked:
            part = batch.lookup_stacked([tables[i] for i in members], [ids[i] for i in members])
        if part is None:
            rows = (batch.lookup_many([tables[i] for i in members], [ids[i] for i in members]) if batch is not None
                    else [tf.nn.embedding_lookup(tables[i], ids[i]) for i in members])
            part = tf.stack(rows, axis=-2) if stacked else rows
        parts.append(part)
        order.extend(members)
    if not stacked:
        out = [None] * len(tables)
        for i, row in zip(order, (r for part in parts for r in part)):
            out[i] = row
        return out
    whole = parts[0] if len(parts) == 1 else tf.concat(parts, axis=-2)
    if order != sorted(order):
        whole = tf.gather(whole, [order.index(i) for i in range(len(tables))], axis=-2)
    return whole


def model_inputs(history_length: int) -> dict:
    """keras.Input per transformed feature, typed by its kind in models/features.py."""
    inputs = {}
    for key, kind in F.FEATURE_KINDS.items():
        name = F.transformed_name(key)
        if kind == F.KIND_ID:
            inputs[name] = keras.Input(shape=(), name=name, dtype=tf.int64)
        elif kind in (F.KIND_NUMERIC, F.KIND_HISTORY_LEN):
            inputs[name] = keras.Input(shape=(), name=name, dtype=tf.float32)
        elif kind == F.KIND_HISTORY_ID:
            inputs[name] = keras.Input(shape=(history_length,), name=name, dtype=tf.int64)
        else:  # history values and mask
            inputs[name] = keras.Input(shape=(history_length,), name=name, dtype=tf.float32)
    return inputs


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class FeatureLayer(keras.layers.Layer):
    r"""Transformed features -> embeddings, target item, history, numerics (module docstring).

    .. math::

        e_f = E_{table(f)}[x_f], \quad
        h_i = [E_{video}[hv_i], E_{author}[ha_i]] + W_o o_i + b_o, \quad
        pool = \frac{\sum_i m_i h_i}{\max(\sum_i m_i, 1)}

    (the Embedding&MLP input of DIN, Zhou et al. KDD 2018 §4.2, with the
    history outcomes o_i added; first-order terms as xDeepFM's linear part, Lian et
    al. KDD 2018 eq. 15).

    Args:
        vocab_sizes: raw categorical feature -> vocabulary size (Transform's vocabulary;
            every key of ID_FEATURES + STRING_FEATURES).
        embedding_dim: default width D (per-table overrides: features.EMBEDDING_DIMS).
        oov_buckets: Transform's OOV buckets (rows = vocab + oov + 1 padding row).
        embedding_init_std: std of the normal initialiser of every embedding table.
        linear: also build the first-order (dim-1) tables and `linear_logit`.
        linear_init_std: std of the first-order tables.
        embeddings: build the embedding tables and item/history outputs (False: only
            numerics and the first-order part, for logistic regression).

    Input: the dict of :func:`model_inputs` (``<feature>_xf`` tensors: ids ``[B]``,
    numerics ``[B]``, histories and mask ``[B, L]``). The ``[L]``-long inputs (histories
    and mask) may also have 1 row against B rows of the scalars (one user's history in a
    ranking request): the history outputs then keep 1 row (embedded once per user) and
    ``linear_terms`` broadcasts them (models/layers/row_broadcast.py).
    Output: the dict of the module docstring (``history`` ``[B, L, D_item]``,
    ``history_pooled`` ``[B, D_item]``, ``numerics`` ``[B, N + 1]``, ...).
    """

    def __init__(self, vocab_sizes, embedding_dim=16, oov_buckets=1, embedding_init_std=0.01,
                 linear=False, linear_init_std=1e-4, embeddings=True, **kwargs):
        super().__init__(**kwargs)
        missing = sorted(set(CATEGORICAL) - set(vocab_sizes))
        if missing:
            raise ValueError(f"FeatureLayer: vocab_sizes lacks {missing}")
        embedding_dim = positive_int("FeatureLayer", "embedding_dim", embedding_dim)
        if isinstance(oov_buckets, bool) or int(oov_buckets) != oov_buckets or oov_buckets < 0:
            raise ValueError(f"FeatureLayer: oov_buckets must be an int >= 0, got {oov_buckets!r}")
        if embedding_init_std <= 0 or linear_init_std <= 0:
            raise ValueError("FeatureLayer: initialiser stds must be positive, got "
                             f"{embedding_init_std}, {linear_init_std}")
        self.vocab_sizes = {k: int(v) for k, v in vocab_sizes.items()}
        self.embedding_dim = int(embedding_dim)
        self.oov_buckets = int(oov_buckets)
        self.embedding_init_std = float(embedding_init_std)
        self.linear = bool(linear)
        self.linear_init_std = float(linear_init_std)
        self.embeddings = bool(embeddings)
        if not (self.embeddings or self.linear):
            raise ValueError("FeatureLayer: at least one of embeddings / linear must be on")
        self.dims = {k: int(F.EMBEDDING_DIMS.get(k) or self.embedding_dim) for k in CATEGORICAL}
        self.item_dim = sum(self.dims[k] for k in F.ITEM_ENTITIES)
        self.uniform = len(set(self.dims.values())) == 1

    def build(self, input_shape):
        rows = table_rows(self.vocab_sizes, self.oov_buckets)
        self.tables, self.linear_tables = {}, {}
        for key in CATEGORICAL:
            if self.embeddings:
                self.tables[key] = self.add_weight(
                    name=f"emb_{key}", shape=(rows[key], self.dims[key]),
                    initializer=keras.initializers.RandomNormal(stddev=self.embedding_init_std))
            if self.linear:
                self.linear_tables[key] = self.add_weight(
                    name=f"linear_{key}", shape=(rows[key], 1),
                    initializer=keras.initializers.RandomNormal(stddev=self.linear_init_std))
        if self.embeddings:
            n_out = len(F.HISTORY_OUTCOME_FEATURES)
            self.outcome_kernel = self.add_weight(
                name="history_outcome_kernel", shape=(n_out, self.item_dim),
                initializer=keras.initializers.RandomNormal(stddev=0.1))
            self.outcome_bias = self.add_weight(
                name="history_outcome_bias", shape=(self.item_dim,), initializer="zeros")
        if self.linear:
            self.linear_numeric = self.add_weight(
                name="linear_numerics", shape=(len(F.NUMERIC_FEATURES) + 1, 1),
                initializer=keras.initializers.RandomNormal(stddev=self.linear_init_std))
        super().build(input_shape)

    def call(self, inputs):
        x = lambda key: inputs[F.transformed_name(key)]  # noqa: E731
        out = {}
        hist_len = tf.reshape(x(F.HISTORY_LEN_FEATURE), [-1, 1])
        numerics = tf.concat(
            [tf.stack([x(k) for k in F.NUMERIC_FEATURES], axis=-1), tf.math.log1p(hist_len)], axis=-1)
        out["numerics"] = numerics

        mask = tf.cast(x("hist_mask"), tf.float32)
        out["history_mask"] = mask
        hist_ids = [x(F.HISTORY_ITEM_FEATURES[k]) for k in F.ITEM_ENTITIES]
        if self.embeddings:
            out.update(self._embedded(x, mask, hist_ids))
        if self.linear:
            terms = lookup_tables([self.linear_tables[k] for k in CATEGORICAL], [x(k) for k in CATEGORICAL])
            for k, ids in zip(F.ITEM_ENTITIES, hist_ids):
                w = tf.nn.embedding_lookup(self.linear_tables[k], ids)  # [B, L, 1]
                terms.append(masked_mean(w, mask))
            linear_terms = concat_rows(terms, axis=-1)
            out["linear_terms"] = linear_terms
            out["linear_logit"] = (tf.reduce_sum(linear_terms, axis=-1, keepdims=True)
                                   + tf.matmul(numerics, tf.convert_to_tensor(self.linear_numeric)))
        return out

    def _embedded(self, x, mask, hist_ids):
        out = {}
        tables, ids = [self.tables[k] for k in CATEGORICAL], [x(k) for k in CATEGORICAL]
        if self.uniform:  # [B, F, D] first: flat and target item are a reshape and a gather of it
            fields = lookup_tables(tables, ids, stacked=True)
            out["fields"] = fields
            out["fields_flat"] = tf.reshape(fields, [-1, sum(self.dims.values())])
            items = tf.gather(fields, [CATEGORICAL.index(k) for k in F.ITEM_ENTITIES], axis=1)
            out["target_item"] = tf.reshape(items, [-1, self.item_dim])
        else:
            field_embs = lookup_tables(tables, ids)
            out["fields_flat"] = tf.concat(field_embs, axis=-1)
            out["target_item"] = tf.concat([field_embs[CATEGORICAL.index(k)] for k in F.ITEM_ENTITIES], axis=-1)
        item_tables = [self.tables[k] for k in F.ITEM_ENTITIES]
        if len({self.dims[k] for k in F.ITEM_ENTITIES}) == 1:  # [B, L, 2, D] -> [B, L, 2D]
            items = lookup_tables(item_tables, hist_ids, stacked=True)
            items = tf.reshape(items, tf.concat([tf.shape(hist_ids[0]), [self.item_dim]], axis=0))
        else:
            items = tf.concat(lookup_tables(item_tables, hist_ids), axis=-1)
        outcomes = tf.stack([tf.cast(x(k), tf.float32) for k in F.HISTORY_OUTCOME_FEATURES], axis=-1)
        # W_o·o_i as one 2-D MatMul (an Einsum here ran ~10x slower under oneDNN)
        outcome_vec = tf.reshape(
            tf.matmul(tf.reshape(outcomes, [-1, outcomes.shape[-1]]), self.outcome_kernel),
            tf.concat([tf.shape(outcomes)[:2], [self.item_dim]], axis=0)) + self.outcome_bias
        history = (items + outcome_vec) * mask[..., tf.newaxis]  # padding rows exactly 0
        out["history"] = history
        out["history_pooled"] = masked_mean(history, mask)
        out["history_gap_s"] = tf.math.expm1(tf.cast(x(F.HISTORY_TIME_GAP_FEATURE), tf.float32)) * mask
        return out

    def get_config(self):
        config = super().get_config()
        config.update({
            "vocab_sizes": dict(self.vocab_sizes),
            "embedding_dim": self.embedding_dim,
            "oov_buckets": self.oov_buckets,
            "embedding_init_std": self.embedding_init_std,
            "linear": self.linear,
            "linear_init_std": self.linear_init_std,
            "embeddings": self.embeddings,
        })
        return config


def mlp(x, hidden_units, activation="relu", name="mlp", dropout_rate=0.0):
    """Dense stack; `activation` is a keras activation name or a layer factory (e.g. Dice)."""
    for i, units in enumerate(hidden_units):
        if callable(activation):
            x = keras.layers.Dense(units, name=f"{name}_{i}")(x)
            x = activation(name=f"{name}_{i}_act")(x)
        else:
            x = keras.layers.Dense(units, activation=activation, name=f"{name}_{i}")(x)
        if dropout_rate:
            x = keras.layers.Dropout(dropout_rate, name=f"{name}_{i}_dropout")(x)
    return x
