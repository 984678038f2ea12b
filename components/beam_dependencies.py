"""TFX's Beam executors repackage TFX for remote workers, also on the local DirectRunner.

``BaseBeamExecutor.__init__`` passes non-empty Beam args through
``tfx.utils.dependency_utils.make_beam_dependency_flags``: unless one of
``--extra_packages``, ``--setup_file``, ``--requirements_file``,
``--worker_harness_container_image`` or ``--sdk_container_image`` is set, it copies TFX's
install (~50 MB) into a fresh ``tempfile.mkdtemp()``, runs ``setup.py sdist`` there
(2.6 s on this project's 2-core machine) and adds ``--extra_package=<that sdist>``. The
directory is never removed. Every Beam component (LogExampleGen, StatisticsGen,
Transform, Evaluator) does it on every run: ~10 s of a default ``make run`` and 200 MB of
/tmp per run, until the disk is full.

Only a remote runner stages the package (TFX's docstring: "When TFX executors are used
with non-local beam runners"); the DirectRunner, in memory or with worker processes,
runs in this Python environment and never reads ``--extra_package``.
``skip_for_local_runners()`` wraps TFX's function so the Beam args of a local runner are
returned unchanged; any other runner gets TFX's behaviour as before (the project's
Dataflow args name ``--setup_file``, so TFX leaves them alone too).
"""
from typing import List

from tfx.utils import dependency_utils

# Beam's names of the runners that run the pipeline in this process's environment
# (no --runner means Beam's DirectRunner).
LOCAL_RUNNERS = (None, "DirectRunner", "SwitchingDirectRunner", "BundleBasedDirectRunner")

_TFX_MAKE_FLAGS = dependency_utils.make_beam_dependency_flags


def is_local_runner(beam_pipeline_args: List[str]) -> bool:
    """True when `beam_pipeline_args` run the pipeline on Beam's DirectRunner."""
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions

    runner = PipelineOptions(flags=list(beam_pipeline_args)).view_as(StandardOptions).runner
    return runner in LOCAL_RUNNERS


def make_beam_dependency_flags(beam_pipeline_args: List[str]) -> List[str]:
    """TFX's make_beam_dependency_flags, except that a local runner's args come back
    unchanged (no TFX sdist built, no temp dir left). Always a new list: TFX returns the
    caller's own list when it adds nothing, which BaseBeamExecutor then extends with its
    labels."""
    if is_local_runner(beam_pipeline_args):
        return list(beam_pipeline_args)
    return list(_TFX_MAKE_FLAGS(beam_pipeline_args))


def skip_for_local_runners() -> None:
    """Installs `make_beam_dependency_flags` where BaseBeamExecutor looks it up
    (``dependency_utils.make_beam_dependency_flags``); idempotent."""
    dependency_utils.make_beam_dependency_flags = make_beam_dependency_flags
