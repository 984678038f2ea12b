"""A small baseline ranker with the heads of a TrainerConfig (heads_from_config)."""
import tensorflow as tf

from models import heads as H
from models.rankers.baseline import build_baseline
from pipeline import configs
from tests.helpers.ranker_utils import small_vocab_sizes, trainer_config

L = 5
T = [1.0, 3.0, 10.0, 30.0, 90.0]  # EAD thresholds, as read from a transform graph


def small_ranker(watch_head="regression", formula="click_prob * watch_time_s", thresholds=T, **hp):
    """The baseline with `heads_from_config(config)` and `loss_weights_from_config(config)`
    of the pipeline's TrainerConfig changed by `hp` (a partial `cread` updates CREAD's)."""
    tf.random.set_seed(0)
    if "cread" in hp:
        hp["cread"] = dict(configs.CREAD, **hp["cread"])
    config = trainer_config("baseline", L, watch_head=watch_head, ranking_score=formula,
                            cqe=dict(configs.CQE, num_quantiles=9), **hp)
    return build_baseline(small_vocab_sizes(), L, embedding_dim=4, hidden_units=(8,),
                          heads=H.heads_from_config(config, thresholds),
                          loss_weights=H.loss_weights_from_config(config))
