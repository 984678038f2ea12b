"""Compiles the same pipeline for Kubeflow Pipelines v2 (Vertex AI Pipelines compatible).

    python kubeflow_v2_runner.py --image gcr.io/<project>/watchtime-ranker:latest \
        --pipeline_root gs://<bucket>/tfx --data_path gs://<bucket>/kuairand \
        --serving_model_dir gs://<bucket>/serving/watchtime_ranker --output watchtime_ranker.json

The image must contain this repository installed (`pip install .`, which pulls the
pins of requirements.lock) so the executors can import `models.*`, `components.*`
and `pipeline.*`. Beam stages run on Dataflow (or Flink/Spark) when
`--beam_pipeline_args` says so, e.g. `--runner=DataflowRunner --project=... --region=...
--temp_location=gs://... --setup_file=./setup.py`, or by a documented argument set of
pipeline/configs/: `--beam_runner DataflowRunner --beam_value project=p --beam_value
region=r --beam_value temp_location=gs://b/tmp --beam_value num_workers=8`. The output is the KFP v2
pipeline spec (JSON) that `kfp` / Vertex submit.
"""
import argparse
import os
import shlex

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

from tfx import v1 as tfx  # noqa: E402

from pipeline import configs  # noqa: E402
from pipeline.pipeline import create_pipeline  # noqa: E402
from pipeline.runners import beam_args, configured_args  # noqa: E402


def compile_pipeline(image: str, pipeline_root: str, data_path: str, serving_model_dir: str, output: str,
                     beam_pipeline_args=None, schema_path: str = configs.SCHEMA_PATH) -> str:
    """Writes the KFP v2 pipeline spec to `output` and returns its path."""
    args = configured_args()
    args.update(
        pipeline_name=configs.PIPELINE_NAME.replace("_", "-"),  # KFP names: [a-z0-9][a-z0-9-]*
        pipeline_root=pipeline_root,
        data_path=data_path,
        schema_path=schema_path,
        serving_model_dir=serving_model_dir,
        metadata_connection_config=None,  # KFP provides MLMD
        beam_pipeline_args=beam_pipeline_args or [],
    )
    pipeline = create_pipeline(**args)
    runner = tfx.orchestration.experimental.KubeflowV2DagRunner(
        config=tfx.orchestration.experimental.KubeflowV2DagRunnerConfig(default_image=image),
        output_filename=output,
    )
    runner.run(pipeline)
    return output


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--image", required=True, help="container image with this repository installed")
    p.add_argument("--pipeline_root", required=True)
    p.add_argument("--data_path", required=True, help="folder of KuaiRand-Pure-format logs")
    p.add_argument("--serving_model_dir", required=True, help="<base>/<model name> that TF Serving polls")
    p.add_argument("--schema_path", default=configs.SCHEMA_PATH,
                   help="folder holding schema.pbtxt as seen inside the image")
    p.add_argument("--output", default=f"{configs.PIPELINE_NAME}_kfp_v2.json")
    p.add_argument("--beam_pipeline_args", default="", help="quoted Beam flags for the Beam components")
    p.add_argument("--beam_runner", default=None,
                   help="a runner of configs.BEAM_RUNNER_ARGS (DataflowRunner, FlinkRunner, SparkRunner, ...); "
                        "its flags come before --beam_pipeline_args")
    p.add_argument("--beam_value", action="append", default=[], metavar="KEY=VALUE",
                   help="fills a {field} of the runner's flags, e.g. project=my-project (repeatable)")
    args = p.parse_args()
    flags = []
    if args.beam_runner:
        values = dict(v.split("=", 1) for v in args.beam_value)
        values.setdefault("image", args.image)
        flags = beam_args(args.beam_runner, **values)
    path = compile_pipeline(args.image, args.pipeline_root, args.data_path, args.serving_model_dir, args.output,
                            flags + shlex.split(args.beam_pipeline_args), args.schema_path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
