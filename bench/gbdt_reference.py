"""Gradient-boosting reference on the bench-rankers split: how far the deep rankers are
from a tree model given the same signals, on *these* days.

    LOG_SIGNALS=<the signals> BENCH_WORK=<a bench-rankers work dir> \
        .venv/bin/python -m bench.gbdt_reference      # -> bench/results/gbdt_reference.json

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
"""
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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


def main() -> int:
    import tensorflow_transform as tft
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.metrics import log_loss, roc_auc_score

    from bench.ranker_data import load_splits
    from pipeline import configs
    from pipeline.artifacts import PipelineStore

    work = os.environ.get("BENCH_WORK", "/tmp/bench_rankers")
    out = os.environ.get("BENCH_OUT", os.path.join(ROOT, "bench", "results", "gbdt_reference.json"))
    store = PipelineStore.for_output_dir(work)
    examples, transform = store.latest_uri("LogExampleGen", "examples"), store.latest_uri("Transform", "transform_graph")
    if not (examples and transform):
        print(f"gbdt_reference: no LogExampleGen / Transform output under {work} (run bench-rankers first)", file=sys.stderr)
        return 1
    t0 = time.time()
    splits, _, info = load_splits(examples, tft.TFTransformOutput(transform), configs.HISTORY_LENGTH)
    designs = {s: design(x) for s, (x, _, _) in splits.items()}
    data = {s: (designs[s][0], y["click_prob"]) for s, (_, y, _) in splits.items()}
    train_matrix, names, is_cat = designs["train"]
    # HistGradientBoosting takes categories < 255; a wider one-hot feature stays an ordinal id
    is_cat = is_cat & (train_matrix.max(axis=0) < 254)
    params = dict(learning_rate=float(os.environ.get("GBDT_LEARNING_RATE", "0.05")),
                  max_iter=int(os.environ.get("GBDT_MAX_ITER", "800")), max_leaf_nodes=31,
                  min_samples_leaf=200, l2_regularization=1.0, categorical_features=is_cat,
                  early_stopping=False, random_state=0)
    model = HistGradientBoostingClassifier(**params).fit(*data["train"])
    val_x, val_y = data["validation"]
    val_auc = [roc_auc_score(val_y, p[:, 1]) for p in model.staged_predict_proba(val_x)]
    best = int(np.argmax(val_auc)) + 1
    model = HistGradientBoostingClassifier(**dict(params, max_iter=best)).fit(*data["train"])
    result = {}
    for split in ("validation", "eval"):
        x, y = data[split]
        p = model.predict_proba(x)[:, 1]
        result[split] = {"auc": round(float(roc_auc_score(y, p)), 5), "logloss": round(float(log_loss(y, p)), 5)}
    record = {"command": "LOG_SIGNALS=<signals> BENCH_WORK=<tmp> .venv/bin/python -m bench.gbdt_reference",
              "signals": list(F.MODEL_SIGNAL_FEATURES), "features": names,
              "params": {k: v for k, v in params.items() if k != "categorical_features"},
              "categorical": [n for n, c in zip(names, is_cat) if c],
              "trees_chosen_on_validation": best, "validation_auc_at_50_tree_steps": [round(a, 5) for a in val_auc[49::50]],
              "data": info, "seconds": round(time.time() - t0, 1), **result}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(record, f, indent=1)
    print(json.dumps({k: record[k] for k in ("trees_chosen_on_validation", "validation", "eval", "seconds")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
