"""kubeflow_v2_runner compiles the same pipeline into a KFP v2 pipeline spec."""
import json

import kubeflow_v2_runner


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
