"""Ranking score: "ranking_score" [B, 1], a named formula of the other heads' outputs.

Each formula of `RANKING_FORMULAS` declares the outputs it reads; the ranking head
needs them from the heads before it, so a formula the configured heads cannot feed
(e.g. "click_prob * dqc" without the CQE head) is a ValueError before any layer is
built (`check_heads`). Formulas are looked up by name, never eval'd.
"""
from typing import Callable, NamedTuple, Tuple

import tensorflow as tf
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import CLICK_OUTPUT, CSE_OUTPUT, DQC_OUTPUT, RANKING_OUTPUT, WATCH_OUTPUT


class RankingFormula(NamedTuple):
    """A ranking score formula: the outputs it reads and fn({output: [B, 1]}) -> [B, 1]."""
    needs: Tuple[str, ...]
    fn: Callable


# ranking_score formulas, by name (a config value).
RANKING_FORMULAS = {
    "click_prob * watch_time_s": RankingFormula(
        (CLICK_OUTPUT, WATCH_OUTPUT), lambda o: o[CLICK_OUTPUT] * o[WATCH_OUTPUT]),
    "watch_time_s": RankingFormula((WATCH_OUTPUT,), lambda o: o[WATCH_OUTPUT]),
    "click_prob": RankingFormula((CLICK_OUTPUT,), lambda o: o[CLICK_OUTPUT]),
    "click_prob * log1p(watch_time_s)": RankingFormula(
        (CLICK_OUTPUT, WATCH_OUTPUT), lambda o: o[CLICK_OUTPUT] * tf.math.log1p(o[WATCH_OUTPUT])),
    "click_prob * dqc": RankingFormula((CLICK_OUTPUT, DQC_OUTPUT), lambda o: o[CLICK_OUTPUT] * o[DQC_OUTPUT]),
    "dqc": RankingFormula((DQC_OUTPUT,), lambda o: o[DQC_OUTPUT]),
    "click_prob * cse": RankingFormula((CLICK_OUTPUT, CSE_OUTPUT), lambda o: o[CLICK_OUTPUT] * o[CSE_OUTPUT]),
}


def ranking_formula(formula: str) -> RankingFormula:
    """The `RankingFormula` named `formula`, else a ValueError listing the known ones."""
    if formula not in RANKING_FORMULAS:
        raise ValueError(f"unknown ranking score formula {formula!r}; known: {sorted(RANKING_FORMULAS)}")
    return RANKING_FORMULAS[formula]


def missing_outputs_error(formula: str, missing, available) -> ValueError:
    return ValueError(f"ranking score {formula!r} needs outputs {list(missing)} "
                      f"(dqc/cse need the CQE head); have {sorted(available)}")


def ranking_score(outputs: dict, formula: str):
    """The named `formula` (RANKING_FORMULAS) of the `outputs` dict, [B, 1]."""
    f = ranking_formula(formula)
    missing = [o for o in f.needs if o not in outputs]
    if missing:
        raise missing_outputs_error(formula, missing, outputs)
    return f.fn(outputs)


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class RankingScore(keras.layers.Layer):
    """ranking_score = RANKING_FORMULAS[formula](outputs), e.g. p_click · E[watch].

    Args:
        formula: a name of `RANKING_FORMULAS` (default "click_prob * watch_time_s").

    Input: a dict {output name: [B, 1]} holding at least the formula's `needs`.
    Output: [B, 1].
    """

    def __init__(self, formula="click_prob * watch_time_s", **kwargs):
        super().__init__(**kwargs)
        ranking_formula(formula)  # validates
        self.formula = formula

    def call(self, outputs):
        return ranking_score(outputs, self.formula)

    def get_config(self):
        return {**super().get_config(), "formula": self.formula}


class RankingScoreHead(Head):
    """Combines the earlier heads' outputs into "ranking_score" [B, 1] (no loss)."""

    name = RANKING_OUTPUT
    output_names = (RANKING_OUTPUT,)

    def __init__(self, formula="click_prob * watch_time_s"):
        self.needs_outputs = ranking_formula(formula).needs  # validates
        self.formula = formula

    def check_available(self, available):
        available = set(available)
        missing = [o for o in self.needs_outputs if o not in available]
        if missing:
            raise missing_outputs_error(self.formula, missing, available)

    def build(self, representation, linear_logit=None, outputs=None):
        outputs = dict(outputs or {})
        self.check_available(outputs)
        needed = {o: outputs[o] for o in self.needs_outputs}
        return {RANKING_OUTPUT: RankingScore(self.formula, name=RANKING_OUTPUT)(needed)}
