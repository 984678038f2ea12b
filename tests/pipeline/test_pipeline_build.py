"""create_pipeline wiring without running it: splits per component, the optional
comparison with the latest blessed model, and bad split settings."""
import json

import pytest

import local_runner


def _by_id(pipeline):
    return {c.id: c for c in pipeline.components}


def test_splits_reach_transform_trainer_and_evaluator(tmp_path):
    c = _by_id(local_runner.build(str(tmp_path / "logs"), str(tmp_path / "out")))
    prop = lambda node, key: json.loads(c[node].exec_properties[key])  # noqa: E731
    assert prop("Transform", "splits_config") == {"analyze": ["train"], "transform": ["train", "validation", "eval"]}
    assert prop("Trainer", "train_args")["splits"] == ["train"]
    assert prop("Trainer", "eval_args")["splits"] == ["validation"]
    assert prop("Evaluator", "example_splits") == ["eval"]
    assert c["LogExampleGen"].exec_properties["validation_last_n_days"] == 1
    assert "baseline_model" in c["Evaluator"].inputs and "latest_blessed_model_resolver" in c


def test_compare_to_blessed_false_drops_the_resolver_and_the_baseline(tmp_path):
    c = _by_id(local_runner.build(str(tmp_path / "logs"), str(tmp_path / "out"), compare_to_blessed=False))
    assert "latest_blessed_model_resolver" not in c
    assert "baseline_model" not in c["Evaluator"].inputs


def test_no_validation_day_is_refused(tmp_path):
    with pytest.raises(ValueError, match="validation_last_n_days must be >= 1"):
        local_runner.build(str(tmp_path / "logs"), str(tmp_path / "out"), validation_last_n_days=0)
