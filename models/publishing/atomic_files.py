"""Durable, all-or-nothing writes of files and directories (fsync + one rename).

A reader (TF Serving's file-system source, the patcher, the Publisher's state) must see
either the old content or the complete new one, also after a crash:

    write everything under a temp name  ->  fsync its files and directories
    ->  rename(temp, final)  ->  fsync final's parent directory (the rename itself)

`rename` is atomic on one local file system (POSIX); paths with a scheme (`gs://...`)
go through tf.io.gfile, where there is no fsync and a directory "rename" is a copy
then a delete (not atomic: the callers' docstrings say what that means for them).
Used by components/publisher/versioning.py (versions), models/publishing/delta.py
(deltas), components/publisher/state.py and serving/patcher.py (assembled versions).

Example:

>>> temp = temp_dir_for("/serving/ranker/deltas/7")     # hidden, non-numeric sibling
>>> ...write files under temp...
>>> atomic_rename(temp, "/serving/ranker/deltas/7")
"""
import os
import time


def is_remote(path: str) -> bool:
    """True for object-store paths (`gs://`, `s3://`...): no fsync, gfile renames."""
    return "://" in path


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(path: str) -> None:
    """fsync every file and directory under a local `path` (no-op on object stores)."""
    if is_remote(path):
        return
    for root, _, files in os.walk(path):
        for name in files:
            _fsync(os.path.join(root, name))
        _fsync(root)


def fsync_dir(path: str) -> None:
    """fsync one local directory (makes a rename or a new entry in it durable)."""
    if not is_remote(path):
        _fsync(path)


def rename_durable(temp: str, final: str) -> None:
    """rename(temp, final) — `final` must not exist — then fsync final's parent."""
    if is_remote(final):
        import tensorflow as tf

        if tf.io.gfile.exists(final):
            raise FileExistsError(f"{final} already exists")
        tf.io.gfile.rename(temp, final)
        return
    if os.path.exists(final):
        raise FileExistsError(f"{final} already exists")
    os.rename(temp, final)
    fsync_dir(os.path.dirname(os.path.abspath(final)))


def atomic_rename(temp: str, final: str) -> None:
    """fsync everything under `temp`, then rename_durable(temp, final)."""
    fsync_tree(temp)
    rename_durable(temp, final)


def temp_dir_for(final: str) -> str:
    """A hidden sibling of `final` (non-numeric: never loaded as a version, never applied)."""
    parent, name = os.path.split(os.path.abspath(final))
    return os.path.join(parent, f".tmp-{name}-{os.getpid()}-{time.monotonic_ns()}")


def write_file_atomic(path: str, data: bytes) -> None:
    """Replaces the local file `path` by `data` all at once (temp file, fsync, os.replace)."""
    temp = f"{path}.tmp-{os.getpid()}"
    with open(temp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
