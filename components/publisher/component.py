"""Publisher: a TFX component that replaces the stock Pusher (issue #10).

Usage in a pipeline (after the Evaluator)::

    publisher = Publisher(model=trainer.outputs["model"], model_blessing=evaluator.outputs["blessing"],
                          transform_graph=transform.outputs["transform_graph"],
                          examples=example_gen.outputs["examples"],
                          serving_base="/serving/watchtime_ranker", model_name="watchtime_ranker",
                          config_json=json.dumps(PublishConfig(...).to_json_dict()),
                          batching_json=json.dumps(configs.SERVING_BATCHING))

Inputs: the trained ``model`` (its SavedModel and the row importance beside it), the
Evaluator's ``model_blessing`` (nothing is published unless blessed), the
``transform_graph`` (the serving signatures apply it) and the raw ``examples``: the
``eval_split`` verifies the published model and feeds the warmup file; the
``tune_split`` (the validation day) draws the NE-loss sweep and, with prune_auto, picks
the pruned fraction, so nothing is tuned on the rows that verify it.

Full or delta (issue #14): publish.py decides per run from the config's full_every and
the publisher state (components/publisher/freshness.py, state.py); a delta publish also
assembles the next version in ``serving_base`` and leaves the delta in
``<serving_base>/deltas/<version>/``.

TF Serving's files (components/publisher/serving_files.py): with ``batching_json`` (the
BatchingParameters fields as JSON) every run rewrites ``models.config`` (latest
min(2, keep_versions) versions, labels canary = newest, stable = the one before),
``batching_parameters.txt`` and ``monitoring_config.txt`` in the parent of
``serving_base``, each parsed with the TF Serving protos first; ``container_base`` is
where that parent is mounted in the TF Serving container (models.config's base_path).

A blessed model the newest version was already published from (a rerun on unchanged
inputs: the Trainer cached, blessed against itself) is not published again: decision
"already serving", ``pushed`` 1 with that version's destination (components/publisher/sources.py).

Outputs: ``pushed_model``, a standard PushedModel (custom properties ``pushed`` 0/1,
``pushed_destination``, ``pushed_version``, as the stock Pusher's, so lineage and
LatestBlessedModel-style resolvers keep working), and ``publish_report``
(``publish_report.json``, components/publisher/publish.py).
"""
import json
import os

from tfx.dsl.component.experimental.annotations import InputArtifact, OutputArtifact, Parameter
from tfx.dsl.component.experimental.decorators import component
from tfx.types import standard_artifacts
from tfx.utils import path_utils

from components.publisher import publish as publish_lib
from components.publisher import serving_files, sources, versioning
from components.publisher.artifacts import PublishReport
from models.publishing.config import PublishConfig

REPORT_FILE = "publish_report.json"


@component
def Publisher(  # pylint: disable=invalid-name
    model: InputArtifact[standard_artifacts.Model],
    model_blessing: InputArtifact[standard_artifacts.ModelBlessing],
    transform_graph: InputArtifact[standard_artifacts.TransformGraph],
    examples: InputArtifact[standard_artifacts.Examples],
    pushed_model: OutputArtifact[standard_artifacts.PushedModel],
    publish_report: OutputArtifact[PublishReport],
    serving_base: Parameter[str],
    model_name: Parameter[str],
    config_json: Parameter[str],
    eval_split: Parameter[str] = "eval",
    tune_split: Parameter[str] = "validation",
    batching_json: Parameter[str] = "",
    container_base: Parameter[str] = "/models",
):
    """Publishes a pruned int8 version of a blessed model, or records why not."""
    import tensorflow as tf

    config = PublishConfig.from_json_dict(json.loads(config_json))
    blessed = bool(model_blessing.get_int_custom_property("blessed"))
    already = sources.serving_version_of(serving_base, model.uri) if blessed else None
    if not blessed:
        report = {"decision": "not published", "reason": "the Evaluator did not bless the model",
                  "version": None, "served_versions": []}
    elif already is not None:  # a cached model blessed again (sources.py): it already serves
        report = {"decision": "already serving", "version": already,
                  "path": os.path.join(serving_base, str(already)),
                  "reason": f"the newest version {already} was published from this model ({model.uri})"}
    else:
        files = sorted(tf.io.gfile.glob(os.path.join(examples.uri, f"Split-{eval_split}", "*")))
        tune_files = sorted(tf.io.gfile.glob(os.path.join(examples.uri, f"Split-{tune_split}", "*")))
        report = publish_lib.publish(
            trained_model_dir=path_utils.serving_model_path(model.uri), model_artifact_dir=model.uri,
            transform_graph_dir=transform_graph.uri, eval_files=files, serving_base=serving_base,
            model_name=model_name, config=config, tune_files=tune_files or None)
        if report["decision"] == "published":
            sources.record_source(serving_base, int(report["version"]), model.uri)
    versions = versioning.list_versions(serving_base)
    if batching_json and versions:  # TF Serving's files follow the versions on disk
        report["serving_files"] = serving_files.write_serving_files(
            serving_base, model_name, versions, config.keep_versions, batching_json, container_base)
    path = os.path.join(publish_report.uri, REPORT_FILE)
    publish_lib.write_report(report, path)
    publish_report.set_string_custom_property("report_json", path)
    publish_report.set_string_custom_property("decision", report["decision"])
    publish_report.set_string_custom_property("kind", str(report.get("kind", "")))  # "full" | "delta" (#14)
    pushed = report["decision"] in ("published", "already serving")  # the model is at pushed_destination
    pushed_model.set_int_custom_property("pushed", int(pushed))
    if pushed:
        pushed_model.set_string_custom_property("pushed_destination", report["path"])
        pushed_model.set_string_custom_property("pushed_version", str(report["version"]))
