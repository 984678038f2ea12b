"""The project's custom TFX artifact types under their KFP v2 schema titles.

A custom artifact type's ``TYPE_NAME`` is ``watchtime_ranker.<Name>`` because Kubeflow
Pipelines v2 needs ``<namespace>.<Name>``, and TFX's KFP v2 container entry point
(``tfx.orchestration.kubeflow.v2.container.kubeflow_v2_run_executor``) imports a custom
type by that title as a class path (``kubeflow_v2_entrypoint_utils._retrieve_class_path``
then ``import_utils.import_class_by_path``). This module makes every title importable:

    import_class_by_path("watchtime_ranker.DeadLetterRows") is DeadLetterRows

It is installed by ``setup.py`` with the other packages (so the image of the
``Dockerfile`` and ``make setup`` have it). A new custom artifact type is added to
``CUSTOM_ARTIFACT_TYPES``; tests/pipeline/test_kubeflow_v2_runner.py checks that every
custom title in the compiled spec resolves here.
"""
from components.log_example_gen.artifacts import DeadLetterRows
from components.model_report.artifacts import ModelReport
from components.publisher.artifacts import PublishReport

CUSTOM_ARTIFACT_TYPES = (DeadLetterRows, ModelReport, PublishReport)

for _cls in CUSTOM_ARTIFACT_TYPES:  # a title that does not name its class here cannot resolve
    if _cls.TYPE_NAME != f"{__name__}.{_cls.__name__}":
        raise ImportError(f"{_cls.__module__}.{_cls.__name__}.TYPE_NAME is {_cls.TYPE_NAME!r}, "
                          f"expected {__name__}.{_cls.__name__!r} (the KFP v2 schema title)")
del _cls

__all__ = ["CUSTOM_ARTIFACT_TYPES"] + [cls.__name__ for cls in CUSTOM_ARTIFACT_TYPES]
