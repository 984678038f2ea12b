"""Rankers: one builder per model family, all from the shared FeatureLayer to the heads.

    RANKERS[model_type](vocab_sizes, history_length, *, embedding_dim, oov_buckets,
                        learning_rate, loss_weights, heads, **ranker_params)

`build_ranker(config, vocab_sizes)` builds and compiles the one a TrainerConfig names.
"""
from models.rankers.registry import RANKERS, build_ranker  # noqa: F401
