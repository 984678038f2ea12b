"""Test fixtures built once per pytest run, shared by its pytest-xdist workers."""
import os
from pathlib import Path
from typing import Callable


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """`<run temp dir>/<name>`, after `build(that dir)` ran once for the whole run: the first
    worker builds it under a file lock in the run's common temp dir (the workers' parent),
    the others wait and read it; nothing may write into it afterwards."""
    import fcntl

    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    root = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "DONE").exists():
            root.mkdir(parents=True, exist_ok=True)
            build(root)
            (root / "DONE").touch()
    return root
