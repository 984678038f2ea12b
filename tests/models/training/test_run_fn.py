"""run_fn end to end without a TFX run: raw example files (the pipeline's Trainer input:
input_examples="raw", read through the transform graph) or transformed ones + TFTransformOutput
-> train under the configured strategy -> SavedModel with both signatures."""
import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft
from tfx.components.trainer.fn_args_utils import DataAccessor, FnArgs
from tfx_bsl.public import tfxio

from models import features as F
from models.training.input import input_fn, shuffle_labels
from models.training.run_fn import run_fn
from pipeline import configs
from tests.conftest import SMALL_L
from tests.helpers.ranker_utils import raw_batch, raw_rows

L = SMALL_L  # the shared transform graph's history length


@pytest.fixture(scope="module")
def transformed_files(small_transform_output, tmp_path_factory):
    """64 raw rows written as 48 train / 16 eval example files twice: raw (what LogExampleGen
    writes and the pipeline's Trainer reads) and transformed by the suite's shared transform
    graph (tests/conftest.py, analysed once per run). Returns ({"raw" | "transformed": {split:
    [file]}}, transform dir, rows)."""
    tft_output, _ = small_transform_output
    rows = raw_rows(64, L, seed=3)
    spec = F.raw_feature_spec(L)
    dtypes = {"int64": np.int64, "float32": np.float32, "string": object}
    raw = {k: np.array([r[k] for r in rows], dtype=dtypes[v.dtype.name]) for k, v in spec.items()}
    transformed = {k: v.numpy() for k, v in tft_output.transform_features_layer()(
        {k: tf.constant(v) for k, v in raw.items()}).items()}
    data_dir = tmp_path_factory.mktemp("examples")
    files = {}
    for kind, values, schema in (("raw", raw, tft_output.raw_metadata.schema),
                                 ("transformed", transformed, tft_output.transformed_metadata.schema)):
        coder = tft.coders.ExampleProtoCoder(schema)
        files[kind] = {}
        for split, part in (("train", range(48)), ("eval", range(48, 64))):
            path = str(data_dir / f"{kind}_{split}.gz")
            with tf.io.TFRecordWriter(path, options="GZIP") as w:
                for i in part:
                    w.write(coder.encode({k: v[i] for k, v in values.items()}))
            files[kind][split] = [path]
    return files, os.path.dirname(tft_output.transform_savedmodel_dir), rows


def _scalars(logdir, tag):
    """The values of a TensorBoard scalar ``tag`` under ``logdir``, in file order."""
    values = []
    for path in sorted(glob.glob(os.path.join(logdir, "**", "events.out.tfevents.*"), recursive=True)):
        for event in tf.compat.v1.train.summary_iterator(path):
            values += [float(tf.make_ndarray(v.tensor)) for v in event.summary.value if v.tag == tag]
    return values


def _data_accessor():
    def factory(file_pattern, options, schema):
        return tfxio.TFExampleRecord(file_pattern=file_pattern, schema=schema).TensorFlowDataset(options)

    return DataAccessor(tf_dataset_factory=factory, record_batch_factory=None, data_view_decode_fn=None)


def _fn_args(files, transform_dir, tmp_path, input_examples="raw", **config):
    custom_config = configs.trainer_config(history_length=L, batch_size=16, embedding_dim=4,
                                           watch_head="regression").to_custom_config()
    custom_config.update(config, input_examples=input_examples)
    files = files[input_examples]
    return FnArgs(train_files=files["train"], eval_files=files["eval"], transform_output=transform_dir,
                  serving_model_dir=str(tmp_path / "serving"), model_run_dir=str(tmp_path / "run"),
                  train_steps=4, eval_steps=1, custom_config=custom_config, data_accessor=_data_accessor())


# Every ranker's export/reload is covered by tests/test_rankers.py; here run_fn itself
# (TFX FnArgs, DataAccessor, strategy, BackupAndRestore) runs on a linear and a
# sequence ranker, which keeps the suite inside its time budget.
# lr reads raw examples (the pipeline's input), bst transformed ones (TrainerConfig's other mode).
@pytest.mark.parametrize("model_type,input_examples", [("lr", "raw"), ("bst", "transformed")])
def test_run_fn_trains_and_exports(model_type, input_examples, transformed_files, tmp_path):
    files, transform_dir, rows = transformed_files
    fn_args = _fn_args(files, transform_dir, tmp_path, input_examples=input_examples, model_type=model_type,
                       ranker_params=configs.RANKER_PARAMS[model_type])
    run_fn(fn_args)
    with open(os.path.join(fn_args.model_run_dir, "history.json")) as f:
        history = json.load(f)
    assert history["model_type"] == model_type and history["strategy"] == "mirrored"
    assert len(history["history"]["loss"]) == 1 and np.isfinite(history["history"]["loss"][0])
    assert "val_click_prob_auc" in history["history"]
    timing = history["train_timing"]  # models/training/train_timer.py (4 steps: too few for a steady state)
    assert timing["epochs"] == 1 and timing["seconds"] > 0 and timing["batch_size"] == 16
    # the click calibration (calibrate_click, on by default) was fitted on the 16 validation rows
    with open(os.path.join(fn_args.model_run_dir, "calibration.json")) as f:
        fit = json.load(f)
    assert fit["examples"] == 16 and ("a" in fit) != ("skipped" in fit), fit
    loaded = tf.saved_model.load(fn_args.serving_model_dir)
    raw = {k: tf.constant(v) for k, v in raw_batch(rows[:7], L).items()}
    out = loaded.signatures["serving_default"](**raw)
    assert out["click_prob"].shape == (7, 1) and out["watch_time_s"].shape == (7, 1)
    assert np.all((out["click_prob"].numpy() > 0) & (out["click_prob"].numpy() < 1))
    # TensorBoard: per-head curves (Keras) and the diagnostics (models/training/diagnostics.py)
    from tests.helpers.e2e_utils import tensorboard_tags

    tags = tensorboard_tags(fn_args.model_run_dir)
    assert {"epoch_loss", "epoch_click_prob_loss", "epoch_watch_time_s_loss", "learning_rate"} <= tags, tags
    if model_type == "bst":
        assert {"attention/transformer_0/weights", "attention/transformer_0/max_weight"} <= tags, tags
    # the rate decayed over the run's 4 steps (models/training/lr_schedule.py): the epoch ended
    # after the step at η_0 · (1 − 3/4); the model keeps the configured rate
    rate = fn_args.custom_config["ranker_params"].get("learning_rate", fn_args.custom_config["learning_rate"])
    if fn_args.custom_config["learning_rate_decay"] == "linear":
        assert _scalars(fn_args.model_run_dir, "learning_rate") == [pytest.approx(rate / 4)]
    # BackupAndRestore cleans its backup after a finished run
    assert not os.path.exists(os.path.join(fn_args.model_run_dir, "backup", "chief"))


def test_run_fn_rejects_unknown_model_type_and_strategy(transformed_files, tmp_path):
    files, transform_dir, _ = transformed_files
    with pytest.raises(ValueError, match="unknown model_type 'widedeep'"):
        run_fn(_fn_args(files, transform_dir, tmp_path, model_type="widedeep"))
    with pytest.raises(ValueError, match="unknown strategy 'tpu'"):
        run_fn(_fn_args(files, transform_dir, tmp_path, strategy="tpu"))


def test_run_fn_watch_heads_use_the_transform_graph_thresholds(transformed_files, tmp_path, monkeypatch):
    """WATCH_HEAD=cread+cqe: run_fn reads the EAD thresholds from the transform graph's
    asset (never recomputes them), trains CREAD + CQE, exports the three signatures."""
    from models.watch_time import ead, ead_analyzer
    from models.training.run_fn import ead_thresholds_from_transform_output

    def no_recompute(*args, **kwargs):
        raise AssertionError("run_fn must not recompute the EAD thresholds")

    monkeypatch.setattr(ead, "search_thresholds", no_recompute)
    monkeypatch.setattr(ead, "boundaries_from_samples", no_recompute)
    files, transform_dir, rows = transformed_files
    fn_args = _fn_args(files, transform_dir, tmp_path, model_type="baseline", watch_head="cread+cqe",
                       cqe=dict(configs.CQE, num_quantiles=9), ranker_params={"hidden_units": [8]})
    run_fn(fn_args)
    with open(os.path.join(fn_args.model_run_dir, "history.json")) as f:
        history = json.load(f)
    with open(os.path.join(transform_dir, "transform_fn", "assets", ead_analyzer.ASSET_FILENAME)) as f:
        asset = ead.EadResult.from_json(f.read())
    assert history["watch_head"] == "cread+cqe"
    assert history["ead_thresholds"] == asset.thresholds
    assert asset.thresholds == ead_thresholds_from_transform_output(tft.TFTransformOutput(transform_dir))
    assert {"val_cread_logits_loss", "val_quantiles_loss", "val_watch_time_s_mae"} <= set(history["history"])
    from tests.helpers.e2e_utils import tensorboard_tags

    assert {"quantiles/spread", "quantiles/spread_mean", "cread/survival"} <= tensorboard_tags(fn_args.model_run_dir)
    loaded = tf.saved_model.load(fn_args.serving_model_dir)
    assert {"serving_default", "serving_examples", "serving_dqc"} <= set(loaded.signatures)
    raw = {k: tf.constant(v) for k, v in raw_batch(rows[:7], L).items()}
    out = loaded.signatures["serving_default"](**raw)
    assert set(out) == {"click_prob", "watch_time_s", "ranking_score", "quantiles", "cse", "dqc", "cde"}
    assert out["quantiles"].shape == (7, 9)
    assert np.all(out["watch_time_s"].numpy() < asset.thresholds[-1])


def test_the_scoring_batch_size_changes_no_figure(transformed_files, tmp_path, monkeypatch):
    """Without eval_steps the model scores the validation split (Keras' validation pass, the
    Platt fit) and the train split (row importance) SCORING_BATCH_SIZE rows a call: the same
    figures whether the 16 validation rows come in one call or in four (5, 5, 5, 1)."""
    from models.publishing import row_importance
    from models.training import run_fn as run_fn_module

    files, transform_dir, _ = transformed_files
    batch_sizes = []  # (files, batch size) of every split run_fn reads
    read = run_fn_module.input_fn

    def recording_input_fn(file_pattern, data_accessor, tf_transform_output, batch_size, *args, **kwargs):
        batch_sizes.append((tuple(file_pattern), batch_size))
        return read(file_pattern, data_accessor, tf_transform_output, batch_size, *args, **kwargs)

    monkeypatch.setattr(run_fn_module, "input_fn", recording_input_fn)
    results = []
    for scoring_batch in (5, run_fn_module.SCORING_BATCH_SIZE):
        monkeypatch.setattr(run_fn_module, "SCORING_BATCH_SIZE", scoring_batch)
        batch_sizes.clear()
        out = tmp_path / str(scoring_batch)
        fn_args = _fn_args(files, transform_dir, out, model_type="lr", ranker_params=configs.RANKER_PARAMS["lr"],
                           deterministic=True)
        fn_args.eval_steps = None
        run_fn(fn_args)
        # the validation split, and the train split once more (row importance), at the scoring batch
        assert (tuple(files["raw"]["eval"]), scoring_batch) in batch_sizes, batch_sizes
        assert batch_sizes.count((tuple(files["raw"]["train"]), scoring_batch)) == 1, batch_sizes
        with open(os.path.join(fn_args.model_run_dir, "history.json")) as f:
            history = json.load(f)["history"]
        with open(os.path.join(fn_args.model_run_dir, "calibration.json")) as f:
            fit = json.load(f)
        results.append((history, fit, row_importance.read_row_importance(str(out))))
    (h5, fit5, rows5), (h, fit, rows) = results
    assert h5["loss"] == h["loss"]  # the same training
    for key in ("val_loss", "val_click_prob_auc", "val_click_prob_loss"):
        np.testing.assert_allclose(h5[key], h[key], rtol=1e-6, err_msg=key)
    assert fit5["examples"] == fit["examples"] == 16
    for key in ("a", "b", "logloss_before"):
        np.testing.assert_allclose(fit5[key], fit[key], rtol=1e-6, err_msg=key)
    assert rows5.keys() == rows.keys()
    for table in rows:
        np.testing.assert_array_equal(rows5[table]["touch_count"], rows[table]["touch_count"])


def test_shuffle_labels_permutes_every_label_together():
    """The diagnostic that trains the degraded candidate of the e2e gating test."""

    n = 64
    x = np.arange(n, dtype=np.float32)
    ds = tf.data.Dataset.from_tensors(({"x": x}, {"click_prob": x * 2, "watch_time_s": x * 3}))
    features, labels = next(iter(shuffle_labels(ds, seed=1)))
    click, watch = labels["click_prob"].numpy(), labels["watch_time_s"].numpy()
    np.testing.assert_array_equal(features["x"].numpy(), x)
    assert sorted(click) == sorted(x * 2)  # same labels ...
    np.testing.assert_allclose(watch, click * 1.5)  # ... one permutation for all of them
    assert np.mean(click != x * 2) > 0.9  # ... detached from their features


def test_a_split_over_the_memory_budget_streams_the_same_rows(transformed_files):
    """input_fn(in_memory=True, memory_budget_bytes=...): within the budget the split is held
    in memory; over it (here 1 byte) the same rows stream through the shuffle buffer."""
    files, transform_dir, rows = transformed_files
    tft_output = tft.TFTransformOutput(transform_dir)

    def rows_of(**kwargs):
        ds = input_fn(files["raw"]["train"], _data_accessor(), tft_output, 16, True, raw=True,
                      shuffle_buffer_size=64, in_memory=True, **kwargs)
        got = [(f, y) for f, y in ds.as_numpy_iterator()]
        return sorted(zip(np.concatenate([f[F.transformed_name("video_id")] for f, _ in got]).tolist(),
                          np.concatenate([y["click_prob"] for _, y in got]).reshape(-1).tolist()))

    held = rows_of(memory_budget_bytes=10**9)
    streamed = rows_of(memory_budget_bytes=1)
    assert len(held) == 48 and held == streamed


def test_a_split_the_artifact_counts_over_the_budget_streams(transformed_files, monkeypatch, caplog):
    """With the Examples artifact's row count (LogExampleGen's num_examples.json) the first
    batch decides: a split counted at 10^7 rows streams under a budget its 48 rows fit in."""
    from models.training import input as input_lib

    files, transform_dir, _ = transformed_files
    tft_output = tft.TFTransformOutput(transform_dir)
    seen = []
    monkeypatch.setattr(input_lib, "split_rows", lambda pattern: seen.append(pattern) or 10**7)
    with caplog.at_level("WARNING"):
        ds = input_fn(files["raw"]["train"], _data_accessor(), tft_output, 16, True, raw=True,
                      shuffle_buffer_size=64, in_memory=True, memory_budget_bytes=10**8)
    assert seen == [files["raw"]["train"]]
    assert "expected for the split's 10000000 rows" in caplog.text and "after 48 rows" in caplog.text
    assert "streaming the split" in caplog.text
    assert sum(len(y["click_prob"]) for _, y in ds.as_numpy_iterator()) == 48


def test_every_split_calls_one_trace_of_the_transform_graph(transformed_files):
    """input_fn(raw=True) maps each split through input.transform_fn: the transform graph is
    traced once for the three input pipelines of a Trainer run (not once per dataset), and
    each gives the transform graph's rows (those of the transformed files)."""
    from models.training import input as input_lib

    files, transform_dir, _ = transformed_files
    tft_output = tft.TFTransformOutput(transform_dir)
    splits = ("train", "eval", "train")
    raw = [input_fn(files["raw"][s], _data_accessor(), tft_output, 16, False, raw=True) for s in splits]
    assert input_lib.transform_fn(tft_output).experimental_get_tracing_count() == 1
    for split, ds in zip(splits, raw):
        expected = input_fn(files["transformed"][split], _data_accessor(), tft_output, 16, False)
        for (f, y), (f0, y0) in zip(ds.as_numpy_iterator(), expected.as_numpy_iterator(), strict=True):
            assert set(f) == set(f0) and set(y) == set(y0)
            for k in f0:
                np.testing.assert_array_equal(f[k], f0[k], err_msg=k)
            for k in y0:
                np.testing.assert_array_equal(y[k], y0[k], err_msg=k)
