"""The bulk forms of LogExampleGen's steps against their per-record references: byte ranges
read as arrays (bulk_lines.py vs reading.read_range), fields parsed on bytes
(parse_batch.parse_lines vs parse_records), side tables parsed by column (side_columns.py vs
parsing.parse_user_row / parse_video_row), and shard files framed in bulk (record_files.py vs
TensorFlow's TFRecord reader)."""
import gzip
import os
import pickle
import random

import numpy as np
import pytest

from components.log_example_gen import bulk_lines, parse_batch, parsing, reading, record_files, row_rules
from components.log_example_gen import columns as C
from components.log_example_gen import side_columns as SC
from schemas.kuairand_format import LOG_COLUMNS


def _ranges(path):
    size = os.path.getsize(path)
    out = []
    for range_bytes in (7, 31, 200, size + 1):
        ranges = reading.plan_ranges([(path, size)], range_bytes)
        starts = reading.range_starts([reading.count_range(r) for r in ranges])
        out += [(r, starts[(r.path, r.start)]) for r in ranges]
    return out


_ODD_LINES = ["", "   ", "1,2,é,4", "1,\x00,3,4", "1,2\t,3,4", "1,2,3", "1,2,3,4,5", "7,8,9,10 ", '1,"2,3",4',
              '"a""b",1,2,3']


def _write(tmp_path, name, lines, eol, bom=False):
    data = (reading.BOM if bom else b"") + eol.join(t.encode("utf-8") for t in lines)
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(data)
    return path


@pytest.mark.parametrize("seed", range(12))
def test_bulk_lines_are_the_records_of_read_range(tmp_path, seed):
    rng = random.Random(seed)
    lines = ["a,b,c,d"] + [rng.choice(_ODD_LINES) if rng.random() < 0.3 else
                           ",".join(str(rng.randrange(10 ** rng.randrange(1, 6))) for _ in range(4))
                           for _ in range(rng.randrange(1, 25))]
    if seed % 3 == 0:
        lines.append("")  # a final line end
    path = _write(tmp_path, "f.csv", lines, b"\r\n" if seed % 2 else b"\n", bom=seed % 4 == 1)
    if seed == 5:  # an invalid UTF-8 record
        with open(path, "ab") as f:
            f.write(b"\n\xff\xfe,1,2,3\n")
    if seed in (6, 7):  # a quoted newline, a quote never closed
        with open(path, "ab") as f:
            f.write(b'\n1,"x\ny",2,3\n' if seed == 6 else b'\n1,"x,2,3')
    bulk = 0
    for r, start in _ranges(path):
        got = bulk_lines.read_lines(r, start)
        if got is None:  # left to read_range
            continue
        bulk += 1
        recs = bulk_lines.records(path, got, np.arange(len(got.start))) + got.others
        assert sorted(recs, key=lambda x: x.offset) == list(reading.read_range(r, start))
    assert bulk > 0
    whole = list(reading.read_whole(path, os.path.getsize(path)))
    assert bulk_lines.read_records(path, os.path.getsize(path)) == whole
    # a record's text read again at its offset (the rows carry none): as read_range gave it
    assert reading.texts_at(path, [rec.offset for rec in whole][::-1]) == {rec.offset: rec.text for rec in whole}
    if whole and len(whole[-1].text) > 1:
        with pytest.raises(ValueError, match="no record starts at offset"):
            reading.texts_at(path, [whole[-1].offset + 1])


def test_a_range_with_a_quote_is_left_to_read_range(tmp_path):
    path = _write(tmp_path, "q.csv", ["a,b", '1,"x', 'y",2', "3,4"], b"\n")
    assert any(bulk_lines.read_lines(r, s) is None for r, s in _ranges(path))


def _log_line(rng):
    values = {"user_id": rng.randrange(1, 6), "video_id": rng.randrange(1, 6), "date": 20220425,
              "hourmin": rng.choice([0, 1230, 2400, 1261]), "time_ms": 1650812741436 + rng.randrange(-10, 10) * 10**7,
              "is_click": rng.choice([0, 1, 2]), "is_like": 0, "long_view": 1, "play_time_ms": rng.randrange(10**5),
              "duration_ms": rng.randrange(10**5), "tab": rng.randrange(4)}
    fields = [str(values.get(c, rng.randrange(3))) for c in LOG_COLUMNS]
    k = rng.randrange(len(fields))
    fields[k] = rng.choice([fields[k]] * 6 + ["", "x", "1.0", "-3", " 4", "1" * 19, "１", "3e1"])
    if rng.random() < 0.03:
        fields.append("9")
    return ",".join(fields)


def test_parse_lines_equals_parse_records(tmp_path):
    rng = random.Random(3)
    lines = [",".join(LOG_COLUMNS)] + [_log_line(rng) for _ in range(400)] + ["", "5,é", "  "]
    path = _write(tmp_path, "log_x.csv", lines, b"\n")
    header = reading.read_header(path)
    users = SC.SideTable.of(np.array([4, 2, 3, 1]), SC.arrays("user", {f: [g(None)] * 4
                                                                     for f, (_, g) in SC.USER_FEATURES.items()}))
    videos = SC.SideTable.of(np.array([1, 2, 3, 5]), SC.arrays("video", {f: [g(None)] * 4
                                                                       for f, (_, g) in SC.VIDEO_FEATURES.items()}))
    ambiguous = {"user": {4}, "video": set()}
    ids = parse_batch.SideIds.of(users, videos, ambiguous)
    rules = row_rules.RowRules(max_play_time_ms=90_000, max_duration_ms=10**6, date_time_tolerance_ms=3_600_000)
    kinds = set()
    for r, start in _ranges(path):
        lines_ = bulk_lines.read_lines(r, start)
        got, got_bad, read = parse_batch.parse_lines(lines_, path, 2, header, rules, users, videos, ambiguous, ids)
        records = list(reading.read_range(r, start))
        want, want_bad = parse_batch.parse_records(records, 2, header, rules, users, videos, ambiguous, ids)
        assert read == len(records)
        assert sorted(got_bad) == sorted(want_bad)
        kinds |= {reason for reason, _ in want_bad}
        assert set(got) == set(want)
        if not want:
            continue
        g, w = np.argsort(got["row_id"]), np.argsort(want["row_id"])
        for name in want:
            assert list(got[name][g]) == list(want[name][w]), name
        # rows carry no text: the ones that need it read it again, as read_range gave it
        offsets = [C.offset_of(i) for i in want["row_id"].tolist()]
        texts = {rec.offset: rec.text for rec in records}
        assert reading.texts_at(path, offsets) == {o: texts[o] for o in offsets}
    assert {"malformed_row", "unknown_user_id", "unknown_video_id", "ambiguous_user_id", "out_of_range:hourmin",
            "date_time_mismatch:date", "out_of_range:is_click"} <= kinds, kinds
    assert any(k.startswith("non_numeric:") for k in kinds) and any(k.startswith("missing_field:") for k in kinds)


_USER_VALUES = ["", " ", "1", "1.0", "2.5", "-3", "1e3", "inf", "nan", "1_0", "x", " 7 ", "full_active", "0x1a"]


@pytest.mark.parametrize("table", ["user", "video"])
def test_side_columns_equal_the_per_row_parser(table):
    rng = random.Random(7)
    id_name, spec = SC.TABLES[table]
    header = [id_name] + sorted({c for c, _ in spec.values()}) + ["unused"]
    values = _USER_VALUES + ["2022-04-10", "20220410", "2022-13-01", "20,67", "5,x"]
    rows = [[rng.choice(["1", "22", " 3 ", "", "x", "4.0", "0"])] + [rng.choice(values) for _ in header[1:]]
            for _ in range(300)]
    parse_fn = parsing.parse_user_row if table == "user" else parsing.parse_video_row
    ids, reasons = SC.parse_ids([r[0] for r in rows], id_name)
    cols = SC.feature_columns(table, header, rows)
    as_arrays = SC.arrays(table, cols)
    for k, row in enumerate(rows):
        try:
            want_id, want = parse_fn(dict(zip(header, row)))
        except ValueError as e:
            assert reasons[k] == str(e)
            continue
        assert reasons[k] is None and ids[k] == want_id
        assert {f: v[k] for f, v in cols.items()} == want
        assert SC.row_features(as_arrays, k) == want
    missing = SC.feature_columns(table, [id_name], [["1"]])  # absent columns: the row parser's defaults
    assert {f: v[0] for f, v in missing.items()} == parse_fn({id_name: "1"})[1]
    # a table pickles (as a Beam side input) compressed and comes back equal, dtypes included
    ok = np.array([r is None for r in reasons])
    table_ = SC.SideTable.of(np.arange(int(ok.sum())), {f: v[ok] for f, v in as_arrays.items()})
    back = pickle.loads(pickle.dumps(table_))
    assert np.array_equal(back.ids, table_.ids) and back.columns.keys() == table_.columns.keys()
    for f, v in table_.columns.items():
        assert back.columns[f].dtype == v.dtype and np.array_equal(back.columns[f], v, equal_nan=v.dtype.kind == "f")
    assert len(pickle.dumps(table_)) < sum(v.nbytes for v in table_.columns.values()) / 2


def test_split_fields_is_the_csv_split():
    for text in ["1,2,3", '1,"2,3",4', "a,,b", "1,2\r3", 'x"y,1', "", "1,\x00"]:
        try:
            want = parsing.split_csv_line(text)
        except Exception:  # noqa: BLE001 (the csv module's own error)
            continue
        assert SC.split_fields(text) == want, text
    for texts in (["1,2", '1,"2,3",4', '"a""b",c'], ["1,2", '"a"b,c', "x"], ["1,2", "1\r2"], ['1,"2', "3"]):
        assert SC.split_all(texts) == [SC.split_fields(t) for t in texts], texts


@pytest.mark.parametrize("deflate", ["isal", "zlib"])  # the writer's default, and its fallback without isal
def test_shard_files_are_tfrecords(tmp_path, monkeypatch, deflate):
    import zlib

    import tensorflow as tf

    if deflate == "zlib":
        monkeypatch.setattr(record_files, "_deflate", zlib)
    else:
        assert record_files._deflate.__name__ == "isal.isal_zlib"  # installed by make setup (requirements.lock)
    records = [b"", b"x", bytes(range(256)) * 40] + [os.urandom(random.Random(k).randrange(300)) for k in range(50)]
    tmp = record_files.temp_dir(str(tmp_path), "run")
    w = record_files.ShardWriter(str(tmp_path / "Split-a" / "data_tfrecord-00003-of-00016.gz"), tmp)
    w.write(records[:10])
    w.write(records[10:])
    path = w.close()
    assert w.count == len(records) and os.path.basename(path) == "data_tfrecord-00003-of-00016.gz"
    assert [r.numpy() for r in tf.data.TFRecordDataset([path], compression_type="GZIP")] == records
    with tf.io.TFRecordWriter(str(tmp_path / "ref.tfrecord")) as ref:  # TensorFlow's own framing
        for r in records:
            ref.write(r)
    assert gzip.open(path).read() == open(tmp_path / "ref.tfrecord", "rb").read()
    record_files.finalize(str(tmp_path), "run", [str(tmp_path / "Split-a"), str(tmp_path / "Split-b")], [path],
                          "data_tfrecord", ".gz")
    assert not os.path.exists(tmp)
    empty = os.listdir(tmp_path / "Split-b")
    assert empty == ["data_tfrecord-00000-of-00001.gz"]
    assert list(tf.data.TFRecordDataset([str(tmp_path / "Split-b" / empty[0])], compression_type="GZIP")) == []


def test_records_with_fixed_length_tails_parse_to_the_encoder_s_examples():
    """example_batches.encode (tfx-bsl Example + example_block's fixed-length Example) against
    tfx-bsl's Example of all the features: the same proto, the same tf.io.parse_example and
    tfx-bsl decoder results; one file row = record + tail."""
    import tensorflow as tf
    from tfx_bsl.coders import example_coder

    from components.log_example_gen import example_batches as EB
    from models import features as F

    rng = np.random.default_rng(4)
    n, L = 40, 3
    features = {}
    for name, kind in EB._KINDS:
        width = L if name in F.RAW_HISTORY_INT + F.RAW_HISTORY_FLOAT else 1
        if kind == "float":
            values = rng.normal(size=n * width) * 1e3
        elif kind == "int":
            values = rng.choice([0, 1], n * width) if name in ("is_click", "hist_is_click") else (
                rng.integers(-1, 1 << rng.integers(2, 40), n * width))
        else:
            values = rng.choice(np.array(["", "full_active", "é"]), n)
        features[name] = (values, width)
    index = rng.permutation(n)[:30]
    records, tails = EB.encode(features, index)
    assert tails.shape[0] == 30 and tails.shape[1] > 0  # some features are fixed-length
    rows = [r + tails[i].tobytes() for i, r in enumerate(records)]
    arrays, names = [], []
    for name, kind in EB._KINDS:
        values, width = features[name]
        picked = values.reshape(-1, width)[index].reshape(-1)
        arrays.append(EB._list_column(picked, width, kind))
        names.append(name)
    import pyarrow as pa
    want = example_coder.RecordBatchToExamplesEncoder().encode(pa.RecordBatch.from_arrays(arrays, names))
    assert [tf.train.Example.FromString(r) for r in rows] == [tf.train.Example.FromString(w) for w in want]
    spec = F.raw_feature_spec(L)
    got_tf, want_tf = tf.io.parse_example(rows, spec), tf.io.parse_example(want, spec)
    for name in spec:
        assert np.array_equal(got_tf[name].numpy(), want_tf[name].numpy()), name
    decoder = example_coder.ExamplesToRecordBatchDecoder()
    assert decoder.DecodeBatch(rows).equals(decoder.DecodeBatch(want))
    # the writer frames record + tail as one TFRecord
    assert record_files.frames(records, tails) == record_files.frames(rows)


def test_duplicate_key_fast_path_is_the_csv_key():
    from components.log_example_gen import user_batches

    for text in ["1,2,3", "1, 2,3", '1,"2",3', "a,,b", "1,2\t", "x", "1,２,3", '"a,b",c', ""]:
        want = ",".join(f.strip() for f in (parsing.split_csv_line(text) or [text]))
        assert user_batches.duplicate_key(text) == want, text


def test_fixed_length_is_one_varint_length_for_all_values():
    from components.log_example_gen import example_block as B

    rng = np.random.default_rng(1)
    for _ in range(500):
        values = rng.integers(-3, 1 << int(rng.integers(1, 63)), int(rng.integers(1, 6)))
        values = np.abs(values) if rng.random() < 0.3 else values
        lengths = [len(B.varint(int(v) & (2**64 - 1))) for v in values]
        assert B.fixed_length("int", values) == (lengths[0] if len(set(lengths)) == 1 else 0), values
    assert B.fixed_length("float", np.zeros(3)) == 4 and B.fixed_length("bytes", np.array(["a"])) == 0
