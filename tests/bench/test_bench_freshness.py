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
    with pytest.raises(ValueError, match="fraction with fp32"):
        bf.Policy("d", LAYOUT, "delta", "random", 0.05, "int8_delta/0.1")


def test_coded_dense_bytes_schedule_and_drift():
    """int8_delta@2: the dense part on the 2nd and 4th delta, coded against the policy's own
    served dense (bytes = deflate of the int8 codes + a 4-byte step per tensor); the served
    dense stays within half a step of the trainer's, however many deltas."""
    import zlib

    from models.publishing import dense_delta

    rng = np.random.default_rng(1)
    p = bf.Policy("d", LAYOUT, "delta", "row_change", 0.05, "int8_delta@2", full_every=9)
    zero = {"emb_a": np.zeros(40), "lin_b": np.zeros(10)}
    codes = {"emb_a": rng.integers(0, 256, (40, 8), dtype=np.uint8)}
    s = dict(_snap(rng), codes=codes)
    p.full(s, zero)
    rows_bytes = 2 * 10 + 1 * 6
    for j in range(1, 5):
        held = [d.copy() for d in p.dense]
        s = dict(_snap(rng), codes=codes,
                 dense=[d + rng.normal(scale=1e-3, size=d.shape).astype(np.float32) for d in s["dense"]])
        sent = p.publish(j, s, zero)
        if j % 2:
            assert sent == rows_bytes and all(np.array_equal(a, b) for a, b in zip(p.dense, held))
            continue
        coded = [dense_delta.encode(h, c, "int8_delta") for h, c in zip(held, s["dense"])]
        assert sent == rows_bytes + sum(len(zlib.compress(c.q.tobytes(), 6)) + 4 for c in coded)
        for got, want, c in zip(p.dense, s["dense"], coded):
            assert np.all(np.abs(got.astype(np.float64) - want) <= 0.5 * float(c.scale) + 1e-6)
    assert p.dense_bytes == [p.bytes[1] - rows_bytes, p.bytes[3] - rows_bytes]
    assert p.row_payload["raw"] == 4 * 2 * 8  # 2 int8 rows of emb_a (D + 4 = 8 bytes of codes) per delta


def test_default_policy_is_the_publishers_schedule():
    from pipeline import configs

    cfg = configs.publish_config(full_every=7, delta_row_fraction=0.1, delta_priority="random",
                                 delta_dense="fp16_delta", dense_every=4)
    p = bf.policy_from_config("default", LAYOUT, cfg)
    assert (p.kind, p.priority, p.fraction, p.full_every) == ("delta", "random", 0.1, 7)
    assert (p.dense_dtype, p.dense_every, p.dense_fraction) == ("fp16_delta", 4, None)
    names = [q.name for q in bf.make_policies(LAYOUT, ["row_change"], [0.05], ["fp16"], 12, default=cfg)]
    assert names == ["full", "stale", "default", "row_change_5%_fp16"]


def test_code_delta_rows_bytes_are_the_row_delta_payload():
    """rows "code_delta": a table's bytes = row_delta.deflated_bytes of the chosen rows' bit
    differences from the held ones (int8 codes + fp16 scale/bias; fp32 values), counted against
    what the policy held BEFORE this delta; the served rows are the trainer's, as with "values"."""
    import zlib

    rng = np.random.default_rng(2)
    p = bf.Policy("d", LAYOUT, "delta", "row_change", 0.05, "fp16@0", full_every=9, rows="code_delta")
    v = bf.Policy("v", LAYOUT, "delta", "row_change", 0.05, "fp16@0", full_every=9)
    zero = {"emb_a": np.zeros(40), "lin_b": np.zeros(10)}
    codes0 = rng.integers(0, 256, (40, 8), dtype=np.uint8)
    s0 = dict(_snap(rng), codes={"emb_a": codes0})
    p.full(s0, zero)
    v.full(s0, zero)
    codes1 = codes0.copy()
    codes1[:, :4] += 1  # every int8 code +1 (mod 256), scale/bias unchanged
    s1 = dict(_snap(rng), codes={"emb_a": codes1})
    sent = p.publish(1, s1, zero)
    rows_a = np.flatnonzero(np.any(p.rows["emb_a"] != s0["rows"]["emb_a"], axis=1))
    rows_b = np.flatnonzero(p.rows["lin_b"][:, 0] != s0["rows"]["lin_b"][:, 0])
    assert len(rows_a) == 2 and len(rows_b) == 1
    gaps_a = np.diff(rows_a, prepend=0).astype(np.uint16).tobytes()
    bits_b = (s1["rows"]["lin_b"][rows_b].view(np.uint32) - s0["rows"]["lin_b"][rows_b].view(np.uint32)).tobytes()
    want = (len(zlib.compress(gaps_a, 6)) + len(zlib.compress(np.ones((2, 4), np.uint8).tobytes(), 6))
            + len(zlib.compress(np.zeros((2, 2), np.uint16).tobytes(), 6))
            + len(zlib.compress(np.diff(rows_b, prepend=0).astype(np.uint16).tobytes(), 6))
            + len(zlib.compress(bits_b, 6)))
    assert sent == want
    assert v.publish(1, s1, zero) == 2 * 10 + 1 * 6
    for n in ("emb_a", "lin_b"):
        np.testing.assert_array_equal(p.rows[n], v.rows[n])
    assert np.array_equal(p.codes["emb_a"][rows_a], codes1[rows_a])  # the held codes follow what was sent
    with pytest.raises(ValueError, match="row coding"):
        bf.Policy("d", LAYOUT, "delta", "random", 0.05, "fp16", rows="int8")
    names = [q.name for q in bf.make_policies(LAYOUT, ["random"], [0.05], ["fp16"], 12,
                                              row_codings=("values", "code_delta"))]
    assert names == ["full", "stale", "random_5%_fp16", "random_5%_fp16_code_delta"]
