"""Which files a LogExampleGen run reads: span, version and input fingerprint.

Follows TFX's file-based ExampleGen (tfx/components/example_gen/driver.py and
utils.calculate_splits_fingerprint_span_and_version):

- **span / version**: a file pattern may hold TFX's ``{SPAN}`` (or ``{YYYY}{MM}{DD}``)
  and ``{VERSION}`` specs; TFX's own resolver picks the latest span (and its latest
  version) among the matching log files, and the pattern is narrowed to it. Without a
  spec the span is 0 and the version None, as in TFX, unless a span window
  (``span_index``, span.py) names it. Side-table patterns may hold specs too; they
  must then resolve to the log files' span.
- **input fingerprint**: one line per table,
  ``<table>:num_files:N,total_bytes:B,sha256:H`` where H hashes the (name relative to
  input_base, size, mtime) of every matching file. It changes when a file is added,
  removed, renamed, resized or rewritten (mtime at the filesystem's resolution), and
  costs one directory listing: no file is read.

The driver (driver.py) records span, version and fingerprint as execution
properties before the cache check, so they are part of the cache key: a rerun on
changed logs re-ingests, an unchanged rerun reuses the cached examples. The executor
resolves again and refuses to run if the files changed in between.
"""
import dataclasses
import hashlib
import os
from typing import Any, Dict, List, Optional, Tuple

from apache_beam.io.filesystems import FileSystems

from components.log_example_gen.config import LogExampleGenConfig

# tfx.components.example_gen.utils' property names (a test checks they are equal). TFX is
# imported only where the driver resolves patterns: the Beam workers unpickle DoFns from
# modules that import this one, and importing tfx.components there cost each worker
# process most of its start-up time and ~1 GB (bench/README.md, Ingestion).
SPAN_PROPERTY_NAME = "span"
VERSION_PROPERTY_NAME = "version"
FINGERPRINT_PROPERTY_NAME = "input_fingerprint"

LOG, USER, VIDEO = "log", "user_features", "video_features"


class InputsChangedError(RuntimeError):
    """The input files changed between the driver (cache key) and the executor."""


@dataclasses.dataclass(frozen=True)
class FileStat:
    path: str
    size: int
    mtime_s: float


@dataclasses.dataclass(frozen=True)
class ResolvedInputs:
    """The files of one run and what identifies them."""
    span: int
    version: Optional[int]
    files: Dict[str, Tuple[FileStat, ...]]  # LOG / USER / VIDEO -> sorted by path
    fingerprint: str

    def paths(self, table: str) -> List[str]:
        return [f.path for f in self.files[table]]

    def exec_properties(self) -> Dict[str, Any]:
        return {SPAN_PROPERTY_NAME: self.span, VERSION_PROPERTY_NAME: self.version,
                FINGERPRINT_PROPERTY_NAME: self.fingerprint}


def match_files(input_base: str, pattern: str, what: str) -> Tuple[FileStat, ...]:
    """Files matching input_base/pattern, sorted by path; ValueError naming what is missing."""
    glob = os.path.join(input_base, pattern)
    metadata = FileSystems.match([glob])[0].metadata_list
    if not metadata:
        raise ValueError(f"LogExampleGen: no {what} file matches {glob!r}")
    return tuple(sorted((FileStat(m.path, int(m.size_in_bytes), float(m.last_updated_in_seconds or 0.0))
                         for m in metadata), key=lambda f: f.path))


def table_fingerprint(table: str, input_base: str, files: Tuple[FileStat, ...]) -> str:
    h = hashlib.sha256()
    base = input_base.rstrip("/") + "/"
    for f in files:
        name = f.path[len(base):] if f.path.startswith(base) else f.path
        h.update(f"{name}\0{f.size}\0{f.mtime_s:.6f}\n".encode("utf-8"))
    return (f"{table}:num_files:{len(files)},total_bytes:{sum(f.size for f in files)},"
            f"sha256:{h.hexdigest()}")


def _resolve_pattern(input_base: str, table: str, pattern: str) -> Tuple[str, int, Optional[int], bool]:
    """(pattern narrowed to the latest span/version, span, version, has a span spec)."""
    from tfx.components.example_gen import utils as example_gen_utils
    from tfx.proto import example_gen_pb2

    split = example_gen_pb2.Input.Split(name=table, pattern=pattern)
    is_span, is_date, _ = example_gen_utils.verify_split_pattern_specs(split)
    if not (is_span or is_date):
        return pattern, 0, None, False
    try:
        _, span, version = example_gen_utils.calculate_splits_fingerprint_span_and_version(
            input_base, [split])  # narrows split.pattern to the latest span/version
    except ValueError as e:
        raise ValueError(f"LogExampleGen: {table} pattern {pattern!r} under {input_base!r}: {e}") from None
    return split.pattern, span, version, True


def resolve_inputs(input_base: str, config: LogExampleGenConfig) -> ResolvedInputs:
    """Span, version, files and fingerprint of the inputs LogExampleGen would read now."""
    patterns = {LOG: config.log_file_pattern, USER: config.user_features_pattern,
                VIDEO: config.video_features_pattern}
    what = {LOG: "log", USER: "user features", VIDEO: "video features"}
    pattern, span, version, has_spec = _resolve_pattern(input_base, LOG, patterns[LOG])
    if config.span_index >= 0:  # a span window over the files (span.py): its index is the span
        if has_spec:
            raise ValueError(f"LogExampleGen: span_index {config.span_index} and a span spec in "
                             f"{patterns[LOG]!r}: choose one way to name the span")
        span = config.span_index
    files = {LOG: match_files(input_base, pattern, what[LOG])}
    for table in (USER, VIDEO):
        side_pattern, side_span, side_version, has_spec = _resolve_pattern(input_base, table, patterns[table])
        if has_spec and (side_span, side_version) != (span, version):
            raise ValueError(
                f"LogExampleGen: the latest {table} span/version {(side_span, side_version)} of "
                f"{patterns[table]!r} differs from the log files' {(span, version)} of {patterns[LOG]!r}")
        files[table] = match_files(input_base, side_pattern, what[table])
    fingerprint = "\n".join(table_fingerprint(t, input_base, files[t]) for t in (LOG, USER, VIDEO))
    return ResolvedInputs(span=span, version=version, files=files, fingerprint=fingerprint)


def check_unchanged(resolved: ResolvedInputs, exec_properties: Dict[str, Any]) -> None:
    """Raises InputsChangedError if the driver recorded another span or fingerprint
    (the cache key would describe other data than the examples written)."""
    recorded = exec_properties.get(FINGERPRINT_PROPERTY_NAME)
    if recorded is None:
        return  # no driver ran (direct executor call, or KFP v2: see component.py)
    recorded_span = exec_properties.get(SPAN_PROPERTY_NAME)
    if recorded != resolved.fingerprint or recorded_span != resolved.span:
        raise InputsChangedError(
            f"LogExampleGen: the input files changed after the driver resolved them "
            f"(span {recorded_span} -> {resolved.span}; fingerprint {recorded!r} -> "
            f"{resolved.fingerprint!r}); rerun the pipeline once the logs are complete")
