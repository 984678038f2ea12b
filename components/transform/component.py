"""TFX's Transform component with ``components.transform.executor`` (FramesTFXIO):
same spec, inputs, outputs and node id ("Transform")."""
from tfx.components.transform import component as tfx_component
from tfx.dsl.components.base import executor_spec

from components.transform import executor


class Transform(tfx_component.Transform):
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(executor.Executor)
