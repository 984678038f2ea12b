"""Every knob of the pipeline, in one place (TFX template convention).

`create_pipeline(...)` takes these as explicit arguments; the runners
(`local_runner.py`, `kubeflow_v2_runner.py`, `pipeline/run_local.py`, through
`pipeline/runners.py`) read them from here and may override a few from the
environment (documented per knob). Each consumer gets one typed config object whose
class lives beside the consumer and holds no defaults: ``TRANSFORM``
(`models.transform_config.TransformConfig`, Transform's custom_config), ``TRAINER``
(`models.training.config.TrainerConfig`, the Trainer's custom_config) and
``LOG_EXAMPLE_GEN``. Nothing under models/ or components/ imports this package.

One module per area (core, ingestion, training, evaluation, publishing, serving); every
knob is read as ``configs.NAME`` from this package.
"""
from pipeline.configs.core import *  # noqa: F401,F403
from pipeline.configs.ingestion import *  # noqa: F401,F403
from pipeline.configs.training import *  # noqa: F401,F403
from pipeline.configs.evaluation import *  # noqa: F401,F403
from pipeline.configs.publishing import *  # noqa: F401,F403
from pipeline.configs.serving import *  # noqa: F401,F403
