"""The Evaluator's predictions call signatures by keyword (models/evaluation/tfma/predictions.py):
TFMA's positional call of a loaded signature only works through TensorFlow's fallback,
after formatting the whole batch into an error message; ours never takes that path
and predicts the same values."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfma = pytest.importorskip("tensorflow_model_analysis")

from tensorflow.python.eager.polymorphic_function import concrete_function  # noqa: E402

from models.evaluation.tfma import predictions as P  # noqa: E402
from tests.models.evaluation.tfma.test_tfma_metrics import TinyRanker, make_data, serialize  # noqa: E402


@pytest.fixture()
def loaded(tmp_path):
    model_dir = str(tmp_path / "model")
    tf.saved_model.save(TinyRanker(), model_dir, signatures={"serving_examples": TinyRanker().serve})
    return model_dir, tf.saved_model.load(model_dir)


def _no_fallback(monkeypatch):
    """A positional call that needs TensorFlow's flat-signature fallback fails here."""
    def refuse(self, args, kwargs):
        raise AssertionError("flat-signature fallback taken")
    monkeypatch.setattr(concrete_function.ConcreteFunction, "_call_with_flat_signature", refuse)


def test_keyword_signature_predicts_the_same_without_the_fallback(loaded, monkeypatch):
    _, model = loaded
    batch = tf.constant(serialize(make_data(1)))
    want = {k: v.numpy() for k, v in model.signatures["serving_examples"](examples=batch).items()}
    wrapped = P.KeywordModel(model)
    sig = wrapped.signatures["serving_examples"]
    assert sig.input_name == "examples" and sig.structured_input_signature == \
        model.signatures["serving_examples"].structured_input_signature
    _no_fallback(monkeypatch)
    with pytest.raises(AssertionError, match="flat-signature fallback taken"):  # TFMA's call, unwrapped
        model.signatures["serving_examples"](batch)
    got = sig(batch)  # TFMA's call, wrapped
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_array_equal(got[k].numpy(), want[k])
    np.testing.assert_array_equal(sig(examples=batch)["click_prob"].numpy(), want["click_prob"])  # keyword: as is
    assert wrapped.signatures.keys() == model.signatures.keys()


def test_the_extractor_replaces_tfmas_and_predicts_through_a_real_tfma_run(loaded, tmp_path, monkeypatch):
    from models.evaluation.tfma import extractors as X
    from tests.models.evaluation.tfma.test_slice_batches import batched_config

    model_dir, model = loaded
    d = make_data(2)
    serialized = serialize(d)
    data_path = str(tmp_path / "eval.tfrecord")
    with tf.io.TFRecordWriter(data_path) as w:
        for s in serialized:
            w.write(s)
    config = batched_config()
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_dir, eval_config=config)
    extractors = X.custom_extractors(shared, config)
    [stage] = [x for x in extractors if x.stage_name == P.STAGE_NAME]
    assert isinstance(stage.ptransform.fn, P._KeywordSignaturesDoFn)
    config.options.include_default_metrics.value = True  # the fallback path gets it too
    [stage] = [x for x in X.custom_extractors(shared, config) if x.stage_name == P.STAGE_NAME]
    assert isinstance(stage.ptransform.fn, P._KeywordSignaturesDoFn)
    config.options.include_default_metrics.value = False
    _no_fallback(monkeypatch)  # DirectRunner in process: a positional fallback would fail the run
    result = tfma.run_model_analysis(eval_shared_model=shared, eval_config=config, extractors=extractors,
                                     data_location=data_path, output_path=str(tmp_path / "out"))
    overall = {k: v for k, v in result.slicing_metrics if k == ()}[()]
    click = model.signatures["serving_examples"](examples=tf.constant(serialized))["click_prob"].numpy()
    mean = overall["click_prob"][""]["mean_prediction"]["doubleValue"]
    assert mean == pytest.approx(float(np.mean(click.astype(np.float64))), abs=1e-6)
