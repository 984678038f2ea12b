"""TFX Trainer entry point: `run_fn(fn_args)` trains, logs to TensorBoard, exports.

The exported SavedModel carries the transform graph and two signatures:

- `serving_default`: raw features as named tensors (JSON-friendly; the history as
  fixed-length padded lists of length L), the REST clients' signature;
- `serving_examples`: serialized tf.Examples (what TFMA feeds the Evaluator).

Both return {"click_prob": [B, 1], "watch_time_s": [B, 1]}.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402

import tensorflow as tf  # noqa: E402
import tensorflow_transform as tft  # noqa: E402
import tf_keras as keras  # noqa: E402
from tfx_bsl.public import tfxio  # noqa: E402

from models import features as F  # noqa: E402
from models.baseline import build_baseline  # noqa: E402

LABEL_KEYS = {"click_prob": F.LABEL_CLICK, "watch_time_s": F.LABEL_WATCH}


def _input_fn(file_pattern, data_accessor, tf_transform_output, batch_size, shuffle):
    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, num_epochs=1, shuffle=shuffle, shuffle_seed=0),
        tf_transform_output.transformed_metadata.schema,
    )

    def split(batch):
        labels = {out: batch.pop(label) for out, label in LABEL_KEYS.items()}
        return batch, labels

    return dataset.map(split)


def _vocab_sizes(tf_transform_output):
    return {key: tf_transform_output.vocabulary_size_by_name(F.vocab_name(key))
            for key in F.ID_FEATURES + F.STRING_FEATURES}


def _serving_signatures(model, tf_transform_output, history_length):
    model.tft_layer = tf_transform_output.transform_features_layer()
    raw_spec = F.raw_feature_spec(history_length)
    serving_spec = {k: raw_spec[k] for k in F.SERVING_RAW_FEATURES}

    def run(raw_features):
        transformed = model.tft_layer(raw_features)
        inputs = {k: transformed[k] for k in model.input_names}
        outputs = model(inputs, training=False)
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

    return {
        "serving_default": serve_raw.get_concrete_function(),
        "serving_examples": serve_examples.get_concrete_function(),
    }


def run_fn(fn_args):
    """Trains the configured ranker and saves it to `fn_args.serving_model_dir`."""
    hp = dict(fn_args.custom_config or {})
    history_length = int(hp.get("history_length", 50))
    batch_size = int(hp.get("batch_size", 256))
    epochs = int(hp.get("epochs", 1))
    tf.random.set_seed(int(hp.get("seed", 0)))

    tf_transform_output = tft.TFTransformOutput(fn_args.transform_output)
    train_ds = _input_fn(fn_args.train_files, fn_args.data_accessor, tf_transform_output, batch_size, True)
    eval_ds = _input_fn(fn_args.eval_files, fn_args.data_accessor, tf_transform_output, batch_size, False)
    if fn_args.train_steps:
        train_ds = train_ds.repeat().take(fn_args.train_steps)
    if fn_args.eval_steps:
        eval_ds = eval_ds.take(fn_args.eval_steps)

    model_type = hp.get("model_type", "baseline")
    if model_type != "baseline":
        raise ValueError(f"unknown model_type {model_type!r}; known: ['baseline']")
    model = build_baseline(
        _vocab_sizes(tf_transform_output),
        history_length,
        embedding_dim=int(hp.get("embedding_dim", 16)),
        hidden_units=tuple(hp.get("hidden_units", (128, 64))),
        oov_buckets=int(hp.get("oov_buckets", 1)),
        learning_rate=float(hp.get("learning_rate", 1e-3)),
        loss_weights={"click_prob": float(hp.get("loss_weight_click", 1.0)),
                      "watch_time_s": float(hp.get("loss_weight_watch", 1.0))},
    )
    tensorboard = keras.callbacks.TensorBoard(log_dir=fn_args.model_run_dir, update_freq="epoch")
    history = model.fit(train_ds, validation_data=eval_ds, epochs=epochs, callbacks=[tensorboard], verbose=2)
    with tf.io.gfile.GFile(os.path.join(fn_args.model_run_dir, "history.json"), "w") as f:
        json.dump({k: [float(x) for x in v] for k, v in history.history.items()}, f)

    signatures = _serving_signatures(model, tf_transform_output, history_length)
    model.save(fn_args.serving_model_dir, save_format="tf", signatures=signatures)
