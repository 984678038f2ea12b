"""Beam's TFRecord checksums with google-crc32c (models/tfrecord_crc.py): the same crc32c as
Beam's own fallback (crcmod), so the same frames and the same errors on a corrupt record,
and installed by the Transform executor and the Evaluator's extractors at import."""
import io
import os

import crcmod
import google_crc32c
import pytest
import tensorflow as tf
from apache_beam.io import tfrecordio
from apache_beam.io.tfrecordio import _TFRecordUtil

from components.log_example_gen import record_files
from components.statistics_gen import sampling
from models import tfrecord_crc

BEAM_OWN = crcmod.predefined.mkPredefinedCrcFun("crc-32c")  # what Beam uses without python-snappy


@pytest.fixture
def restore_beam_crc():
    before = tfrecordio._default_crc32c_fn.fn
    yield
    tfrecordio._default_crc32c_fn.fn = before


def _frames(records, crc) -> bytes:
    tfrecordio._default_crc32c_fn.fn = crc
    out = io.BytesIO()
    for r in records:
        _TFRecordUtil.write_record(out, r)
    return out.getvalue()


def test_same_checksum_as_beams_own():
    rng = __import__("random").Random(0)
    for n in list(range(0, 70)) + [2900, 65537]:
        b = bytes(rng.getrandbits(8) for _ in range(n))
        assert google_crc32c.value(b) == BEAM_OWN(b)
    assert google_crc32c.value(b"123456789") == 0xE3069283  # CRC-32C's check value


def test_frames_are_the_same_and_read_by_tf_and_by_beam(tmp_path, restore_beam_crc):
    records = [os.urandom(n) for n in (0, 1, 12, 2900, 40)]
    assert tfrecord_crc.use_hardware_crc32c()
    fast = _frames(records, google_crc32c.value)
    assert fast == _frames(records, BEAM_OWN)
    path = tmp_path / "r.tfrecord"
    path.write_bytes(fast)
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records
    assert list(record_files.read_frames(str(path), sampling.record_mask("x", 1.0))) == records
    tfrecordio._default_crc32c_fn.fn = google_crc32c.value
    stream = io.BytesIO(fast)
    assert [_TFRecordUtil.read_record(stream) for _ in records] == records
    bad = bytearray(fast)
    bad[len(_frames(records[:3], google_crc32c.value)) + 12 + 5] ^= 0x01  # a byte of record 3's data
    stream = io.BytesIO(bytes(bad))
    for _ in range(3):
        _TFRecordUtil.read_record(stream)
    with pytest.raises(ValueError, match="Mismatch of data mask"):
        _TFRecordUtil.read_record(stream)


def test_transform_and_evaluator_modules_install_it(restore_beam_crc):
    import importlib

    for module in ("components.transform.executor", "models.evaluation.tfma.extractors"):
        tfrecordio._default_crc32c_fn.fn = None
        importlib.reload(importlib.import_module(module))
        assert tfrecordio._default_crc32c_fn.fn is google_crc32c.value, module
