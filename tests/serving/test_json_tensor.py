"""serving.json_tensor: JSON values -> typed arrays and outputs -> JSON, hand-checked."""
import base64

import numpy as np
import pytest
import tensorflow as tf

from serving.json_tensor import InputConverter, JsonTensorError, tensor_to_json


def _where(path):
    return "x" + "".join(f"[{p}]" for p in path)


def test_rows_become_a_typed_array():
    conv = InputConverter("hist", tf.TensorSpec([None, 3], tf.int64), _where)
    arr = conv.to_array([[1, 2, 3], [4, 5, -1]], [3], lambda i: [i])
    assert arr.dtype == np.int64 and arr.tolist() == [[1, 2, 3], [4, 5, -1]]
    conv = InputConverter("s", tf.TensorSpec([None], tf.string), _where)
    arr = conv.to_array(["ab", {"b64": base64.b64encode(b"\xff\x00").decode()}], [],
                        lambda i: [i])
    assert arr.dtype == object and arr.tolist() == [b"ab", b"\xff\x00"]
    conv = InputConverter("d", tf.TensorSpec([None], tf.float32), _where)
    assert conv.to_array([1, 2.5], [], lambda i: [i]).tolist() == [1.0, 2.5]


@pytest.mark.parametrize("spec,rows,needles", [
    (tf.TensorSpec([None, 3], tf.int64), [[1, 2, 3], [1, 2]], ["x[1]", "length 3"]),
    (tf.TensorSpec([None, 3], tf.int64), [[1, 2.0, 3]], ["x[0][1]", "integer"]),
    (tf.TensorSpec([None], tf.int32), [2 ** 31], ["out of range", "int32"]),
    (tf.TensorSpec([None], tf.bool), [1], ["true/false"]),
    (tf.TensorSpec([None], tf.string), [{"b64": "!!"}], ["base64"]),
    (tf.TensorSpec([None, None], tf.float32), [[1.0], [1.0, 2.0]], ["x[1]", "same shape"]),
])
def test_values_that_do_not_fit_name_the_place(spec, rows, needles):
    conv = InputConverter("inp", spec, _where)
    with pytest.raises(JsonTensorError) as err:
        conv.to_array(rows, spec.shape.as_list()[1:], lambda i: [i])
    for needle in ["input 'inp'"] + needles:
        assert needle in err.value.message, err.value.message


def test_outputs_to_json():
    # float32 0.1 prints as 0.1 (its shortest round-trip decimal), not 0.10000000149
    assert tensor_to_json("p", np.array([[0.1], [2.5]], np.float32)) == [[0.1], [2.5]]
    assert tensor_to_json("n", np.array([3, -1], np.int64)) == [3, -1]
    strings = np.array([b"ok", b"\xff"], dtype=object)
    assert tensor_to_json("s", strings) == ["ok", {"b64": "/w=="}]
    assert tensor_to_json("s_bytes", strings) == [{"b64": "b2s="}, {"b64": "/w=="}]


def test_short_decimals_round_trip_and_are_short():
    """Vectorised output formatting: every float32 reads back exactly; typical values
    print with TF Serving's 6 significant digits."""
    import json

    from serving.json_tensor import short_decimals

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=5000) * 10.0 ** rng.integers(-40, 38, 5000),
                        [0.0, -0.0, 1 / 3, 3.4e38, 1e-45]]).astype(np.float32)
    back = np.array(json.loads(json.dumps(short_decimals(x).tolist())), np.float32)
    np.testing.assert_array_equal(back, x)
    assert json.dumps(short_decimals(np.array([0.1, 2.5, 1 / 3, 19.75], np.float32)).tolist()) \
        == "[0.1, 2.5, 0.333333343, 19.75]"  # 6 digits, or 9 (TF Serving's WriteDecimal)
