"""servable.Signature's flat call (the hot path, no structured-argument binding) gives
the keyword call's outputs and still refuses a tensor of the wrong shape."""
import numpy as np
import pytest

from serving.servable import ServedVersion
from tests.serving.tiny_model import USER_NAMES, make_instance, save_model


def _feed(sig, rows, user_batch1=False):
    feed = {}
    for k, spec in sig.inputs.items():
        values = [r[k] for r in rows[:1]] if user_batch1 and k in USER_NAMES else [r[k] for r in rows]
        feed[k] = np.array([v.encode() if isinstance(v, str) else v for v in values],
                           dtype=object if spec.dtype.name == "string" else spec.dtype.as_numpy_dtype)
    return feed


def test_flat_call_equals_keyword_call_and_checks_shapes(tmp_path):
    save_model(tmp_path / "1")
    served = ServedVersion(1, str(tmp_path / "1"), enable_warmup=False)
    rows = [make_instance(i) for i in range(4)]
    for name, user_batch1 in (("serving_default", False), ("serving_rank", True)):
        sig = served.signatures[name]
        assert sig._flat is not None  # TF 2.16's restored signatures take the flat path
        assert sig._captures is not None  # ... with their captured handles resolved once
        feed = _feed(sig, rows, user_batch1)
        fast = sig(feed)
        sig_wrapped = type(sig)(sig.name, sig.fn)
        sig_wrapped._captures = None  # the wrapper's own per-call resolution
        sig_slow = type(sig)(sig.name, sig.fn)
        sig_slow._flat = None
        for other in (sig_wrapped(feed), sig_slow(feed)):
            assert fast.keys() == other.keys()
            for k in fast:
                np.testing.assert_array_equal(fast[k], other[k])
    rank = served.signatures["serving_rank"]
    bad = _feed(rank, rows, user_batch1=False)  # user side with batch 4, not 1
    with pytest.raises(TypeError, match="'hist_len' has shape \\[4\\]"):
        rank(bad)
