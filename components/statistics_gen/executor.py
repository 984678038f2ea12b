"""StatisticsGen's executor with the sample drawn before decoding (package doc).

Per split: the shard files -> ``read_frames`` keeps the records of ``sampling.record_mask``
(rate ``sampling.split_rate``) -> tfx-bsl's decoder in batches (no schema, as TFX's
StatisticsGen reads) -> TFDV's statistics -> ``Split-<name>/FeatureStats.pb``.
The artifact carries TFX's properties: split names, span and ``sample_rate_by_split``
(here the rate each split was read at). With every rate 1 the statistics are TFX's.

One Beam graph serves every split: the decoded batches are keyed by their split and go
through TFDV's sliced statistics (what ``tfdv.GenerateStatistics`` runs, the split as the
slice key), and one step writes each split's file. TFX runs ``GenerateStatistics`` and a
``WriteToText`` per split, each a dozen Beam stages of fixed cost (~1.8 s a split on the
DirectRunner) whatever the split's size. Sharded output or slicing options keep that path.
"""
import os
from typing import Any, Dict, List, Tuple

import apache_beam as beam
import pyarrow as pa
import tensorflow_data_validation as tfdv
from tensorflow_data_validation.statistics import stats_impl
from tensorflow_metadata.proto.v0 import statistics_pb2
from tfx import types
from tfx.components.statistics_gen import executor as tfx_executor
from tfx.components.util import examples_utils
from tfx.proto import example_gen_pb2
from tfx.types import artifact_utils, standard_component_specs as specs
from tfx.utils import io_utils, json_utils
from tfx_bsl.coders import example_coder

from components import beam_in_process
from components.beam_dependencies import skip_for_local_runners
from components.log_example_gen.artifacts import num_examples_property
from components.log_example_gen.record_files import read_frames
from components.statistics_gen import sampling

skip_for_local_runners()  # no TFX sdist per run on the DirectRunner (components/beam_dependencies.py)
beam_in_process.install()  # no state cache, no logger resets per pickle (components/beam_in_process.py)

SAMPLE_ROWS_KEY = "sample_rows"
DECODE_BATCH = 8192  # serialized examples per decoded RecordBatch, and TFDV's batch unless set


class _DecodeSample(beam.DoFn):
    """(split, shard file) -> (split, RecordBatch) of its sampled examples."""

    def __init__(self, rates: Dict[str, float]):
        self._rates = rates

    def setup(self):
        self._decoder = example_coder.ExamplesToRecordBatchDecoder()

    def process(self, split_path: Tuple[str, str]):
        split, path = split_path
        batch: List[bytes] = []
        for record in read_frames(path, sampling.record_mask(path, self._rates[split])):
            batch.append(record)
            if len(batch) == DECODE_BATCH:
                yield split, self._decoder.DecodeBatch(batch)
                batch = []
        if batch:
            yield split, self._decoder.DecodeBatch(batch)


def _write_splits(merged: statistics_pb2.DatasetFeatureStatisticsList, paths: Dict[str, str]) -> None:
    """The sliced statistics (a dataset per split, named by it) -> each split's FeatureStats.pb,
    as ``tfdv.GenerateStatistics`` writes it (unnamed); a split without rows gets TFDV's
    statistics of no input, an empty dataset."""
    by_split = {d.name: d for d in merged.datasets}
    unknown = sorted(set(by_split) - set(paths) - {""})
    if unknown:
        raise ValueError(f"statistics of unknown splits {unknown}")
    for split, path in paths.items():
        out = statistics_pb2.DatasetFeatureStatisticsList()
        dataset = out.datasets.add()
        if split in by_split:
            dataset.CopyFrom(by_split[split])
            dataset.ClearField("name")
        io_utils.write_bytes_file(path, out.SerializeToString())


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
        options.desired_batch_size = options.desired_batch_size or DECODE_BATCH

        statistics = artifact_utils.get_single_instance(output_dict[specs.STATISTICS_KEY])
        statistics.split_names = artifact_utils.encode_split_names(splits)
        statistics.span = examples.span
        statistics.set_json_value_custom_property(tfx_executor.SAMPLE_RATE_BY_SPLIT_PROPERTY_NAME,
                                                  json_utils.dumps(rates))
        sharded = exec_properties.get(specs.SHARDED_STATS_OUTPUT_KEY, False)
        if sharded and not tfdv.default_sharded_output_supported():
            raise ValueError("sharded statistics output was requested but is not supported")
        files = {split: sorted(m.path for m in beam.io.filesystems.FileSystems.match(
            [os.path.join(artifact_utils.get_split_uri([examples], split), "*")])[0].metadata_list)
            for split in splits}
        binary = {split: os.path.join(artifact_utils.get_split_uri([statistics], split),
                                      tfx_executor.DEFAULT_FILE_NAME) for split in splits}
        with self._make_beam_pipeline() as p:
            batches = (p
                       | "Files" >> beam.Create([(split, path) for split in splits for path in files[split]])
                       | "Spread" >> beam.Reshuffle()
                       | "ReadSample" >> beam.ParDo(_DecodeSample(rates)).with_output_types(
                           Tuple[str, pa.RecordBatch]))
            if _per_split(options, sharded):
                for split in splits:
                    _ = (batches
                         | f"Only[{split}]" >> beam.Filter(lambda kv, s=split: kv[0] == s)
                         | f"Batches[{split}]" >> beam.Values().with_output_types(pa.RecordBatch)
                         | f"GenerateStatistics[{split}]" >> tfdv.GenerateStatistics(options)
                         | f"WriteStatsOutput[{split}]" >> _writer(binary[split], sharded))
            else:
                if options.feature_allowlist:  # what GenerateStatistics does before slicing
                    batches |= "FilterFeaturesByAllowList" >> beam.MapTuple(
                        lambda split, batch: (split, stats_impl._filter_features(batch, options.feature_allowlist)))
                _ = (batches
                     | "GenerateStatistics" >> stats_impl.GenerateSlicedStatisticsImpl(options,
                                                                                        is_slicing_enabled=True)
                     | "WriteStatsOutput" >> beam.Map(_write_splits, binary))


def _per_split(options: tfdv.StatsOptions, sharded: bool) -> bool:
    """TFX's graph per split where one graph cannot say the same: the user's own slices,
    or statistics written in several parts."""
    return bool(sharded or options.slicing_config or options.experimental_slice_functions
                or options.experimental_slice_sqls or options.experimental_result_partitions != 1)


def _writer(binary: str, sharded: bool) -> beam.PTransform:
    if not sharded:
        return tfdv.WriteStatisticsToBinaryFile(binary)
    return tfdv.WriteStatisticsToRecordsAndBinaryFile(
        binary_proto_path=binary,
        records_path_prefix=os.path.join(os.path.dirname(binary), tfx_executor.stats_artifact_utils.SHARDED_STATS_PREFIX
                                         + tfdv.default_sharded_output_suffix()))
