"""Patcher: assemble version N+1 from the local version N and a delta, for stock TF Serving.

A delta (models/publishing/delta.py) sits in `<model base>/deltas/<N+1>/` with a manifest
naming its base version N. `assemble(<base>/<N>, <base>/deltas/<N+1>, <base>/<N+1>)`:

    1. refuses when <base>/<N> is missing (BaseVersionMissingError), when a payload
       file's sha256 or size differs from the manifest (DeltaChecksumError), or when the
       manifest's base version, a checkpoint key, dtype or shape does not match the base
       (DeltaMismatchError) — each error names the file or key;
    2. hard-links (or copies, across file systems) every file of <N> but `variables/`
       and `fingerprint.pb` into a hidden temp dir `<base>/.tmp-<N+1>-…`: the graph
       (saved_model.pb), assets/ (vocabularies), assets.extra/ (warmup requests);
    3. writes `variables/` with tf.raw_ops.SaveV2: the same keys (the
       _CHECKPOINTABLE_OBJECT_GRAPH entry included), dtypes and shapes as <N>, only the
       delta's table rows and dense variables changed (fp16 dense cast back; rows sent as
       bit differences decoded against <N>'s rows, models/publishing/row_delta.py; coded
       dense added to <N>'s values, models/publishing/dense_delta.py);
    4. regenerates fingerprint.pb when <N> had one, fsyncs and renames the temp dir to
       <base>/<N+1> (one rename: TF Serving sees all of it or nothing).

The result is an ordinary numbered version (plain tf.saved_model.load, standard ops).
A refused delta leaves nothing under the base: the served version does not change,
and the next full version resyncs.

Sidecar beside real TF Serving (same base path):

    python -m serving.patcher --model_base_path /models/watchtime_ranker [--poll_seconds 1] [--once]

applies every pending delta (a version above the newest on disk, its base present),
oldest first. The embedded server's ModelManager calls `apply_pending` before each
version scan. A refused delta is logged once and retried each poll (a later full version
supersedes it); `--once` exits 1 when a delta was refused.
"""
import argparse
import logging
import os
import shutil
import time
from typing import Callable, Dict, List, Optional

import numpy as np

from models.publishing import delta as delta_lib
from models.publishing.atomic_files import atomic_rename, temp_dir_for
from models.publishing.delta import DeltaChecksumError, DeltaError, DeltaMismatchError  # noqa: F401 - re-exported

log = logging.getLogger(__name__)
SKIP = ("variables", "fingerprint.pb")
_reported: Dict[str, str] = {}  # delta dir -> last error logged (log a refusal once)


class BaseVersionMissingError(DeltaError):
    """The delta's base version is not under the model base path."""


def _link_tree(src: str, dst: str) -> int:
    """Hard-links every file under `src` into `dst` (copy when linking fails); returns files."""
    n = 0
    for root, _, files in os.walk(src):
        target = os.path.join(dst, os.path.relpath(root, src))
        os.makedirs(target, exist_ok=True)
        for name in files:
            a, b = os.path.join(root, name), os.path.join(target, name)
            try:
                os.link(a, b)
            except OSError:
                shutil.copy2(a, b)
            n += 1
    return n


def write_checkpoint(prefix: str, tensors: Dict[str, np.ndarray]) -> None:
    """One-shard TF2 checkpoint (`prefix`.index + .data-00000-of-00001) with tf.raw_ops.SaveV2."""
    import tensorflow as tf

    names = sorted(tensors)
    values = [tf.constant(tensors[k], dtype=tf.string) if k == delta_lib.OBJECT_GRAPH_KEY
              else tf.constant(np.asarray(tensors[k])) for k in names]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names), tensors=values)


def _write_fingerprint(export_dir: str) -> None:
    try:
        from tensorflow.python.saved_model.pywrap_saved_model import fingerprinting as fp

        data = fp.CreateFingerprintDef(export_dir)
    except Exception as e:  # optional file: TF Serving and tf.saved_model.load work without it
        log.warning("fingerprint.pb not regenerated for %s: %s", export_dir, e)
        return
    with open(os.path.join(export_dir, "fingerprint.pb"), "wb") as f:
        f.write(data)


def assemble(base_version_dir: str, delta_dir: str, out_dir: str,
             before_rename: Optional[Callable[[str], None]] = None) -> dict:
    """Builds `out_dir` from `base_version_dir` + `delta_dir` (module docstring); returns
    {"version", "base_version", "path", "delta_bytes", "rows_sent", "dense_variables"}.
    `before_rename(temp_dir)`: a check on the assembled model (raise to refuse)."""
    if not os.path.isfile(os.path.join(base_version_dir, "saved_model.pb")):
        raise BaseVersionMissingError(f"base version {base_version_dir} is missing (no saved_model.pb): "
                                      f"cannot apply {delta_dir}; the next full version resyncs")
    manifest, tables, dense = delta_lib.read_delta(delta_dir)
    base_name = os.path.basename(os.path.normpath(base_version_dir))
    if base_name != str(manifest["base_version"]):
        raise DeltaMismatchError(f"{os.path.join(delta_dir, delta_lib.MANIFEST)}: base_version "
                                 f"{manifest['base_version']}, asked to apply it to {base_version_dir}")
    base = delta_lib.read_checkpoint(base_version_dir)
    new = delta_lib.apply_delta(base, manifest, tables, dense)
    if os.path.exists(out_dir):
        raise FileExistsError(f"{out_dir} already exists")
    temp = temp_dir_for(out_dir)
    try:
        os.makedirs(temp)
        for name in os.listdir(base_version_dir):
            if name in SKIP:
                continue
            src = os.path.join(base_version_dir, name)
            if os.path.isdir(src):
                _link_tree(src, os.path.join(temp, name))
            else:
                _link_tree_file(src, os.path.join(temp, name))
        os.makedirs(os.path.join(temp, "variables"))
        write_checkpoint(delta_lib.checkpoint_prefix(temp), new)
        delta_lib.check_same_layout(base, delta_lib.read_checkpoint(temp), what=f"assembled {temp}")
        if os.path.exists(os.path.join(base_version_dir, "fingerprint.pb")):
            _write_fingerprint(temp)
        if before_rename is not None:
            before_rename(temp)
        atomic_rename(temp, out_dir)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return {"version": int(manifest["version"]), "base_version": int(manifest["base_version"]), "path": out_dir,
            "delta_bytes": int(manifest["total_bytes"]), "rows_sent": int(manifest["rows_sent"]),
            "dense_variables": len(dense)}


def _link_tree_file(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def pending_deltas(model_base_path: str) -> List[int]:
    """Versions above the newest one on disk with a complete delta under deltas/, ascending
    (deltas only move forward: an older one, whose version was removed, is never re-applied)."""
    root = os.path.join(model_base_path, delta_lib.DELTAS_DIR)
    if not os.path.isdir(root):
        return []
    newest = max([int(n) for n in os.listdir(model_base_path) if n.isdigit()], default=-1)
    return sorted(int(n) for n in os.listdir(root)
                  if n.isdigit() and int(n) > newest and os.path.exists(os.path.join(root, n, delta_lib.MANIFEST)))


def apply_pending(model_base_path: str) -> dict:
    """Applies every pending delta whose base version exists, oldest first (a chain
    N → N+1 → N+2 assembles in one call). Returns {"applied": [...], "refused": {v: error}}."""
    applied, refused = [], {}
    for version in pending_deltas(model_base_path):
        delta_dir = os.path.join(model_base_path, delta_lib.DELTAS_DIR, str(version))
        try:
            manifest = delta_lib.read_manifest(delta_dir)
            base_dir = os.path.join(model_base_path, str(manifest["base_version"]))
            assemble(base_dir, delta_dir, os.path.join(model_base_path, str(version)))
        except Exception as e:  # DeltaError, OSError, a corrupt base checkpoint: refuse, keep serving
            error = f"{type(e).__name__}: {e}"
            refused[version] = error
            if _reported.get(delta_dir) != error:
                log.error("delta %s refused: %s", delta_dir, error)
                _reported[delta_dir] = error
            continue
        applied.append(version)
        log.info("assembled version %d of %s from its delta", version, model_base_path)
    return {"applied": applied, "refused": refused}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.patcher", description=__doc__.split("\n")[0])
    parser.add_argument("--model_base_path", required=True, help="the TF Serving model base path")
    parser.add_argument("--poll_seconds", type=float, default=1.0)
    parser.add_argument("--once", action="store_true", help="apply what is pending, then exit")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    while True:
        result = apply_pending(args.model_base_path)
        if args.once:
            print({"applied": result["applied"], "refused": result["refused"]})
            return 1 if result["refused"] else 0
        time.sleep(args.poll_seconds)


if __name__ == "__main__":
    raise SystemExit(main())
