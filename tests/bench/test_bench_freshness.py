"""Byte accounting and served state of the freshness replay's policies (bench/bench_freshness.py),
on a fake two-table layout (no TensorFlow model)."""
import types

import numpy as np
import pytest

from bench import bench_freshness as bf

LAYOUT = types.SimpleNamespace(
    tables={"emb_a": {"index": 0, "rows": 40, "dim": 4, "quantized": True, "row_bytes": 8, "index_bytes": 2},
            "lin_b": {"index": 1, "rows": 10, "dim": 1, "quantized": False, "row_bytes": 4, "index_bytes": 2}},
    dense=[2, 3], dense_params=30, table_bytes=40 * 8 + 10 * 4, full_bytes=40 * 8 + 10 * 4 + 4 * 30)


def _snap(rng):
    return {"rows": {"emb_a": rng.normal(size=(40, 4)).astype(np.float32),
                     "lin_b": rng.normal(size=(10, 1)).astype(np.float32)},
            "opt_state": {"emb_a": rng.random(40), "lin_b": rng.random(10)},
            "dense": [rng.normal(size=(5, 4)).astype(np.float32), rng.normal(size=10).astype(np.float32)]}


@pytest.mark.parametrize("dense, expected", [
    ("fp32", 2 * 10 + 1 * 6 + 30 * 4),          # 2 rows of emb_a (2 + 8 B), 1 of lin_b (2 + 4 B), dense fp32
    ("fp16", 2 * 10 + 1 * 6 + 30 * 2),
    ("fp16@0", 2 * 10 + 1 * 6),                 # dense only with full versions
    ("fp16/0.1", 2 * 10 + 1 * 6 + 3 * (2 + 4)),  # top 3 of 30 dense elements, 4-byte index each
])
def test_delta_bytes_and_served_state(dense, expected):
    rng = np.random.default_rng(0)
    full, stale = bf.Policy("full", LAYOUT, "full"), bf.Policy("stale", LAYOUT, "stale")
    delta = bf.Policy("d", LAYOUT, "delta", "row_change", 0.05, dense, full_every=3)
    zero = {"emb_a": np.zeros(40), "lin_b": np.zeros(10)}
    s0 = _snap(rng)
    for p in (full, stale, delta):
        assert p.full(s0, zero) == LAYOUT.full_bytes
    s1 = _snap(rng)
    assert delta.publish(1, s1, zero) == expected and delta.kinds == ["delta"]
    assert full.publish(1, s1, zero) == LAYOUT.full_bytes and stale.publish(1, s1, zero) == 0
    changed = np.any(delta.rows["emb_a"] != s0["rows"]["emb_a"], axis=1)
    assert changed.sum() == 2 and np.array_equal(delta.rows["emb_a"][changed], s1["rows"]["emb_a"][changed])
    w = delta.weights([None] * 4)
    assert w[0] is delta.rows["emb_a"] and w[2].shape == (5, 4) and w[3].shape == (10,)
    assert np.array_equal(full.weights([None] * 4)[2], s1["dense"][0])
    assert np.array_equal(stale.weights([None] * 4)[2], s0["dense"][0])
    delta.publish(2, _snap(rng), zero)
    assert delta.publish(3, _snap(rng), zero) == LAYOUT.full_bytes and delta.kinds[-1] == "full"


def test_bad_dense_spec():
    with pytest.raises(ValueError, match="dense variant"):
        bf.Policy("d", LAYOUT, "delta", "random", 0.05, "bf16")
