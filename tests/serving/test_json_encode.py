"""serving.json_encode / predict_codec.encode_predict_response: the REST reply written as
text, floats exactly as TF Serving's WriteDecimal (util/json_tensor.cc) writes them."""
import json

import numpy as np
import pytest

from serving import predict_codec
from serving.errors import JsonReply, RequestError
from serving.json_encode import row_texts, tensor_text


def tf_serving_text(v: float) -> str:
    """WriteDecimal: absl::StrCat (%g, 6 digits); %.9g if that does not round-trip;
    '.0' appended when the text has neither '.' nor 'e'."""
    s = "%.6g" % v
    if np.float32(float(s)) != np.float32(v):
        s = "%.9g" % v
    if "." not in s and "e" not in s:
        s += ".0"
    return s


def test_floats_are_written_as_tf_serving_writes_them():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(size=20000) * 10.0 ** rng.integers(-40, 38, 20000),
                        rng.integers(-1000, 1000, 300), rng.random(3000) * 100,
                        [0.0, -0.0, 1 / 3, 3.4e38, 1e-45, 9e6, 3e-5, 123456, 1234567, 999999.9,
                         1e6, 0.1, 2.5, 1e-4, 16777217, -1707559936.0]]).astype(np.float32)
    got = row_texts("p", x)
    assert got == [tf_serving_text(float(v)) for v in x]
    np.testing.assert_array_equal(np.array(json.loads("[" + ", ".join(got) + "]"), np.float32), x)
    assert row_texts("p", np.array([3.0, 0.1, 1 / 3, 9e6, -0.0], np.float32)) == \
        ["3.0", "0.1", "0.333333343", "9e+06", "-0.0"]
    q = np.array([[0.5, 2.0], [1e-7, 12.25]], np.float32)
    assert tensor_text("q", q) == "[[0.5, 2.0], [1e-07, 12.25]]"
    assert tensor_text("n", np.array([[3, -1]], np.int64)) == "[[3, -1]]"
    assert tensor_text("s", np.array([b"ok", b"\xff"], dtype=object)) == '["ok", {"b64": "/w=="}]'
    assert tensor_text("p", np.array(2.5, np.float32)) == "2.5"
    for shape in ((50, 30), (50, 1), (70,)):  # one printf over the tensor = the rows' texts
        t = x[:int(np.prod(shape))].reshape(shape)
        assert tensor_text("t", t) == "[" + ", ".join(row_texts("t", t)) + "]"
        np.testing.assert_array_equal(np.array(json.loads(tensor_text("t", t)), np.float32), t)


@pytest.mark.parametrize("row_format", [True, False])
def test_encoded_reply_equals_the_dict_reply(row_format):
    rng = np.random.default_rng(1)
    outputs = {"click_prob": rng.random((5, 1)).astype(np.float32),
               "quantiles": (rng.random((5, 7)) * 100).astype(np.float32),
               "rank": np.arange(5, dtype=np.int64)}
    text = predict_codec.encode_predict_response(outputs, row_format, 5)
    want = predict_codec.format_predict_response(outputs, row_format, 5)
    assert json.loads(text) == want and JsonReply(text) == want  # same numbers, same nesting
    assert JsonReply(text)["predictions" if row_format else "outputs"] is not None
    one = predict_codec.encode_predict_response({"p": outputs["click_prob"]}, row_format, 5)
    assert json.loads(one) == predict_codec.format_predict_response(
        {"p": outputs["click_prob"]}, row_format, 5)
    with pytest.raises(RequestError, match="not finite"):
        predict_codec.encode_predict_response({"p": np.array([[np.nan]], np.float32)},
                                              row_format, 1)
