"""Beam's in-process worker without two fixed costs per run that buy this project nothing.

Every Beam component here (LogExampleGen, StatisticsGen, Transform, the Evaluator) runs on
the DirectRunner's in-memory worker by default (pipeline/configs/core.py). Beam 2.61 gives
that worker:

1. A 100 MB state cache (``fn_api_runner.worker_handlers.STATE_CACHE_SIZE_MB``) that keeps
   decoded side inputs across bundles and weighs every value it loads with objsize
   (``statecache.get_deep_size``), which first collects the ids of the globals of every
   loaded module (1.5-4.2 ms a call with TensorFlow, TFX, TFT and TFMA imported: five calls
   on a small list, session 45's 2-core Xeon VM; a slower VM takes about twice that). A
   batch pipeline on this runner runs each stage as one bundle, so nothing is read twice:
   in a default ``make run`` the pipelines of LogExampleGen, StatisticsGen, Transform and
   the Evaluator loaded 25, 1, 44 and 33 values and hit the cache 0 times
   (``StateCache.describe_stats``). At size 0 the worker reads a side input from the
   runner as it does on a miss (the cache's ``is_cache_enabled`` path) and weighs nothing.
2. Its dill pickler resets dill's logger level around every dumps and loads
   (``internal/dill_pickler.py``: ``dill._dill._trace(False)``), and ``Logger.setLevel``
   clears the cache of every logger in the process (~270 here) each time: 846 times in one
   LogExampleGen run. ``_trace`` below sets the same levels, only when they change.

``install()`` (idempotent) applies both in this process; the Beam components' executors
call it at import, beside beam_dependencies.skip_for_local_runners. The worker processes
of other runners (multi_processing, Dataflow) are untouched: their cache size is the
``--max_cache_memory_usage_mb`` pipeline option.
"""
import logging

import dill
from apache_beam.runners.portability.fn_api_runner import worker_handlers

_DILL_LOG = logging.getLogger("dill")  # dill._dill.log


def _trace(boolean: bool) -> None:
    """dill's ``_trace``: INFO while tracing a failed pickle, else WARN (set only on a change)."""
    level = logging.INFO if boolean else logging.WARN
    if _DILL_LOG.level != level:
        _DILL_LOG.setLevel(level)


def install() -> None:
    """No state cache in the in-memory worker; dill's level set only when it changes."""
    worker_handlers.STATE_CACHE_SIZE_MB = 0
    dill._dill._trace = _trace
