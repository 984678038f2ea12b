"""create_pipeline wiring without running it: splits per component, the optional
comparison with the latest blessed model, and bad split settings."""
import dataclasses
import json

import pytest

from models.training.config import TrainerConfig
from models.transform_config import TransformConfig
from pipeline import configs
from pipeline.runners import build_local


def _by_id(pipeline):
    return {c.id: c for c in pipeline.components}


def test_splits_reach_transform_trainer_and_evaluator(tmp_path):
    c = _by_id(build_local(str(tmp_path / "logs"), str(tmp_path / "out")))
    prop = lambda node, key: json.loads(c[node].exec_properties[key])  # noqa: E731
    # Transform analyses the train split and materializes nothing: the Trainer reads the raw
    # examples through the transform graph (pipeline.py module doc).
    assert prop("Transform", "splits_config") == {"analyze": ["train"]}
    assert "transformed_examples" not in c["Transform"].outputs
    assert c["Trainer"].inputs["examples"].producer_component_id == "LogExampleGen"
    assert json.loads(c["Trainer"].exec_properties["custom_config"])["input_examples"] == "raw"
    assert prop("Trainer", "train_args")["splits"] == ["train"]
    assert prop("Trainer", "eval_args")["splits"] == ["validation"]
    assert prop("Evaluator", "example_splits") == ["eval"]
    assert c["LogExampleGen"].exec_properties["validation_last_n_days"] == 1
    assert "baseline_model" in c["Evaluator"].inputs and "latest_blessed_model_resolver" in c


def test_compare_to_blessed_false_drops_the_resolver_and_the_baseline(tmp_path):
    c = _by_id(build_local(str(tmp_path / "logs"), str(tmp_path / "out"), compare_to_blessed=False))
    assert "latest_blessed_model_resolver" not in c
    assert "baseline_model" not in c["Evaluator"].inputs


def test_no_validation_day_is_refused(tmp_path):
    with pytest.raises(ValueError, match="validation_last_n_days must be >= 1"):
        build_local(str(tmp_path / "logs"), str(tmp_path / "out"),
                    example_gen_config=dataclasses.replace(configs.LOG_EXAMPLE_GEN, validation_last_n_days=0))


def test_typed_configs_reach_transform_and_trainer(tmp_path):
    """Transform's knobs are in its custom_config (so in its cache key) and both typed
    configs round-trip through the component's exec properties."""
    c = _by_id(build_local(str(tmp_path / "logs"), str(tmp_path / "out")))
    transform = json.loads(c["Transform"].exec_properties["custom_config"])
    assert transform["ead_beta"] == configs.EAD_BETA
    assert TransformConfig.from_custom_config(transform) == configs.TRANSFORM
    trainer = json.loads(c["Trainer"].exec_properties["custom_config"])
    assert TrainerConfig.from_custom_config(trainer) == configs.TRAINER
    assert trainer["shuffle_buffer_size"] == configs.SHUFFLE_BUFFER_SIZE


def test_configs_refuse_missing_unknown_and_bad_knobs():
    good = configs.TRAINER.to_custom_config()
    with pytest.raises(ValueError, match=r"missing \['batch_size'\]"):
        TrainerConfig.from_custom_config({k: v for k, v in good.items() if k != "batch_size"})
    with pytest.raises(ValueError, match=r"unknown \['bogus'\]"):
        TrainerConfig.from_custom_config(dict(good, bogus=1))
    with pytest.raises(ValueError, match="watch_head"):
        configs.TRAINER.replace(watch_head="cread+xyz")
    with pytest.raises(ValueError, match="missing"):
        TransformConfig.from_custom_config({})


def test_mismatched_history_length_or_oov_is_refused(tmp_path):
    with pytest.raises(ValueError, match="history_length"):
        build_local(str(tmp_path / "logs"), str(tmp_path / "out"),
                    trainer_config=configs.trainer_config(history_length=7))
    with pytest.raises(ValueError, match="oov_buckets"):
        build_local(str(tmp_path / "logs"), str(tmp_path / "out"),
                    trainer_config=configs.trainer_config(oov_buckets=3))


def test_trainer_config_knows_the_heads_watch_heads():
    """TrainerConfig validates watch_head without importing TF: its list must be the heads'."""
    from models import heads
    from models.training import config

    assert config.WATCH_HEADS == heads.WATCH_HEADS


def test_publisher_replaces_the_pusher(tmp_path):
    """The Publisher (#10) runs under the Pusher's node id with the model, blessing,
    transform graph and examples, and the configured PublishConfig."""
    from models.publishing.config import PublishConfig

    c = _by_id(build_local(str(tmp_path / "logs"), str(tmp_path / "out")))
    pusher = c["Pusher"]
    assert type(pusher).__name__ == "Publisher"
    assert {"model", "model_blessing", "transform_graph", "examples"} <= set(pusher.inputs)
    assert {"pushed_model", "publish_report"} <= set(pusher.outputs)
    config = PublishConfig.from_json_dict(json.loads(pusher.exec_properties["config_json"]))
    assert config == configs.PUBLISHER
    assert pusher.exec_properties["serving_base"] == configs.output_paths(str(tmp_path / "out"))["serving_model_dir"]


def test_transformed_trainer_input_is_refused(tmp_path):
    """Transform materializes nothing, so a Trainer config asking for transformed examples
    would read files that do not exist: the build refuses it."""
    with pytest.raises(ValueError, match="input_examples must be 'raw'"):
        build_local(str(tmp_path / "logs"), str(tmp_path / "out"),
                    trainer_config=configs.trainer_config(input_examples="transformed"))
