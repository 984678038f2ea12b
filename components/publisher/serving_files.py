"""TF Serving's config files, rewritten by the Publisher next to the versions it publishes.

The serving base of a model is `<root>/<model_name>/` (numeric versions inside); TF
Serving's files sit in `<root>` (serving/tf_serving_config.py: the docker-compose and
KServe manifests mount `<root>` at /models):

    models.config            model_config_list { config { name, base_path: /models/<name>,
                             model_version_policy { latest { num_versions: n } },
                             version_labels { stable: v_prev, canary: v_new } } }
    batching_parameters.txt  BatchingParameters (pipeline/configs/serving.py SERVING_BATCHING)
    monitoring_config.txt    Prometheus on /monitoring/prometheus/metrics

    n = min(2, keep_versions, #versions on disk)
    canary = the newest version, stable = the one before it (the newest when alone)

so a publish makes the new version the canary while the previous one stays loaded as
stable (TF Serving refuses labels on versions it has not loaded: both are within
`latest n`). Each text is validated by parsing it with the TF Serving protos
(serving/tf_serving_config.py) and written atomically (models/publishing/atomic_files.py;
through tf.io.gfile on object stores). Only this model is listed: a root shared by
several models needs its own models.config.
"""
import json
import os
from typing import Dict, List

import tensorflow as tf

from models.publishing.atomic_files import is_remote, write_file_atomic
from serving import tf_serving_config as tsc


def labels_for(versions: List[int]) -> Dict[str, int]:
    """{"canary": newest, "stable": the one before it (the newest when alone)}; {} if none."""
    if not versions:
        return {}
    versions = sorted(versions)
    return {"canary": versions[-1], "stable": versions[-2] if len(versions) > 1 else versions[-1]}


def serving_artifacts(model_name: str, versions: List[int], keep_versions: int, batching: dict,
                      container_base: str = tsc.CONTAINER_BASE) -> tsc.ServingArtifacts:
    """The ServingArtifacts of one model (module docstring)."""
    num_versions = max(1, min(2, int(keep_versions), len(versions) or 1))
    return tsc.ServingArtifacts(model_name, num_versions, tsc.BatchingParameters(**batching),
                                labels_for(sorted(versions)[-num_versions:]), container_base)


def _write(path: str, text: str) -> None:
    if is_remote(path):
        with tf.io.gfile.GFile(path, "w") as f:  # object stores replace a file whole
            f.write(text)
    else:
        write_file_atomic(path, text.encode())


def write_serving_files(serving_base: str, model_name: str, versions: List[int], keep_versions: int,
                        batching_json: str, container_base: str = tsc.CONTAINER_BASE) -> Dict[str, str]:
    """Writes the three files into dirname(serving_base); returns {TF Serving flag: path}.
    Every text is parsed with the TF Serving protos first (a bad value raises here)."""
    a = serving_artifacts(model_name, versions, keep_versions, json.loads(batching_json), container_base)
    texts = {"--model_config_file": (tsc.MODEL_CONFIG_FILE, tsc.model_config_text(a)),
             "--batching_parameters_file": (tsc.BATCHING_FILE, tsc.batching_text(a.batching)),
             "--monitoring_config_file": (tsc.MONITORING_FILE, tsc.monitoring_text())}
    root = os.path.dirname(serving_base.rstrip("/"))
    tf.io.gfile.makedirs(root)
    out = {}
    for flag, (name, text) in texts.items():
        out[flag] = os.path.join(root, name)
        _write(out[flag], text)
    return out
