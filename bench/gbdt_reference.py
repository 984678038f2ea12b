"""Gradient-boosting reference on the bench-rankers split: how far the deep rankers are
from a tree model given the same signals, on *these* days.

    LOG_SIGNALS=<the signals> BENCH_WORK=<a bench-rankers work dir> \
        .venv/bin/python -m bench.gbdt_reference      # -> bench/results/gbdt_reference.json
    GBDT_TARGET=watch LOG_SIGNALS=all BENCH_WORK=<a bench-watchtime work dir>/real \
        .venv/bin/python -m bench.gbdt_reference      # -> bench/results/gbdt_watch_reference.json
    GBDT_FAMILY_SETS="none;in_tab;recent;session;target_match;all" LOG_SIGNALS=<the 12> \
        BENCH_WORK=<a work dir whose LogExampleGen ran with LOG_SIGNAL_FAMILIES=all> \
        .venv/bin/python -m bench.gbdt_reference      # -> bench/results/signal_families.json

#15 quotes gradient boosting at eval AUC 0.7491 on 05-05..05-08, days this machine's
`../shared/data/kuairand-pure` does not have; the bench trains on 04-25..05-01 and scores
05-03..05-04. This fits scikit-learn's HistGradientBoostingClassifier on the work dir's
transformed splits (LogExampleGen + Transform as bench-rankers ran them): the numeric
inputs and the enabled signals (trees are invariant to Transform's monotone z-scores),
the low-cardinality ids as categorical features (tab, hour, the 18 one-hot user features,
the three strings; one with more than 253 values stays an ordinal id), the history length and the history's mean click and log watch time.
High-cardinality ids (user, video, author, music, tag) are left out: that is what the
signals summarise for a tree. The number of trees is chosen on the validation day's AUC
(staged predictions), the eval days are scored once.

``GBDT_FAMILY_SETS`` (#37): the click reference once per set of the optional signal
families (components/log_example_gen/signal_families.py; "none", a family, "a+b" or "all"),
their features read from the examples and added to the same design matrix; per-user GAUC
but no frozen GAUC (the families have no frozen form yet).

``GBDT_MODEL`` / ``GBDT_SEEDS`` (#37): ``lightgbm`` (bench/gbdt_lightgbm.py: regularised
LightGBM, hyper-parameters and trees chosen on the validation day) and / or ``hist`` (the
default, the model above), each once per seed ("0,1,2"): per-seed records, mean and std ->
bench/results/gbdt_reference_lightgbm.json (BENCH_OUT to name another).

``GBDT_TARGET=watch`` is #13's reference ("LightGBM, L1 / quantile objectives"), on the
same design matrix with the watch-time label in seconds: an L1 regressor (the conditional
median, MAE's minimiser; trees chosen on validation MAE), a squared-error regressor on
log1p(y) (XAUC), and one quantile regressor per decile τ = 0.1..0.9 (trees chosen on the
validation day's pinball loss), whose coverage error is reported raw and after the same
split-conformal levels as CQE's (models/watch_time/conformal.py, fitted on the
validation day; ``GBDT_WATCH_QUANTILES=0`` skips them: nine of its twelve models). MAE, XAUC
and XGAUC as bench-watchtime computes them. How much of XAUC is
the click: every score's XAUC split by the clicks of the pair (``xauc_click_pairs``), the
click classifier's probability as a watch-time order (``click_classifier``) and the log1p
model with the true click put first (``l2_log1p_true_click_first``, an upper bound).
"""
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench.watchtime_metrics import click_pair_split  # noqa: E402
from models import features as F  # noqa: E402

CATEGORICAL = ["tab", "hour", "user_active_degree", "video_type", "upload_type"] + [f"onehot_feat{i}" for i in range(18)]


def design(x):
    """(matrix, names, categorical mask) of one transformed split."""
    cols, names = [], []
    for k in F.NUMERIC_FEATURES + [F.HISTORY_LEN_FEATURE] + CATEGORICAL:
        cols.append(np.asarray(x[F.transformed_name(k)], np.float64)); names.append(k)
    mask = np.asarray(x["hist_mask_xf"], np.float64)
    n = np.maximum(mask.sum(1), 1.0)
    for k in ("hist_is_click", "hist_watch_time_s"):
        cols.append((np.asarray(x[F.transformed_name(k)]) * mask).sum(1) / n); names.append(k + "_mean")
    is_cat = np.array([nm in CATEGORICAL for nm in names])
    return np.stack(cols, axis=1), names, is_cat


COVERAGE_TAUS = tuple(np.round(np.arange(1, 10) / 10.0, 2))  # bench_watchtime.COVERAGE_TAUS


def _classifier(params, train, val_x, val_y):
    """A HistGradientBoostingClassifier refitted with the number of trees that maximises
    the validation day's AUC -> (model, trees, validation AUC per tree)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import roc_auc_score

    model = HistGradientBoostingClassifier(**params).fit(*train)
    val_auc = [roc_auc_score(val_y, p[:, 1]) for p in model.staged_predict_proba(val_x)]
    best = int(np.argmax(val_auc)) + 1
    return HistGradientBoostingClassifier(**dict(params, max_iter=best)).fit(*train), best, val_auc


def split_scores(predict, data, meta):
    """AUC, logloss, per-user GAUC and (when meta holds x_frozen) frozen GAUC of
    ``predict(matrix) -> P(click)`` on the validation and eval splits; ``data[split]`` =
    (matrix, labels)."""
    from sklearn.metrics import log_loss, roc_auc_score

    from models.evaluation import metrics

    result = {}
    for split in ("validation", "eval"):
        x, y = data[split]
        p = predict(x)
        # within-user ranking as bench_rankers measures it: per-user GAUC and the
        # frozen-state GAUC (user state frozen at the user's first impression of the split)
        users = meta[split]["user"]
        result[split] = {"auc": round(float(roc_auc_score(y, p)), 5), "logloss": round(float(log_loss(y, p)), 5),
                         "gauc": round(metrics.gauc(users, y, p)["gauc"], 5)}
        if "x_frozen" in meta[split]:  # the signal families have no frozen form yet (family_sets)
            p_frozen = predict(design(meta[split]["x_frozen"])[0])
            result[split]["frozen_gauc"] = round(metrics.gauc(users, y, p_frozen)["gauc"], 5)
    return result


def click_reference(data, params):
    """Classifier on click_prob; trees chosen on validation AUC -> record fields."""
    meta = {s: m for s, (_, _, m) in data.items()}
    data = {s: (x, y["click_prob"]) for s, (x, y, _) in data.items()}
    model, best, val_auc = _classifier(params, data["train"], *data["validation"])
    result = split_scores(lambda m: model.predict_proba(m)[:, 1], data, meta)
    return {"trees_chosen_on_validation": best,
            "validation_auc_at_50_tree_steps": [round(a, 5) for a in val_auc[49::50]], **result}


def over_seeds(run, seeds):
    """``run(seed)`` -> record with validation / eval metric dicts, per seed; plus their mean
    and std over the seeds (population std)."""
    per_seed = {str(seed): run(seed) for seed in seeds}
    summary = {"mean": {}, "std": {}}
    for split in ("validation", "eval"):
        for metric in per_seed[str(seeds[0])][split]:
            values = [r[split][metric] for r in per_seed.values()]
            summary["mean"].setdefault(split, {})[metric] = round(float(np.mean(values)), 5)
            summary["std"].setdefault(split, {})[metric] = round(float(np.std(values)), 5)
    return {"seeds": list(seeds), "per_seed": per_seed, **summary}


def click_models(data, params, models, seeds):
    """GBDT_MODEL (hist, lightgbm or both) x GBDT_SEEDS on the click target -> {model: over_seeds
    record}; lightgbm's hyper-parameters tuned once on the validation day (first seed)."""
    out = {}
    for name in models:
        t0 = time.time()
        if name == "hist":  # no subsampling: the seed changes nothing here, recorded to show it
            out[name] = over_seeds(lambda s: click_reference(data, dict(params, random_state=s)), seeds)
        else:
            from bench import gbdt_lightgbm as L

            is_cat = params["categorical_features"]
            xy = {s: (d[0], np.asarray(d[1]["click_prob"]).reshape(-1)) for s, d in data.items()}
            chosen, trials = L.tune(xy["train"], xy["validation"], is_cat, seeds[0])
            out[name] = {"params": dict(chosen), "grid": L.GRID, "tuning_on_validation": trials,
                         **over_seeds(lambda s: L.click_reference(data, chosen, is_cat, s), seeds)}
        out[name]["seconds"] = round(time.time() - t0, 1)
        print(name, json.dumps({k: out[name][k] for k in ("mean", "std")}), flush=True)
    return out


def _regressor(params, loss, train, val_x, val_score, **kw):
    """A HistGradientBoostingRegressor refitted with the number of trees that minimises
    ``val_score(prediction)`` on the validation day -> (model, trees)."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    model = HistGradientBoostingRegressor(loss=loss, **params, **kw).fit(*train)
    scores = [val_score(p) for p in model.staged_predict(val_x)]
    best = int(np.argmin(scores)) + 1
    return HistGradientBoostingRegressor(loss=loss, **dict(params, max_iter=best), **kw).fit(*train), best


def watch_reference(data, params, quantiles: bool = True):
    """#13's reference: L1 (seconds), squared error on log1p and decile quantile
    regressors on watch_time_s; trees chosen on the validation day -> record fields."""
    from scipy.stats import rankdata

    from models.evaluation import metrics, quantile_metrics
    from models.watch_time import conformal

    x = {s: d[0] for s, d in data.items()}
    y = {s: np.asarray(d[1]["watch_time_s"], np.float64).reshape(-1) for s, d in data.items()}
    click = {s: np.asarray(d[1]["click_prob"], np.float64).reshape(-1) for s, d in data.items()}
    users = {s: np.asarray(d[2]["user"]) for s, d in data.items()}
    out, trees = {}, {}

    def order(s, p):  # XAUC, and by the clicks of the pair
        return {"xauc": round(metrics.xauc(y[s], p), 5), "xauc_click_pairs": click_pair_split(y[s], p, click[s])}

    def point(name, predict):
        out[name] = {s: {"mae": round(metrics.mae(y[s], p), 4), **order(s, p),
                         "xgauc": round(metrics.xgauc(users[s], y[s], p)["xgauc"], 5)}
                     for s, p in ((s, np.maximum(predict(x[s]), 0.0)) for s in ("validation", "eval"))}

    l1, trees["l1_seconds"] = _regressor(params, "absolute_error", (x["train"], y["train"]), x["validation"],
                                         lambda p: metrics.mae(y["validation"], p))
    point("l1_seconds", l1.predict)
    log_model, trees["l2_log1p"] = _regressor(params, "squared_error", (x["train"], np.log1p(y["train"])),
                                              x["validation"],
                                              lambda p: float(np.mean((p - np.log1p(y["validation"])) ** 2)))
    point("l2_log1p", lambda m: np.expm1(log_model.predict(m)))
    # how much of XAUC is the click: the click classifier's probability as the watch-time
    # order, and l2_log1p with the true click put first (every click above every skip: an
    # upper bound no model reaches, the XAUC perfect click knowledge would give)
    clf, trees["click"], _ = _classifier(params, (x["train"], click["train"]), x["validation"], click["validation"])
    out["click_classifier"] = {s: order(s, clf.predict_proba(x[s])[:, 1]) for s in ("validation", "eval")}
    out["l2_log1p_true_click_first"] = {  # click, then the model's rank in (0, 1): clicks first, order kept
        s: order(s, click[s] + rankdata(log_model.predict(x[s])) / (len(click[s]) + 1)) for s in ("validation", "eval")}
    if not quantiles:
        return {"trees_chosen_on_validation": trees, **out}
    q = {s: [] for s in ("validation", "eval")}
    for tau in COVERAGE_TAUS:
        model, trees[f"quantile_{tau}"] = _regressor(
            params, "quantile", (x["train"], y["train"]), x["validation"],
            lambda p, t=tau: quantile_metrics.pinball_loss(y["validation"], p[:, None], [t]), quantile=tau)
        for s in q:
            q[s].append(model.predict(x[s]))
    q = {s: np.maximum.accumulate(np.maximum(np.stack(v, 1), 0.0), axis=1) for s, v in q.items()}  # monotone
    levels = conformal.fit_levels(y["validation"], q["validation"], COVERAGE_TAUS)
    calibrated = conformal.apply_levels(q["eval"], levels, COVERAGE_TAUS)
    out["quantiles"] = {
        "eval": {"coverage_error_raw": round(quantile_metrics.mean_coverage_error(y["eval"], q["eval"], COVERAGE_TAUS), 5),
                 "coverage_error": round(quantile_metrics.mean_coverage_error(y["eval"], calibrated, COVERAGE_TAUS), 5),
                 "coverage_by_tau_raw": [round(float(c), 4) for c in
                                         quantile_metrics.quantile_coverage(y["eval"], q["eval"], COVERAGE_TAUS)],
                 "coverage_by_tau": [round(float(c), 4) for c in
                                     quantile_metrics.quantile_coverage(y["eval"], calibrated, COVERAGE_TAUS)],
                 "median_mae": round(metrics.mae(y["eval"], calibrated[:, COVERAGE_TAUS.index(0.5)]), 4)},
        "validation": {"coverage_error_raw": round(quantile_metrics.mean_coverage_error(
            y["validation"], q["validation"], COVERAGE_TAUS), 5)},
        "conformal_levels": [round(float(g), 4) for g in levels]}
    return {"trees_chosen_on_validation": trees, **out}


def family_matrix(examples_dir, split, names, meta):
    """The signal-family features (components/log_example_gen/signal_families.py) of one
    split, in load_split's row order (the same files, read in the same order; checked on
    user and time)."""
    import tensorflow as tf

    from bench.ranker_data import split_files

    spec = {k: tf.io.FixedLenFeature([1], tf.float32 if k.startswith("sig_") else tf.int64)
            for k in list(names) + ["user_id", "time_ms"]}
    parse = tf.function(lambda serialized: tf.io.parse_example(serialized, spec))
    parts = [{k: v.numpy()[:, 0] for k, v in parse(r).items()}
             for r in tf.data.TFRecordDataset(split_files(examples_dir, split), compression_type="GZIP").batch(8192)]
    cols = {k: np.concatenate([p[k] for p in parts]) for k in spec}
    if not (np.array_equal(cols["user_id"], meta["user"].reshape(-1))
            and np.array_equal(cols["time_ms"], meta["time_ms"].reshape(-1))):
        raise RuntimeError(f"gbdt_reference: the {split} families are not in load_split's row order")
    return np.stack([cols[k].astype(np.float64) for k in names], axis=1)


def family_sets(examples_dir, splits, designs, params, text):
    """GBDT_FAMILY_SETS="none;in_tab;...;all": the click reference on the design matrix +
    each set's family features (the examples must have been written with
    LOG_SIGNAL_FAMILIES=all) -> {set: record fields}. Per-user GAUC, no frozen GAUC."""
    from components.log_example_gen import signal_families as SF

    all_names = SF.feature_names(list(SF.FAMILIES))
    extra = {s: family_matrix(examples_dir, s, all_names, splits[s][2]) for s in splits}
    out = {}
    for name in [t.strip() for t in text.split(";") if t.strip()]:
        chosen = () if name == "none" else SF.feature_names(list(SF.FAMILIES) if name == "all" else name.split("+"))
        cols = [all_names.index(k) for k in chosen]
        data = {s: (np.concatenate([designs[s][0], extra[s][:, cols]], axis=1), y,
                    {k: v for k, v in meta.items() if k != "x_frozen"}) for s, (_, y, meta) in splits.items()}
        is_cat = np.concatenate([params["categorical_features"], np.zeros(len(cols), dtype=bool)])
        t0 = time.time()
        out[name] = dict(click_reference(data, dict(params, categorical_features=is_cat)), features_added=list(chosen),
                         seconds=round(time.time() - t0, 1), loadavg_after=open("/proc/loadavg").read().split()[:3])
        print(name, json.dumps({k: out[name][k] for k in ("trees_chosen_on_validation", "validation", "eval")}),
              flush=True)
    return out


def main() -> int:
    import tensorflow_transform as tft

    from bench.ranker_data import load_splits
    from pipeline import configs
    from pipeline.artifacts import PipelineStore

    target = os.environ.get("GBDT_TARGET", "click")
    if target not in ("click", "watch"):
        raise ValueError(f"GBDT_TARGET must be click or watch, got {target!r}")
    quantiles = os.environ.get("GBDT_WATCH_QUANTILES", "1") != "0"  # the watch reference's deciles
    models = [m.strip() for m in os.environ.get("GBDT_MODEL", "hist").split(",") if m.strip()]
    seeds = [int(v) for v in os.environ.get("GBDT_SEEDS", "0").split(",") if v.strip()]
    if not models or set(models) - {"hist", "lightgbm"}:
        raise ValueError(f"GBDT_MODEL must be hist, lightgbm or both (comma list), got {models!r}")
    multi = models != ["hist"] or seeds != [0]  # the click models x seeds record (#37)
    if multi and (target != "click" or os.environ.get("GBDT_FAMILY_SETS")):
        raise ValueError("GBDT_MODEL / GBDT_SEEDS: the click target without GBDT_FAMILY_SETS only")
    work = os.environ.get("BENCH_WORK", "/tmp/bench_rankers")
    out = os.environ.get("BENCH_OUT", os.path.join(
        ROOT, "bench", "results", "gbdt_watch_reference.json" if target == "watch" else
        "gbdt_reference_lightgbm.json" if "lightgbm" in models else "gbdt_reference.json"))
    store = PipelineStore.for_output_dir(work)
    examples, transform = store.latest_uri("LogExampleGen", "examples"), store.latest_uri("Transform", "transform_graph")
    if not (examples and transform):
        print(f"gbdt_reference: no LogExampleGen / Transform output under {work} (run bench-rankers first)", file=sys.stderr)
        return 1
    t0 = time.time()
    splits, _, info = load_splits(examples, tft.TFTransformOutput(transform), configs.HISTORY_LENGTH)
    designs = {s: design(x) for s, (x, _, _) in splits.items()}
    train_matrix, names, is_cat = designs["train"]
    # HistGradientBoosting takes categories < 255; a wider one-hot feature stays an ordinal id
    is_cat = is_cat & (train_matrix.max(axis=0) < 254)
    params = dict(learning_rate=float(os.environ.get("GBDT_LEARNING_RATE", "0.05")),
                  max_iter=int(os.environ.get("GBDT_MAX_ITER", "800")), max_leaf_nodes=31,
                  min_samples_leaf=200, l2_regularization=1.0, categorical_features=is_cat,
                  early_stopping=False, random_state=0)
    sets = os.environ.get("GBDT_FAMILY_SETS", "")
    if sets:
        if target != "click":
            raise ValueError("GBDT_FAMILY_SETS: the click target only")
        out = os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench", "results", "signal_families.json"))
        load = open("/proc/loadavg").read().split()[:3]
        result = {"family_sets": family_sets(examples, splits, designs, params, sets)}
    else:
        data = {s: (designs[s][0], y, meta) for s, (_, y, meta) in splits.items()}
        if target == "watch":
            result = watch_reference(data, params, quantiles)
        elif multi:
            result = {"models": click_models(data, params, models, seeds),
                      "log_signals": os.environ.get("LOG_SIGNALS", F.STANDARD_TOKEN)}
        else:
            result = click_reference(data, params)
    prefix = "" if target == "click" else "GBDT_TARGET=watch " + ("" if quantiles else "GBDT_WATCH_QUANTILES=0 ")
    if multi:
        prefix = f"GBDT_MODEL={','.join(models)} GBDT_SEEDS={','.join(map(str, seeds))} "
        if "lightgbm" in models:
            import lightgbm  # the version the figures came from

            result["lightgbm_version"] = lightgbm.__version__
        prefix += f"LOG_SIGNALS={result['log_signals']} BENCH_OUT={os.path.relpath(os.path.abspath(out), ROOT)} "
        result["prepare_command"] = (f"LOG_SIGNALS={result['log_signals']} nice -n 19: bench.ranker_data."
                                     "run_example_gen_and_transform(<logs>, BENCH_WORK, <train days>, <eval days>) "
                                     "as bench.bench_rankers calls it (its default logs and days)")
    if sets:
        prefix = f"GBDT_FAMILY_SETS='{sets}' "
        result["loadavg_before"] = load
        result["prepare_command"] = ("LOG_SIGNAL_FAMILIES=all LOG_SIGNALS=<the 12>: bench.ranker_data."
                                     "run_example_gen_and_transform(<logs>, BENCH_WORK, <train days>, <eval days>)")
    signals = "" if multi else "LOG_SIGNALS=<signals> "
    python = "nice -n 19 .venv/bin/python" if multi else ".venv/bin/python"
    record = {"command": prefix + signals + f"BENCH_WORK=<tmp> {python} -m bench.gbdt_reference",
              "target": target, "signals": list(F.MODEL_SIGNAL_FEATURES), "features": names,
              "params": {k: v for k, v in params.items() if k != "categorical_features"},
              "categorical": [n for n, c in zip(names, is_cat) if c],
              "data": info, "seconds": round(time.time() - t0, 1), **result}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps({k: v for k, v in record.items() if k not in ("signals", "features", "categorical", "data")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
