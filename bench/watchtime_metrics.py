"""The per-split metrics of every bench-watchtime record (bench/bench_watchtime.py),
below the bench modules that use them (bench_watchtime, watchtime_variants,
gbdt_reference), so none of them imports another's entry point."""
import numpy as np


def click_pair_split(y, pred, click_y) -> dict:
    """XAUC by the clicks of the pair (xauc_pairs.xauc_by_label_pairs), rounded for a record:
    {within_click, within_skip, across: [pair share, XAUC of those pairs]}."""
    from models.evaluation import xauc_pairs

    d = xauc_pairs.xauc_by_label_pairs(y, pred, np.asarray(click_y).reshape(-1))
    names = {"within_positive": "within_click", "within_negative": "within_skip", "across": "across"}
    return {name: [round(d[k]["share"], 4), round(d[k]["xauc"], 5)] for k, name in names.items()}


def point_metrics(y, pred, user_ids, click_y, click_prob) -> dict:
    """MAE, XAUC (and by the pair's clicks), XGAUC, calibration gap, click AUC, mean
    prediction of one split."""
    from models.evaluation import metrics

    pred = np.asarray(pred, np.float64)
    xg = metrics.xgauc(user_ids, y, pred)
    return {"mae": round(metrics.mae(y, pred), 4), "xauc": round(metrics.xauc(y, pred), 5),
            "xauc_click_pairs": click_pair_split(y, pred, click_y),
            "xgauc": round(xg["xgauc"], 5), "xgauc_users": xg["num_users_used"],
            "mean_calibration_gap": round(metrics.mean_calibration_by_bin(y, pred, 10)["mean_abs_gap"], 4),
            "click_auc": round(metrics.auc(np.asarray(click_y).reshape(-1), click_prob), 5),
            "mean_prediction": round(float(pred.mean()), 4), "mean_label": round(float(y.mean()), 4)}
