"""Data of the ranker benchmark (bench/bench_rankers.py): the pipeline's LogExampleGen +
Transform on the bench days, the transformed splits, and the frozen-state inputs.

Frozen-state inputs (the frozen-state GAUC of models/evaluation/request_metrics.py):
every impression of a user's evaluation window is scored with the user state of the
user's first impression there, frozen in the *raw* features and then transformed, so
signals derived from the user state are frozen too (freeze_user_state):

    USER_STATE_FEATURES      history, history length, per-user signals  -> first(u)
    USER_TAB_STATE_FEATURES  the user's click rate in the request's tab  -> first(u, tab)
    sig_propensity = clip(e_tab * u_coec * v_coec, 0, 1) recomputed with the frozen u_coec.
"""
import glob
import json
import os

import numpy as np

from models import features as F

NUM_CANDIDATES = 100
# signals of the user side that are not per-user state: the request context's running tab
# CTR (context, like tab and hour) and the per-(user, tab) rate (frozen per user and tab)
_CONTEXT_SIGNALS = ("sig_tab_ctr",)
USER_TAB_STATE_FEATURES = ("sig_user_tab_ctr",)
USER_STATE_FEATURES = tuple(F.HISTORY_FEATURES + [F.HISTORY_TAB_FEATURE, F.HISTORY_LEN_FEATURE]
                            + [k for k in F.USER_SIGNAL_FEATURES
                               if k not in _CONTEXT_SIGNALS + USER_TAB_STATE_FEATURES])
# signal families (#37): the user's recent outcomes and session are per-user state, the in-tab
# ones and the in-tab watch ratios per (user, tab); the per-(user, hour) and per-(user,
# candidate author/tag/music/duration) ones (time_context, target_match, the other watch
# ones) keep running
USER_STATE_FEATURES += tuple(F.FAMILY_SIGNAL_TRANSFORMS["recent"]) + tuple(F.FAMILY_SIGNAL_TRANSFORMS["session"])
USER_TAB_STATE_FEATURES += tuple(F.FAMILY_SIGNAL_TRANSFORMS["in_tab"]) + tuple(
    k for k in F.FAMILY_SIGNAL_TRANSFORMS["watch"] if k in F.USER_FAMILY_FEATURES)


def cache_key(logs, train_days, eval_days) -> dict:
    """What run_example_gen_and_transform's outputs in a work dir depend on: the logs, the
    days, the signal families LogExampleGen writes and LOG_SIGNALS (Transform's inputs)."""
    from pipeline import configs

    key = {"logs": os.path.abspath(logs), "train_days": train_days, "eval_days": eval_days,
           "splits": "train,validation,eval"}
    if configs.LOG_EXAMPLE_GEN.signal_families:  # examples with the signal families (#37)
        key["signal_families"] = list(configs.LOG_EXAMPLE_GEN.signal_families)
    key["log_signals"] = sorted(configs.LOG_SIGNALS)
    return key


def run_example_gen_and_transform(logs, work, train_days, eval_days):
    """The pipeline's LogExampleGen + ImportSchemaGen + Transform; returns their output dirs.
    Cached in `work`: a rerun with the same cache_key reuses them, another key reruns."""
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.pipeline import Pipeline

    import dataclasses

    from pipeline import configs
    from pipeline.artifacts import PipelineStore
    from pipeline.runners import build_local

    stamp = os.path.join(work, "bench_days.json")
    key = cache_key(logs, train_days, eval_days)

    def latest():
        store = PipelineStore.for_output_dir(work)
        return store.latest_uri("LogExampleGen", "examples"), store.latest_uri("Transform", "transform_graph")

    if os.path.exists(stamp) and json.load(open(stamp)) == key:
        try:
            examples, transform_graph = latest()
            if examples and transform_graph:
                return examples, transform_graph
        except FileNotFoundError:
            pass
    example_gen_config = dataclasses.replace(configs.LOG_EXAMPLE_GEN, train_days=train_days, eval_days=eval_days)
    full = build_local(logs, work, example_gen_config=example_gen_config)
    keep = [c for c in full.components if c.id in ("LogExampleGen", "ImportSchemaGen", "Transform")]
    for node in keep:  # detach the dropped downstream components (StatisticsGen, Trainer, ...)
        for down in list(node.downstream_nodes):
            if down not in keep:
                node.remove_downstream_node(down)
    partial = Pipeline(pipeline_name=full.pipeline_info.pipeline_name,
                               pipeline_root=full.pipeline_info.pipeline_root, components=keep,
                               enable_cache=False, metadata_connection_config=full.metadata_connection_config,
                               beam_pipeline_args=full.beam_pipeline_args)
    LocalDagRunner().run(partial)
    os.makedirs(work, exist_ok=True)
    json.dump(key, open(stamp, "w"))
    return latest()


def freeze_user_state(raw, user_ids, tabs, times_ms):
    """Raw features of a split -> the same rows with the user state frozen at the start
    of the window (models.evaluation.request_metrics.frozen_state_rows):

        x'_k(i) = x_k(first(u_i))          k in USER_STATE_FEATURES (history, per-user signals)
        x'_k(i) = x_k(first(u_i, tab_i))   k in USER_TAB_STATE_FEATURES (the user's rate in a tab)
        sig_propensity'(i) = clip(sig_tab_ctr(i) * sig_user_coec'(i) * sig_video_coec(i), 0, 1)

    first(g) = the group's earliest row (ties by row order). The request context (tab,
    hour, sig_tab_ctr) and the candidate's features stay as they are. A user's first
    impression in a tab has only earlier-window events of *other* tabs before it, so the
    per-(user, tab) rate there is still the window-start state of that tab."""
    from models.evaluation import request_metrics as R

    rows = R.frozen_state_rows(user_ids, times_ms)
    user_tab = np.unique(np.stack([np.asarray(user_ids, np.int64), np.asarray(tabs, np.int64)], 1),
                         axis=0, return_inverse=True)[1].reshape(-1)
    rows_tab = R.frozen_state_rows(user_tab, times_ms)
    out = dict(raw)
    for k in USER_STATE_FEATURES:
        if k in raw:
            out[k] = raw[k][rows]
    for k in USER_TAB_STATE_FEATURES:
        if k in raw:
            out[k] = raw[k][rows_tab]
    if "sig_propensity" in raw:
        p = raw["sig_tab_ctr"].astype(np.float64) * out["sig_user_coec"] * raw["sig_video_coec"]
        out["sig_propensity"] = np.clip(p, 0.0, 1.0).astype(raw["sig_propensity"].dtype)
    return out


def make_transform(tft_output, batch=4096):
    """numpy raw features -> numpy transformed features (the Transform graph, in batches)."""
    import tensorflow as tf

    layer = tft_output.transform_features_layer()
    fn = tf.function(lambda raw: layer(raw))

    def transform(raw):
        # the serving inputs + every raw signal present: a graph analysed with more signals
        # than LOG_SIGNALS enables still finds its inputs (the layer ignores unused keys)
        keys = F.SERVING_RAW_FEATURES + F.LABELS + [k for k in F.SIGNAL_FEATURES + F.FAMILY_FEATURES
                                                    if k in raw and k not in F.SERVING_RAW_FEATURES]
        n = len(raw[keys[0]])
        parts = [{k: v.numpy() for k, v in fn({k: raw[k][i:i + batch] for k in keys}).items()}
                 for i in range(0, n, batch)]
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    return transform


def split_files(examples_dir, split):
    """The gzipped TFRecord files of one split of LogExampleGen's output."""
    return sorted(glob.glob(os.path.join(examples_dir, f"Split-{split}", "*")))


def latency_requests(files, hist_len, history_length):
    """The ranking requests the latency benches time: NUM_CANDIDATES serialized rows each,
    the first row's user side on every candidate (bench/serving_latency.py `measure`).
    A ranker that skips history padding costs more for a longer history, so two users:

        "median_history"  the first row whose history length is the split's median
        "full_history"    the first row with all `history_length` items (the worst case)

    each followed by the split's first NUM_CANDIDATES - 1 other rows as candidates.
    `hist_len`: the split's history lengths in file order."""
    import tensorflow as tf

    picks = {"median_history": int(np.flatnonzero(hist_len == int(np.median(hist_len)))[0])}
    full = np.flatnonzero(hist_len == history_length)
    if full.size:
        picks["full_history"] = int(full[0])
    wanted = set(picks.values()) | set(range(NUM_CANDIDATES))
    rows = {i: r.numpy() for i, r in enumerate(tf.data.TFRecordDataset(files, compression_type="GZIP")
                                               .take(max(wanted) + 1)) if i in wanted}
    return {name: [rows[i]] + [rows[j] for j in range(NUM_CANDIDATES) if j != i][:NUM_CANDIDATES - 1]
            for name, i in picks.items()}


def eval_latency_requests(examples_dir, history_length):
    """latency_requests of the eval split of LogExampleGen's output (reads its history lengths)."""
    import tensorflow as tf

    files = split_files(examples_dir, "eval")
    spec = {F.HISTORY_LEN_FEATURE: F.raw_feature_spec(history_length)[F.HISTORY_LEN_FEATURE]}
    hist_len = np.concatenate([tf.io.parse_example(r, spec)[F.HISTORY_LEN_FEATURE].numpy() for r in
                               tf.data.TFRecordDataset(files, compression_type="GZIP").batch(8192)])
    return latency_requests(files, hist_len, history_length)


def serve_latency_record(export_dir, requests, calls, history_length, signatures=("serving_default", "serving_rank")):
    """p50 / p99 ms of one SavedModel on each of `requests`, as the benches record them:
    `serving_default` (the user side on every row) as serve_p50_ms_100 / serve_p99_ms_100
    for the median-history user and serve_*_ms_100_<request> for the others;
    `serving_rank` (the user side once, README "One user × N candidates") as
    serve_rank_*_ms_100[_<request>] (bench/serving_latency.py: a fresh process on the
    server's thread pools)."""
    from bench.serving_latency import interleaved_latency_ms

    record = {}
    for signature in signatures:
        prefix = "serve" if signature == "serving_default" else "serve_" + signature.replace("serving_", "")
        for request, rows in requests.items():
            (p50, p99), = interleaved_latency_ms([export_dir], rows, calls, history_length, signature=signature)
            suffix = "" if request == "median_history" else "_" + request
            record.update({f"{prefix}_p50_ms_100{suffix}": round(p50, 3),
                           f"{prefix}_p99_ms_100{suffix}": round(p99, 3)})
    return record


def load_split(examples_dir, split, transform, history_length, frozen=False, batch=4096, requests=False):
    """Raw examples of a split -> (transformed inputs, labels, meta, latency_requests if
    `requests` else None); with `frozen`, meta["x_frozen"] = the inputs with the user
    state frozen (freeze_user_state)."""
    import tensorflow as tf

    files = split_files(examples_dir, split)
    needed = (F.SERVING_RAW_FEATURES + F.LABELS + F.SIGNAL_FEATURES + F.FAMILY_FEATURES
              + ["date", "user_id", "time_ms", "tab"])
    first = next(iter(tf.data.TFRecordDataset(files[:1], compression_type="GZIP").take(1))).numpy()
    families = F.FAMILY_FEATURES[0] in tf.train.Example.FromString(first).features.feature  # written (#37)?
    spec = {k: v for k, v in F.raw_feature_spec(history_length, families).items() if k in needed}
    parse = tf.function(lambda serialized: tf.io.parse_example(serialized, spec))
    parts = []
    for records in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(batch):
        parts.append({k: v.numpy() for k, v in parse(records).items()})
    raw = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    if requests:
        requests = latency_requests(files, raw[F.HISTORY_LEN_FEATURE], history_length)
    data = transform(raw)
    labels = {"click_prob": data.pop(F.LABEL_CLICK).astype(np.float32),
              "watch_time_s": data.pop(F.LABEL_WATCH).astype(np.float32)}
    meta = {"date": raw["date"], "user": raw["user_id"], "video_id": raw["video_id"], "time_ms": raw["time_ms"],
            "hist_video_id": raw["hist_video_id"]}
    if frozen:
        x_frozen = transform(freeze_user_state(raw, raw["user_id"], raw["tab"], raw["time_ms"]))
        meta["x_frozen"] = {k: v for k, v in x_frozen.items() if k in data}
    return data, labels, meta, requests or None


def load_splits(examples_dir, tft_output, history_length):
    """The pipeline's train / validation / eval splits (LogExampleGen: validation = the
    last train day(s)) -> ({split: (x, y, meta)}, the eval split's latency_requests, info);
    validation and eval carry the frozen-state inputs in meta["x_frozen"]."""
    transform = make_transform(tft_output)
    splits, requests = {}, None
    for split in ("train", "validation", "eval"):
        x, y, meta, rows = load_split(examples_dir, split, transform, history_length, frozen=split != "train",
                                      requests=split == "eval")
        splits[split] = (x, y, meta)
        if split == "eval":
            requests = rows
    info = {"train_days": sorted({int(d) for d in splits["train"][2]["date"]}),
            "validation_days": sorted({int(d) for d in splits["validation"][2]["date"]}),
            **{f"{k}_examples": int(v[1]["click_prob"].size) for k, v in splits.items()}}
    info["latency_request_history_items"] = {name: request_history_items(rows[0], history_length)
                                             for name, rows in requests.items()}
    return splits, requests, info


def request_history_items(serialized, history_length):
    """The history length of one serialized row (the user of a latency request)."""
    import tensorflow as tf

    spec = {F.HISTORY_LEN_FEATURE: F.raw_feature_spec(history_length)[F.HISTORY_LEN_FEATURE]}
    return int(tf.io.parse_single_example(serialized, spec)[F.HISTORY_LEN_FEATURE])


def add_history_scenes(logs, splits, tft_output, history_length):
    """Bench-only prototype of hist_tab: the scene (tab) of each history item, rebuilt from
    the raw logs with LogExampleGen's rule (the user's strictly earlier events, most recent
    first, ties by file order) as Transform's tab index (0 = padding). Checked against the
    examples' hist_video_id; returns the fraction of history items that match."""
    import pandas as pd

    from pipeline import configs

    files = sorted(glob.glob(os.path.join(logs, configs.LOG_FILE_PATTERN)))
    df = pd.concat([pd.read_csv(f, usecols=["user_id", "video_id", "time_ms", "tab"]) for f in files],
                   ignore_index=True)
    df = df.iloc[np.lexsort((np.arange(len(df)), df["time_ms"].values, df["user_id"].values))]
    u, t = df["user_id"].values, df["time_ms"].values
    n = len(df)
    new_user = np.r_[True, u[1:] != u[:-1]]
    user_start = np.maximum.accumulate(np.where(new_user, np.arange(n), 0))
    group_start = np.maximum.accumulate(np.where(new_user | np.r_[True, t[1:] != t[:-1]], np.arange(n), 0))
    vocab = {int(v): i + 1 for i, v in enumerate(tft_output.vocabulary_by_name("tab_vocab"))}
    oov = len(vocab) + 1
    tab_xf = np.array([vocab.get(int(v), oov) for v in df["tab"].values], np.int64)
    video = df["video_id"].values
    key = pd.Series(group_start, index=pd.MultiIndex.from_arrays([u, t]))
    key = key[~key.index.duplicated()]
    matched = total = 0
    for x, _, meta in splits.values():
        start = key.reindex(pd.MultiIndex.from_arrays([meta["user"], meta["time_ms"]])).values
        found = ~np.isnan(start)
        start = np.where(found, start, 0).astype(np.int64)
        idx = start[:, None] - 1 - np.arange(history_length)[None, :]
        mask = x["hist_mask_xf"] > 0
        ok = found[:, None] & (idx >= user_start[start][:, None]) & mask
        safe = np.clip(idx, 0, n - 1)
        x["hist_tab_xf"] = np.where(ok, tab_xf[safe], 0).astype(np.int64)
        if "x_frozen" in meta:  # history: the user state at the first impression
            from models.evaluation.request_metrics import frozen_state_rows

            meta["x_frozen"]["hist_tab_xf"] = x["hist_tab_xf"][frozen_state_rows(meta["user"], meta["time_ms"])]
        matched += int(np.sum(ok & (video[safe] == meta["hist_video_id"])))
        total += int(mask.sum())
    return matched / max(total, 1)
