"""Grouping through files: a GroupByKey whose values wait on disk, not in the runner's memory.

The DirectRunner (Beam's FnApiRunner, in_memory or multi_processing) holds the whole input
of every GroupByKey in the driver's memory until the consuming stage has run, so
LogExampleGen's peak memory grew with the log (1M simulated rows: 4.5 GB, most of it the
grouped batches of the entity and tab passes). Distributed runners (Dataflow, Flink, Spark)
shuffle out of process and group the values themselves (``spill_dir=None``). With a
``spill_dir``::

    (key, value) ─Spill─► the bundle's values buffered per key as pickles; once more than
                          ``max_bytes`` are buffered (and at the bundle's end) each key's
                          buffer becomes one file  <spill_dir>/<uuid>.pkl
                 ─► (key, path) ─GroupByKey─► (key, [paths]) ─► (key, Spilled(paths))

so the runner groups only paths and a consumer holds one key's values (a shard), not the
log. ``Spilled`` iterates the values, reading one file at a time (a file's values in the
order they were added). A retried bundle writes new files; only the paths a committed
bundle emitted reach a consumer, and the spill folder lives under the output's temporary
folder, removed with it (record_files.finalize), so nothing is lost or read twice.
"""
import os
import pickle
import uuid
from typing import Any, Dict, Iterator, List, Optional

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from components.log_example_gen import batch_buffer, record_files

MAX_BUFFER_BYTES = 64 << 20  # pickled values a bundle holds before it writes them out


class Spilled:
    """The values of one key, read back from its spill files (module doc)."""

    def __init__(self, paths: List[str]):
        self.paths = sorted(paths)

    def __iter__(self) -> Iterator[Any]:
        for path in self.paths:
            with FileSystems.open(path, compression_type="uncompressed") as f:
                while True:
                    try:
                        yield pickle.load(f)
                    except EOFError:
                        break


class _Spill(beam.DoFn):
    """(key, value) -> (key, path of a file of the key's values) (module doc)."""

    def __init__(self, spill_dir: str, max_bytes: int):
        self._dir, self._max = spill_dir, max_bytes

    def start_bundle(self):
        self._buffers: Dict[Any, List[bytes]] = {}
        self._held = 0

    def process(self, element):
        key, value = element
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        self._buffers.setdefault(key, []).append(data)
        self._held += len(data)
        if self._held > self._max:
            yield from self._flush()

    def finish_bundle(self):
        for kv in self._flush():
            yield batch_buffer.in_global_window(kv)

    def _flush(self):
        if self._buffers:
            record_files.ensure_dir(self._dir)
        for key, parts in self._buffers.items():
            path = os.path.join(self._dir, f"{uuid.uuid4().hex}.pkl")
            with FileSystems.create(path, compression_type="uncompressed") as f:
                for data in parts:
                    f.write(data)
            yield key, path
        self._buffers, self._held = {}, 0


class GroupByKey(beam.PTransform):
    """beam.GroupByKey, through files under ``spill_dir`` when it is set (module doc)."""

    def __init__(self, spill_dir: Optional[str], max_bytes: int = MAX_BUFFER_BYTES):
        super().__init__()
        self._dir, self._max = spill_dir, max_bytes

    def expand(self, pcoll):
        if self._dir is None:
            return pcoll | "Group" >> beam.GroupByKey()
        return (pcoll
                | "Spill" >> beam.ParDo(_Spill(self._dir, self._max))
                | "GroupPaths" >> beam.GroupByKey()
                | "Open" >> beam.MapTuple(lambda key, paths: (key, Spilled(list(paths)))))


class CoGroupByKey(beam.PTransform):
    """{name: PCollection of (key, value)} -> (key, {tag: [values]}): beam.CoGroupByKey, where
    ``tags`` may give several inputs one tag (their values merged; default: tag = name),
    through files under ``spill_dir`` when it is set. Each input is spilled by the stage that
    makes it, before any Flatten (a Flatten's input is held in memory like a GroupByKey's)."""

    def __init__(self, spill_dir: Optional[str], tags: Optional[Dict[str, str]] = None,
                 max_bytes: int = MAX_BUFFER_BYTES):
        super().__init__()
        self._dir, self._tags, self._max = spill_dir, dict(tags or {}), max_bytes

    def expand(self, pcolls):
        tag_of = {name: self._tags.get(name, name) for name in pcolls}
        tags = sorted(set(tag_of.values()))
        if self._dir is None:
            merged = {t: [pcolls[n] for n in sorted(pcolls) if tag_of[n] == t] for t in tags}
            return ({t: pcs | f"Flatten_{t}" >> beam.Flatten() for t, pcs in merged.items()}
                    | "CoGroup" >> beam.CoGroupByKey())
        spilled = [pcolls[n] | f"Spill_{n}" >> beam.ParDo(_Spill(self._dir, self._max))
                   | f"Tag_{n}" >> beam.MapTuple(lambda key, path, t=tag_of[n]: (key, (t, path)))
                   for n in sorted(pcolls)]
        return (spilled
                | "Flatten" >> beam.Flatten()
                | "GroupPaths" >> beam.GroupByKey()
                | "Open" >> beam.Map(_untag, tags))


def _untag(element, tags):
    """(key, [(tag, path)]) -> (key, {tag: the values of its files, in path order})."""
    key, tagged = element
    paths = {t: [] for t in tags}
    for tag, path in tagged:
        paths[tag].append(path)
    return key, {t: list(Spilled(p)) for t, p in paths.items()}
