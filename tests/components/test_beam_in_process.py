"""components/beam_in_process.py: the in-memory worker runs without its state cache, side
inputs still arrive whole and correct, and Beam's pickler no longer resets every logger's
cache per pickle, while dill's trace levels stay what dill sets."""
import logging

import apache_beam as beam
import dill
from apache_beam.internal import dill_pickler
from apache_beam.runners.portability.fn_api_runner import worker_handlers
from apache_beam.runners.worker import statecache
from apache_beam.testing.util import assert_that, equal_to

from components import beam_in_process


def test_installed_by_the_beam_executors_and_the_pipeline():
    import components.log_example_gen.executor  # noqa: F401
    import components.statistics_gen.executor  # noqa: F401
    import components.transform.executor  # noqa: F401
    import pipeline.pipeline  # noqa: F401

    beam_in_process.install()  # idempotent
    assert worker_handlers.STATE_CACHE_SIZE_MB == 0
    assert dill._dill._trace is beam_in_process._trace


def test_side_inputs_without_the_state_cache_and_nothing_weighed(monkeypatch):
    beam_in_process.install()
    weighed = []
    monkeypatch.setattr(statecache, "get_deep_size", lambda *objs: weighed.append(objs) or 8)
    with beam.Pipeline(argv=["--direct_running_mode=in_memory", "--direct_num_workers=1"]) as p:
        table = p | "Table" >> beam.Create([{k: k * k for k in range(100)}])
        ids = p | "Ids" >> beam.Create(list(range(0, 100, 7)))
        many = p | "Many" >> beam.Create(list(range(1000)))
        out = ids | beam.Map(lambda k, t, m: (k, t[k], len(m)), beam.pvalue.AsSingleton(table),
                             beam.pvalue.AsList(many))
        assert_that(out, equal_to([(k, k * k, 1000) for k in range(0, 100, 7)]))
    assert weighed == []  # no cache, nothing sized


def test_pickling_sets_dills_level_only_on_a_change(monkeypatch):
    beam_in_process.install()
    log = logging.getLogger("dill")
    log.setLevel(logging.WARN)
    calls = []
    real = logging.Logger.setLevel
    monkeypatch.setattr(logging.Logger, "setLevel", lambda self, level: calls.append((self.name, level))
                        or real(self, level))
    for value in ({"a": [1, 2]}, lambda x: x + 1, b"bytes"):
        assert dill_pickler.loads(dill_pickler.dumps(value)) is not None
    assert calls == []  # it was dill's WARN already
    dill._dill._trace(True)  # a failed pickle traces at INFO, then back to WARN: as dill does
    assert log.level == logging.INFO
    dill._dill._trace(False)
    assert log.level == logging.WARN and calls == [("dill", logging.INFO), ("dill", logging.WARN)]
