"""TF Serving's ``--model_config_file`` (text ``ModelServerConfig``) <-> `ModelSpec`s.

Parsed with the ``tensorflow_serving.config.model_server_config_pb2`` proto itself
(``config/model_server_config.proto``): ``model_platform`` must be "tensorflow",
names must be unique, ``model_version_policy`` is ``latest {num_versions}`` (default
1), ``all {}`` or ``specific {versions: ...}``, ``version_labels`` maps a label to a
version. A relative ``base_path`` is resolved against the config file's directory (TF
Serving resolves it against its working directory).
"""
import os
from typing import Dict, List

from serving.model_manager import ModelSpec, VersionPolicy


def parse_model_specs(text: str, config_dir: str = ".") -> List[ModelSpec]:
    from google.protobuf import text_format
    from tensorflow_serving.config import model_server_config_pb2

    config = model_server_config_pb2.ModelServerConfig()
    text_format.Parse(text, config)
    if config.WhichOneof("config") == "custom_model_config":
        raise ValueError("custom_model_config is not supported; use model_config_list")
    specs, seen = [], set()
    for c in config.model_config_list.config:
        if not c.name:
            raise ValueError("a model config has no name")
        if c.name in seen:
            raise ValueError(f"Illegal to list model {c.name} multiple times in config list")
        seen.add(c.name)
        if c.model_platform != "tensorflow":
            raise ValueError(f"model {c.name}: model_platform must be \"tensorflow\", got "
                             f"{c.model_platform!r}")
        base = c.base_path
        if not base:
            raise ValueError(f"model {c.name} has no base_path")
        if not os.path.isabs(base):
            base = os.path.join(config_dir, base)
        specs.append(ModelSpec(c.name, os.path.abspath(base), policy_from_proto(c),
                               dict(c.version_labels)))
    if not specs:
        raise ValueError("the config lists no models (model_config_list { config {...} })")
    return specs


def policy_from_proto(c) -> VersionPolicy:
    p = c.model_version_policy
    kind = p.WhichOneof("policy_choice")
    if kind == "all":
        return VersionPolicy("all")
    if kind == "specific":
        if not p.specific.versions:
            raise ValueError(f"model {c.name}: specific version policy lists no versions")
        return VersionPolicy("specific", versions=tuple(p.specific.versions))
    n = p.latest.num_versions if kind == "latest" else 1
    return VersionPolicy("latest", num_versions=max(1, n))


def read_model_specs(path: str) -> List[ModelSpec]:
    with open(path) as f:
        text = f.read()
    return parse_model_specs(text, os.path.dirname(os.path.abspath(path)))


def read_model_config(path: str) -> Dict[str, str]:
    """{model_name: model_base_path} of a model config file."""
    return {s.name: s.base_path for s in read_model_specs(path)}
