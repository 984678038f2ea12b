"""`compile_ranker`: ranker body + heads -> the compiled multi-output keras.Model."""
import tf_keras as keras

from models.heads.base import check_heads
from models.heads.lazy_adam import make_optimizer


def compile_ranker(inputs, representation, heads=None, linear_logit=None, learning_rate=1e-3,
                   loss_weights=None, name="ranker", steps_per_execution: int = 1,
                   jit_compile: bool = False, optimizer: str = "adam") -> keras.Model:
    """keras.Model(inputs -> {output: tensor}) with every head's loss and metrics, compiled.

    `heads`: a list of `Head` (default: click + regression, `default_heads()`), built in
    order, so a head with `needs_outputs` (the ranking score) comes after the heads it
    reads. `linear_logit` (optional, [B, 1]) is added to the click logit only.
    `loss_weights`: {output: weight}; outputs without a loss are ignored, missing ones
    weigh 1. Keras' execution knobs (TrainerConfig): `steps_per_execution` batches per
    tf.function call and XLA (`jit_compile`) for the train / test / predict functions
    only; exported signatures trace the model's `call` without XLA
    (models/training/export.py), so SavedModels keep standard ops. `optimizer`: "adam"
    (tf-keras) or "lazy_adam" (sparse rows updated alone: models/heads/lazy_adam.py).
    """
    if heads is None:
        from models.heads.config import default_heads

        heads = default_heads()
    heads = check_heads(heads)
    if int(steps_per_execution) < 1:
        raise ValueError(f"compile_ranker: steps_per_execution must be >= 1, got {steps_per_execution!r}")
    outputs, losses, metrics = {}, {}, {}
    for head in heads:
        new = head.build(representation, linear_logit=linear_logit, outputs=dict(outputs))
        if set(new) != set(head.output_names):
            raise ValueError(f"compile_ranker: {head!r} built outputs {sorted(new)}, "
                             f"declared {sorted(head.output_names)}")
        outputs.update(new)
        losses.update(head.losses())
        metrics.update(head.metrics())
    loss_weights = {k: float(v) for k, v in (loss_weights or {}).items() if k in losses}
    model = keras.Model(inputs=inputs, outputs=outputs, name=name)
    model.compile(optimizer=make_optimizer(optimizer, learning_rate), loss=losses,
                  loss_weights={k: loss_weights.get(k, 1.0) for k in losses}, metrics=metrics,
                  steps_per_execution=int(steps_per_execution), jit_compile=bool(jit_compile))
    return model
