"""The DirectRunner's Beam executors build no TFX sdist; other runners keep TFX's flags."""
import tempfile

import pytest
from tfx.dsl.components.base import base_beam_executor
from tfx.utils import dependency_utils

import pipeline.pipeline  # noqa: F401  (installs the wrapper, as our Beam executors do)
from components import beam_dependencies


class _Executor(base_beam_executor.BaseBeamExecutor):
    def Do(self, input_dict, output_dict, exec_properties):  # pragma: no cover
        raise NotImplementedError


def _without_labels(args):
    """The args less the telemetry labels BaseBeamExecutor appends after the dependency flags."""
    kept = list(args)
    while "--labels" in kept:
        i = kept.index("--labels")
        del kept[i:i + 2]
    return kept


@pytest.fixture
def no_sdist(monkeypatch):
    """Fails on any TFX sdist build or temp dir; records the calls otherwise."""
    built = []
    monkeypatch.setattr(dependency_utils, "build_ephemeral_package",
                        lambda: built.append(1) or "/staged/tfx_ephemeral.tar.gz")
    return built


@pytest.mark.parametrize("args", [
    ["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    ["--direct_running_mode=multi_processing", "--direct_num_workers=2"],
    ["--runner=DirectRunner"],
])
def test_a_beam_executor_on_the_direct_runner_keeps_its_args_and_builds_nothing(args, no_sdist, monkeypatch):
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *a, **k: pytest.fail("a temp dir was made"))
    executor = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=list(args)))
    assert _without_labels(executor._beam_pipeline_args) == args
    assert no_sdist == []


def test_a_remote_runner_gets_tfx_s_extra_package_unless_it_names_its_dependencies(no_sdist):
    remote = ["--runner=DataflowRunner", "--project=p", "--region=r"]
    executor = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=remote))
    assert _without_labels(executor._beam_pipeline_args) == remote + ["--extra_package=/staged/tfx_ephemeral.tar.gz"]
    assert no_sdist == [1]
    with_setup = remote + ["--setup_file=./setup.py"]
    executor = _Executor(base_beam_executor.BaseBeamExecutor.Context(beam_pipeline_args=with_setup))
    assert _without_labels(executor._beam_pipeline_args) == with_setup and no_sdist == [1]
    assert with_setup == remote + ["--setup_file=./setup.py"]  # the caller's list not extended


def test_installed_by_our_beam_executors_and_the_pipeline_once():
    import components.log_example_gen.executor  # noqa: F401
    import components.statistics_gen.executor  # noqa: F401

    beam_dependencies.skip_for_local_runners()
    beam_dependencies.skip_for_local_runners()
    assert dependency_utils.make_beam_dependency_flags is beam_dependencies.make_beam_dependency_flags
    assert beam_dependencies._TFX_MAKE_FLAGS is not beam_dependencies.make_beam_dependency_flags
