"""pipeline/process_memory.py: the RSS figures `make run` prints per component, and the
release of freed heap pages after each component (all run in one process); the
benchmarks' per-process peaks."""
import json
import subprocess
import sys

import pytest

from pipeline import process_memory


def test_rss_is_read_from_proc_status(tmp_path):
    status = tmp_path / "status"
    status.write_text("Name:\tx\nVmHWM:\t  204800 kB\nVmRSS:\t  1024 kB\n")
    assert process_memory.rss_mb(str(status)) == 1.0 and process_memory.peak_rss_mb(str(status)) == 200.0
    assert process_memory.rss_mb(str(tmp_path / "absent")) != process_memory.rss_mb(str(tmp_path / "absent"))  # NaN


def test_release_returns_freed_small_allocations_to_the_os():
    """400 MB in 40k small arrays, freed: glibc keeps the pages (RSS stays up) until
    release_free_memory trims them (in a child process: this one's heap is not clean)."""
    code = ("import json, numpy as np; from pipeline import process_memory as p; "
            "a = [np.ones(1250) for _ in range(40_000)]; full = p.rss_mb(); del a; freed = p.rss_mb(); "
            "p.release_free_memory(); print(json.dumps([full, freed, p.rss_mb()]))")
    full, freed, released = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                      check=True).stdout)
    assert full - released > 300, (full, freed, released)
    assert released < freed


def test_frozen_objects_are_skipped_and_later_cycles_still_collected():
    """freeze_loaded_objects: what is alive at the freeze leaves the collector's view; a
    cycle made afterwards (a component's garbage) is still found by release_free_memory
    (in a child process: freezing this one would keep the suite's cycles forever)."""
    code = ("import gc, json, weakref\nfrom pipeline import process_memory as p\n"
            "class C: pass\n"
            "loaded = [C() for _ in range(1000)]; p.freeze_loaded_objects(); frozen = gc.get_freeze_count(); "
            "a = C(); a.self = a; alive = weakref.ref(a); del a; p.release_free_memory(); "
            "print(json.dumps([frozen, alive() is None]))")
    frozen, collected = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout)
    assert frozen >= 1000 and collected


def test_peak_rss_is_the_process_own_not_its_parent():
    """A child of a large parent: ru_maxrss starts at the parent's RSS after fork + exec,
    VmHWM (peak_rss_mb) is the child's own."""
    code = ("import pipeline.process_memory as b, resource, json; "
            "print(json.dumps([b.peak_rss_mb(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]))")
    ballast = bytearray(600 * 1024 * 1024)
    ballast[::4096] = b"\x01" * len(ballast[::4096])  # touched: resident in this (parent) process
    own, maxrss = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                            check=True).stdout)
    del ballast
    assert maxrss > 600 and own < 300, (own, maxrss)


def test_release_after_each_finished_component(monkeypatch):
    """ReleaseAfterComponents (local_runner.py's handler; make run's progress lines do the
    same) releases on LocalDagRunner's "is finished." records only."""
    import logging

    calls = []
    monkeypatch.setattr(process_memory, "release_free_memory", lambda: calls.append(1))
    handler = process_memory.ReleaseAfterComponents()
    for message in ("Component Trainer is running.", "Component Trainer is finished.",
                    "A cached execution 3 is used.", "Component Evaluator is finished."):
        handler.emit(logging.LogRecord("absl", logging.INFO, __file__, 1, message, None, None))
    handler.emit(logging.LogRecord("absl", logging.INFO, __file__, 1, "%d", ("x",), None))  # a bad record
    assert len(calls) == 2


def test_default_onednn_off_keeps_a_set_value():
    environ = {}
    process_memory.default_onednn_off(environ)
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    environ = {"TF_ENABLE_ONEDNN_OPTS": "1"}
    process_memory.default_onednn_off(environ)
    assert environ == {"TF_ENABLE_ONEDNN_OPTS": "1"}


@pytest.mark.parametrize("module", ["local_runner", "bench.bench_scale"])
def test_entry_points_turn_onednn_off_before_tensorflow_loads(module):
    """local_runner.py and bench-scale's component processes run as `make run` does."""
    code = ("import os, sys; os.environ.pop('TF_ENABLE_ONEDNN_OPTS', None); "
            f"import {module}; print(os.environ['TF_ENABLE_ONEDNN_OPTS'], 'tensorflow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1].split()[0] == "0"
    if module == "bench.bench_scale":  # it loads TensorFlow only in the component's process
        assert out.strip().splitlines()[-1].split()[1] == "False"
