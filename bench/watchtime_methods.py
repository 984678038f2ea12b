"""One watch-time method of bench-watchtime (bench/bench_watchtime.py, whose docstring
lists the methods): the BENCH_RANKER built with the method's watch head, trained, and its
validation / eval predictions; the no-model references (marginal, duration-group median).
"""
import os
import time

import numpy as np

from bench.watchtime_variants import CQE_VARIANTS, cqe_predictions, sweep_thresholds
from components.log_example_gen.signals import WATCH_RATIO_CAP  # the ratio label's cap, as the signals'

D2Q_GROUPS = 30  # duration groups (Zhan et al. 2022 use 30 on KuaiRand-like data)
MEDIAN_TOWER = (64,)  # median_tower: the median head's own ReLU layer(s)


def candidate_thresholds(report, name):
    """The thresholds of the Transform EAD asset's candidate `name` (e.g. "alpha=0")."""
    return next(c for c in report.candidates if c["name"] == name)["thresholds"]


def train_and_predict(method, report, sizes, data, epochs, batch_size, history_length, seed=0):
    """Trains the BENCH_RANKER with `method`'s watch head (TF seed `seed`); returns {estimate: pred} (+ quantiles)."""
    if method == "marginal":
        from models.watch_time import cqe
        from pipeline import configs

        from models.watch_time.d2q import D2Q

        train_y, raw = data[1], data[5]
        n_eval = len(next(iter(data[4].values())))
        taus = cqe.quantile_levels(configs.CQE["num_quantiles"])
        y = train_y["watch_time_s"]
        groups = D2Q(raw["train"]["duration_s"], y, num_groups=D2Q_GROUPS)

        def refs(split, n):  # no-model references: the train split's mean / median / group median
            return {"marginal_mean": np.full(n, float(np.mean(y))), "marginal_median": np.full(n, float(np.median(y))),
                    "duration_group_median": groups.watch_time(raw[split]["duration_s"], np.full(n, 0.5))}

        n_val = len(data[3]["watch_time_s"])
        mean, q = np.full(n_eval, float(np.mean(y))), np.tile(np.quantile(y, taus), (n_eval, 1))
        return {"train_seconds": 0.0, "click_prob": np.full(n_eval, float(np.mean(train_y["click_prob"]))),
                **refs("eval", n_eval), "quantiles": q, "quantiles_raw": q, "raw_cde": mean,
                "levels": taus, "extra": {},
                "validation": {"click_prob": np.full(n_val, float(np.mean(train_y["click_prob"]))),
                               **refs("validation", n_val)}}
    import tensorflow as tf
    import tf_keras as keras

    from models import heads as H
    from models.rankers import build_ranker
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import fit_ranker
    from pipeline import configs

    ranker = os.environ.get("BENCH_RANKER", "baseline")
    keras.backend.clear_session()
    tf.random.set_seed(seed)
    config = configs.trainer_config(
        ranker, history_length=history_length, ranking_score="click_prob", watch_head="regression",
        loss_weight_cqe=float(os.environ.get("BENCH_LOSS_WEIGHT_CQE", configs.LOSS_WEIGHT_CQE)),
        learning_rate=configs.learning_rate_at(batch_size))
    heads, thresholds, extra = None, None, {}
    d2q = None
    from models import features as F
    from models.watch_time.d2q import D2Q

    duration_key = F.transformed_name("duration_s")
    if method in ("d2q", "cqe_d2q", "d2q_median"):
        d2q = D2Q(data[0][duration_key], data[1]["watch_time_s"], num_groups=D2Q_GROUPS)
    if method in CQE_VARIANTS:
        config = config.replace(watch_head="cqe", cqe=dict(configs.CQE, **CQE_VARIANTS[method]))
        if method == "cqe_d2q":  # the quantiles of the in-group percentile, mapped back per group
            heads = [H.ClickHead(), H.CqeWatchHead(**config.cqe, provides_watch_time=False),
                     H.RankingScoreHead("click_prob")]
    elif method.startswith("cread_e") and method not in ("cread_equal_frequency", "cread_equal_width"):
        config = config.replace(watch_head="cread")
        if method == "cread_ead":
            thresholds = report.thresholds
        else:
            thresholds, extra = sweep_thresholds(method, data[1]["watch_time_s"])
    elif method == "wlr":
        heads = [H.ClickHead(), H.WlrWatchHead(scale=float(np.mean(data[1]["watch_time_s"]))),
                 H.RankingScoreHead("click_prob")]
    elif method in ("d2q", "d2q_median"):
        heads = [H.ClickHead(), H.D2qPercentileHead("mae" if method == "d2q_median" else "mse"),
                 H.RankingScoreHead("click_prob")]
    elif method.startswith("median") or method.startswith("quantile_t"):  # pinball at tau (median: 0.5)
        tau = 0.5 if method.startswith("median") else float(method[len("quantile_t"):])
        heads = [H.ClickHead(), H.WatchTimeQuantileHead(tau, "seconds" if method == "median_seconds" else "log1p",
                                                        MEDIAN_TOWER if method == "median_tower" else ()),
                 H.RankingScoreHead("click_prob")]
    elif method == "pairwise" or method.startswith("pairwise_l"):  # + λ·RankNet over the batch's pairs
        weight = 1.0 if method == "pairwise" else float(method[len("pairwise_l"):])
        heads = [H.ClickHead(), H.WatchTimePairwiseHead(weight), H.RankingScoreHead("click_prob")]
    elif method in ("watch_ratio", "watch_ratio_median"):
        heads = [H.ClickHead(), H.WatchRatioHead(WATCH_RATIO_CAP, "mae" if method.endswith("median") else "mse"),
                 H.RankingScoreHead("click_prob")]
    elif method.startswith("cread"):
        config = config.replace(watch_head="cread")
        thresholds = {"cread_equal_frequency": candidate_thresholds(report, "alpha=0"),
                      "cread_equal_width": candidate_thresholds(report, "equal_width")}[method]
    else:
        config = config.replace(watch_head=method)
    model = build_ranker(config, sizes, heads=heads, ead_thresholds=thresholds)
    train_x, train_y, val_x, val_y, eval_x, raw = data

    def labels(x, y, split):
        out = H.training_labels(model.output_names, y["click_prob"], y["watch_time_s"])
        if d2q is not None:
            p = d2q.percentile(x[duration_key], y["watch_time_s"]).astype(np.float32)
            out["quantiles" if method == "cqe_d2q" else "d2q_percentile"] = p
        if H.WATCH_RATIO_OUTPUT in model.output_names:
            out[H.WATCH_RATIO_OUTPUT] = H.watch_ratio(y["watch_time_s"], raw[split]["duration_s"],
                                                      WATCH_RATIO_CAP).astype(np.float32)
        return out

    train_ds = (tf.data.Dataset.from_tensor_slices((train_x, labels(train_x, train_y, "train")))
                .shuffle(len(train_y["click_prob"]), seed=0).batch(batch_size).prefetch(2))
    val_ds = tf.data.Dataset.from_tensor_slices((val_x, labels(val_x, val_y, "validation"))).batch(4096)
    t0 = time.time()
    fit_ranker(model, train_ds, epochs, validation_data=val_ds, verbose=0,  # the rate decays as in run_fn
               callbacks=decay_callbacks(config, len(train_y["click_prob"]), epochs, batch_size))
    train_seconds = time.time() - t0

    def estimates(x, split, pred):  # {estimate name: seconds} of one split's predictions
        if method == "d2q" or method == "d2q_median":
            return {method: d2q.watch_time(x[duration_key], pred["d2q_percentile"].reshape(-1))}
        if H.WATCH_RATIO_OUTPUT in pred:
            return {method: pred[H.WATCH_RATIO_OUTPUT].reshape(-1).astype(np.float64)
                    * np.maximum(raw[split]["duration_s"].astype(np.float64), 1.0)}
        return {method: pred["watch_time_s"].reshape(-1)}

    pred = model.predict(eval_x, batch_size=4096, verbose=0)
    val_pred = model.predict(val_x, batch_size=4096, verbose=0)
    out = {"train_seconds": train_seconds, "click_prob": pred["click_prob"].reshape(-1), "extra": extra,
           "validation": {"click_prob": val_pred["click_prob"].reshape(-1)}}
    if method in CQE_VARIANTS:
        out.update(cqe_predictions(method, model, d2q, (duration_key, val_x, val_y, eval_x), pred))
    else:
        out.update(estimates(eval_x, "eval", pred))
        out["validation"].update(estimates(val_x, "validation", val_pred))
    return out
