"""TFX Trainer entry point: `run_fn(fn_args)` trains, logs to TensorBoard, exports.

Every setting comes in the Trainer's custom_config as a `TrainerConfig`
(models/training/config.py; values in pipeline/configs/ TRAINER): the ranker
`model_type` (models/rankers RANKERS) and its `ranker_params`, the watch head
("regression" | "cread" | "cqe" | "cread+cqe"), loss weights, batch size, shuffle
buffer, epochs and the tf.distribute `strategy` (models/training/strategies.py), and
the speed knobs (steps_per_execution, jit_compile, input_in_memory: #15).
Training keeps BackupAndRestore checkpoints under `<model_run_dir>/backup`;
TensorBoard logs go to `<model_run_dir>`: Keras' per-head losses and metrics, and the
learning rate, attention-weight and quantile-spread diagnostics
(models/training/diagnostics.py). CREAD uses the EAD thresholds Transform learnt on
the train split, read from the transform graph's asset, never recomputed.

After training, the click logit's Platt calibration (a, b) is fitted on the validation split
when `calibrate_click` (models/heads/calibration.py; `<model_run_dir>/calibration.json`); it
is reset to the identity after a warm start's restore, so fits never stack.

The SavedModel is written by models/training/export.py (signatures `serving_default`,
`serving_examples`, and `serving_dqc` with the CQE head).

Warm start (#14, models/training/warm_start.py): with a `base_model` (the pipeline's
Resolver on the latest Model) that saved its state, the weights and optimizer state are
restored (embedding rows remapped by vocabulary token) before one pass over the span;
history.json's "warm_start" holds the loss of the first training batch before
(cold initialisation) and after the restore. Every run saves its state beside the SavedModel.
`input_examples="raw"`: the Trainer reads LogExampleGen's examples and applies the
transform graph in input_fn (models/training/input.py).
"""
import os
import json
import shutil

import tensorflow as tf
from absl import logging
import tf_keras as keras

from models.heads import CLICK_OUTPUT
from models.heads import calibration
from models.publishing import row_importance
from models.rankers.registry import build_ranker, check_model_type
from models.training import determinism
from models.training import lr_schedule
from models.training import diagnostics as training_diagnostics
from models.training import strategies
from models.training import warm_start
from models.training.config import TrainerConfig
from models.training.epoch_callbacks import EpochProgbarLogger, EpochTensorBoard
from models.training.export import export_serving_model
from models.training.input import input_fn, label_keys_for, shuffle_labels, vocab_sizes
from models.training.split_counts import split_rows
from models.training.train_timer import TrainTimer
from models.watch_time import ead_analyzer


# Rows per model call when the model scores a whole split: Keras' validation pass, the conformal
# and Platt fits on the validation split, row importance's pass over the train split. What they
# compute does not depend on it (Keras weighs each batch's validation loss by its rows); at the
# training batch size every call paid its fixed dispatch cost for 64 rows.
SCORING_BATCH_SIZE = 1024


def ead_thresholds_from_transform_output(tf_transform_output) -> list:
    """The EAD thresholds t_1..t_M Transform learnt (the transform graph's asset, read by
    models/watch_time/ead_analyzer.py): the same constants the graph buckets with."""
    return list(ead_analyzer.read_ead_result(tf_transform_output).thresholds)


def fit_ranker(model, train_data, epochs: int, validation_data=None, callbacks=(), keep_best_epoch=True,
               monitor=f"val_{CLICK_OUTPUT}_auc", verbose=2, **fit_kwargs):
    """model.fit; with validation data and epochs > 1, stops once `monitor` (validation
    click AUC) stops improving and restores the best epoch's weights (the one-epoch
    phenomenon, DESIGN.md §6). Returns the Keras History.

    The variables Keras would make in the first training step are made first (Adam's
    slots, the per-output loss means): a tf.function whose first call creates variables is
    traced twice (creating them, then without), so Keras traced its train_function twice
    (3.9-4.6 s each for the CLI test's baseline ranker)."""
    with model.distribute_strategy.scope():
        model.optimizer.build(model.trainable_variables)
        if not model.compiled_loss.built:
            model.compiled_loss.build(model.output)
    callbacks = list(callbacks)
    if verbose and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
        # Keras' own logger would update its bar at every batch (epoch_callbacks.py)
        callbacks.append(EpochProgbarLogger())
    if keep_best_epoch and validation_data is not None and epochs > 1:
        callbacks.append(keras.callbacks.EarlyStopping(monitor=monitor, mode="max", patience=1,
                                                       restore_best_weights=True))
    return model.fit(train_data, validation_data=validation_data, epochs=epochs, callbacks=callbacks,
                     verbose=verbose, **fit_kwargs)


def make_strategy(config: TrainerConfig):
    return strategies.make_strategy(config.strategy, ps_min_shard_bytes=config.ps_min_shard_bytes,
                                    ps_max_shards=config.ps_max_shards)


def run_fn(fn_args):
    """Trains the configured ranker and saves it to `fn_args.serving_model_dir`."""
    config = TrainerConfig.from_custom_config(fn_args.custom_config)
    check_model_type(config.model_type)  # fail before any data is read
    if config.deterministic:
        determinism.enable_determinism()
        if not config.input_in_memory:
            logging.warning("deterministic training with streaming input (input_in_memory=False): the "
                            "shuffle follows the example files' row order, so runs reproduce only on the "
                            "same example files, not on a rerun of LogExampleGen")
    # Python's random, NumPy and TensorFlow: tf-keras draws an unseeded initializer's seed from
    # Python's random module, so tf.random.set_seed alone leaves the initial weights per process
    keras.utils.set_random_seed(config.seed)

    import tensorflow_transform as tft

    strategy = make_strategy(config)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    thresholds = None
    if "cread" in config.watch_head:
        thresholds = ead_thresholds_from_transform_output(tf_transform_output)
    with strategy.scope():
        model = build_ranker(config, vocab_sizes(tf_transform_output), ead_thresholds=thresholds)
    label_keys = label_keys_for(model)
    batch_size, epochs = config.batch_size, config.epochs
    raw = config.input_examples == "raw"
    # a split larger than this streams instead of being held in memory (input_fn)
    budget = config.input_memory_budget_mb * 2**20 if config.input_memory_budget_mb else None

    def train_dataset(input_context=None):
        ds = input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output,
                      input_context.get_per_replica_batch_size(batch_size) if input_context else batch_size,
                      True, num_epochs=None if input_context else 1, label_keys=label_keys,
                      shuffle_buffer_size=config.shuffle_buffer_size, raw=raw,
                      in_memory=config.input_in_memory, seed=config.seed, canonical=config.deterministic,
                      memory_budget_bytes=budget)
        if config.shuffle_labels_seed is not None:
            ds = shuffle_labels(ds, config.shuffle_labels_seed)
        if input_context:
            ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds

    fit_kwargs, validation = {}, None
    if strategies.is_parameter_server(strategy):
        if not fn_args.train_steps:
            raise ValueError("strategy 'parameter_server' needs train_steps (TrainArgs.num_steps): "
                             "the coordinator cannot detect the end of the data")
        train_data = keras.utils.experimental.DatasetCreator(train_dataset)
        fit_kwargs["steps_per_epoch"] = max(1, fn_args.train_steps // epochs)
    else:
        train_data = train_dataset()
        if fn_args.train_steps:
            train_data = train_data.repeat().take(fn_args.train_steps)
        # fn_args.eval_files: the pipeline's "validation" split (the last train day), never the
        # eval days the Evaluator scores (pipeline.py EvalArgs)
        # eval_steps (TFX EvalArgs.num_steps) counts batches of the training batch size
        validation = input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output,
                              batch_size if fn_args.eval_steps else SCORING_BATCH_SIZE, False,
                              label_keys=label_keys, raw=raw, in_memory=config.input_in_memory,
                              canonical=config.deterministic, memory_budget_bytes=budget)
        if fn_args.eval_steps:
            validation = validation.take(fn_args.eval_steps)

    run_dir = strategies.write_dir(fn_args.model_run_dir)
    callbacks = [EpochTensorBoard(run_dir),
                 keras.callbacks.BackupAndRestore(backup_dir=os.path.join(fn_args.model_run_dir, "backup"))]
    if validation is not None:  # learning rate, attention weights, quantile spread on a fixed batch
        probe_features = {k: v[:batch_size] for k, v in next(iter(validation))[0].items()}
        callbacks.append(training_diagnostics.TrainingDiagnostics(run_dir, probe_features))
    vocabularies = warm_start.read_vocabularies(tf_transform_output)
    warm = _warm_start(model, strategy, fn_args, config, vocabularies, train_dataset)
    calibration.reset(model)  # a warm start restored the last fit: train uncalibrated, refit below
    first_loss, timer = _FirstStepLoss(), TrainTimer(batch_size)
    callbacks += [first_loss, timer]
    if not (warm and "restored" in warm and config.warm_start_learning_rate is not None):
        # a full run's rate decays over its steps; a warm start keeps warm_start_learning_rate.
        # The steps count from here (after a warm start's restore), also when BackupAndRestore
        # resumes a preempted run with its later step count
        callbacks += lr_schedule.decay_callbacks(config, split_rows(fn_args.train_files), epochs,
                                                 train_steps=fn_args.train_steps,
                                                 optimizer=model.optimizer)
    history = fit_ranker(model, train_data, epochs, validation_data=validation, callbacks=callbacks,
                         **fit_kwargs)
    if warm is not None:
        warm["first_train_step_loss"] = first_loss.loss
    tf.io.gfile.makedirs(run_dir)
    with tf.io.gfile.GFile(os.path.join(run_dir, "history.json"), "w") as f:
        json.dump({"model_type": config.model_type, "strategy": config.strategy,
                   "watch_head": config.watch_head, "ead_thresholds": thresholds,
                   "params": int(model.count_params()), "warm_start": warm, "train_timing": timer.summary(),
                   "history": {k: [float(x) for x in v] for k, v in history.history.items()}}, f)

    if config.cqe.get("conformal") and "cqe" in config.watch_head and validation is not None:
        # split-conformal quantile levels on the validation split, baked into the model (#13)
        from models.watch_time import conformal
        conformal_fit = conformal.fit_model_levels(model, validation)
        with tf.io.gfile.GFile(os.path.join(run_dir, "conformal.json"), "w") as f:
            json.dump(conformal_fit, f)

    if config.calibrate_click:  # Platt scaling of the click logit on the validation split (#37)
        fit = (calibration.fit_model(model, validation) if validation is not None
               else {"skipped": "no validation split (parameter_server strategy)"})
        if "skipped" in fit:
            logging.warning("click calibration skipped: %s", fit["skipped"])
        with tf.io.gfile.GFile(os.path.join(run_dir, "calibration.json"), "w") as f:
            json.dump(fit, f)

    export_dir = strategies.write_dir(fn_args.serving_model_dir)
    export_serving_model(model, tf_transform_output, config.history_length, export_dir)
    if export_dir != fn_args.serving_model_dir:  # non-chief worker: its copy is discarded
        shutil.rmtree(export_dir, ignore_errors=True)
    else:  # per-row optimizer state, touches and L2 norm beside the SavedModel, for the Publisher (#10)
        row_importance.write_row_importance(model, input_fn(
            fn_args.train_files, fn_args.data_accessor, tf_transform_output, SCORING_BATCH_SIZE, False,
            label_keys=label_keys, raw=raw, in_memory=config.deterministic,
            canonical=config.deterministic,  # float sums in one order
            memory_budget_bytes=budget),
            os.path.dirname(fn_args.serving_model_dir))
        warm_start.save(model, vocabularies, os.path.dirname(fn_args.serving_model_dir))  # the next run's start
        warm_start.record_origin(os.path.dirname(fn_args.serving_model_dir),  # which model it continues
                                 warm_start.model_uri_of(warm["base_model"]) if warm and "restored" in warm else None)


class _FirstStepLoss(keras.callbacks.Callback):
    """The first training step's loss. Reads Keras' logs as tensors (`_supports_tf_logs`) and
    only once: a callback that wants numpy logs makes Keras copy every step's logs to Python,
    a sync per step (a LambdaCallback did, and Keras warned it was slower than the step)."""

    def __init__(self):
        super().__init__()
        self._supports_tf_logs = True
        self.loss = None

    def on_train_batch_end(self, batch, logs=None):
        if self.loss is None:
            value = (logs or {}).get("loss", float("nan"))
            if hasattr(value, "fetch"):  # a parameter-server coordinator's RemoteValue
                value = value.fetch()
            self.loss = float(value)


def _warm_start(model, strategy, fn_args, config: TrainerConfig, vocabularies, train_dataset):
    """Restores `fn_args.base_model`'s saved state into `model` (module doc); None without one.
    Returns {"base_model", "restored", "loss_before", "loss_after"}: the loss of one training
    batch at the cold initialisation and after the restore (same batch, no update)."""
    warm_dir = warm_start.warm_dir_of(getattr(fn_args, "base_model", None))
    if warm_dir is None or strategies.is_parameter_server(strategy):
        return None
    features, labels = next(iter(train_dataset()))
    before = model.test_on_batch(features, labels, return_dict=True)["loss"]
    try:
        with strategy.scope():
            report = warm_start.restore(model, warm_dir, vocabularies, config.oov_buckets)
    except ValueError as e:  # another architecture (config changed): train from scratch, say so
        logging.warning("warm start skipped: %s", e)
        return {"base_model": fn_args.base_model, "skipped": str(e), "loss_before": float(before)}
    after = model.test_on_batch(features, labels, return_dict=True)["loss"]
    if config.warm_start_learning_rate is not None:  # the continuous phase's own rate
        model.optimizer.learning_rate = config.warm_start_learning_rate
    return {"base_model": fn_args.base_model, "restored": report, "loss_before": float(before),
            "loss_after": float(after), "learning_rate": float(model.optimizer.learning_rate.numpy())}
