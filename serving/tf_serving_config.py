"""The files real TF Serving reads next to the published versions, generated and validated.

``<serving base>/models.config`` (``--model_config_file``, text ``ModelServerConfig``:
name, base path inside the container, version policy, labels),
``batching_parameters.txt`` (``--batching_parameters_file``, text ``BatchingParameters``)
and ``monitoring_config.txt`` (``--monitoring_config_file``, text ``MonitoringConfig``)
sit in the serving base directory, beside ``<model_name>/<version>/`` (TF Serving ignores
non-numeric names there). Each text is parsed back with the TF Serving protos before it
is written (atomically: temp file + rename), so a typo never reaches a server:
``model_server_config_pb2`` from tensorflow-serving-api, and for the two protos that
package does not ship, descriptors built here field for field from the 2.16 sources
(``servables/tensorflow/session_bundle_config.proto`` fields 1-7,
``config/monitoring_config.proto``).

    python -m serving.tf_serving_config --serving_base outputs/serving_model \
        --model_name watchtime_ranker --num_versions 2 --label stable=3
"""
import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, Optional, Sequence

CONTAINER_BASE = "/models"  # the tensorflow/serving image's MODEL_BASE_PATH
MODEL_CONFIG_FILE = "models.config"
BATCHING_FILE = "batching_parameters.txt"
MONITORING_FILE = "monitoring_config.txt"
PROMETHEUS_PATH = "/monitoring/prometheus/metrics"


@dataclass(frozen=True)
class BatchingParameters:
    """TF Serving's CPU guidance (``batching/README.md``): threads = cores, a 1-10 ms
    timeout, max batch = the largest request (serving_rank: the candidate count)."""
    max_batch_size: int
    batch_timeout_micros: int
    max_enqueued_batches: int
    num_batch_threads: int
    allowed_batch_sizes: Sequence[int] = ()
    pad_variable_length_inputs: bool = False


@dataclass(frozen=True)
class ServingArtifacts:
    model_name: str
    num_versions: int
    batching: BatchingParameters
    labels: Dict[str, int] = field(default_factory=dict)
    container_base: str = CONTAINER_BASE


# ------------------------------------------------------------------ protos
_CLASSES = {}


def proto_classes():
    """(BatchingParameters, MonitoringConfig) message classes, built from descriptors."""
    if _CLASSES:
        return _CLASSES["batching"], _CLASSES["monitoring"]
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf import wrappers_pb2  # noqa: F401  (registers wrappers.proto)

    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(
        name="watchtime_ranker/tf_serving_subset.proto", package="tensorflow.serving",
        syntax="proto3", dependency=["google/protobuf/wrappers.proto"])
    b = fdp.message_type.add(name="BatchingParameters")
    for num, name, type_name in ((1, "max_batch_size", ".google.protobuf.Int64Value"),
                                 (2, "batch_timeout_micros", ".google.protobuf.Int64Value"),
                                 (3, "max_enqueued_batches", ".google.protobuf.Int64Value"),
                                 (4, "num_batch_threads", ".google.protobuf.Int64Value"),
                                 (5, "thread_pool_name", ".google.protobuf.StringValue")):
        b.field.add(name=name, number=num, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=type_name)
    b.field.add(name="allowed_batch_sizes", number=6, type=F.TYPE_INT64, label=F.LABEL_REPEATED)
    b.field.add(name="pad_variable_length_inputs", number=7, type=F.TYPE_BOOL,
                label=F.LABEL_OPTIONAL)
    p = fdp.message_type.add(name="PrometheusConfig")
    p.field.add(name="enable", number=1, type=F.TYPE_BOOL, label=F.LABEL_OPTIONAL)
    p.field.add(name="path", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    m = fdp.message_type.add(name="MonitoringConfig")
    m.field.add(name="prometheus_config", number=1, type=F.TYPE_MESSAGE,
                label=F.LABEL_OPTIONAL, type_name=".tensorflow.serving.PrometheusConfig")
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import wrappers_pb2 as w
    wrappers = descriptor_pb2.FileDescriptorProto()
    w.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    pool.Add(fdp)
    factory = message_factory.MessageFactory(pool)
    _CLASSES["batching"] = factory.GetPrototype(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters"))
    _CLASSES["monitoring"] = factory.GetPrototype(
        pool.FindMessageTypeByName("tensorflow.serving.MonitoringConfig"))
    return _CLASSES["batching"], _CLASSES["monitoring"]


def _parse(text: str, message):
    from google.protobuf import text_format

    return text_format.Parse(text, message)


# ------------------------------------------------------------------ texts
def model_config_text(a: ServingArtifacts) -> str:
    from tensorflow_serving.config import model_server_config_pb2

    labels = "".join(f'\n    version_labels {{ key: "{k}" value: {v} }}'
                     for k, v in sorted(a.labels.items()))
    text = (f"# generated by serving/tf_serving_config.py: tensorflow_model_server "
            f"--model_config_file=<this file>\nmodel_config_list {{\n  config {{\n"
            f'    name: "{a.model_name}"\n'
            f'    base_path: "{a.container_base.rstrip("/")}/{a.model_name}"\n'
            f'    model_platform: "tensorflow"\n'
            f"    model_version_policy {{ latest {{ num_versions: {a.num_versions} }} }}"
            f"{labels}\n  }}\n}}\n")
    _parse(text, model_server_config_pb2.ModelServerConfig())  # validate
    return text


def batching_text(b: BatchingParameters) -> str:
    sizes = list(b.allowed_batch_sizes)
    if sizes and (sizes != sorted(sizes) or sizes[-1] != b.max_batch_size):
        raise ValueError("allowed_batch_sizes must increase and end at max_batch_size")
    lines = [f"max_batch_size {{ value: {b.max_batch_size} }}",
             f"batch_timeout_micros {{ value: {b.batch_timeout_micros} }}",
             f"max_enqueued_batches {{ value: {b.max_enqueued_batches} }}",
             f"num_batch_threads {{ value: {b.num_batch_threads} }}"]
    lines += [f"allowed_batch_sizes: {s}" for s in sizes]
    if b.pad_variable_length_inputs:
        lines.append("pad_variable_length_inputs: true")
    text = "\n".join(lines) + "\n"
    _parse(text, proto_classes()[0]())
    return text


def monitoring_text(path: str = PROMETHEUS_PATH) -> str:
    text = f'prometheus_config {{ enable: true, path: "{path}" }}\n'
    _parse(text, proto_classes()[1]())
    return text


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def write_artifacts(serving_base: str, a: ServingArtifacts) -> Dict[str, str]:
    """Writes the three files into `serving_base`; returns {flag: path}."""
    os.makedirs(serving_base, exist_ok=True)
    out = {"--model_config_file": os.path.join(serving_base, MODEL_CONFIG_FILE),
           "--batching_parameters_file": os.path.join(serving_base, BATCHING_FILE),
           "--monitoring_config_file": os.path.join(serving_base, MONITORING_FILE)}
    _write_atomic(out["--model_config_file"], model_config_text(a))
    _write_atomic(out["--batching_parameters_file"], batching_text(a.batching))
    _write_atomic(out["--monitoring_config_file"], monitoring_text())
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="python -m serving.tf_serving_config",
                                description="Write TF Serving's config files next to the "
                                            "published versions.")
    p.add_argument("--serving_base", required=True, help="dir holding <model_name>/<version>/")
    p.add_argument("--model_name", default="watchtime_ranker")
    p.add_argument("--num_versions", type=int, default=1)
    p.add_argument("--label", action="append", default=[], help="label=version")
    p.add_argument("--container_base", default=CONTAINER_BASE)
    p.add_argument("--max_batch_size", type=int, default=128)
    p.add_argument("--batch_timeout_micros", type=int, default=2000)
    p.add_argument("--max_enqueued_batches", type=int, default=16)
    p.add_argument("--num_batch_threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args(argv)
    labels = {}
    for item in args.label:
        k, _, v = item.partition("=")
        if not k or not v.isdigit():
            print(f"error: --label needs label=version, got {item!r}", file=sys.stderr)
            return 2
        labels[k] = int(v)
    a = ServingArtifacts(args.model_name, args.num_versions, BatchingParameters(
        args.max_batch_size, args.batch_timeout_micros, args.max_enqueued_batches,
        args.num_batch_threads), labels, args.container_base)
    for flag, path in write_artifacts(args.serving_base, a).items():
        print(f"{flag}={path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
