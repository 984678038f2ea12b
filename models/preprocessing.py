"""TF Transform preprocessing_fn: raw tf.Example features -> model inputs.

Ids and strings
    x_xf = vocab_index(x) + 1, so index 0 is reserved for history padding and
    OOV values land in the `VOCAB_OOV_BUCKETS` indices after the vocabulary.
    Embedding tables therefore have `vocab_size + oov_buckets + 1` rows.
    A history id feature shares its target's vocabulary (`ID_SHARED_VOCAB`): the
    vocabulary of `video_id` is computed over the target videos *and* the (unpadded)
    history videos, and both are looked up in it, so one embedding table serves
    both.
    All vocabularies come from one analyzer (models/fused_vocabulary.py): the files
    and ids `tft.vocabulary` gives, without its ~10 Beam stages per feature.
Numerics
    z = (g(x) - mean) / std, g = log1p(max(x, 0)) for heavy-tailed features
    (`LOG1P_FEATURES`), identity otherwise; statistics from the train split.
Signals (enabled ones only, `MODEL_SIGNAL_FEATURES`, signal families included)
    z = (g(x) - mean) / std with g from `SIGNAL_TRANSFORMS` / `FAMILY_TRANSFORMS`:
    logit(clip(x, ε, 1 - ε)) for rates, log(max(x, ε)) for ratios, log1p(max(x, 0)) for
    counts, identity otherwise; ε = `SIGNAL_EPS`.
History values
    hist_mask = 1(position < hist_len); hist_watch_time_s and hist_time_gap_s get
    log1p (padding stays 0); hist_is_click is 0/1.
Labels
    is_click (float 0/1) and watch_time_s (seconds) pass through unchanged.
EAD watch-time buckets (CREAD §4, models/watch_time/ead.py)
    t_1 < ... < t_M from the train split's watch-time CDF (error-adaptive
    discretization); they are constants of the transform graph and its asset
    `ead_thresholds.json` (key "ead_thresholds", J of every candidate), and
    watch_time_bucket = Σ_m 1(watch_time_s > t_m) is the ordinal label.

Knobs arrive as Transform's ``custom_config`` (a `TransformConfig`, values in
pipeline/configs/ ``TRANSFORM``), so they are part of Transform's cache key: a
changed EAD β re-runs Transform instead of reusing an old transform graph.
"""
import tensorflow as tf
import tensorflow_transform as tft

from models import features as F
from models import fused_vocabulary
from models.transform_config import TransformConfig
from models.watch_time import ead_analyzer


SIGNAL_EPS = 1e-4


def signal_transform(x, kind: str):
    """g(x) of a signal (module docstring)."""
    if kind == "logit":
        p = tf.clip_by_value(x, SIGNAL_EPS, 1.0 - SIGNAL_EPS)
        return tf.math.log(p) - tf.math.log1p(-p)
    if kind == "log":
        return tf.math.log(tf.maximum(x, SIGNAL_EPS))
    if kind == "log1p":
        return tf.math.log1p(tf.maximum(x, 0.0))
    if kind != "none":
        raise ValueError(f"unknown signal transform {kind!r}")
    return x


def z_scores(columns):
    """z = (x - mean) / sqrt(var) of every [B] tensor x of `columns` over the analysed rows
    (x unchanged where var = 0), as tft.scale_to_z_score, with mean and var accumulated in
    float64 and rounded to float32.

    One tft.mean and one tft.var over the stacked [B, K] matrix (``reduce_instance_dims=False``:
    per column) instead of two analyzers per feature: 2 analyzers instead of 2K, each with
    its own Beam stages (the 40-row fixture's analysis: 8-9 instead of 21-25 CPU-s). The
    vector combiner sums in another order than the scalar one, so a constant can differ in
    its last float32 bit from a per-feature analysis (|Δz| ≤ 5e-7 on the fixture).

    Beam combines the per-batch moments in another order on every run; in float32 (or in
    float64 used as is) that moved the z-scores by an ulp between two Transforms of the same
    rows, so DETERMINISTIC=1 runs differed (#34). Rounded from float64, the two constants
    are the same float32 numbers unless they straddle a rounding boundary (~1e-13 / 6e-8)."""
    # the stack feeds the analyzers only; each column is scaled on its own, so columns of
    # different batch sizes (serving_rank's user side: one row per request) still work
    x64 = tf.cast(tf.stack([tf.reshape(c, [-1]) for c in columns], axis=1), tf.float64)
    means = tf.cast(tft.mean(x64, reduce_instance_dims=False), tf.float32)
    stds = tf.sqrt(tf.cast(tft.var(x64, reduce_instance_dims=False), tf.float32))
    out = []
    for i, x in enumerate(columns):
        centred, std = x - means[i], stds[i]
        out.append(tf.where(std > 0, centred / tf.where(std > 0, std, tf.ones_like(std)), centred))
    return out


def _flat(x):
    return tf.reshape(x, [-1])


def _vocab_ids(x, vocab, num_oov_buckets, vocab_size):
    """vocab_index(x) + 1 (module docstring). With one OOV bucket every OOV value gets
    index vocab_size + 1, which the lookup's default value gives without the per-value
    hash (AsString + hash) an OOV-bucket table computes for every key, known or not:
    the same ids, ~0.8 ms less per 100-row request (27 hash ops, two of them over
    [B, L] histories)."""
    if num_oov_buckets != 1:
        return tft.apply_vocabulary(x, vocab, num_oov_buckets=num_oov_buckets) + 1
    ids = tft.apply_vocabulary(x, vocab, default_value=-1)
    return tf.where(ids < 0, tf.cast(vocab_size, ids.dtype), ids) + 1


def preprocessing_fn(inputs, custom_config):
    """Maps raw features (models.features) to transformed ones (`<name>_xf`).

    `custom_config`: `TransformConfig.to_custom_config()` (Transform passes it)."""
    config = TransformConfig.from_custom_config(custom_config)
    out = {}
    oov = config.oov_buckets

    hist_len = tf.cast(inputs[F.HISTORY_LEN_FEATURE], tf.int64)
    hist_width = tf.shape(inputs["hist_video_id"])[1]
    positions = tf.range(tf.cast(hist_width, tf.int64))[tf.newaxis, :]
    hist_mask = positions < tf.reshape(hist_len, [-1, 1])
    out["hist_mask_xf"] = tf.cast(hist_mask, tf.float32)
    out[F.transformed_name(F.HISTORY_LEN_FEATURE)] = tf.cast(hist_len, tf.float32)

    shared_targets = {target: hist for hist, target in F.ID_SHARED_VOCAB.items()}
    vocab_keys = F.ID_FEATURES + F.STRING_FEATURES
    vocab_values = []
    for key in vocab_keys:
        values = _flat(inputs[key])
        if key in shared_targets:
            values = tf.concat([values, tf.boolean_mask(inputs[shared_targets[key]], hist_mask)], axis=0)
        vocab_values.append(values)
    vocabs, sizes = fused_vocabulary.fused_vocabularies(
        vocab_values, [F.vocab_name(k) for k in vocab_keys], config.vocab_frequency_threshold)
    for i, key in enumerate(vocab_keys):
        out[F.transformed_name(key)] = _vocab_ids(inputs[key], vocabs[i], oov, sizes[i])
        if key in shared_targets:
            hist_key = shared_targets[key]
            hist_ids = _vocab_ids(inputs[hist_key], vocabs[i], oov, sizes[i])
            out[F.transformed_name(hist_key)] = tf.where(hist_mask, hist_ids, tf.zeros_like(hist_ids))

    numerics = []
    for key in F.NUMERIC_FEATURES:
        x = tf.cast(inputs[key], tf.float32)
        if key in F.LOG1P_FEATURES:
            x = tf.math.log1p(tf.maximum(x, 0.0))
        elif key in F.SIGNAL_TRANSFORMS or key in F.FAMILY_TRANSFORMS:
            x = signal_transform(x, F.SIGNAL_TRANSFORMS.get(key) or F.FAMILY_TRANSFORMS[key])
        numerics.append(x)
    for key, z in zip(F.NUMERIC_FEATURES, z_scores(numerics)):
        out[F.transformed_name(key)] = z

    zeros = tf.zeros_like(out["hist_mask_xf"])
    for key in F.HISTORY_VALUE_FEATURES:
        x = tf.cast(inputs[key], tf.float32)
        if key != "hist_is_click":
            x = tf.math.log1p(tf.maximum(x, 0.0))
        out[F.transformed_name(key)] = tf.where(hist_mask, x, zeros)

    out[F.LABEL_CLICK] = tf.cast(inputs[F.LABEL_CLICK], tf.float32)
    watch = tf.cast(inputs[F.LABEL_WATCH], tf.float32)
    out[F.LABEL_WATCH] = watch
    thresholds, _ = ead_analyzer.ead_thresholds_analyzer(
        watch, M=config.ead_num_buckets, beta=config.ead_beta, alphas=config.ead_alphas,
        num_quantiles=config.ead_num_quantiles, t_max_quantile=config.ead_t_max_quantile)
    out[F.WATCH_BUCKET_LABEL] = tf.reduce_sum(
        tf.cast(tf.reshape(watch, [-1, 1]) > tf.reshape(thresholds, [1, -1]), tf.int64), axis=1)
    return out
