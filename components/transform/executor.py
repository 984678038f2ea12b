"""TFX's Transform executor, reading tf.Examples through ``FramesTFXIO``.

Everything is TFX's Transform (analysis, cache, outputs, properties) except the Beam
source of a tf.Example dataset: ``_CreateTFXIO`` swaps TFX's ``TFExampleRecord`` for
``frames_tfxio.FramesTFXIO`` (same records, schema and RecordBatch columns; whole shard
files read and decoded in batches instead of one Beam element per record). Other
payloads (sequence examples, raw records, data views) keep TFX's TFXIO.
"""
from tfx.components.transform import executor as tfx_executor
from tfx_bsl.tfxio import tf_example_record

from components.beam_dependencies import skip_for_local_runners
from components.transform.frames_tfxio import FramesTFXIO

skip_for_local_runners()  # no TFX sdist per run on the DirectRunner (components/beam_dependencies.py)


class Executor(tfx_executor.Executor):
    def _CreateTFXIO(self, dataset, schema):
        tfxio = super()._CreateTFXIO(dataset, schema)
        if type(tfxio) is not tf_example_record.TFExampleRecord:
            return tfxio
        return FramesTFXIO(file_pattern=tfxio._file_pattern, schema=tfxio._schema,
                           raw_record_column_name=tfxio.raw_record_column_name,
                           telemetry_descriptors=tfxio.telemetry_descriptors)
