"""`Head`: the base class of every output head (the objective, apart from the network).

A ranker body computes a representation z [B, K] (and optionally a first-order click
logit, e.g. xDeepFM's linear part); a head turns it into named outputs and says how
they train, like TF Recommenders' `tasks` keep the objective apart from the model:

    class MyHead(Head):
        name = "my_output"                    # the head's main output
        output_names = ("my_output",)         # every output build() returns
        def build(self, representation, linear_logit=None, outputs=None):
            return {"my_output": keras.layers.Dense(1, name="my_output")(representation)}
        def losses(self):  return {"my_output": "mse"}
        def metrics(self): return {"my_output": [keras.metrics.MeanAbsoluteError(name="mae")]}

A head that combines the outputs of earlier heads (the ranking score) declares them in
`needs_outputs`; `check_heads` rejects a head list where they are not produced before
any layer is built. `compile_ranker` (models/heads/model.py) builds the heads in order.
"""
from typing import Dict, Iterable, List, Tuple

from models.heads.outputs import OUTPUT_LABELS


class Head:
    """Base class of the output heads.

    Attributes:
        name: the head's main output (e.g. "click_prob").
        output_names: every output :meth:`build` returns (declared, so the head list is
            checked before any layer is built).
        needs_outputs: outputs of earlier heads :meth:`build` reads from ``outputs``.
    """

    name: str = ""
    output_names: Tuple[str, ...] = ()
    needs_outputs: Tuple[str, ...] = ()

    @property
    def output_name(self) -> str:
        """The main output (the name the duck-typed heads used)."""
        return self.name

    def build(self, representation, linear_logit=None, outputs=None) -> Dict:
        """{output name: tensor} for every name of `output_names`.

        representation: z [B, K]; linear_logit: optional first-order click logit [B, 1];
        outputs: the outputs of the heads built before this one (read-only).
        """
        raise NotImplementedError(f"{type(self).__name__}.build")

    def losses(self) -> Dict:
        """{output: Keras loss} of the outputs that train."""
        return {}

    def metrics(self) -> Dict:
        """{output: [Keras metrics]}."""
        return {}

    def labels(self) -> Dict[str, str]:
        """{output: label key (models.features)} of every output with a loss."""
        return {o: OUTPUT_LABELS[o] for o in self.losses() if o in OUTPUT_LABELS}

    def check_available(self, available: Iterable[str]) -> None:
        """ValueError when an output of `needs_outputs` is not in `available`."""
        available = set(available)
        missing = [o for o in self.needs_outputs if o not in available]
        if missing:
            raise ValueError(f"head {self.name!r} needs outputs {missing}; have {sorted(available)}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(outputs={list(self.output_names)})"


def check_heads(heads) -> List[Head]:
    """The heads as a list, checked before anything is built: every one a `Head`, no
    output produced twice, and every `needs_outputs` produced by an earlier head."""
    heads = list(heads)
    produced: List[str] = []
    for head in heads:
        if not isinstance(head, Head):
            raise TypeError(f"{head!r} is not a models.heads.Head: subclass it (name, output_names, "
                            "build, losses, metrics)")
        head.check_available(produced)
        clash = sorted(set(head.output_names) & set(produced))
        if clash or len(set(head.output_names)) != len(head.output_names):
            raise ValueError(f"compile_ranker: duplicate head outputs {clash or list(head.output_names)}")
        produced.extend(head.output_names)
    return heads
