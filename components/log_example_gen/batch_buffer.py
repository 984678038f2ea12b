"""Few large batches instead of many small ones: a DoFn's keyed outputs joined per key.

A stage that cuts each input batch by a second key (the tab pass: by user shard and entity
shard, for each tab-hour; SelectRows: by tab, for each user shard) would emit
inputs × keys small batches, and every batch costs a pickle, a spill-file record and a
concatenation downstream whatever its size (1M rows: ~190k batches of the tab pass, 60 s).
``BatchBuffer`` holds a bundle's output batches per key and emits each key's rows as one
batch when more than ``max_rows`` rows are held and when the bundle finishes, so a stage
emits about keys × (rows / max_rows + 1) batches, and holds at most ``max_rows`` rows.
"""
from typing import Any, Callable, Dict, Iterator, List, Tuple

import apache_beam as beam
from apache_beam.transforms.window import GlobalWindow
from apache_beam.utils.windowed_value import WindowedValue

from components.log_example_gen import columns as C

MAX_ROWS = 500_000


def in_global_window(out):
    """An output of ``finish_bundle`` (a value or a ``TaggedOutput``): Beam wants it windowed,
    and every collection of LogExampleGen is in the global window."""
    tag, value = (out.tag, out.value) if isinstance(out, beam.pvalue.TaggedOutput) else (None, out)
    windowed = WindowedValue(value, GlobalWindow().max_timestamp(), [GlobalWindow()])
    return windowed if tag is None else beam.pvalue.TaggedOutput(tag, windowed)


class BatchBuffer:
    """``add(tag, key, batch)`` -> outputs to yield from ``process``; ``finish()`` -> outputs to
    yield from ``finish_bundle``. An output is ``shape(key, batch)`` (default ``(key, batch)``)
    on the main output (tag None), or ``TaggedOutput(tag, (key, batch))``."""

    def __init__(self, max_rows: int = MAX_ROWS, shape: Callable[[Any, C.Batch], Any] = lambda k, b: (k, b)):
        self._max, self._shape = max_rows, shape
        self._parts: Dict[Tuple[Any, Any], List[C.Batch]] = {}
        self._held = 0

    def add(self, tag, key, batch: C.Batch) -> Iterator[Any]:
        n = C.length(batch)
        if not n:
            return
        self._parts.setdefault((tag, key), []).append(batch)
        self._held += n
        if self._held > self._max:
            yield from self._drain()

    def finish(self) -> Iterator[Any]:
        for out in self._drain():
            yield in_global_window(out)

    def _drain(self) -> Iterator[Any]:
        parts, self._parts, self._held = self._parts, {}, 0
        for (tag, key), batches in parts.items():
            batch = C.concat(batches)
            yield self._shape(key, batch) if tag is None else beam.pvalue.TaggedOutput(tag, (key, batch))
