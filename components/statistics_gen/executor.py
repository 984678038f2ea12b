"""StatisticsGen's executor with the sample drawn before decoding (package doc).

Per split: the shard files -> ``read_frames`` keeps the records of ``sampling.record_mask``
(rate ``sampling.split_rate``) -> tfx-bsl's decoder in batches (no schema, as TFX's
StatisticsGen reads) -> ``tfdv.GenerateStatistics`` -> ``Split-<name>/FeatureStats.pb``.
The artifact carries TFX's properties: split names, span and ``sample_rate_by_split``
(here the rate each split was read at). With every rate 1 the statistics are TFX's.
"""
import os
from typing import Any, Dict, List

import apache_beam as beam
import pyarrow as pa
import tensorflow_data_validation as tfdv
from tfx import types
from tfx.components.statistics_gen import executor as tfx_executor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs as specs
from tfx.utils import io_utils, json_utils
from tfx_bsl.coders import example_coder

from components.log_example_gen.artifacts import num_examples_property
from components.log_example_gen.record_files import read_frames
from components.statistics_gen import sampling

SAMPLE_ROWS_KEY = "sample_rows"
DECODE_BATCH = 1000  # serialized examples per decoded RecordBatch


class _DecodeSample(beam.DoFn):
    """A shard file -> RecordBatches of its sampled examples."""

    def __init__(self, rate: float):
        self._rate = rate

    def setup(self):
        self._decoder = example_coder.ExamplesToRecordBatchDecoder()

    def process(self, path: str):
        batch: List[bytes] = []
        for record in read_frames(path, sampling.record_mask(path, self._rate)):
            batch.append(record)
            if len(batch) == DECODE_BATCH:
                yield self._decoder.DecodeBatch(batch)
                batch = []
        if batch:
            yield self._decoder.DecodeBatch(batch)


def _num_examples(examples: types.Artifact, split: str):
    name = num_examples_property(split)  # LogExampleGen's counts
    return examples.get_int_custom_property(name) if examples.has_custom_property(name) else None


class Executor(tfx_executor.Executor):
    """TFX StatisticsGen's executor with ``sample_rows`` (package doc)."""

    def Do(self, input_dict: Dict[str, List[types.Artifact]], output_dict: Dict[str, List[types.Artifact]],
           exec_properties: Dict[str, Any]) -> None:
        self._log_startup(input_dict, output_dict, exec_properties)
        exclude = json_utils.loads(exec_properties.get(specs.EXCLUDE_SPLITS_KEY, "null")) or []
        explicit = json_utils.loads(exec_properties.get(specs.SAMPLE_RATE_BY_SPLIT_KEY, "null")) or {}
        sample_rows = int(exec_properties.get(SAMPLE_ROWS_KEY) or 0)
        examples = artifact_utils.get_single_instance(input_dict[specs.EXAMPLES_KEY])
        if examples_utils.get_payload_format(examples) != example_gen_pb2.PayloadFormat.FORMAT_TF_EXAMPLE:
            raise ValueError(f"StatisticsGen reads tf.Examples; {examples.uri} holds "
                             f"{examples_utils.get_payload_format_string(examples)}")
        splits = [s for s in artifact_utils.decode_split_names(examples.split_names) if s not in exclude]
        if not splits:
            raise ValueError(f"no splits to read in {examples.uri} (excluded: {exclude})")
        unknown = sorted(set(explicit) - set(splits))
        if unknown:
            raise ValueError(f"sample_rate_by_split names splits {unknown} that are not read: {splits}")

        options = tfdv.StatsOptions()
        if exec_properties.get(specs.STATS_OPTIONS_JSON_KEY):
            options = tfdv.StatsOptions.from_json(exec_properties[specs.STATS_OPTIONS_JSON_KEY])
        if input_dict.get(specs.SCHEMA_KEY):
            if options.schema:
                raise ValueError("a schema was given both as an input and in stats_options: give one")
            options.schema = io_utils.SchemaReader().read(
                io_utils.get_only_uri_in_dir(artifact_utils.get_single_uri(input_dict[specs.SCHEMA_KEY])))
        if options.experimental_filter_read_paths:
            raise ValueError("stats_options.experimental_filter_read_paths is not supported here: the examples "
                             "are decoded whole (use feature_allowlist, or tfx.components.StatisticsGen)")
        rates = {s: sampling.split_rate(s, sample_rows, _num_examples(examples, s), explicit, options.sample_rate)
                 for s in splits}
        options.sample_rate = None  # the sample is drawn from the records, before decoding

        statistics = artifact_utils.get_single_instance(output_dict[specs.STATISTICS_KEY])
        statistics.split_names = artifact_utils.encode_split_names(splits)
        statistics.span = examples.span
        statistics.set_json_value_custom_property(tfx_executor.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
                                                  json_utils.dumps(rates))
        sharded = exec_properties.get(specs.SHARDED_STATS_OUTPUT_KEY, False)
        if sharded and not tfdv.default_sharded_output_supported():
            raise ValueError("sharded statistics output was requested but is not supported")
        with self._make_beam_pipeline() as p:
            for split in splits:
                files = sorted(beam.io.filesystems.FileSystems.match(
                    [os.path.join(artifact_utils.get_split_uri([examples], split), "*")])[0].metadata_list,
                    key=lambda m: m.path)
                out = artifact_utils.get_split_uri([statistics], split)
                binary = os.path.join(out, tfx_executor.DEFAULT_FILE_NAME)
                write = tfdv.WriteStatisticsToBinaryFile(binary)
                if sharded:
                    write = tfdv.WriteStatisticsToRecordsAndBinaryFile(
                        binary_proto_path=binary,
                        records_path_prefix=os.path.join(out, tfx_executor.stats_artifact_utils.SHARDED_STATS_PREFIX
                                                         + tfdv.default_sharded_output_suffix()))
                _ = (p
                     | f"Files[{split}]" >> beam.Create([m.path for m in files])
                     | f"Spread[{split}]" >> beam.Reshuffle()
                     | f"ReadSample[{split}]" >> beam.ParDo(_DecodeSample(rates[split])).with_output_types(
                         pa.RecordBatch)
                     | f"GenerateStatistics[{split}]" >> tfdv.GenerateStatistics(options)
                     | f"WriteStatsOutput[{split}]" >> write)
