"""Pluggable output heads: any ranker body -> named outputs, losses and metrics.

A ranker computes a representation z [B, K] (and optionally a first-order click
logit, e.g. xDeepFM's linear part); heads (`Head`, base.py) turn it into outputs:

    ClickHead (click.py)          p_click = σ(w_c·z + b_c [+ linear_logit])   "click_prob"
                                  loss: binary cross-entropy; metric AUC
    WatchTimeRegressionHead       ŵ = expm1(softplus(w_w·z + b_w))            "watch_time_s"
      (regression.py)             loss: (log1p(y) - log1p(ŵ))²; metric MAE (seconds)
    CreadWatchHead (cread.py)     CREAD (models/watch_time/cread.py): M survival logits
                                  "cread_logits" (training only, loss CreadLoss) and the
                                  restored E[watch] "watch_time_s"
    CqeWatchHead (cqe.py)         CQE (models/watch_time/cqe.py): "quantiles" [B, N]
                                  (pinball loss), "cse", "dqc", "cde" [B, 1];
                                  "watch_time_s" = CDE when it is the only watch head
    RankingScoreHead (ranking.py) "ranking_score" [B, 1] = a named formula of the other
                                  outputs (RANKING_FORMULAS, each declaring its inputs)
    WlrWatchHead (wlr.py),        bench baselines (bench/bench_watchtime.py): YouTube
    D2qPercentileHead (d2q.py),   WLR, exp(logit) = E[watch]; D2Q's in-group percentile
    WatchTimeQuantileHead         (MSE, or L1: the median); the τ-quantile of watch time
      (median.py),                (log1p pinball; τ = 0.5: the median, which MAE rewards);
    WatchRatioHead (ratio.py),    the capped watch / duration ratio (× duration after predict);
    WatchTimePairwiseHead         log1p regression + λ·RankNet over the batch's ordered pairs
      (pairwise.py)               (the order XAUC measures)

`compile_ranker(inputs, z, heads, ...)` (model.py) builds and compiles the keras.Model
whose outputs are the union of the heads' outputs. `heads_from_config(hp, thresholds)`
(config.py) turns the trainer config into the head list; `training_labels` (outputs.py)
gives the label of every output that has a loss.
"""
from models.heads.base import Head, check_heads
from models.heads.click import ClickHead
from models.heads.config import WATCH_HEADS, default_heads, heads_from_config, loss_weights_from_config
from models.heads.cqe import CqeWatchHead
from models.heads.cread import CreadWatchHead
from models.heads.d2q import D2qPercentileHead
from models.heads.median import WatchTimeQuantileHead, log1p_pinball, seconds_pinball
from models.heads.model import compile_ranker
from models.heads.outputs import (CDE_OUTPUT, CLICK_OUTPUT, CREAD_LOGITS_OUTPUT, CSE_OUTPUT,
                                  D2Q_PERCENTILE_OUTPUT, DQC_OUTPUT, OUTPUT_LABELS, QUANTILES_OUTPUT,
                                  RANKING_OUTPUT, TRAINING_ONLY_OUTPUTS, WATCH_OUTPUT, WATCH_RATIO_OUTPUT,
                                  WLR_LOGIT_OUTPUT, training_labels)
from models.heads.pairwise import WatchTimePairwiseHead, log1p_mse_pairwise, pairwise_logistic
from models.heads.ranking import (RANKING_FORMULAS, RankingFormula, RankingScore, RankingScoreHead,
                                  ranking_formula, ranking_score)
from models.heads.ratio import WatchRatioHead, watch_ratio
from models.heads.regression import WatchTimeRegressionHead, log1p_mse
from models.heads.wlr import WlrWatchHead

__all__ = [
    "CDE_OUTPUT", "CLICK_OUTPUT", "CREAD_LOGITS_OUTPUT", "CSE_OUTPUT", "D2Q_PERCENTILE_OUTPUT", "DQC_OUTPUT",
    "OUTPUT_LABELS", "QUANTILES_OUTPUT", "RANKING_FORMULAS", "RANKING_OUTPUT", "TRAINING_ONLY_OUTPUTS",
    "WATCH_HEADS", "WATCH_OUTPUT", "WATCH_RATIO_OUTPUT", "WLR_LOGIT_OUTPUT", "ClickHead", "CqeWatchHead",
    "CreadWatchHead", "D2qPercentileHead", "Head", "RankingFormula", "RankingScore", "RankingScoreHead",
    "WatchRatioHead", "WatchTimePairwiseHead", "WatchTimeQuantileHead", "WatchTimeRegressionHead",
    "WlrWatchHead", "check_heads", "compile_ranker", "default_heads", "heads_from_config", "log1p_mse",
    "log1p_mse_pairwise", "log1p_pinball", "loss_weights_from_config", "pairwise_logistic", "ranking_formula",
    "ranking_score", "seconds_pinball", "training_labels", "watch_ratio",
]
