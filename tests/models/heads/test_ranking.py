"""Ranking score formulas: values against NumPy, declared inputs checked at build time."""
import numpy as np
import pytest
import tensorflow as tf

from models import heads as H
from tests.helpers.ranker_utils import random_transformed, small_vocab_sizes, trainer_config
from tests.models.heads.small_ranker import L, small_ranker
from tests.models.layers.round_trip import assert_config_round_trip


@pytest.mark.parametrize("formula", sorted(H.RANKING_FORMULAS))
def test_ranking_score_formulas(formula):
    model = small_ranker("cread+cqe", formula)
    x, _ = random_transformed(16, L, small_vocab_sizes(), seed=1)
    out = {k: v.numpy().astype(np.float64) for k, v in model(x, training=False).items()}
    p, w = out["click_prob"], out["watch_time_s"]
    want = {"click_prob * watch_time_s": p * w, "watch_time_s": w, "click_prob": p,
            "click_prob * log1p(watch_time_s)": p * np.log1p(w), "click_prob * dqc": p * out["dqc"],
            "dqc": out["dqc"], "click_prob * cse": p * out["cse"]}[formula]
    assert out["ranking_score"].shape == (16, 1)
    np.testing.assert_allclose(out["ranking_score"], want, rtol=1e-5, atol=1e-7)


def test_every_formula_declares_what_it_reads():
    outputs = {o: tf.constant([[2.0]]) for o in (H.CLICK_OUTPUT, H.WATCH_OUTPUT, H.DQC_OUTPUT, H.CSE_OUTPUT)}
    for name, formula in H.RANKING_FORMULAS.items():
        named = set(name.replace("(", " ").replace(")", " ").split()) & set(outputs)
        assert set(formula.needs) == named  # the declaration matches the formula's name
        only_needed = {o: outputs[o] for o in formula.needs}
        assert H.ranking_score(only_needed, name).shape == (1, 1)  # reads nothing else
        for dropped in formula.needs:
            with pytest.raises(ValueError, match="needs outputs"):
                H.ranking_score({o: v for o, v in only_needed.items() if o != dropped}, name)
    assert H.RANKING_FORMULAS["click_prob * dqc"].needs == ("click_prob", "dqc")


def test_formula_without_its_outputs_fails_before_any_layer_is_built():
    for watch_head, formula in (("cread", "click_prob * dqc"), ("regression", "dqc"),
                                ("cread+cqe", "click_prob * cse")):
        config = trainer_config("baseline", L, watch_head=watch_head, ranking_score=formula)
        if "cqe" in watch_head:
            H.heads_from_config(config, [1.0, 2.0])  # CQE produces dqc and cse
            continue
        with pytest.raises(ValueError, match=r"needs outputs \['dqc'\] \(dqc/cse need the CQE head\)"):
            H.heads_from_config(config, [1.0, 2.0])
    with pytest.raises(ValueError, match="needs outputs"):  # the order matters: inputs come first
        H.check_heads([H.RankingScoreHead("click_prob"), H.ClickHead()])


def test_unknown_formula_is_rejected_everywhere():
    for make in (H.RankingScoreHead, H.RankingScore, lambda f: H.ranking_score({}, f), H.ranking_formula):
        with pytest.raises(ValueError, match="unknown ranking score formula"):
            make("__import__('os')")


def test_ranking_score_layer_round_trip():
    outputs = {"click_prob": tf.constant([[0.5], [0.25]]), "watch_time_s": tf.constant([[10.0], [4.0]])}
    layer = H.RankingScore("click_prob * log1p(watch_time_s)", name="ranking_score")
    np.testing.assert_allclose(layer(outputs).numpy(), [[0.5 * np.log1p(10.0)], [0.25 * np.log1p(4.0)]],
                               rtol=1e-6)
    clone = assert_config_round_trip(layer, lambda lyr: lyr(outputs))
    assert clone.formula == "click_prob * log1p(watch_time_s)"
