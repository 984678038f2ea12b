"""spill.py: GroupByKey / CoGroupByKey through files give what Beam's own give, whatever the
buffer size (one file per bundle, or one per value), and a value comes back
equal to what went in (numpy batches, tuples); batch_buffer.py joins a key's batches."""
import os

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.util import assert_that, equal_to

from components.log_example_gen import spill

ITEMS = [(k % 3, (k, np.arange(k, dtype=np.int64))) for k in range(20)]


def _canonical(kv):
    key, values = kv
    return key, sorted((v[0], v[1].tolist()) for v in values)


@pytest.mark.parametrize("max_bytes", [1, 1 << 20])  # a file per value; one per bundle
def test_group_by_key_through_files_equals_beam_group_by_key(tmp_path, max_bytes):
    spill_dir = str(tmp_path / "spill")
    expected = [_canonical((k, [v for kk, v in ITEMS if kk == k])) for k in range(3)]
    with beam.Pipeline() as p:
        items = p | beam.Create(ITEMS)
        spilled = items | "Spilled" >> spill.GroupByKey(spill_dir, max_bytes=max_bytes) | "C1" >> beam.Map(_canonical)
        plain = items | "Plain" >> spill.GroupByKey(None) | "C2" >> beam.Map(_canonical)
        assert_that(spilled, equal_to(expected), label="spilled")
        assert_that(plain, equal_to(expected), label="plain")
    files = os.listdir(spill_dir)
    assert all(f.endswith(".pkl") for f in files)
    assert len(files) == (len(ITEMS) if max_bytes == 1 else 1)  # Create's one bundle: one file


def test_spilled_reads_values_back_in_order(tmp_path):
    dofn = spill._Spill(str(tmp_path), max_bytes=1 << 20)
    dofn.start_bundle()
    assert list(dofn.process(("k", {"a": np.array([1, 2])}))) == []  # buffered, nothing written yet
    assert list(dofn.process(("k", ("x", 3)))) == []
    [out] = list(dofn.finish_bundle())
    key, rng = out.value
    first, second = list(spill.Spilled([rng]))
    assert key == "k" and first["a"].tolist() == [1, 2] and second == ("x", 3)


def test_one_file_per_flush_each_key_reads_only_its_own_range(tmp_path):
    """Keys share a flush's file; a key's ranges from several flushes come back whole, each
    range's values in the order they were added, ranges in (path, start) order."""
    dofn = spill._Spill(str(tmp_path), max_bytes=1 << 20)
    outputs, flush_of_path = [], {}
    for flush in range(2):
        dofn.start_bundle()
        for i in range(3):
            for key in ("a", "b", "c"):
                assert list(dofn.process((key, (key, flush, i, np.full(i + 1, i))))) == []
        out = [o.value for o in dofn.finish_bundle()]
        flush_of_path.update({rng[0]: flush for _, rng in out})
        outputs += out
    assert len(os.listdir(tmp_path)) == 2 and len(flush_of_path) == 2 and len(outputs) == 6
    for key in ("a", "b", "c"):
        values = list(spill.Spilled([rng for k, rng in outputs if k == key]))
        expected = [(key, flush_of_path[path], i, [i] * (i + 1)) for path in sorted(flush_of_path) for i in range(3)]
        assert [(v[0], v[1], v[2], v[3].tolist()) for v in values] == expected


def test_cogroup_through_files_merges_tags_like_beam(tmp_path):
    left = [(1, "a"), (2, "b"), (1, "c")]
    right_1, right_2 = [(1, 10)], [(2, 20), (3, 30)]
    expected = [(1, {"l": ["a", "c"], "r": [10]}), (2, {"l": ["b"], "r": [20]}), (3, {"l": [], "r": [30]})]

    def canonical(kv):
        return kv[0], {t: sorted(v) for t, v in kv[1].items()}

    for name, spill_dir in (("spilled", str(tmp_path / "s")), ("plain", None)):
        with beam.Pipeline() as p:
            joined = ({"l": p | "L" >> beam.Create(left), "r1": p | "R1" >> beam.Create(right_1),
                       "r2": p | "R2" >> beam.Create(right_2)}
                      | spill.CoGroupByKey(spill_dir, tags={"r1": "r", "r2": "r"}, max_bytes=1)
                      | beam.Map(canonical))
            assert_that(joined, equal_to(expected), label=name)


def test_batch_buffer_joins_a_keys_batches_and_emits_the_rest_at_the_end():
    from apache_beam.utils.windowed_value import WindowedValue

    from components.log_example_gen.batch_buffer import BatchBuffer

    buf = BatchBuffer(max_rows=5, shape=lambda k, b: (k, ("tab", b)))
    part = lambda *v: {"x": np.array(v)}  # noqa: E731
    keys = lambda *k: np.array(k, dtype=np.int64)  # noqa: E731
    assert list(buf.add(None, part(1, 2), keys(1, 1))) == []
    assert list(buf.add("entity", part(3), keys(2), label="video")) == []
    assert list(buf.add(None, part(), keys())) == []  # empty batches are not held
    drained = list(buf.add(None, part(4, 5, 6), keys(1, 1, 1)))  # 6 rows held > 5: every key drained
    [(key, (family, batch)), tagged] = [d for d in drained]
    assert (key, family, batch["x"].tolist()) == (1, "tab", [1, 2, 4, 5, 6])
    assert tagged.tag == "entity" and tagged.value[0] == ("video", 2)  # labelled key, no shape
    assert tagged.value[1]["x"].tolist() == [3]
    assert list(buf.add(None, part(7), keys(3))) == []
    [last] = list(buf.finish())
    assert isinstance(last, WindowedValue) and last.value[0] == 3 and last.value[1][1]["x"].tolist() == [7]
    assert list(buf.finish()) == []


def test_batch_buffer_cuts_rows_by_their_keys_in_the_order_they_came():
    """Rows of many inputs, a key per row: each key's rows as one batch, in input order."""
    from components.log_example_gen.batch_buffer import BatchBuffer

    buf = BatchBuffer(max_rows=100)
    inputs = [({"x": np.array([10, 11, 12]), "y": np.array([0.5, 1.5, 2.5])}, np.array([2, 0, 2])),
              ({"x": np.array([13, 14]), "y": np.array([3.5, 4.5])}, np.array([0, 2]))]
    for batch, keys in inputs:
        assert list(buf.add("t", batch, keys, label="f")) == []
    out = {o.value[0]: o.value[1] for o in (w.value for w in buf.finish())}
    assert sorted(out) == [("f", 0), ("f", 2)]
    assert out[("f", 0)]["x"].tolist() == [11, 13] and out[("f", 0)]["y"].tolist() == [1.5, 3.5]
    assert out[("f", 2)]["x"].tolist() == [10, 12, 14] and out[("f", 2)]["y"].tolist() == [0.5, 2.5, 4.5]
