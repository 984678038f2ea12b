"""A process's own peak resident memory, for the benchmarks' memory figures.

    peak_rss_mb() = VmHWM / 1024   (MB; /proc/self/status, Linux)

VmHWM is the high-water mark of the process's current address space. Not ru_maxrss:
Linux keeps the maximum over every address space the process had, so after fork + exec
a child's ru_maxrss starts at its parent's RSS at the fork (a child of a 1.5 GB parent
reports >= 1.5 GB however little it uses; tests/pipeline/test_process_memory.py). Where there
is no /proc, ru_maxrss (KiB on Linux, bytes on macOS): an upper bound.

    children_peak_rss_mb() = max ru_maxrss of the waited-for children / 1024

The largest child process's peak (e.g. Beam worker processes): an upper bound for the
same reason, it includes the parent's RSS when the child was forked.

A process that runs a whole pipeline (TFX's LocalDagRunner: `make run`, local_runner.py)
gives the heap's freed pages back after each component (:class:`ReleaseAfterComponents`),
after freezing what its imports loaded (:func:`freeze_loaded_objects`), so that the
garbage collection in each release scans only what the components made.
"""
import logging
import os
import re
import resource

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"


def default_onednn_off(environ=os.environ) -> None:
    """TensorFlow's oneDNN kernels off unless ``TF_ENABLE_ONEDNN_OPTS`` is set: call before
    TensorFlow loads (`make run`, local_runner.py, bench-scale's processes; the Dockerfile
    sets it for Kubeflow). Their caches hold memory no Python object holds: ~0.9 GiB left
    after the Trainer (session 33), and in the Evaluator a JIT-compiled kernel per batch
    shape (TFMA's reader batches adaptively, so the shapes, and the cache, grow with the
    eval rows: at memray's high-water mark of the 1M-row Evaluator, 536 MB of Xbyak code
    buffers were mapped, not all of them resident).
    The Trainer is as fast without them (README "Scale")."""
    environ.setdefault(ONEDNN_ENV, "0")


# LocalDagRunner's log record at each component's start and end
COMPONENT_EVENT = re.compile(r"Component (\S+) is (running|finished)\.")


def _status_mb(field: str, status: str):
    try:
        with open(status) as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return None


def peak_rss_mb(status: str = "/proc/self/status") -> float:
    """This process's own peak RSS in MB (module docstring); `status`: the file to read."""
    peak = _status_mb("VmHWM:", status)
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def rss_mb(status: str = "/proc/self/status") -> float:
    """This process's resident memory now in MB (VmRSS; NaN where there is no /proc)."""
    rss = _status_mb("VmRSS:", status)
    return rss if rss is not None else float("nan")


def release_free_memory() -> None:
    """Collects garbage, then returns the C heap's free pages to the OS (glibc's
    ``malloc_trim(0)``; a no-op elsewhere). Without it a long process keeps the pages of
    memory it freed: glibc trims only the top of each arena, and TensorFlow's and Beam's
    many threads spread allocations over many arenas."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def freeze_loaded_objects() -> None:
    """``gc.freeze()``: every object alive now moves to a permanent generation that no
    later collection scans. Call it once, after a pipeline's imports and definition and
    before its components run: TFX, TensorFlow and Beam load ~8k modules, and each full
    collection (:func:`release_free_memory` after every component, and Python's own
    generation-2 passes) walked all their objects again (0.5-0.9 s each on a 2-core VM;
    ~0 s after the freeze). What it freezes is never collected as a cycle, so nothing
    made by the work itself should be alive yet."""
    import gc

    gc.collect()
    gc.freeze()


def children_peak_rss_mb() -> float:
    """The largest waited-for child process's peak RSS in MB (module docstring: an upper bound)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


class ReleaseAfterComponents(logging.Handler):
    """Calls :func:`release_free_memory` after each "Component X is finished." record
    (add it to the root logger; absl's records propagate there): every component of a
    LocalDagRunner run shares the process, and glibc would keep what one freed."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad log record must not stop the run
            return
        match = COMPONENT_EVENT.search(message)
        if match and match.group(2) == "finished":
            release_free_memory()
