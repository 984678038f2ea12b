"""Trainer config -> heads: watch heads, bad settings, losses and their weights."""
import pytest

from models import features as F
from models import heads as H
from models.training.input import label_keys_for
from pipeline import configs
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config
from tests.models.heads.small_ranker import L, small_ranker


@pytest.mark.parametrize("watch_head,types,outputs", [
    ("regression", ["ClickHead", "WatchTimeRegressionHead"], {"click_prob", "watch_time_s"}),
    ("cread", ["ClickHead", "CreadWatchHead"], {"click_prob", "watch_time_s", "cread_logits"}),
    ("cqe", ["ClickHead", "CqeWatchHead"], {"click_prob", "watch_time_s", "quantiles", "cse", "dqc", "cde"}),
    ("cread+cqe", ["ClickHead", "CreadWatchHead", "CqeWatchHead"],
     {"click_prob", "watch_time_s", "cread_logits", "quantiles", "cse", "dqc", "cde"}),
])
def test_heads_of_each_watch_head(watch_head, types, outputs):
    heads = H.heads_from_config(trainer_config("baseline", L, watch_head=watch_head), [1.0, 2.0])
    assert [type(h).__name__ for h in heads] == types + ["RankingScoreHead"]
    assert {o for h in heads for o in h.output_names} == outputs | {"ranking_score"}
    assert all(isinstance(h, H.Head) for h in heads)
    assert H.WATCH_HEADS == ("regression", "cread", "cqe", "cread+cqe")


def test_bad_configs_raise():
    with pytest.raises(ValueError, match="unknown ranking score formula"):
        small_ranker(formula="__import__('os')")
    with pytest.raises(ValueError, match="needs outputs"):
        small_ranker("cread", "click_prob * dqc")
    with pytest.raises(ValueError, match="unknown watch_head"):
        small_ranker("wlr")
    with pytest.raises(ValueError, match="needs the EAD thresholds"):
        small_ranker("cread", thresholds=None)
    with pytest.raises(ValueError):
        H.heads_from_config(trainer_config("baseline", L, watch_head="cread"), [3.0, 1.0])  # must increase
    with pytest.raises(ValueError):
        H.heads_from_config(trainer_config("baseline", L, watch_head="cqe",
                                           cqe=dict(configs.CQE, tau_low=0.9, tau_high=0.2)))


def test_losses_and_weights_per_head():
    model = small_ranker("cread+cqe", loss_weight_click=0.5, loss_weight_cread=2.0, loss_weight_cqe=0.25)
    assert label_keys_for(model) == {"click_prob": F.LABEL_CLICK, "watch_time_s": F.LABEL_WATCH,
                                     "cread_logits": F.LABEL_WATCH, "quantiles": F.LABEL_WATCH}
    x, y = random_transformed(64, L, small_vocab_sizes(), seed=3)
    labels = H.training_labels(model.output_names, y["click_prob"], y["watch_time_s"])
    res = model.evaluate(x, labels, batch_size=64, verbose=0, return_dict=True)
    assert set(res) >= {"click_prob_loss", "cread_logits_loss", "quantiles_loss", "watch_time_s_mae"}
    assert "watch_time_s_loss" not in res  # CREAD's loss sits on the logits
    total = 0.5 * res["click_prob_loss"] + 2.0 * res["cread_logits_loss"] + 0.25 * res["quantiles_loss"]
    assert res["loss"] == pytest.approx(total, rel=1e-4)


def test_loss_weights_and_head_settings_come_from_the_config_only():
    """No head setting has a default outside pipeline/configs/: the weights are the
    config's, and a CREAD/CQE settings dict missing a key is an error naming it."""
    config = trainer_config("baseline", L, loss_weight_watch=0.5)
    assert H.loss_weights_from_config(config) == {
        "click_prob": configs.LOSS_WEIGHT_CLICK, "watch_time_s": 0.5,
        "cread_logits": configs.LOSS_WEIGHT_CREAD, "quantiles": configs.LOSS_WEIGHT_CQE}
    partial_cread = {k: v for k, v in configs.CREAD.items() if k != "lambda_restore"}
    with pytest.raises(ValueError, match=r"cread: missing \['lambda_restore'\]"):
        H.heads_from_config(trainer_config("baseline", L, watch_head="cread", cread=partial_cread), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"cqe: missing \[\], unknown \['bogus'\]"):
        H.heads_from_config(trainer_config("baseline", L, watch_head="cqe", cqe=dict(configs.CQE, bogus=1)))
