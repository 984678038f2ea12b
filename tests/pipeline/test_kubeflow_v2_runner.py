"""kubeflow_v2_runner compiles the same pipeline into a KFP v2 pipeline spec; the spec is
read back with kfp's proto, every container is checked, and LogExampleGen's container
command from the spec runs locally on tiny logs (the KFP v2 launcher entry point with
the ExecutorInput JSON that KFP would substitute for ``{{$}}``)."""
import glob
import json
import os
import subprocess
import sys

import pytest

import kubeflow_v2_runner

ENTRY_POINT = ["python", "-m", "tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_dockerfile_installs_the_watchtime_ranker_module():
    """KFP v2's entry point imports a custom artifact type by its schema title
    "watchtime_ranker.<Name>": the real package watchtime_ranker/ (installed by setup.py)
    exports the classes; the image copies and installs it, no generated shim."""
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    assert text.startswith("# Image") and "FROM tensorflow/tfx:1.16.0" in text
    assert "COPY watchtime_ranker /app/watchtime_ranker" in text
    assert "printf" not in text and "purelib" not in text  # the old shim is gone
    assert "import watchtime_ranker" in text  # the image build checks the import
    assert "TF_ENABLE_ONEDNN_OPTS=0" in text  # as `make run` (pipeline/process_memory.default_onednn_off)
    with open(os.path.join(ROOT, "setup.py")) as f:
        assert '"watchtime_ranker*"' in f.read()


def test_compiles_every_component_with_the_image(tmp_path):
    out = str(tmp_path / "spec.json")
    kubeflow_v2_runner.compile_pipeline(
        image="registry.example/watchtime-ranker:1", pipeline_root="gs://bucket/root",
        data_path="gs://bucket/logs", serving_model_dir="gs://bucket/serving/watchtime_ranker", output=out,
        beam_pipeline_args=["--runner=DataflowRunner", "--setup_file=./setup.py"],
        schema_path="/app/schemas")
    with open(out) as f:
        spec = json.load(f)["pipelineSpec"]
    tasks = set(spec["root"]["dag"]["tasks"])
    assert {"LogExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "Transform", "Trainer",
            "Evaluator", "Pusher"} <= tasks
    executors = spec["deploymentSpec"]["executors"]
    images = {e["container"]["image"] for e in executors.values() if "container" in e}
    assert images == {"registry.example/watchtime-ranker:1"}
    leg = executors["LogExampleGen_executor"]["container"]["args"]
    assert "components.log_example_gen.executor.Executor" in leg
    text = json.dumps(spec)
    assert "gs://bucket/logs" in text and "/app/schemas/schema.pbtxt" in text
    assert "DataflowRunner" in text
    assert spec["pipelineInfo"]["name"] == "watchtime-ranker"


@pytest.fixture(scope="module")
def local_spec(tmp_path_factory):
    from tests.components.log_example_gen.fixture_logs import at, log_line, write_inputs
    from schemas.kuairand_format import LOG_COLUMNS

    tmp = tmp_path_factory.mktemp("kfp")
    write_inputs(str(tmp / "logs"), with_bad=False)  # 20220425-27; one more day for the
    with open(tmp / "logs" / "log_part3.csv", "w") as f:  # configured split (2 eval days + 1 validation)
        f.write(",".join(LOG_COLUMNS) + "\n" + log_line(2, 11, 20220428, at(20220428, 0)) + "\n")
    out = str(tmp / "spec.json")
    kubeflow_v2_runner.compile_pipeline(
        image="registry.example/watchtime-ranker:1", pipeline_root=str(tmp / "root"),
        data_path=str(tmp / "logs"), serving_model_dir=str(tmp / "serving" / "watchtime_ranker"), output=out,
        beam_pipeline_args=["--direct_running_mode=in_memory", "--direct_num_workers=1"],
        schema_path="/app/schemas")
    return tmp, out


def test_spec_read_back_with_kfp_names_image_command_and_args_of_every_component(local_spec):
    from google.protobuf import json_format
    from kfp.pipeline_spec import pipeline_spec_pb2
    from tfx.utils import import_utils

    with open(local_spec[1]) as f:
        spec = json_format.ParseDict(json.load(f)["pipelineSpec"], pipeline_spec_pb2.PipelineSpec(),
                                     ignore_unknown_fields=True)
    executors = json_format.MessageToDict(spec.deployment_spec)["executors"]
    containers = {label: e["container"] for label, e in executors.items() if "container" in e}
    assert {c.split("_executor")[0] for c in containers} >= {
        "LogExampleGen", "StatisticsGen", "ImportSchemaGen", "ExampleValidator", "Transform", "Trainer",
        "Evaluator", "Pusher"}
    for label, c in containers.items():
        assert c["image"] == "registry.example/watchtime-ranker:1", label
        assert c["command"] == ENTRY_POINT, label
        args = c["args"]
        assert args[:2] == ["--executor_class_path", args[1]] and args[2:4] == [
            "--json_serialized_invocation_args", "{{$}}"], label
        assert args[4:] == ["--direct_running_mode=in_memory", "--direct_num_workers=1"], label
        assert import_utils.import_class_by_path(args[1]), label  # importable in this image
    # custom output artifact types are imported by their schema title inside the container,
    # the way the entry point does it: every one resolves through the watchtime_ranker package
    import watchtime_ranker
    from tfx.orchestration.kubeflow.v2.container import kubeflow_v2_entrypoint_utils as entrypoint

    types = [out.artifact_type for comp in spec.components.values()
             for out in comp.output_definitions.artifacts.values()]
    paths = {entrypoint._retrieve_class_path(t) for t in types}
    custom = sorted(p for p in paths if not p.startswith("tfx."))
    assert custom == ["watchtime_ranker.DeadLetterRows", "watchtime_ranker.ModelReport",
                      "watchtime_ranker.PublishReport"]
    for path in custom:
        cls = import_utils.import_class_by_path(path)
        assert cls.TYPE_NAME == path and cls in watchtime_ranker.CUSTOM_ARTIFACT_TYPES, path
    assert sorted(c.TYPE_NAME for c in watchtime_ranker.CUSTOM_ARTIFACT_TYPES) == custom
    assert os.path.dirname(watchtime_ranker.__file__) == os.path.join(ROOT, "watchtime_ranker")


def test_log_example_gen_container_command_runs_locally(local_spec):
    from tests.components.log_example_gen.fixture_logs import GOOD

    tmp, path = local_spec
    with open(path) as f:
        spec = json.load(f)["pipelineSpec"]
    container = spec["deploymentSpec"]["executors"]["LogExampleGen_executor"]["container"]
    component = spec["components"]["LogExampleGen"]
    task = spec["root"]["dag"]["tasks"]["LogExampleGen"]
    task_root = tmp / "root" / "LogExampleGen_1"
    # What the KFP v2 launcher substitutes for {{$}}: parameters, output artifacts, output file.
    executor_input = {
        "inputs": {"parameters": {k: v["runtimeValue"]["constantValue"]
                                  for k, v in task["inputs"]["parameters"].items()}},
        "outputs": {
            "artifacts": {key: {"artifacts": [{"name": f"LogExampleGen-{key}", "type": d["artifactType"],
                                               "uri": str(task_root / key)}]}
                          for key, d in component["outputDefinitions"]["artifacts"].items()},
            "outputFile": str(task_root / "executor_output.json"),
        },
    }
    args = [json.dumps(executor_input) if a == "{{$}}" else a for a in container["args"]]
    command = [sys.executable] + container["command"][1:]  # the image's `python`
    # the project as the image has it (the repo root, where setup.py's packages live): the
    # entry point imports the DeadLetterRows output type from the real watchtime_ranker package
    pythonpath = os.pathsep.join([ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    done = subprocess.run(command + args, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2",
                                   PYTHONPATH=pythonpath))
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.load(open(task_root / "dead_letter" / "counts.json"))
    assert counts["good_rows"] == len(GOOD) + 1 and counts["bad_rows"] == 0
    assert counts["splits"] == {"train": 1, "validation": 3, "eval": 4}
    for split in ("train", "validation", "eval"):
        assert glob.glob(str(task_root / "examples" / f"Split-{split}" / "data_tfrecord-*.gz")), split
    output = json.load(open(task_root / "executor_output.json"))  # what KFP records in MLMD
    examples = output["artifacts"]["examples"]["artifacts"][0]
    assert json.loads(examples["metadata"]["split_names"]) == ["train", "validation", "eval"]
    assert examples["metadata"]["num_train_examples"] == counts["splits"]["train"]


def test_beam_runner_argument_sets_fill_and_refuse_missing_fields():
    from pipeline import configs
    from pipeline.runners import beam_args

    assert set(configs.BEAM_RUNNER_ARGS) >= {"DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"}
    assert beam_args("DirectRunner") == ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
    flags = beam_args("DataflowRunner", project="p", region="europe-west4", temp_location="gs://b/tmp",
                      num_workers=8)
    assert "--runner=DataflowRunner" in flags and "--project=p" in flags and "--max_num_workers=8" in flags
    flink = beam_args("FlinkRunner", job_endpoint="localhost:8099", image="img:1", num_workers=4)
    assert flink[:2] == ["--runner=PortableRunner", "--job_endpoint=localhost:8099"]
    assert "--environment_config=img:1" in flink
    with pytest.raises(ValueError, match=r"needs values for \['image', 'job_endpoint'\]"):
        beam_args("SparkRunner")
    with pytest.raises(ValueError, match="unknown Beam runner 'Dask'"):
        beam_args("Dask")
