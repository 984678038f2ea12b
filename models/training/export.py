"""Export: the trained ranker + the transform graph as a SavedModel with its signatures.

- `serving_default`: raw features as named tensors (JSON-friendly; the history as
  fixed-length padded lists of length L), the REST clients' signature;
- `serving_examples`: serialized tf.Examples (what TFMA feeds the Evaluator), parsed and
  passed to `serving_default`'s function (a call op: the model is traced once for both);
- `serving_rank`: one user, N candidates. The user-side inputs
  (`features.USER_CONTEXT_FEATURES`: profile, request context, history) have batch 1,
  the candidate-side inputs (`features.CANDIDATE_FEATURES`) batch N. The transform graph
  (row-wise: every output row depends on its own input row) runs once on the request as
  sent, so the user side is transformed once (batch 1) and broadcast to N rows before the
  model, except the [L]-long history inputs of a model that takes them with 1 row
  (`row_broadcast.takes_one_row_history`, DIN): they keep a static batch of 1 and the
  model broadcasts inside its layers (history embedded and projected once per request).
  outputs[i] = serving_default(user ⊕ candidate_i) (REST: TF Serving's columnar
  `inputs` form, which allows different dimension 0); standard ops only (BroadcastTo);
- `serving_dqc` (CQE head only): the raw named tensors plus `dqc_k` [B] (float, in
  [0, 1]): the DQC weight per request (dqc = k·t_low + (1 − k)·t_high). TF Serving
  signatures have no optional inputs, so `serving_default` uses the configured
  default k and this third signature takes k explicitly (`serving_default`'s function,
  then the DQC and a ranking score that uses it recomputed at k).

Outputs (names stable across heads): "click_prob" [B, 1], "watch_time_s" [B, 1],
"ranking_score" [B, 1] and, with the CQE head, "quantiles" [B, N], "cse", "dqc",
"cde" [B, 1]. Training-only outputs (CREAD logits) are dropped.
"""
import tensorflow as tf

from models import features as F
from models import heads as heads_lib
from models.layers.row_broadcast import takes_one_row_history
from models.watch_time.cqe import interpolate_quantile


def serving_signatures(model, tf_transform_output, history_length: int) -> dict:
    """`serving_default` (raw named tensors) and `serving_examples` (tf.Examples), both
    applying the transform graph then the model. Attaches the TFT layer to `model`."""
    model.tft_layer = tf_transform_output.transform_features_layer()
    # A model that takes the [L]-long history inputs with 1 row gets them so (embedded and
    # projected once); per-row scalars are broadcast before the model (cheap).
    one_row_inputs = ({k for k, t in zip(model.input_names, model.inputs) if t.shape.rank > 1}
                      if takes_one_row_history(model) else set())
    raw_spec = F.raw_feature_spec(history_length)
    serving_spec = {k: raw_spec[k] for k in F.SERVING_RAW_FEATURES}

    cqe_layer = _find_layer(model, "cqe")
    formula = _ranking_formula(model)

    raw_signature = {
        k: tf.TensorSpec([None] + list(spec.shape), spec.dtype, name=k) for k, spec in serving_spec.items()
    }

    # The transform graph traced once for every signature: serve_rank's batch-1 user side
    # fits the [None] batch too. Each trace of the TFT layer prunes its graph anew (~1 s),
    # and the SavedModel would hold each pruned copy.
    @tf.function(input_signature=[raw_signature])
    def transform(raw_features):
        return model.tft_layer(dict(raw_features))

    def run(raw_features):
        return run_transformed(transform(raw_features))

    def run_transformed(transformed):
        inputs = {k: transformed[k] for k in model.input_names}
        outputs = dict(model(inputs, training=False))
        for key in heads_lib.TRAINING_ONLY_OUTPUTS:
            outputs.pop(key, None)
        return _named(outputs)

    def with_dqc_k(outputs, dqc_k):
        """The outputs with the DQC at the request's k, and a ranking score that may use it."""
        outputs = dict(outputs)
        q = outputs[heads_lib.QUANTILES_OUTPUT]
        k = tf.reshape(tf.clip_by_value(tf.cast(dqc_k, q.dtype), 0.0, 1.0), [-1, 1])
        t_high = tf.reshape(interpolate_quantile(q, cqe_layer.tau_high, cqe_layer.taus), [-1, 1])
        outputs[heads_lib.DQC_OUTPUT] = k * outputs[heads_lib.CSE_OUTPUT] + (1.0 - k) * t_high
        if formula is not None:
            outputs[heads_lib.RANKING_OUTPUT] = heads_lib.ranking_score(outputs, formula)
        return _named(outputs)

    @tf.function(input_signature=[raw_signature])
    def serve_raw(raw_features):
        return run(dict(raw_features))

    # serving_examples and serving_dqc call serve_raw's graph (a function-call op in the
    # SavedModel): the transform graph and the model are traced once for the three.
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve_examples(serialized):
        return _named(serve_raw(tf.io.parse_example(serialized, serving_spec)))

    user_side = set(F.USER_CONTEXT_FEATURES)
    rank_signature = {
        k: tf.TensorSpec([1 if k in user_side else None] + list(spec.shape), spec.dtype, name=k)
        for k, spec in serving_spec.items()}
    first_candidate = F.CANDIDATE_FEATURES[0]

    @tf.function(input_signature=[rank_signature])
    def serve_rank(request):
        # The transform graph maps rows independently, so it runs once on the request as
        # sent: outputs of the user side come out with batch 1 (one vocabulary lookup of
        # the history, not N) and are broadcast to the N candidates before the model.
        n = tf.shape(request[first_candidate])[0]
        transformed = transform(request)
        # the static batch of 1 selects the layers' one-user forms when tracing
        return run_transformed({k: _one_row(transformed[k]) if k in one_row_inputs
                                else _broadcast_rows(transformed[k], n) for k in model.input_names})

    signatures = {
        "serving_default": serve_raw.get_concrete_function(),
        "serving_examples": serve_examples.get_concrete_function(),
        "serving_rank": serve_rank.get_concrete_function(),
    }
    if cqe_layer is not None:
        dqc_signature = dict(raw_signature, dqc_k=tf.TensorSpec([None], tf.float32, name="dqc_k"))

        @tf.function(input_signature=[dqc_signature])
        def serve_dqc(request):
            request = dict(request)
            k = request.pop("dqc_k")
            return with_dqc_k(serve_raw(request), k)

        signatures["serving_dqc"] = serve_dqc.get_concrete_function()
    return signatures


def _named(outputs: dict) -> dict:
    """Each output under its own name in the graph."""
    return {name: tf.identity(value, name=name) for name, value in outputs.items()}


def _one_row(x):
    """`x` with its static batch pinned to 1 (checked at run time)."""
    return tf.ensure_shape(x, tf.TensorShape([1]).concatenate(x.shape[1:]))


def _broadcast_rows(x, n):
    """`x` [1, ...] repeated to [n, ...]; a tensor that already has n rows is unchanged."""
    return tf.broadcast_to(x, tf.concat([[n], tf.shape(x)[1:]], axis=0))


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
    tf.saved_model.load / TF Serving read without any custom-object registry).

    Without Keras's per-layer call traces (`save_traces=False`): the signatures are what
    serving runs, and keras.models.load_model (the Publisher's rewrite.load_trained_model)
    rebuilds the ranker from its layers' configs (every custom layer is registered), then
    restores the variables (tests/models/test_registered_layers.py). Tracing every layer's
    call for the SavedModel cost ~7 s per export of the default DIN. The loaded object has
    no Keras `variables` list (read them from variables/variables with
    tf.train.load_checkpoint)."""
    signatures = serving_signatures(model, tf_transform_output, history_length)
    model.save(export_dir, save_format="tf", signatures=signatures, save_traces=False)
    return export_dir
