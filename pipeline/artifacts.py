"""MLMD lookups: the one way tooling (`make run`, benches, tests) finds pipeline outputs.

The pipeline root's directory layout (`<root>/<node>/<output>/<execution id>/`) is a
TFX implementation detail; which artifact is the newest output of a component is
recorded in ML Metadata. Every lookup here goes through MLMD:

    store = PipelineStore.for_output_dir("outputs")
    examples_uri = store.latest_uri("LogExampleGen", "examples")
    index_html = store.latest_property("ModelReport", "report", "index_html")

A component's outputs are the artifacts attached to OUTPUT events of its node's
executions (context type "node", name "<pipeline>.<node id>"), completed or cached,
newest last.
"""
import os
from typing import List, Optional

from pipeline import configs

_NODE_CONTEXT = "node"


class PipelineStore:
    """Read-only view of one pipeline's MLMD store."""

    def __init__(self, metadata_path: str, pipeline_name: str = configs.PIPELINE_NAME):
        if not os.path.exists(metadata_path):
            raise FileNotFoundError(f"no MLMD store at {metadata_path}: has the pipeline run?")
        from ml_metadata import metadata_store
        from ml_metadata.proto import metadata_store_pb2

        config = metadata_store_pb2.ConnectionConfig()
        config.sqlite.filename_uri = metadata_path
        config.sqlite.connection_mode = metadata_store_pb2.SqliteMetadataSourceConfig.READONLY
        self._store = metadata_store.MetadataStore(config)
        self._pb2 = metadata_store_pb2
        self.pipeline_name = pipeline_name

    @classmethod
    def for_output_dir(cls, output_dir: str, pipeline_name: str = configs.PIPELINE_NAME) -> "PipelineStore":
        """The store a local run under `output_dir` writes (configs.output_paths)."""
        return cls(configs.output_paths(output_dir)["metadata_path"], pipeline_name)

    def outputs(self, node_id: str, output_key: str) -> list:
        """Every live artifact `node_id` produced under `output_key`, oldest first."""
        pb2 = self._pb2
        context = self._store.get_context_by_type_and_name(_NODE_CONTEXT, f"{self.pipeline_name}.{node_id}")
        if context is None:
            return []
        done = (pb2.Execution.COMPLETE, pb2.Execution.CACHED)
        execution_ids = [e.id for e in self._store.get_executions_by_context(context.id)
                         if e.last_known_state in done]
        if not execution_ids:
            return []
        ids = {ev.artifact_id for ev in self._store.get_events_by_execution_ids(execution_ids)
               if ev.type == pb2.Event.OUTPUT and ev.path.steps and ev.path.steps[0].key == output_key}
        artifacts = [a for a in self._store.get_artifacts_by_id(sorted(ids))
                     if a.state in (pb2.Artifact.LIVE, pb2.Artifact.UNKNOWN)]
        return sorted(artifacts, key=lambda a: (a.create_time_since_epoch, a.id))

    def uris(self, node_id: str, output_key: str) -> List[str]:
        return [a.uri for a in self.outputs(node_id, output_key)]

    def latest(self, node_id: str, output_key: str):
        found = self.outputs(node_id, output_key)
        return found[-1] if found else None

    def latest_uri(self, node_id: str, output_key: str) -> Optional[str]:
        artifact = self.latest(node_id, output_key)
        return artifact.uri if artifact is not None else None

    def latest_property(self, node_id: str, output_key: str, name: str):
        """A custom property of the newest output (int, double, string, or the value of a
        JSON property, e.g. StatisticsGen's ``sample_rate_by_split``), or None."""
        artifact = self.latest(node_id, output_key)
        if artifact is None or name not in artifact.custom_properties:
            return None
        value = artifact.custom_properties[name]
        if value.WhichOneof("value") == "struct_value":  # TFX's JSON property: {"__value__": its JSON}
            import json

            from google.protobuf import json_format

            wrapped = json_format.MessageToDict(value.struct_value)
            wrapped = wrapped.get("__value__", wrapped)
            return json.loads(wrapped) if isinstance(wrapped, str) else wrapped
        return getattr(value, value.WhichOneof("value"))

    # ------------------------------------------------------------ what tooling asks for
    def examples_uri(self) -> str:
        uri = self.latest_uri("LogExampleGen", "examples")
        if uri is None:
            raise FileNotFoundError(f"MLMD has no LogExampleGen examples for pipeline {self.pipeline_name!r}")
        return uri

    def blessed(self) -> Optional[bool]:
        """Whether the newest Evaluator run blessed its candidate (None: no evaluation)."""
        value = self.latest_property("Evaluator", "blessing", "blessed")
        return None if value is None else bool(value)

    def blessing_failures(self) -> List[str]:
        """Why the newest Evaluator run did not bless (`validation_failures` of its
        evaluation); [] when it blessed or there is no evaluation."""
        uri = self.latest_uri("Evaluator", "evaluation")
        if uri is None or not os.path.exists(os.path.join(uri, "validations.tfrecord")):
            return []
        import tensorflow_model_analysis as tfma

        return validation_failures(tfma.load_validation_result(uri))

    def report_index(self) -> Optional[str]:
        """index.html of the newest ModelReport, or None."""
        index = self.latest_property("ModelReport", "report", "index_html")
        return index if index and os.path.exists(index) else None

    def pushed_version_dir(self) -> Optional[str]:
        """Where the newest push put its model version, or None when nothing was pushed."""
        artifact = self.latest("Pusher", "pushed_model")
        if artifact is None or not artifact.custom_properties["pushed"].int_value:
            return None
        return artifact.custom_properties["pushed_destination"].string_value

    def publish_report(self) -> Optional[dict]:
        """The newest Publisher's report (components/publisher/publish.py), or None."""
        import json

        path = self.latest_property("Pusher", "publish_report", "report_json")
        if not path or not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)


def split_files(examples_uri: str, split: str) -> List[str]:
    import tensorflow as tf

    return sorted(tf.io.gfile.glob(os.path.join(examples_uri, f"Split-{split}", "*")))


def held_back_examples(examples_uri: str, n: int, split: str = "eval") -> list:
    """The first n serialized examples of a split of an Examples artifact."""
    import tensorflow as tf

    files = split_files(examples_uri, split)
    if not files:
        raise FileNotFoundError(f"no Split-{split} files under {examples_uri}")
    dataset = tf.data.TFRecordDataset(files, compression_type="GZIP").take(n)
    return [record.numpy() for record in dataset]


def validation_failures(result) -> List[str]:
    """One line per failed metric threshold of a TFMA ValidationResult, e.g.
    "watch_time_s/mean_absolute_error, candidate - baseline = 5.41 (change_threshold
    absolute 1.0, LOWER_IS_BETTER)", and the slices or thresholds TFMA found missing."""
    from google.protobuf import text_format

    lines = []
    for per_slice in result.metric_validations_per_slice:
        where = text_format.MessageToString(per_slice.slice_key, as_one_line=True) or "overall"
        for failure in per_slice.failures:
            key = failure.metric_key
            kind = failure.metric_value.WhichOneof("type")  # double_value is a DoubleValue message
            value = getattr(getattr(failure.metric_value, kind), "value", None) if kind else None
            value = f"{value:.4g}" if isinstance(value, float) else "?"
            threshold = text_format.MessageToString(failure.metric_threshold, as_one_line=True)
            lines.append(f"{key.output_name + '/' if key.output_name else ''}{key.name}"
                         f"{', candidate - baseline' if key.is_diff else ''} = {value} ({threshold}; slice {where})")
    lines += [f"missing slice: {text_format.MessageToString(m, as_one_line=True)}" for m in result.missing_slices]
    if result.missing_thresholds:
        lines.append(f"{len(result.missing_thresholds)} metric threshold(s) had no value")
    return lines
