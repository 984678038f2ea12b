"""Feature spec: the single source of truth for every feature name and kind.

LogExampleGen writes tf.Examples with exactly the *raw* features below; the curated
schema (schemas/schema.pbtxt) declares them; Transform (models/preprocessing.py)
turns them into model inputs; the serving signatures accept them.

Kinds
-----
- ID (int64 scalar): categorical ids, vocabulary + OOV buckets in Transform.
  `ID_SHARED_VOCAB` maps a history feature to the target feature whose vocabulary
  (and embedding table) it shares, e.g. `hist_video_id` -> `video_id`.
- STRING (bytes scalar): categorical strings, vocabulary + OOV buckets.
- NUMERIC (float scalar): log1p (for counts/durations) then z-score.
- HISTORY (fixed length L list): the user's earlier events, most recent first,
  padded at the end with `HISTORY_PAD_ID` (ids) / 0 (values). `hist_len` counts the
  real entries, so the mask is `position < hist_len`.
- LABEL: `is_click` (int64 0/1) and `watch_time_s` (float seconds).
- META: kept for slicing and analysis, never a model input.
- SIGNAL (float scalar, #15, #13): leakage-free running statistics (click rates and
  watch times) of the impression's user, video, author, music, tag and tab
  (components/log_example_gen/signals.py).
  Always written; model inputs (numerics, transformed by `SIGNAL_TRANSFORMS` then
  z-scored) only when enabled, like `hist_tab` (the scene of every history item):
  ``LOG_SIGNALS`` in the environment, unset = "standard" (the default, #37: the 12 click
  signals `STANDARD_SIGNALS`), "none" or "" (no signal: the model of sessions <= 20),
  "all" or a comma list of names of `SIGNAL_FEATURES` / "hist_tab" / the groups (e.g.
  "standard,hist_tab"); pipeline/configs/ingestion.py shows it as `LOG_SIGNALS`.
- FAMILY SIGNAL (float scalar, #37): the optional signal families of
  components/log_example_gen/signal_families.py (`FAMILY_SIGNAL_TRANSFORMS`, per family).
  ``LOG_SIGNALS`` also takes a family name (its signals), "families" (all five) or a family
  signal's name ("all" is not a family: the 19 signals and hist_tab). When any family
  signal is a model input, LogExampleGen writes every family (pipeline/configs/ingestion.py
  implies LOG_SIGNAL_FAMILIES=all), the raw spec and the schema declare them
  (schemas/with_families/schema.pbtxt, `FAMILY_INPUTS`), and Transform / serving take the
  enabled ones like the signals above; otherwise the examples and the schema are unchanged.
"""
import os

HISTORY_PAD_ID = -1
MISSING_ID = -1  # categorical value missing in a side table (e.g. a video without tag)

# id features (int64 scalars) -> vocabulary name
ID_FEATURES = [
    "user_id",
    "video_id",
    "author_id",
    "music_id",
    "tag_id",
    "tab",
    "hour",
] + [f"onehot_feat{i}" for i in range(18)]

STRING_FEATURES = ["user_active_degree", "video_type", "upload_type"]

# numeric features; LOG1P_FEATURES are heavy-tailed and get log1p before z-score.
BASE_NUMERIC_FEATURES = [
    "duration_s",
    "video_age_days",
    "follow_user_num",
    "fans_user_num",
    "friend_user_num",
    "register_days",
    "is_lowactive_period",
    "is_live_streamer",
    "is_video_author",
]
LOG1P_FEATURES = ["duration_s", "video_age_days", "follow_user_num", "fans_user_num",
                  "friend_user_num", "register_days"]

# Leakage-free signals (equations: components/log_example_gen/signals.py) and the
# transform of each before the z-score: logit (rates in (0, 1)), log (ratios > 0), none.
SIGNAL_TRANSFORMS = {
    "sig_propensity": "logit", "sig_tab_ctr": "logit", "sig_user_coec": "log", "sig_video_coec": "log",
    "sig_user_tab_ctr": "logit", "sig_user_lift": "none", "sig_author_ctr": "logit",
    "sig_music_ctr": "logit", "sig_tag_tab_ctr": "logit", "sig_tab_duration_ctr": "logit",
    "sig_last50_click": "logit", "sig_last50_watch": "none",
    # watch time (#13): means of log1p(watch_s) (already log scale) and of the capped watch ratio
    "sig_video_watch": "none", "sig_video_watch_ratio": "none", "sig_author_watch": "none",
    "sig_tab_duration_watch": "none", "sig_last50_watch_ratio": "none",
    "sig_tag_tab_watch": "none",  # #37's watch side: the tag's watch-time mean, per tab
    "sig_tab_hour_ctr": "logit",  # #37's time context: the tab's CTR at this hour of day
}
SIGNAL_FEATURES = list(SIGNAL_TRANSFORMS)
# the signals that depend on the user and the request context only (serving: user side)
USER_SIGNAL_FEATURES = ["sig_tab_ctr", "sig_user_coec", "sig_user_tab_ctr", "sig_user_lift",
                        "sig_last50_click", "sig_last50_watch", "sig_last50_watch_ratio", "sig_tab_hour_ctr"]
HISTORY_TAB_FEATURE = "hist_tab"
SIGNALS_ENV = "LOG_SIGNALS"
# The default model inputs (#37, chosen on the validation day: bench/results/rankers_signals.json,
# README "Leakage-free signals"): the 12 click signals, written by LogExampleGen in every run.
STANDARD_SIGNALS = SIGNAL_FEATURES[:12]
STANDARD_TOKEN = "standard"  # LOG_SIGNALS: the 12, and what an unset LOG_SIGNALS means

# Signal families (#37; equations: components/log_example_gen/signal_families.py, which
# takes its names from here) and the transform of each before the z-score: logit (rates),
# log1p (counts), none (already log1p seconds, or −1 when the event never happened).
FAMILY_SIGNAL_TRANSFORMS = {
    "in_tab": {**{f"sig_user_tab_last{n}_click": "logit" for n in (10, 20, 50)}, "sig_user_tab_since_click": "none"},
    "recent": {**{f"sig_last{n}_click": "logit" for n in (5, 10, 20)},
               **{f"sig_last{n}_watch": "none" for n in (5, 10, 20)},
               "sig_since_click": "none", "sig_since_long_view": "none", "sig_last_hour_n": "log1p"},
    "session": {"sig_session_position": "log1p", "sig_session_clicks": "log1p", "sig_session_age": "none"},
    "target_match": {**{f"sig_user_{k}_n": "log1p" for k in ("author", "tag", "music")},
                     **{f"sig_user_{k}_ctr": "logit" for k in ("author", "tag")}},
    "time_context": {"sig_user_hour_ctr": "logit", "sig_user_hour_n": "log1p"},
    "watch": {"sig_user_tab_last10_ratio": "none", "sig_user_tab_last20_ratio": "none",
              "sig_user_dur_watch": "none", "sig_user_author_watch": "none"},
}
FAMILY_TRANSFORMS = {k: g for names in FAMILY_SIGNAL_TRANSFORMS.values() for k, g in names.items()}
FAMILY_FEATURES = list(FAMILY_TRANSFORMS)
# family signals of the user and the request context (tab, hour) alone; target_match's and
# watch's per-duration / per-author means depend on the candidate
USER_FAMILY_FEATURES = ([k for f in ("in_tab", "recent", "session", "time_context") for k in FAMILY_SIGNAL_TRANSFORMS[f]]
                        + ["sig_user_tab_last10_ratio", "sig_user_tab_last20_ratio"])
FAMILIES_TOKEN = "families"  # LOG_SIGNALS: every family signal


def parse_enabled_signals(text: str) -> tuple:
    """``LOG_SIGNALS`` text -> the enabled names ("" / "none": none, "standard": the 12 click
    signals, "all": the 19 signals and hist_tab; a family name: its signals, "families":
    every family's; else signal names; a comma list takes the union)."""
    known = SIGNAL_FEATURES + [HISTORY_TAB_FEATURE] + FAMILY_FEATURES
    groups = {STANDARD_TOKEN: STANDARD_SIGNALS, "all": SIGNAL_FEATURES + [HISTORY_TAB_FEATURE],
              FAMILIES_TOKEN: FAMILY_FEATURES, **{f: list(names) for f, names in FAMILY_SIGNAL_TRANSFORMS.items()}}
    text = (text or "").strip()
    if text in ("", "none"):
        return ()
    names = set()
    for n in (n.strip() for n in text.split(",")):
        names.update(groups.get(n, [n] if n else []))
    unknown = sorted(names - set(known))
    if unknown:
        raise ValueError(f"{SIGNALS_ENV}: unknown names {unknown}; known: {sorted(groups)} or any of {known}")
    return tuple(n for n in known if n in names)


def family_inputs(enabled) -> tuple:
    """The families with a signal among ``enabled`` (LogExampleGen must write them)."""
    return tuple(f for f, names in FAMILY_SIGNAL_TRANSFORMS.items() if set(names) & set(enabled))


ENABLED_SIGNALS = parse_enabled_signals(os.environ.get(SIGNALS_ENV, STANDARD_TOKEN))  # unset: the default
MODEL_SIGNAL_FEATURES = [k for k in SIGNAL_FEATURES + FAMILY_FEATURES if k in ENABLED_SIGNALS]
FAMILY_INPUTS = family_inputs(ENABLED_SIGNALS)
HISTORY_TAB_ENABLED = HISTORY_TAB_FEATURE in ENABLED_SIGNALS
NUMERIC_FEATURES = BASE_NUMERIC_FEATURES + MODEL_SIGNAL_FEATURES

# history features (fixed length L). Ids share the target's vocabulary.
HISTORY_ID_FEATURES = ["hist_video_id", "hist_author_id"]
# hist_is_click is int64 0/1 (padding 0); the two floats are seconds (padding 0).
HISTORY_VALUE_FEATURES = ["hist_is_click", "hist_watch_time_s", "hist_time_gap_s"]
HISTORY_FEATURES = HISTORY_ID_FEATURES + HISTORY_VALUE_FEATURES
HISTORY_LEN_FEATURE = "hist_len"
ID_SHARED_VOCAB = {"hist_video_id": "video_id", "hist_author_id": "author_id",
                   **({HISTORY_TAB_FEATURE: "tab"} if HISTORY_TAB_ENABLED else {})}

LABEL_CLICK = "is_click"
LABEL_WATCH = "watch_time_s"
LABELS = [LABEL_CLICK, LABEL_WATCH]
WATCH_BUCKET_LABEL = "watch_time_bucket"  # transformed only: Σ_m 1(y > t_m), EAD thresholds
EXTRA_OUTCOMES = ["is_like", "long_view"]  # int64, kept for later heads/analysis

META_FEATURES = ["time_ms", "date"]  # int64; date is yyyymmdd
# bytes meta features, for slicing the evaluation (never model inputs)
META_BYTES_FEATURES = ["duration_bucket"]
DURATION_BUCKET_BOUNDARIES_S = (15, 30, 60, 120, 300)


def duration_bucket(duration_s: float) -> str:
    """Slice label of a video duration: '<15s', '15-30s', ..., '>=300s'."""
    bounds = DURATION_BUCKET_BOUNDARIES_S
    if duration_s < bounds[0]:
        return f"<{bounds[0]}s"
    for lo, hi in zip(bounds, bounds[1:]):
        if duration_s < hi:
            return f"{lo}-{hi}s"
    return f">={bounds[-1]}s"


RAW_INT_FEATURES = ID_FEATURES + [HISTORY_LEN_FEATURE, LABEL_CLICK] + EXTRA_OUTCOMES + META_FEATURES
RAW_FLOAT_FEATURES = BASE_NUMERIC_FEATURES + SIGNAL_FEATURES + [LABEL_WATCH]
RAW_BYTES_FEATURES = STRING_FEATURES + META_BYTES_FEATURES
RAW_HISTORY_INT = ["hist_video_id", "hist_author_id", "hist_is_click", HISTORY_TAB_FEATURE]
RAW_HISTORY_FLOAT = ["hist_watch_time_s", "hist_time_gap_s"]

# serving: raw request features = everything a client knows before the impression.
_HIST_TAB_IF_ENABLED = [HISTORY_TAB_FEATURE] if HISTORY_TAB_ENABLED else []
SERVING_RAW_FEATURES = (ID_FEATURES + STRING_FEATURES + NUMERIC_FEATURES
                        + HISTORY_FEATURES + _HIST_TAB_IF_ENABLED + [HISTORY_LEN_FEATURE])
# the request features that are [L]-long lists (every other one is a scalar)
SERVING_LIST_FEATURES = HISTORY_FEATURES + _HIST_TAB_IF_ENABLED


# serving_rank (one request = one user and N candidate videos): the user's side is sent
# once with batch 1 and broadcast to the N candidates inside the graph. User side = the
# user profile (user_features file), the request context (tab, hour) and the history
# (its time gaps are measured to the request time, the same for every candidate).
USER_CONTEXT_FEATURES = (["user_id", "tab", "hour"] + [f"onehot_feat{i}" for i in range(18)]
                         + ["user_active_degree", "follow_user_num", "fans_user_num",
                            "friend_user_num", "register_days", "is_lowactive_period",
                            "is_live_streamer", "is_video_author"]
                         + HISTORY_FEATURES + _HIST_TAB_IF_ENABLED + [HISTORY_LEN_FEATURE]
                         + [k for k in USER_SIGNAL_FEATURES + USER_FAMILY_FEATURES if k in ENABLED_SIGNALS])
CANDIDATE_FEATURES = [k for k in SERVING_RAW_FEATURES if k not in USER_CONTEXT_FEATURES]


def transformed_name(key: str) -> str:
    """Name of a feature after Transform (the TFX template's `_xf` suffix)."""
    return key + "_xf"


def vocab_name(key: str) -> str:
    """Vocabulary file name for a categorical feature (shared ones map to the target)."""
    return ID_SHARED_VOCAB.get(key, key) + "_vocab"


def raw_feature_spec(history_length: int, families: bool = None) -> dict:
    """tf.io parsing spec of a raw tf.Example as written by LogExampleGen; with every family
    signal if ``families`` (None: when a family signal is a model input, `FAMILY_INPUTS`)."""
    import tensorflow as tf

    families = bool(FAMILY_INPUTS) if families is None else families
    spec = {}
    for k in RAW_INT_FEATURES:
        spec[k] = tf.io.FixedLenFeature([], tf.int64)
    for k in RAW_FLOAT_FEATURES + (FAMILY_FEATURES if families else []):
        spec[k] = tf.io.FixedLenFeature([], tf.float32)
    for k in RAW_BYTES_FEATURES:
        spec[k] = tf.io.FixedLenFeature([], tf.string)
    for k in RAW_HISTORY_INT:
        spec[k] = tf.io.FixedLenFeature([history_length], tf.int64)
    for k in RAW_HISTORY_FLOAT:
        spec[k] = tf.io.FixedLenFeature([history_length], tf.float32)
    return spec


# ---------------------------------------------------------------- model-side spec
# What the feature layer (models/layers/feature_layer.py) builds from each transformed
# feature. Kinds of *model inputs* (after Transform):
KIND_ID = "id"                   # int64 scalar index, 0 = padding, own or shared table
KIND_NUMERIC = "numeric"         # float scalar, z-scored
KIND_HISTORY_ID = "history_id"   # int64 [L] index into its target's table (0 = padding)
KIND_HISTORY_VALUE = "history_value"  # float [L] outcome of a history item (0 at padding)
KIND_HISTORY_LEN = "history_len"  # float scalar, number of real history items
KIND_MASK = "mask"               # float [L] 1 = real history item

FEATURE_KINDS = {
    **{k: KIND_ID for k in ID_FEATURES + STRING_FEATURES},
    **{k: KIND_NUMERIC for k in NUMERIC_FEATURES},
    **{k: KIND_HISTORY_ID for k in HISTORY_ID_FEATURES},
    **{k: KIND_HISTORY_VALUE for k in HISTORY_VALUE_FEATURES},
    HISTORY_LEN_FEATURE: KIND_HISTORY_LEN,
    "hist_mask": KIND_MASK,
}

# One embedding table per entity: a history id feature looks up its target's
# table (the same vocabulary, see ID_SHARED_VOCAB), so "video_id" and
# "hist_video_id" share the rows of table "video_id".
def embedding_table(key: str) -> str:
    """Name of the embedding table a categorical (target or history) feature uses."""
    return ID_SHARED_VOCAB.get(key, key)


# The item of a behaviour sequence and of the target: these entities' embeddings
# are concatenated into the item vector (target t and history items h_i have the
# same width, which target attention and the transformer need).
ITEM_ENTITIES = ["video_id", "author_id"]
HISTORY_ITEM_FEATURES = {"video_id": "hist_video_id", "author_id": "hist_author_id"}

# Embedding width per table; None = the ranker's `embedding_dim` (CIN needs every
# field at the same width, so keep None unless the ranker allows otherwise).
EMBEDDING_DIMS = {k: None for k in ID_FEATURES + STRING_FEATURES}

# Outcome signals of a history item (DESIGN.md §6: they carry most of the signal on
# KuaiRand): projected into the item space and added to the item vector. Values
# after Transform: hist_is_click in {0,1}, the other two log1p(seconds).
HISTORY_OUTCOME_FEATURES = ["hist_is_click", "hist_watch_time_s", "hist_time_gap_s"]
# log1p(seconds) of the gap between a history event and the impression (BST position)
HISTORY_TIME_GAP_FEATURE = "hist_time_gap_s"


def model_input_names() -> list:
    """Transformed feature names every ranker takes as input (labels excluded)."""
    return [transformed_name(k) for k in FEATURE_KINDS]
