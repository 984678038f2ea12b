"""Signal study (#37): how much AUC the signal groups that LogExampleGen does not compute
would add, measured with LightGBM before any of them is built into the pipeline.

    LOG_SIGNAL_FAMILIES=all BENCH_WORK=<dir> .venv/bin/python -m bench.signal_study
        # -> bench/results/signal_study.json (BENCH_OUT to name another)

BENCH_WORK is a bench-rankers work dir (LogExampleGen + Transform on the real logs); it is
prepared there when it holds none (~40 s), with the signal families written
(LOG_SIGNAL_FAMILIES=all, components/log_example_gen/signal_families.py). The design
matrix is gbdt_reference's (the numeric inputs, the 12 click signals, the low-cardinality
ids as categoricals), plus the families read from the examples, plus the candidate groups
below, computed in numpy from the raw log files and joined to the examples on (user, time,
video). Every candidate is leak-free in the pipeline's sense (signals.py), for row i of
group g at t_i with label delay D (configs.LABEL_DELAY_S):

    I_g(i) = {j in g: t_j < t_i}          impressions (no label): known at once
    K_g(i) = {j in g: t_j + D < t_i}      labels (click y, w = log1p(play seconds))
    since(S) = log1p((t_i − max_{j∈S} t_j) / 1 s), −1 when S is empty

``exposure`` (g = (user, video)): |I_g|, Σ_K y, Σ_K w, since(I_g): the user saw this video before.
``popularity``: log1p|I_g| for g = video, author, music, tag, (video, tab); impressions of the
    video and of the author in the last hour and day (|I_g| − |{j ∈ I_g: t_j < t_i − W}|);
    time since the group's first impression in the log.
``eb_items`` (g = video, (video, tab), author, music, (tag, tab)): the CTR shrunk to an
    empirical-Bayes prior, (Σ_K y + a) / (|K_g| + a + b), with Beta(a, b) fitted by the method
    of moments to the train days' per-group CTRs (groups with >= 20 impressions);
    log1p|K_g|; the mean of w over K_g (−1 if empty).
``tab_hour``: the CTR of (tab, hour of day) and of the hour over every user's K, shrunk to
    the tab's running CTR e_tab with 10 pseudo-rows.
``user_activity``: log1p|I_user|, impressions today and in the last 10 minutes, the raw CTR
    and mean w over K_user (−1 if empty).

Protocol: LightGBM (bench/gbdt_lightgbm.py's regularised parameters, 15 leaves, >= 100 rows a
leaf, learning rate 0.05), trees chosen by early stopping on the validation day's AUC (the
only day used to choose anything), the eval days scored once; ``SEEDS`` fits per set (row
bagging and feature sampling change with the seed): mean and standard error. Sets: the 12,
the 12 + the families, then each group added to that, then all of them.
"""
import glob
import json
import os
import sys
import time
from typing import Dict

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SEEDS = (0, 1, 2)
PARAMS = dict(num_leaves=15, min_data_in_leaf=100, learning_rate=0.05)
_SPAN = 10 ** 10  # ms: times within a group key's range (115 days)


def _keys(groups: np.ndarray, t: np.ndarray, t0: int):
    if len(t) and int(t.max()) - t0 >= _SPAN:
        raise ValueError("signal_study: the log spans more than 115 days")
    key = groups.astype(np.int64) * _SPAN + (t - t0)
    order = np.argsort(key, kind="stable")
    return order, key[order]


def prior_sums(groups: np.ndarray, t: np.ndarray, values: Dict[str, np.ndarray], query_t: np.ndarray,
               t0: int) -> Dict[str, np.ndarray]:
    """Per row i: ``n`` = |{j: groups_j = groups_i, t_j < query_t_i}| and each value's sum
    over that set (query_t = t for I, t − D for K)."""
    order, sorted_keys = _keys(groups, t, t0)
    start = np.searchsorted(sorted_keys, groups * _SPAN, side="left")
    pos = np.searchsorted(sorted_keys, groups * _SPAN + np.maximum(query_t - t0, 0), side="left")
    out = {"n": (pos - start).astype(np.float64)}
    for name, v in values.items():
        c = np.concatenate([[0.0], np.cumsum(np.asarray(v, np.float64)[order])])
        out[name] = c[pos] - c[start]
    return out


def since_last(groups: np.ndarray, t: np.ndarray, t0: int) -> np.ndarray:
    """since({j: groups_j = groups_i, t_j < t_i}) (module doc)."""
    order, sorted_keys = _keys(groups, t, t0)
    start = np.searchsorted(sorted_keys, groups * _SPAN, side="left")
    pos = np.searchsorted(sorted_keys, groups * _SPAN + (t - t0), side="left")
    last = t[order][np.maximum(pos - 1, 0)]
    return np.where(pos > start, np.log1p((t - last) / 1000.0), -1.0)


def eb_prior(clicks: np.ndarray, n: np.ndarray, min_n: int = 20):
    """Beta(a, b) by the method of moments over the groups with >= min_n impressions:
    mean μ and variance v of their CTRs, a + b = μ(1 − μ)/v − 1 (at least 1)."""
    keep = n >= min_n
    if not keep.any():
        return 1.0, 1.0
    rate = clicks[keep] / n[keep]
    mu, var = float(rate.mean()), float(rate.var())
    strength = max(mu * (1 - mu) / max(var, 1e-12) - 1.0, 1.0)
    return mu * strength, (1 - mu) * strength


def raw_log(logs: str):
    """The log rows (exact duplicates dropped, as LogExampleGen's duplicate rule does) with
    the video's author, music and first tag, the hour of day and w."""
    import pandas as pd

    df = pd.concat([pd.read_csv(f) for f in sorted(glob.glob(os.path.join(logs, "log_standard*.csv")))])
    df = df.drop_duplicates().reset_index(drop=True)
    videos = pd.read_csv(glob.glob(os.path.join(logs, "video_features_basic*.csv"))[0],
                         usecols=["video_id", "author_id", "music_id", "tag"])
    videos["tag"] = pd.to_numeric(videos["tag"].astype(str).str.split(",").str[0], errors="coerce")
    df = df.merge(videos.fillna(-1), on="video_id", how="left").fillna({"author_id": -1, "music_id": -1, "tag": -1})
    df["hour"] = df["hourmin"] // 100
    df["w"] = np.log1p(df["play_time_ms"].clip(lower=0) / 1000.0)
    return df


def _codes(df, cols):
    return df.groupby(cols, sort=False).ngroup().to_numpy(np.int64)


def candidate_groups(df, train_end_ms: int, delay_ms: int) -> Dict[str, Dict[str, np.ndarray]]:
    """{group: {candidate: value per row of df}} (module doc)."""
    t = df["time_ms"].to_numpy(np.int64)
    t0 = int(t.min()) if len(t) else 0
    y, w = df["is_click"].to_numpy(np.float64), df["w"].to_numpy(np.float64)
    known = t - delay_ms
    tab = prior_sums(_codes(df, ["tab"]), t, {"y": y}, known, t0)
    e_tab = (tab["y"] + 2 * 0.5) / (tab["n"] + 2)  # signals.py's e_tab, p0 = 0.5
    out = {}

    g = _codes(df, ["user_id", "video_id"])
    k = prior_sums(g, t, {"y": y, "w": w}, known, t0)
    out["exposure"] = {"uv_n": prior_sums(g, t, {}, t, t0)["n"], "uv_clicks": k["y"], "uv_watch": k["w"],
                       "uv_since": since_last(g, t, t0)}

    pop = {}
    for name, cols in (("video", ["video_id"]), ("author", ["author_id"]), ("music", ["music_id"]),
                       ("tag", ["tag"]), ("video_tab", ["video_id", "tab"])):
        g = _codes(df, cols)
        n = prior_sums(g, t, {}, t, t0)["n"]
        pop[f"{name}_n"] = np.log1p(n)
        if name in ("video", "author"):
            for label, window in (("1h", 3_600_000), ("24h", 86_400_000)):
                pop[f"{name}_n_{label}"] = n - prior_sums(g, t, {}, t - window, t0)["n"]
        first = np.full(int(g.max()) + 1 if len(g) else 0, np.iinfo(np.int64).max)
        np.minimum.at(first, g, t)  # the group's first impression; before t_i when n > 0
        pop[f"{name}_since_first"] = np.where(n > 0, np.log1p((t - first[g]) / 1000.0), -1.0)
    out["popularity"] = pop

    eb, train = {}, t < train_end_ms
    for name, cols in (("video", ["video_id"]), ("video_tab", ["video_id", "tab"]), ("author", ["author_id"]),
                       ("music", ["music_id"]), ("tag_tab", ["tag", "tab"])):
        g = _codes(df, cols)
        k = prior_sums(g, t, {"y": y, "w": w}, known, t0)
        a, b = eb_prior(np.bincount(g[train], y[train]), np.bincount(g[train]).astype(np.float64))
        eb[f"{name}_ctr_eb"] = (k["y"] + a) / (k["n"] + a + b)
        eb[f"{name}_known_n"] = np.log1p(k["n"])
        eb[f"{name}_watch_mean"] = np.where(k["n"] > 0, k["w"] / np.maximum(k["n"], 1.0), -1.0)
    out["eb_items"] = eb

    out["tab_hour"] = {}
    for name, cols in (("tab_hour", ["tab", "hour"]), ("hour", ["hour"])):
        k = prior_sums(_codes(df, cols), t, {"y": y}, known, t0)
        out["tab_hour"][f"{name}_ctr"] = (k["y"] + 10 * e_tab) / (k["n"] + 10)

    user = _codes(df, ["user_id"])
    n = prior_sums(user, t, {}, t, t0)["n"]
    k = prior_sums(user, t, {"y": y, "w": w}, known, t0)
    out["user_activity"] = {
        "user_n": np.log1p(n),
        "user_n_today": prior_sums(_codes(df, ["user_id", "date"]), t, {}, t, t0)["n"],
        "user_n_10min": n - prior_sums(user, t, {}, t - 600_000, t0)["n"],
        "user_ctr_raw": np.where(k["n"] > 0, k["y"] / np.maximum(k["n"], 1.0), -1.0),
        "user_watch_mean": np.where(k["n"] > 0, k["w"] / np.maximum(k["n"], 1.0), -1.0)}
    return out


def _summary(values):
    a = np.asarray(values, np.float64)
    return {"mean": round(float(a.mean()), 5), "se": round(float(a.std(ddof=1) / np.sqrt(len(a))), 5)
            if len(a) > 1 else None, "values": [round(float(v), 5) for v in a]}


def fit_set(data, labels, categorical, seeds):
    """LightGBM per seed on {split: matrix} -> per-seed records and mean / se."""
    from sklearn.metrics import log_loss, roc_auc_score

    from bench import gbdt_lightgbm as LG

    runs = []
    for seed in seeds:
        booster, trees, _ = LG.fit(dict(LG.BASE_PARAMS, **PARAMS), (data["train"], labels["train"]),
                                   (data["validation"], labels["validation"]), categorical, seed,
                                   max_trees=2000, patience=100)
        run = {"seed": seed, "trees": trees, "gain": booster.feature_importance("gain")}
        for split in ("validation", "eval"):
            p = booster.predict(data[split], num_iteration=trees)
            run[split] = {"auc": float(roc_auc_score(labels[split], p)), "logloss": float(log_loss(labels[split], p))}
        runs.append(run)
    record = {f"{split}_{m}": _summary([r[split][m] for r in runs])
              for split in ("validation", "eval") for m in ("auc", "logloss")}
    record["trees"] = [r["trees"] for r in runs]
    return record, np.mean([r["gain"] for r in runs], axis=0)


def main() -> int:
    from bench.bench_rankers import logs_and_days
    from bench.gbdt_reference import design, family_matrix
    from bench.ranker_data import load_splits, run_example_gen_and_transform
    from components.log_example_gen import signal_families as SF
    from models import features as F
    from pipeline import configs
    from pipeline.artifacts import PipelineStore

    if configs.SIGNAL_FAMILIES != "all":
        print("signal_study: set LOG_SIGNAL_FAMILIES=all (the families are part of the design)", file=sys.stderr)
        return 2
    found = logs_and_days("signal-study")
    if found is None:
        return 1
    logs, train_days, eval_days = found
    work = os.environ.get("BENCH_WORK", "/tmp/bench_signal_study")
    out_path = os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench", "results", "signal_study.json"))
    seeds = tuple(int(s) for s in os.environ.get("SIGNAL_STUDY_SEEDS", ",".join(map(str, SEEDS))).split(","))
    started = time.time()
    store = PipelineStore.for_output_dir(work)
    if not store.latest_uri("LogExampleGen", "examples"):
        run_example_gen_and_transform(logs, work, train_days, eval_days)
    examples, transform = store.latest_uri("LogExampleGen", "examples"), store.latest_uri("Transform", "transform_graph")
    import tensorflow_transform as tft

    spec = F.raw_feature_spec
    F.raw_feature_spec = lambda length, families=None: spec(length, False)  # the graph's inputs: no families
    try:
        splits, _, _ = load_splits(examples, tft.TFTransformOutput(transform), configs.HISTORY_LENGTH)
    finally:
        F.raw_feature_spec = spec
    full = {s: design(x) for s, (x, _, _) in splits.items()}
    designs = {s: matrix for s, (matrix, _, _) in full.items()}
    _, base_names, is_cat = full["train"]
    is_cat = is_cat & (designs["train"].max(axis=0) < 254)  # as gbdt_reference
    family_names = list(SF.feature_names(list(SF.FAMILIES)))
    families = {s: family_matrix(examples, s, family_names, splits[s][2]) for s in splits}
    videos = {s: family_matrix(examples, s, ["video_id"], splits[s][2])[:, 0].astype(np.int64) for s in splits}

    df = raw_log(logs)
    train_end = int(df.loc[df["date"] <= train_days[-2], "time_ms"].max()) + 1  # the last train day validates
    groups = candidate_groups(df, train_end, int(round(configs.LABEL_DELAY_S * 1000)))
    index = {k: i for i, k in enumerate(zip(df["user_id"].tolist(), df["time_ms"].tolist(), df["video_id"].tolist()))}
    rows = {}
    for s, (_, _, meta) in splits.items():
        keys = zip(meta["user"].reshape(-1).tolist(), meta["time_ms"].reshape(-1).tolist(), videos[s].tolist())
        rows[s] = np.array([index.get(k, -1) for k in keys])
        if (rows[s] < 0).any():
            raise RuntimeError(f"signal_study: {(rows[s] < 0).sum()} {s} examples not found in the raw log")
    labels = {s: np.asarray(y["click_prob"]).reshape(-1) for s, (_, y, _) in splits.items()}

    sets = [("the 12", False, []), ("12 + families", True, [])]
    sets += [(f"12 + families + {g}", True, [g]) for g in groups]
    sets.append(("12 + families + all groups", True, list(groups)))
    result = {"issue": 37, "command": "LOG_SIGNAL_FAMILIES=all BENCH_WORK=<tmp> .venv/bin/python -m bench.signal_study",
              "protocol": f"LightGBM {PARAMS} on bench/gbdt_lightgbm.py's BASE_PARAMS, trees by early stopping on "
                          f"the validation day's AUC (patience 100), eval scored once; seeds {list(seeds)}; se = "
                          "std / sqrt(seeds)",
              "data": {"logs": os.path.relpath(os.path.abspath(logs), ROOT),
                       "train_days": train_days[:-1], "validation_days": train_days[-1:], "eval_days": eval_days,
                       "label_delay_s": configs.LABEL_DELAY_S,
                       **{f"{s}_examples": int(len(labels[s])) for s in labels}},
              "machine": f"{os.cpu_count()} cores; load average at start {open('/proc/loadavg').read().split()[:3]}",
              "sets": {}}
    for name, with_families, chosen in sets:
        def matrix(s):
            parts = [designs[s]] + ([families[s]] if with_families else [])
            parts += [np.stack([v[rows[s]] for v in groups[g].values()], axis=1) for g in chosen]
            return np.concatenate(parts, axis=1)

        data = {s: matrix(s) for s in splits}
        categorical = np.concatenate([is_cat, np.zeros(data["train"].shape[1] - len(is_cat), dtype=bool)])
        t1 = time.time()
        record, gain = fit_set(data, labels, categorical, seeds)
        names = base_names + (family_names if with_families else []) + [c for g in chosen for c in groups[g]]
        share = gain / max(gain.sum(), 1e-12)
        record["gain_share_of_added"] = {n: round(float(v), 4) for n, v in zip(names, share)
                                         if n not in base_names and (n not in family_names or not chosen)}
        record["seconds"] = round(time.time() - t1, 1)
        result["sets"][name] = record
        print(name, json.dumps({k: record[k] for k in ("validation_auc", "eval_auc", "eval_logloss")}), flush=True)
    ref = result["sets"]["12 + families"]
    for name, record in result["sets"].items():
        record["eval_auc_minus_12_families"] = round(record["eval_auc"]["mean"] - ref["eval_auc"]["mean"], 5)
        record["validation_auc_minus_12_families"] = round(record["validation_auc"]["mean"]
                                                           - ref["validation_auc"]["mean"], 5)
    result["seconds"] = round(time.time() - started, 1)
    with open(out_path, "w") as f:
        json.dump(result, f, indent=1)
    print("wrote", os.path.relpath(out_path, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
