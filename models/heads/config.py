"""Heads from the trainer config: watch head, ranking score formula, loss weights.

`heads_from_config(config, thresholds)` turns a `TrainerConfig` (values in
pipeline/configs/ WATCH_HEAD, RANKING_SCORE, CREAD, CQE) into the head list and
checks it; `loss_weights_from_config(config)` gives {output: weight}. No setting has
a default here: a missing one is an error naming it.
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


CREAD_KEYS = ("restoration", "phi0", "lambda_ce", "lambda_restore", "lambda_ord", "huber_delta")
CQE_KEYS = ("num_quantiles", "tau_low", "tau_high", "default_k", "increment", "tower_units", "stop_gradient",
            "loss_space", "batch_reduction", "conformal")


def _settings(config, name: str, keys) -> dict:
    """The head settings dict `config.<name>` with exactly `keys` (no silent defaults)."""
    settings = dict(getattr(config, name))
    missing, unknown = sorted(set(keys) - set(settings)), sorted(set(settings) - set(keys))
    if missing or unknown:
        raise ValueError(f"trainer config {name}: missing {missing}, unknown {unknown}")
    return settings


def heads_from_config(config, thresholds=None) -> list:
    """Heads of a `TrainerConfig` (models/training/config.py): the click head, the watch
    head(s) named by `config.watch_head` (WATCH_HEADS, settings `config.cread` /
    `config.cqe`) and the ranking score `config.ranking_score` (formula name).
    `thresholds` (EAD, from the transform graph) is required for CREAD. A formula
    whose outputs these heads do not produce is a ValueError here."""
    watch = config.watch_head
    if watch not in WATCH_HEADS:
        raise ValueError(f"unknown watch_head {watch!r}; known: {WATCH_HEADS}")
    heads = [ClickHead()]
    if watch == "regression":
        heads.append(WatchTimeRegressionHead())
    if "cread" in watch:
        if thresholds is None:
            raise ValueError(f"watch_head {watch!r} needs the EAD thresholds of the transform graph")
        heads.append(CreadWatchHead(thresholds, **_settings(config, "cread", CREAD_KEYS)))
    if "cqe" in watch:
        heads.append(CqeWatchHead(**_settings(config, "cqe", CQE_KEYS), provides_watch_time=watch == "cqe"))
    heads.append(RankingScoreHead(config.ranking_score))
    return check_heads(heads)


def loss_weights_from_config(config) -> dict:
    """{output: weight} of the multi-task loss from a `TrainerConfig`: click, regression
    watch, CREAD, CQE."""
    return {CLICK_OUTPUT: float(config.loss_weight_click),
            WATCH_OUTPUT: float(config.loss_weight_watch),
            CREAD_LOGITS_OUTPUT: float(config.loss_weight_cread),
            QUANTILES_OUTPUT: float(config.loss_weight_cqe)}
