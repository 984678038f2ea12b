"""The ranker registry and `build_ranker`: TrainerConfig -> compiled Keras ranker."""
import tf_keras as keras

from models import heads as heads_lib
from models.rankers.baseline import build_baseline
from models.rankers.bst import build_bst
from models.rankers.dcn import build_dcn
from models.rankers.din import build_din
from models.rankers.lr import build_logistic_regression
from models.rankers.xdeepfm import build_xdeepfm

# model_type -> builder(vocab_sizes, history_length, *, embedding_dim, oov_buckets,
#                        learning_rate, loss_weights, heads, **ranker_params,
#                        **compile_options); compile_options (steps_per_execution,
#                        jit_compile, optimizer) go to models.heads.compile_ranker
RANKERS = {
    "lr": build_logistic_regression,
    "baseline": build_baseline,
    "xdeepfm": build_xdeepfm,
    "din": build_din,
    "bst": build_bst,
    "dcn": build_dcn,
}


def check_model_type(model_type: str) -> None:
    if model_type not in RANKERS:
        raise ValueError(f"unknown model_type {model_type!r}; known: {sorted(RANKERS)}")


def build_ranker(config, vocab_sizes: dict, heads=None, ead_thresholds=None) -> keras.Model:
    """Builds and compiles the ranker `config.model_type` (a TrainerConfig) for
    `vocab_sizes` ({raw feature: vocabulary size}). Without `heads` they come from the
    config (heads.heads_from_config; CREAD needs `ead_thresholds`)."""
    check_model_type(config.model_type)
    if heads is None:
        heads = heads_lib.heads_from_config(config, ead_thresholds)
    params = dict(config.ranker_params)
    kwargs = dict(embedding_dim=config.embedding_dim, oov_buckets=config.oov_buckets,
                  learning_rate=config.learning_rate,
                  loss_weights=heads_lib.loss_weights_from_config(config), heads=heads)
    kwargs.update(params)  # a ranker may override e.g. its learning rate
    # Keras execution knobs, compiled once in models.heads.compile_ranker
    kwargs.update(steps_per_execution=int(config.steps_per_execution), jit_compile=bool(config.jit_compile),
                  optimizer=config.optimizer)
    try:
        return RANKERS[config.model_type](vocab_sizes, config.history_length, **kwargs)
    except TypeError as e:
        raise ValueError(f"bad ranker_params {sorted(params)} for model_type {config.model_type!r}: {e}") from e
