"""Grouping through files: a GroupByKey whose values wait on disk, not in the runner's memory.

The DirectRunner (Beam's FnApiRunner, in_memory or multi_processing) holds the whole input
of every GroupByKey in the driver's memory until the consuming stage has run, so
LogExampleGen's peak memory grew with the log (1M simulated rows: 4.5 GB, most of it the
grouped batches of the entity and tab passes). Distributed runners (Dataflow, Flink, Spark)
shuffle out of process and group the values themselves (``spill_dir=None``). With a
``spill_dir``::

    (key, value) ─Spill─► the bundle's values buffered per key as pickles; once more than
                          ``max_bytes`` are buffered (and at the bundle's end) the buffers
                          become one file  <spill_dir>/<uuid>.pkl, each key's values one
                          byte range [start, end) of it
                 ─► (key, (path, start, end)) ─GroupByKey─► (key, [ranges]) ─► (key, Spilled(ranges))

so the runner groups only ranges and a consumer holds one key's values (a shard), not the
log. ``Spilled`` iterates the values, reading one range at a time (in (path, start) order;
a range's values in the order they were added). One file per flush, not per key and flush:
4M simulated rows spilled 3.9 GB in 17,825 files one per key and 2.6 s went to removing them at
the end, on one core; in 59 files, 0.83 s. A retried bundle writes new files; only the ranges a committed bundle
emitted reach a consumer, and the spill folder lives under the output's temporary folder,
removed with it (record_files.finalize), so nothing is lost or read twice.
"""
import os
import pickle
import uuid
from typing import Any, Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from components.log_example_gen import batch_buffer, record_files

MAX_BUFFER_BYTES = 64 << 20  # pickled values a bundle holds before it writes them out


Range = Tuple[str, int, int]  # (path, start, end): one key's values in a spill file


class Spilled:
    """The values of one key, read back from its ranges of spill files (module doc)."""

    def __init__(self, ranges: List[Range]):
        self.ranges = sorted(ranges)

    def __iter__(self) -> Iterator[Any]:
        for path, start, end in self.ranges:
            with FileSystems.open(path, compression_type="uncompressed") as f:
                f.seek(start)
                while f.tell() < end:
                    yield pickle.load(f)


class _Spill(beam.DoFn):
    """(key, value) -> (key, (path, start, end): the range of a spill file holding the key's
    values) (module doc)."""

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
        if not self._buffers:
            return
        record_files.ensure_dir(self._dir)
        path, ranges, offset = os.path.join(self._dir, f"{uuid.uuid4().hex}.pkl"), [], 0
        with FileSystems.create(path, compression_type="uncompressed") as f:
            for key, parts in self._buffers.items():
                start = offset
                for data in parts:
                    f.write(data)
                    offset += len(data)
                ranges.append((key, (path, start, offset)))
        self._buffers, self._held = {}, 0
        yield from ranges


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
                | "Open" >> beam.MapTuple(lambda key, ranges: (key, Spilled(list(ranges)))))


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
                   | f"Tag_{n}" >> beam.MapTuple(lambda key, rng, t=tag_of[n]: (key, (t, rng)))
                   for n in sorted(pcolls)]
        return (spilled
                | "Flatten" >> beam.Flatten()
                | "GroupPaths" >> beam.GroupByKey()
                | "Open" >> beam.Map(_untag, tags))


def _untag(element, tags):
    """(key, [(tag, range)]) -> (key, {tag: the values of its ranges, in (path, start) order})."""
    key, tagged = element
    ranges = {t: [] for t in tags}
    for tag, rng in tagged:
        ranges[tag].append(rng)
    return key, {t: list(Spilled(r)) for t, r in ranges.items()}
