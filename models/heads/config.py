"""Heads from the trainer config: watch head, ranking score formula, loss weights.

`heads_from_config(hp, thresholds)` turns the trainer config (pipeline/configs.py
WATCH_HEAD, RANKING_SCORE, CREAD, CQE; `TrainerConfig.to_custom_config()`) into the
head list and checks it; `loss_weights_from_config(hp)` gives {output: weight}.
"""
from models.heads.base import check_heads
from models.heads.click import ClickHead
from models.heads.cqe import CqeWatchHead
from models.heads.cread import CreadWatchHead
from models.heads.outputs import CLICK_OUTPUT, CREAD_LOGITS_OUTPUT, QUANTILES_OUTPUT, WATCH_OUTPUT
from models.heads.ranking import RankingScoreHead
from models.heads.regression import WatchTimeRegressionHead

WATCH_HEADS = ("regression", "cread", "cqe", "cread+cqe")


def default_heads():
    return [ClickHead(), WatchTimeRegressionHead()]


def heads_from_config(hp: dict, thresholds=None) -> list:
    """Heads of the trainer config `hp`: click head, the watch head(s) named by
    `watch_head` (WATCH_HEADS) and the ranking score `ranking_score` (formula name).
    `thresholds` (EAD, from the transform graph) is required for CREAD. A formula
    whose outputs these heads do not produce is a ValueError here."""
    watch = hp.get("watch_head", "regression")
    if watch not in WATCH_HEADS:
        raise ValueError(f"unknown watch_head {watch!r}; known: {WATCH_HEADS}")
    heads = [ClickHead()]
    if watch == "regression":
        heads.append(WatchTimeRegressionHead())
    if "cread" in watch:
        if thresholds is None:
            raise ValueError(f"watch_head {watch!r} needs the EAD thresholds of the transform graph")
        c = dict(hp.get("cread") or {})
        heads.append(CreadWatchHead(thresholds, restoration=c.get("restoration", "trapezoid"),
                                    phi0=c.get("phi0", 1.0), lambda_ce=c.get("lambda_ce", 1.0),
                                    lambda_restore=c.get("lambda_restore", 1.0),
                                    lambda_ord=c.get("lambda_ord", 1.0),
                                    huber_delta=c.get("huber_delta", 1.0)))
    if "cqe" in watch:
        q = dict(hp.get("cqe") or {})
        heads.append(CqeWatchHead(num_quantiles=q.get("num_quantiles", 100), tau_low=q.get("tau_low", 0.25),
                                  tau_high=q.get("tau_high", 0.7), default_k=q.get("default_k", 0.5),
                                  increment=q.get("increment", "softplus"),
                                  provides_watch_time=watch == "cqe"))
    heads.append(RankingScoreHead(hp.get("ranking_score", "click_prob * watch_time_s")))
    return check_heads(heads)


def loss_weights_from_config(hp: dict) -> dict:
    """{output: weight} of the multi-task loss: click, regression watch, CREAD, CQE."""
    return {CLICK_OUTPUT: float(hp.get("loss_weight_click", 1.0)),
            WATCH_OUTPUT: float(hp.get("loss_weight_watch", 1.0)),
            CREAD_LOGITS_OUTPUT: float(hp.get("loss_weight_cread", 1.0)),
            QUANTILES_OUTPUT: float(hp.get("loss_weight_cqe", 1.0))}
