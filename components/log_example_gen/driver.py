"""LogExampleGen driver: span, version and input fingerprint before the cache check.

Like TFX's ExampleGen driver (tfx/components/example_gen/driver.py): the launcher runs
the driver before it computes the cache key from the execution properties and the
output artifact skeletons, so what the driver adds (``span``, ``version``,
``input_fingerprint``; inputs.py) is part of the key. Edited, added or removed log or
side-table files -> another fingerprint -> a new execution; unchanged files -> the
cached examples are reused.

Both orchestration paths are covered: ``run`` (IR launchers: LocalDagRunner,
BeamDagRunner) and ``resolve_exec_properties`` / ``_prepare_output_artifacts``
(the legacy component launcher).
"""
import copy
from typing import Any, Dict, List

from tfx import types
from tfx.components.example_gen import driver as example_gen_driver
from tfx.dsl.components.base import base_driver
from tfx.orchestration import data_types, data_types_utils, metadata
from tfx.orchestration.portable import base_driver as ir_base_driver
from tfx.orchestration.portable import data_types as portable_data_types
from tfx.proto.orchestration import driver_output_pb2

from components.log_example_gen import inputs as inputs_lib
from components.log_example_gen.config import LogExampleGenConfig
from components.log_example_gen.executor import EXAMPLES_KEY, INPUT_BASE_KEY


class Driver(base_driver.BaseDriver, ir_base_driver.BaseDriver):
    """Adds span / version / input_fingerprint to the execution properties and the
    Examples output artifact."""

    def __init__(self, metadata_handle: metadata.Metadata):
        base_driver.BaseDriver.__init__(self, metadata_handle)
        ir_base_driver.BaseDriver.__init__(self, metadata_handle)

    def resolve_exec_properties(self, exec_properties: Dict[str, Any],
                                pipeline_info: data_types.PipelineInfo,
                                component_info: data_types.ComponentInfo) -> Dict[str, Any]:
        del pipeline_info, component_info
        resolved = inputs_lib.resolve_inputs(exec_properties[INPUT_BASE_KEY],
                                             LogExampleGenConfig.from_exec_properties(exec_properties))
        exec_properties.update(resolved.exec_properties())
        return exec_properties

    def _prepare_output_artifacts(self, input_artifacts, output_dict, exec_properties, execution_id,
                                  pipeline_info, component_info) -> Dict[str, List[types.Artifact]]:
        outputs = base_driver.BaseDriver._prepare_output_artifacts(  # pylint: disable=protected-access
            self, input_artifacts, output_dict, exec_properties, execution_id, pipeline_info,
            component_info)
        for artifact in outputs[EXAMPLES_KEY]:
            example_gen_driver.update_output_artifact(exec_properties, artifact.mlmd_artifact)
        return outputs

    def run(self, execution_info: portable_data_types.ExecutionInfo) -> driver_output_pb2.DriverOutput:
        exec_properties = self.resolve_exec_properties(dict(execution_info.exec_properties), None, None)
        result = driver_output_pb2.DriverOutput()
        for key, value in exec_properties.items():
            if value is not None:
                data_types_utils.set_metadata_value(result.exec_properties[key], value)
        examples = copy.deepcopy(execution_info.output_dict[EXAMPLES_KEY][0].mlmd_artifact)
        example_gen_driver.update_output_artifact(exec_properties, examples)
        result.output_artifacts[EXAMPLES_KEY].artifacts.append(examples)
        return result
