"""LightGBM for the gradient-boosting reference (bench/gbdt_reference.py, #37): the click
classifier on the same design matrix, regularised, its hyper-parameters and number of trees
chosen on the validation day only, the eval days scored once.

    GBDT_MODEL=lightgbm GBDT_SEEDS=0,1,2 LOG_SIGNALS=<signals> BENCH_WORK=<a bench-rankers work dir> \
        .venv/bin/python -m bench.gbdt_reference      # -> bench/results/gbdt_reference_lightgbm.json

Regularisation: a small learning rate, ≥ min_data_in_leaf rows per leaf, L2 on the leaf
values, row bagging and feature sub-sampling per tree; the low-cardinality ids are LightGBM
categoricals (the mask gbdt_reference gives, with smoothing and L2 on their splits).
Tuning (``tune``): every combination of ``GRID`` fitted with the first seed, each with
early stopping on the validation day's AUC (the validation set is the only one LightGBM
sees); the combination with the best validation AUC is kept. Then one fit per seed
(bagging and feature sampling change with it), trees = the best validation iteration.
"""
import itertools

import numpy as np

BASE_PARAMS = dict(objective="binary", learning_rate=0.02, num_leaves=31, min_data_in_leaf=200, lambda_l2=10.0,
                   feature_fraction=0.8, bagging_fraction=0.8, bagging_freq=1, max_bin=255,
                   cat_smooth=10.0, cat_l2=10.0, min_data_per_group=100, max_cat_threshold=32,
                   num_threads=2, deterministic=True, force_row_wise=True, verbosity=-1)
GRID = {"num_leaves": [15, 31, 63], "min_data_in_leaf": [100, 400]}
MAX_TREES, PATIENCE = 3000, 200


def fit(params, train, val, categorical, seed, max_trees=MAX_TREES, patience=PATIENCE):
    """LightGBM on ``train`` = (matrix, labels); early stopping on the validation AUC
    -> (booster, trees = the best validation iteration, validation AUC per tree)."""
    import lightgbm as lgb

    cat = [int(i) for i in np.flatnonzero(categorical)]
    dtrain = lgb.Dataset(train[0], train[1], categorical_feature=cat, free_raw_data=False)
    dval = lgb.Dataset(val[0], val[1], categorical_feature=cat, reference=dtrain)
    curve = {}
    booster = lgb.train(dict(params, metric="auc", seed=seed), dtrain, num_boost_round=max_trees,
                        valid_sets=[dval], valid_names=["validation"],
                        callbacks=[lgb.early_stopping(patience, verbose=False), lgb.record_evaluation(curve)])
    return booster, int(booster.best_iteration), curve["validation"]["auc"]


def tune(train, val, categorical, seed, grid=None, base=None, **kw):
    """Every combination of ``grid`` on ``base`` fitted with ``seed``; the one with the best
    validation AUC -> (its params, [trial records])."""
    grid, base = GRID if grid is None else grid, BASE_PARAMS if base is None else base
    trials = []
    for values in itertools.product(*grid.values()):
        chosen = dict(zip(grid, values))
        _, trees, curve = fit(dict(base, **chosen), train, val, categorical, seed, **kw)
        trials.append({"params": chosen, "trees": trees, "validation_auc": round(float(curve[trees - 1]), 5)})
        print("lightgbm tuning", trials[-1], flush=True)
    best = max(trials, key=lambda t: t["validation_auc"])
    return dict(base, **best["params"]), trials


def click_reference(data, params, categorical, seed, **kw):
    """One seed: fit with early stopping on validation AUC, score validation and eval once
    with the chosen trees (gbdt_reference.split_scores) -> record fields."""
    from bench.gbdt_reference import split_scores

    meta = {s: m for s, (_, _, m) in data.items()}
    data = {s: (x, np.asarray(y["click_prob"]).reshape(-1)) for s, (x, y, _) in data.items()}
    booster, trees, curve = fit(params, data["train"], data["validation"], categorical, seed, **kw)
    result = split_scores(lambda m: booster.predict(m, num_iteration=trees), data, meta)
    return {"trees_chosen_on_validation": trees,
            "validation_auc_at_100_tree_steps": [round(float(a), 5) for a in curve[99::100]], **result}
