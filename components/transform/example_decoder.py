"""tf.Examples -> the RecordBatch tfx-bsl's decoder gives, parsed by TensorFlow's fast parser.

tfx-bsl's ``ExamplesToRecordBatchDecoder(schema)`` parses each serialized tf.Example into
a protobuf message and copies its features into Arrow builders: 40.1-40.8 µs for one of
LogExampleGen's ~2.9 KB examples (68 features, six lists of 50; 20,000 examples of the
1M-row bench-scale train split in batches of 1,000, this project's 2-core machine), the
bulk of Transform's analysis. ``tf.io.parse_example`` with one ``RaggedFeature`` per
schema feature (TensorFlow's fast path, no messages; called eagerly, which beats a
tf.function here) gives the same batches in 10.5-12.5 µs, Arrow columns included.
For each feature f of the decoder's Arrow schema
(order and types ``large_list<int64 | float | large_binary>``)::

    column f = LargeListArray(offsets = row_splits(f), values = values(f))

which is the decoder's column exactly when every example has f with at least one value.
A row of length 0 is either a missing feature (the decoder's null) or an empty list (its
[]), which the ragged parse cannot tell apart, and a value of the wrong type fails the
parse: such a batch is decoded by tfx-bsl's decoder itself, so every batch decodes to
tfx-bsl's RecordBatch (or its error); so is every batch decoded while TensorFlow is not
executing eagerly (inside a TF1 graph). LogExampleGen writes every feature of every
example, so its batches take the fast path.
"""
from typing import List

import numpy as np
import pyarrow as pa
import tensorflow as tf
from tfx_bsl.coders import example_coder

_TF_TYPES = {pa.int64(): "int64", pa.float32(): "float32", pa.large_binary(): "string"}


class ExampleDecoder:
    """``DecodeBatch(records) -> pa.RecordBatch`` equal to tfx-bsl's decoder with `serialized_schema`."""

    def __init__(self, serialized_schema: bytes):
        self._fallback = example_coder.ExamplesToRecordBatchDecoder(serialized_schema)
        self._schema = self._fallback.ArrowSchema()
        features = {}
        for field in self._schema:
            if not pa.types.is_large_list(field.type) or field.type.value_type not in _TF_TYPES:
                raise ValueError(f"feature {field.name}: Arrow type {field.type} is not one of "
                                 f"tfx-bsl's tf.Example types")
            features[field.name] = tf.io.RaggedFeature(_TF_TYPES[field.type.value_type], row_splits_dtype=tf.int64)
        self._features = features
        self.fallback_batches = 0  # batches tfx-bsl decoded (a row of length 0, a parse error, graph mode)

    def ArrowSchema(self) -> pa.Schema:
        return self._schema

    def DecodeBatch(self, records: List[bytes]) -> pa.RecordBatch:
        if not tf.executing_eagerly():  # inside a TF1 graph: tfx-bsl's decoder
            return self._decode_by_tfx_bsl(records)
        try:
            parsed = tf.io.parse_example(tf.constant(records, dtype=tf.string), self._features)
        except tf.errors.InvalidArgumentError:
            return self._decode_by_tfx_bsl(records)
        columns = []
        for field in self._schema:
            ragged = parsed[field.name]
            splits = ragged.row_splits.numpy()
            if len(splits) > 1 and np.diff(splits).min() == 0:
                return self._decode_by_tfx_bsl(records)
            values = ragged.values.numpy()
            columns.append(pa.LargeListArray.from_arrays(
                pa.array(splits), pa.array(values, type=field.type.value_type)))
        return pa.RecordBatch.from_arrays(columns, schema=self._schema)

    def _decode_by_tfx_bsl(self, records: List[bytes]) -> pa.RecordBatch:
        self.fallback_batches += 1
        return self._fallback.DecodeBatch(records)
