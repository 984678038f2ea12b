"""TFX's Transform executor, reading tf.Examples through ``FramesTFXIO``.

Everything is TFX's Transform (analysis, cache, outputs, properties) except the Beam
source of a tf.Example dataset: ``TransformProcessor._CreateTFXIO`` (where TFX's
executor makes each dataset's TFXIO) gives ``frames_tfxio.FramesTFXIO`` instead of
``TFExampleRecord`` (same records, schema and RecordBatch columns; whole shard files
read and decoded in batches instead of one Beam element per record). Other payloads
(sequence examples, raw records, data views) keep TFX's TFXIO.

TFX's ``Executor.Do`` calls the module's ``TransformProcessor()`` by name, so ``Do``
sets that name to ``FramesTransformProcessor`` for its own call and restores it after.
"""
import threading

from tfx.components.transform import executor as tfx_executor
from tfx_bsl.tfxio import tf_example_record

from components import beam_in_process
from components.beam_dependencies import skip_for_local_runners
from components.transform.frames_tfxio import FramesTFXIO
from models.tfrecord_crc import use_hardware_crc32c

skip_for_local_runners()  # no TFX sdist per run on the DirectRunner (components/beam_dependencies.py)
beam_in_process.install()  # no state cache, no logger resets per pickle (components/beam_in_process.py)
use_hardware_crc32c()  # for the payloads that keep TFX's TFXIO (Beam's TFRecord reader)

_SWAP = threading.Lock()  # one Do at a time swaps the module's TransformProcessor


class FramesTransformProcessor(tfx_executor.TransformProcessor):
    def _CreateTFXIO(self, dataset, schema):
        tfxio = super()._CreateTFXIO(dataset, schema)
        if type(tfxio) is not tf_example_record.TFExampleRecord:
            return tfxio
        return FramesTFXIO(file_pattern=tfxio._file_pattern, schema=tfxio._schema,
                           raw_record_column_name=tfxio.raw_record_column_name,
                           telemetry_descriptors=tfxio.telemetry_descriptors)


class Executor(tfx_executor.Executor):
    def Do(self, input_dict, output_dict, exec_properties):
        with _SWAP:
            tfx_processor = tfx_executor.TransformProcessor
            tfx_executor.TransformProcessor = FramesTransformProcessor
            try:
                return super().Do(input_dict, output_dict, exec_properties)
            finally:
                tfx_executor.TransformProcessor = tfx_processor
