"""Atomic, versioned publish into a TF Serving base directory.

Layout: `<base>/<integer version>/` per version (TF Serving's file-system source and
serving/model_manager.py load numeric names only). A publish

    1. deletes stale temp dirs of killed publishes (`<base>/.publishing-*`),
    2. assembles the new version under `<base>/.publishing-<version>-<pid>/`,
    3. fsyncs its files (local paths; object stores have no fsync),
    4. renames it to `<base>/<version>` (one rename: readers see all of it or nothing),
    5. deletes the oldest numeric versions beyond the last `keep`.

A publish killed anywhere before 4 leaves no new numeric directory: the previous
version keeps serving, and the next publish removes the leftover temp dir. Paths go
through tf.io.gfile, so a `gs://` base works (a GCS "rename" copies then deletes: the
temp name is non-numeric, so a half-copied directory is never loaded either way...
except during the copy itself, where TF Serving may see an incomplete `<version>`;
on object stores point TF Serving at a base written by one final rename or a
`models.config` update instead).
"""
import os
import time
from typing import Callable, List, Optional

import tensorflow as tf

from models.publishing.atomic_files import fsync_tree, rename_durable

TEMP_PREFIX = ".publishing-"


def list_versions(base: str) -> List[int]:
    """Numeric version directories under `base`, ascending."""
    if not tf.io.gfile.isdir(base):
        return []
    return sorted(int(n.rstrip("/")) for n in tf.io.gfile.listdir(base) if n.rstrip("/").isdigit())


def next_version(base: str, now: Optional[float] = None) -> int:
    """A version above every existing one: the Unix time in seconds, or latest + 1."""
    existing = list_versions(base)
    stamp = int(now if now is not None else time.time())
    return max([stamp] + [v + 1 for v in existing])


def clean_stale_temps(base: str) -> List[str]:
    """Removes leftover temp dirs of killed publishes; returns their names."""
    if not tf.io.gfile.isdir(base):
        return []
    stale = [n.rstrip("/") for n in tf.io.gfile.listdir(base) if n.startswith(TEMP_PREFIX)]
    for name in stale:
        tf.io.gfile.rmtree(os.path.join(base, name))
    return stale


def publish_version(base: str, assemble: Callable[[str], None], keep: int, version: Optional[int] = None,
                    before_rename: Optional[Callable[[str], None]] = None) -> dict:
    """Assembles a version with `assemble(temp_dir)` and publishes it atomically (module
    docstring). `before_rename(temp_dir)`: test hook between write and rename.
    Returns {"version", "path", "removed_versions", "stale_temps_removed"}."""
    if keep < 1:
        raise ValueError(f"publish_version: keep must be >= 1, got {keep}")
    tf.io.gfile.makedirs(base)
    stale = clean_stale_temps(base)
    version = int(version if version is not None else next_version(base))
    final = os.path.join(base, str(version))
    if tf.io.gfile.exists(final):
        raise FileExistsError(f"publish_version: {final} already exists")
    temp = os.path.join(base, f"{TEMP_PREFIX}{version}-{os.getpid()}")
    try:
        assemble(temp)
        fsync_tree(temp)
        if before_rename is not None:
            before_rename(temp)
        rename_durable(temp, final)  # + fsync of the base dir (models/publishing/atomic_files.py)
    except BaseException:
        if tf.io.gfile.exists(temp):
            tf.io.gfile.rmtree(temp)
        raise
    removed = []
    for old in list_versions(base)[:-keep]:
        tf.io.gfile.rmtree(os.path.join(base, str(old)))
        removed.append(old)
    return {"version": version, "path": final, "removed_versions": removed, "stale_temps_removed": stale}
