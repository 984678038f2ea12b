"""A tf.Example TFXIO whose Beam source reads whole shard files into decoded batches.

TFX's ``TFExampleRecord.BeamSource`` is, per record, a Beam element: Beam's
``ReadFromTFRecord`` (Python framing, one ``read`` per header and per body), TFXIO's raw
record telemetry, ``BatchElements`` (at most 1,000 records), then the C++ decoder and
TFXIO's RecordBatch telemetry. On 1M simulated rows Transform's analysis spent 21 % of
its Beam time in Beam's record reading and 6 % in the telemetry, against 50 % in the
decoder (py-spy, session 35).

``FramesTFXIO.BeamSource(batch_size)``::

    files(file_pattern) | Reshuffle | for each file: record_files.read_frames
        -> ExampleDecoder.DecodeBatch(batch_size records, default 1,000) -> pa.RecordBatch

The same records (every frame of every file matched, each length and data CRC
checked, ValueError naming the file on a corrupt one), decoded into the RecordBatch
tfx-bsl's ``ExamplesToRecordBatchDecoder`` gives with the same (projected) schema
(``example_decoder.ExampleDecoder``: TensorFlow's parser, tfx-bsl's decoder where the two
could differ; without a schema, tfx-bsl's decoder), so the same RecordBatch columns and
ArrowSchema as ``TFExampleRecord``; batches may be cut
elsewhere and the order of files may differ, which no consumer of a PCollection
may rely on. Everything else (projection, TensorAdapter, TF datasets, raw records)
is ``TFExampleRecord``'s; with a raw-record column it falls back to TFX's source.
"""
from typing import List, Optional

import apache_beam as beam
import pyarrow as pa
from apache_beam.io.filesystems import FileSystems
from tfx_bsl.coders import example_coder
from tfx_bsl.tfxio import tf_example_record

from components.log_example_gen.record_files import keep_all, read_frames
from components.transform.example_decoder import ExampleDecoder

DEFAULT_BATCH = 1000  # TFXIO's own cap on a tuned batch (tfx_bsl.coders.batch_util)


def match_files(file_patterns: List[str]) -> List[str]:
    """The files each pattern matches, sorted per pattern; ValueError naming a pattern
    that matches none (Beam's ReadFromTFRecord refuses it too)."""
    paths = []
    for pattern, result in zip(file_patterns, FileSystems.match(list(file_patterns))):
        found = sorted(m.path for m in result.metadata_list)
        if not found:
            raise ValueError(f"no files match {pattern}")
        paths.extend(found)
    return paths


class _ReadDecode(beam.DoFn):
    """A shard file -> its examples as RecordBatches of `batch` rows (the last shorter)."""

    def __init__(self, serialized_schema: Optional[bytes], batch: int):
        self._schema, self._batch = serialized_schema, batch

    def setup(self):
        self._decoder = (ExampleDecoder(self._schema) if self._schema
                         else example_coder.ExamplesToRecordBatchDecoder())

    def process(self, path: str):
        records: List[bytes] = []
        for record in read_frames(path, keep_all):
            records.append(record)
            if len(records) == self._batch:
                yield self._decoder.DecodeBatch(records)
                records = []
        if records:
            yield self._decoder.DecodeBatch(records)


class FramesTFXIO(tf_example_record.TFExampleRecord):
    """``TFExampleRecord`` with the file-at-a-time ``BeamSource`` of the module doc."""

    def BeamSource(self, batch_size: Optional[int] = None) -> beam.PTransform:
        if self.raw_record_column_name is not None:
            return super().BeamSource(batch_size)
        schema = self._GetSchemaForDecoding()
        serialized = schema.SerializeToString() if schema is not None else None
        paths = match_files(self._file_pattern)
        batch = batch_size or DEFAULT_BATCH

        @beam.typehints.with_output_types(pa.RecordBatch)
        def _read(pipeline):
            return (pipeline
                    | "Files" >> beam.Create(paths)
                    | "Spread" >> beam.Reshuffle()
                    | "ReadAndDecode" >> beam.ParDo(_ReadDecode(serialized, batch)))

        return beam.ptransform_fn(_read)()

    def _ProjectImpl(self, tensor_names: List[str]) -> "FramesTFXIO":
        projected = super()._ProjectImpl(tensor_names)
        return FramesTFXIO(file_pattern=self._file_pattern, schema=projected._schema,
                           raw_record_column_name=self.raw_record_column_name,
                           telemetry_descriptors=self.telemetry_descriptors)
