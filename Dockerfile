# Image for the Kubeflow Pipelines v2 runs (kubeflow_v2_runner.py --image ...): the TFX
# 1.16 image (Python 3.10, TFX/TF/Beam) with this project installed at the pins of
# requirements.lock, so every executor of the compiled spec can import models.*,
# components.*, pipeline.* and the custom artifact types (watchtime_ranker.*).
#
#   docker build -t <registry>/watchtime-ranker:<tag> .
#   docker push <registry>/watchtime-ranker:<tag>
#   make kfp IMAGE=<registry>/watchtime-ranker:<tag> PIPELINE_ROOT=gs://... DATA=gs://... SERVING=gs://...
FROM tensorflow/tfx:1.16.0

WORKDIR /app
# oneDNN off, as in `make run` (pipeline/process_memory.default_onednn_off: its caches hold
# memory no Python object holds and grow with the Evaluator's batch shapes)
ENV TF_USE_LEGACY_KERAS=1 \
    TF_ENABLE_ONEDNN_OPTS=0 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Pins first (cached layer), then the project without re-resolving dependencies.
COPY requirements.lock /app/requirements.lock
RUN python -m pip install --no-cache-dir -r /app/requirements.lock
COPY setup.py /app/setup.py
COPY pipeline /app/pipeline
COPY components /app/components
COPY models /app/models
COPY serving /app/serving
COPY data /app/data
COPY schemas /app/schemas
# watchtime_ranker: KFP v2's container entry point imports a custom artifact type by its
# schema title "watchtime_ranker.<Name>" (tfx kubeflow_v2_entrypoint_utils._retrieve_class_path),
# so this package (installed by setup.py) exports the project's custom artifact classes.
COPY watchtime_ranker /app/watchtime_ranker
RUN python -m pip install --no-cache-dir --no-deps /app \
 && python -c "import watchtime_ranker, components.log_example_gen.executor, models.preprocessing"

# The compiled spec overrides the entry point (python -m tfx.orchestration.kubeflow.v2.
# container.kubeflow_v2_run_executor ...); schema.pbtxt is at /app/schemas (--schema_path).
ENTRYPOINT []
