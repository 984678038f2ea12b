"""TFX Trainer entry point: `run_fn(fn_args)` trains, logs to TensorBoard, exports.

The ranker is chosen by `model_type` in the Trainer custom_config
(pipeline/configs.py MODEL_TYPE): "lr", "baseline", "xdeepfm", "din" or "bst"
(`RANKERS`); its hyperparameters come in `ranker_params`. Training runs under the
tf.distribute strategy named by `strategy` (models/strategies.py), with
BackupAndRestore checkpoints under `<model_run_dir>/backup`. TensorBoard logs go to
`<model_run_dir>`: Keras' per-head losses and metrics, and the learning rate,
attention-weight and quantile-spread diagnostics (models/training_diagnostics.py).

The exported SavedModel carries the transform graph and two signatures
(`serving_signatures`, also used by the tests and the benchmark):

- `serving_default`: raw features as named tensors (JSON-friendly; the history as
  fixed-length padded lists of length L), the REST clients' signature;
- `serving_examples`: serialized tf.Examples (what TFMA feeds the Evaluator).

- `serving_dqc`: the raw named tensors plus `dqc_k` [B] (float, in [0, 1]): the DQC
  weight per request (CQE: dqc = k·t_low + (1 − k)·t_high). TF Serving signatures
  have no optional inputs, so `serving_default` uses the configured default k and
  this third signature takes k explicitly; it is only exported with the CQE head.

Outputs (names stable across heads): "click_prob" [B, 1], "watch_time_s" [B, 1]
(expected watch time from the configured watch head: regression, CREAD restoration,
or CQE's CDE; with "cread+cqe" the CREAD restoration), "ranking_score" [B, 1]
(formula `ranking_score`, models/heads.py RANKING_FORMULAS) and, with the CQE head,
"quantiles" [B, N], "cse", "dqc", "cde" [B, 1].

Watch heads (`watch_head` in the config, pipeline/configs.py WATCH_HEAD):
"regression" | "cread" | "cqe" | "cread+cqe". CREAD uses the EAD thresholds Transform
learnt on the train split, read from the transform graph's asset
(`ead_thresholds_from_transform_output`), never recomputed.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402
import shutil  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from models import features as F  # noqa: E402
from models.training import strategies  # noqa: E402
from models.training import diagnostics as training_diagnostics  # noqa: E402
from models.rankers.baseline import build_baseline, build_logistic_regression  # noqa: E402
from models.rankers.bst import build_bst  # noqa: E402
from models.rankers.din import build_din  # noqa: E402
from models.watch_time import ead  # noqa: E402
from models import heads as heads_lib  # noqa: E402
from models.heads import CLICK_OUTPUT, WATCH_OUTPUT  # noqa: E402
from models.rankers.xdeepfm import build_xdeepfm  # noqa: E402

LABEL_KEYS = {CLICK_OUTPUT: F.LABEL_CLICK, WATCH_OUTPUT: F.LABEL_WATCH}

# model_type -> builder(vocab_sizes, history_length, *, embedding_dim, oov_buckets,
#                        learning_rate, loss_weights, **ranker_params)
RANKERS = {
    "lr": build_logistic_regression,
    "baseline": build_baseline,
    "xdeepfm": build_xdeepfm,
    "din": build_din,
    "bst": build_bst,
}


def build_ranker(model_type: str, vocab_sizes: dict, history_length: int, hp: dict = None,
                 heads=None, ead_thresholds=None) -> keras.Model:
    """Builds and compiles the ranker `model_type` from the trainer hyperparameters `hp`
    (embedding_dim, oov_buckets, learning_rate, loss weights, ranker_params, watch_head,
    ranking_score, cread, cqe). Without `heads`, they come from `hp`
    (heads.heads_from_config; CREAD needs `ead_thresholds`)."""
    if model_type not in RANKERS:
        raise ValueError(f"unknown model_type {model_type!r}; known: {sorted(RANKERS)}")
    hp = dict(hp or {})
    if heads is None:
        heads = heads_lib.heads_from_config(hp, ead_thresholds)
    params = dict(hp.get("ranker_params") or {})
    if model_type == "baseline" and "hidden_units" not in params and "hidden_units" in hp:
        params["hidden_units"] = tuple(hp["hidden_units"])
    kwargs = dict(embedding_dim=int(hp.get("embedding_dim", 16)),
                  oov_buckets=int(hp.get("oov_buckets", 1)),
                  learning_rate=float(hp.get("learning_rate", 1e-3)),
                  loss_weights=heads_lib.loss_weights_from_config(hp),
                  heads=heads)
    kwargs.update(params)  # a ranker may override e.g. its learning rate
    try:
        return RANKERS[model_type](vocab_sizes, history_length, **kwargs)
    except TypeError as e:
        raise ValueError(f"bad ranker_params {sorted(params)} for model_type {model_type!r}: {e}") from e


def ead_thresholds_from_transform_output(tf_transform_output) -> list:
    """The EAD thresholds t_1..t_M Transform learnt (the JSON asset of the transform
    graph, models/ead.py ASSET_FILENAME): the same constants the graph buckets with."""
    path = tf_transform_output.vocabulary_file_by_name("ead_thresholds")
    with tf.io.gfile.GFile(path, "r") as f:
        return list(ead.EadResult.from_json(f.read()).thresholds)


def label_keys_for(model) -> dict:
    """{output name: transformed label key} for every output of `model` with a loss."""
    return {o: heads_lib.OUTPUT_LABELS[o] for o in model.output_names if o in heads_lib.OUTPUT_LABELS}


def input_fn(file_pattern, data_accessor, tf_transform_output, batch_size, shuffle, num_epochs=1,
             label_keys=None, shuffle_buffer_size=10000):
    """Transformed examples -> (features, {output name: label}) batches.

    LogExampleGen writes each user's rows together (histories are built per user) and
    the file order drifts (real train split: click rate 0.40 in the first 10k rows,
    0.50 in the last 15k), so a shuffle buffer much smaller than the split trains the
    last steps on a biased slice of users: keep `shuffle_buffer_size` (configs
    SHUFFLE_BUFFER_SIZE) at least the train split's size."""
    from tfx_bsl.public import tfxio  # heavy; imported only where the Trainer needs it

    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle,
                                       shuffle_buffer_size=int(shuffle_buffer_size), shuffle_seed=0),
        tf_transform_output.transformed_metadata.schema,
    )
    return dataset.map(lambda batch: split_labels(batch, label_keys))


def split_labels(batch, label_keys=None):
    """(features, labels): labels keyed by output name (`label_keys`, default
    LABEL_KEYS); every label-like key (is_click, watch_time_s, the transformed
    watch_time_bucket) is removed from the features."""
    batch = dict(batch)
    label_keys = LABEL_KEYS if label_keys is None else label_keys
    labels = {out: batch[label] for out, label in label_keys.items()}
    for key in F.LABELS + [F.WATCH_BUCKET_LABEL]:
        batch.pop(key, None)
    return batch, labels


def shuffle_labels(dataset, seed: int):
    """Diagnostic only (custom_config `shuffle_labels_seed`): permutes the labels of each
    (features, labels) batch, one permutation shared by every label, so the features no
    longer predict them while their joint distribution is unchanged. Trains a
    deliberately degraded candidate (tests/test_e2e_pipeline.py, gating); never set it in production."""
    def permute(features, labels):
        n = tf.shape(next(iter(labels.values())))[0]
        perm = tf.random.shuffle(tf.range(n), seed=seed)
        return features, {out: tf.gather(label, perm) for out, label in labels.items()}

    return dataset.map(permute)


def vocab_sizes(tf_transform_output) -> dict:
    return {key: tf_transform_output.vocabulary_size_by_name(F.vocab_name(key))
            for key in F.ID_FEATURES + F.STRING_FEATURES}


def serving_signatures(model, tf_transform_output, history_length: int) -> dict:
    """`serving_default` (raw named tensors) and `serving_examples` (tf.Examples), both
    applying the transform graph then the model. Attaches the TFT layer to `model`."""
    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = F.raw_feature_spec(history_length)
    serving_spec = {k: raw_spec[k] for k in F.SERVING_RAW_FEATURES}

    cqe_layer = _find_layer(model, "cqe")
    formula = _ranking_formula(model)

    def run(raw_features, dqc_k=None):
        transformed = model.tft_layer(raw_features)
        inputs = {k: transformed[k] for k in model.input_names}
        outputs = dict(model(inputs, training=False))
        for key in heads_lib.TRAINING_ONLY_OUTPUTS:
            outputs.pop(key, None)
        if dqc_k is not None:  # DQC with the request's k, and a ranking score that may use it
            from models.watch_time.cqe import interpolate_quantile

            q = outputs[heads_lib.QUANTILES_OUTPUT]
            k = tf.reshape(tf.clip_by_value(tf.cast(dqc_k, q.dtype), 0.0, 1.0), [-1, 1])
            t_high = tf.reshape(interpolate_quantile(q, cqe_layer.tau_high, cqe_layer.taus), [-1, 1])
            outputs[heads_lib.DQC_OUTPUT] = k * outputs[heads_lib.CSE_OUTPUT] + (1.0 - k) * t_high
            if formula is not None:
                outputs[heads_lib.RANKING_OUTPUT] = heads_lib.ranking_score(outputs, formula)
        return {name: tf.identity(value, name=name) for name, value in outputs.items()}

    raw_signature = {
        k: tf.TensorSpec([None] + list(spec.shape), spec.dtype, name=k) for k, spec in serving_spec.items()
    }

    @tf.function(input_signature=[raw_signature])
    def serve_raw(raw_features):
        return run(dict(raw_features))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(serialized):
        return run(tf.io.parse_example(serialized, serving_spec))

    signatures = {
        "serving_default": serve_raw.get_concrete_function(),
        "serving_examples": serve_examples.get_concrete_function(),
    }
    if cqe_layer is not None:
        dqc_signature = dict(raw_signature, dqc_k=tf.TensorSpec([None], tf.float32, name="dqc_k"))

        @tf.function(input_signature=[dqc_signature])
        def serve_dqc(request):
            request = dict(request)
            k = request.pop("dqc_k")
            return run(request, dqc_k=k)

        signatures["serving_dqc"] = serve_dqc.get_concrete_function()
    return signatures


def _find_layer(model, name):
    try:
        return model.get_layer(name)
    except ValueError:
        return None


def _ranking_formula(model):
    layer = _find_layer(model, heads_lib.RANKING_OUTPUT)
    return getattr(layer, "formula", None)


def export_serving_model(model, tf_transform_output, history_length: int, export_dir: str) -> str:
    """Saves `model` with the serving signatures to `export_dir` (a SavedModel that
    tf.saved_model.load / TF Serving read without any custom-object registry)."""
    signatures = serving_signatures(model, tf_transform_output, history_length)
    model.save(export_dir, save_format="tf", signatures=signatures)
    return export_dir


def fit_ranker(model, train_data, epochs: int, validation_data=None, callbacks=(), keep_best_epoch=True,
               monitor=f"val_{CLICK_OUTPUT}_auc", verbose=2, **fit_kwargs):
    """model.fit; with validation data and epochs > 1, stops once `monitor` (validation
    click AUC) stops improving and restores the best epoch's weights (the one-epoch
    phenomenon, DESIGN.md §6). Returns the Keras History."""
    callbacks = list(callbacks)
    if keep_best_epoch and validation_data is not None and epochs > 1:
        callbacks.append(keras.callbacks.EarlyStopping(monitor=monitor, mode="max", patience=1,
                                                       restore_best_weights=True))
    return model.fit(train_data, validation_data=validation_data, epochs=epochs, callbacks=callbacks,
                     verbose=verbose, **fit_kwargs)


def make_strategy(hp: dict):
    return strategies.make_strategy(
        hp.get("strategy", "mirrored"),
        ps_min_shard_bytes=int(hp.get("ps_min_shard_bytes", 256 << 10)),
        ps_max_shards=hp.get("ps_max_shards"))


def run_fn(fn_args):
    """Trains the configured ranker and saves it to `fn_args.serving_model_dir`."""
    hp = dict(fn_args.custom_config or {})
    history_length = int(hp.get("history_length", 50))
    batch_size = int(hp.get("batch_size", 256))
    epochs = int(hp.get("epochs", 1))
    tf.random.set_seed(int(hp.get("seed", 0)))
    model_type = hp.get("model_type", "baseline")
    if model_type not in RANKERS:  # fail before any data is read
        raise ValueError(f"unknown model_type {model_type!r}; known: {sorted(RANKERS)}")

    import tensorflow_transform as tft

    strategy = make_strategy(hp)
    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    thresholds = None
    if "cread" in hp.get("watch_head", "regression"):
        thresholds = ead_thresholds_from_transform_output(tf_transform_output)
    with strategy.scope():
        model = build_ranker(model_type, vocab_sizes(tf_transform_output), history_length, hp,
                             ead_thresholds=thresholds)
    label_keys = label_keys_for(model)

    def train_dataset(input_context=None):
        ds = input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output,
                      input_context.get_per_replica_batch_size(batch_size) if input_context else batch_size,
                      True, num_epochs=None if input_context else 1, label_keys=label_keys,
                      shuffle_buffer_size=int(hp.get("shuffle_buffer_size", 10000)))
        if hp.get("shuffle_labels_seed") is not None:
            ds = shuffle_labels(ds, int(hp["shuffle_labels_seed"]))
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
        validation = input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output, batch_size, False,
                              label_keys=label_keys)
        if fn_args.eval_steps:
            validation = validation.take(fn_args.eval_steps)

    run_dir = strategies.write_dir(fn_args.model_run_dir)
    callbacks = [keras.callbacks.TensorBoard(log_dir=run_dir, update_freq="epoch"),
                 keras.callbacks.BackupAndRestore(backup_dir=os.path.join(fn_args.model_run_dir, "backup"))]
    if validation is not None:  # learning rate, attention weights, quantile spread on a fixed batch
        probe_features, _ = next(iter(validation))
        callbacks.append(training_diagnostics.TrainingDiagnostics(run_dir, probe_features))
    history = fit_ranker(model, train_data, epochs, validation_data=validation, callbacks=callbacks,
                         **fit_kwargs)
    tf.io.gfile.makedirs(run_dir)
    with tf.io.gfile.GFile(os.path.join(run_dir, "history.json"), "w") as f:
        json.dump({"model_type": model_type, "strategy": hp.get("strategy", "mirrored"),
                   "watch_head": hp.get("watch_head", "regression"), "ead_thresholds": thresholds,
                   "params": int(model.count_params()),
                   "history": {k: [float(x) for x in v] for k, v in history.history.items()}}, f)

    export_dir = strategies.write_dir(fn_args.serving_model_dir)
    export_serving_model(model, tf_transform_output, history_length, export_dir)
    if export_dir != fn_args.serving_model_dir:  # non-chief worker: its copy is discarded
        shutil.rmtree(export_dir, ignore_errors=True)
