"""Few large batches instead of many small ones: a DoFn's keyed outputs joined per key.

A stage that cuts each input batch by a second key (the tab pass: by user shard and entity
shard, for each tab block; SelectRows: by tab, for each user shard) would emit
inputs × keys small batches, and every batch costs a pickle, a spill-file record and a
concatenation downstream whatever its size (1M rows: ~190k batches of the tab pass, 60 s).
``BatchBuffer`` holds a bundle's input batches with a key per row, and when more than
``max_rows`` rows are held and when the bundle finishes it joins them and cuts the join by
key once, emitting each key's rows as one batch: a stage emits about
keys × (rows / max_rows + 1) batches and holds at most ``max_rows`` rows, and the cut costs
once per drain, not once per input (cutting each tab-hour block of the real logs, ~80 rows, 96
ways cost more than the tab pass itself: 150 -> 107 CPU-µs a row of LogExampleGen on them).
"""
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import apache_beam as beam
import numpy as np
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
    """``add(tag, batch, keys)`` -> outputs to yield from ``process``; ``finish()`` -> outputs to
    yield from ``finish_bundle``. An output is ``shape(key, batch)`` (default ``(key, batch)``)
    on the main output (tag None), or ``TaggedOutput(tag, (key, batch))``."""

    def __init__(self, max_rows: int = MAX_ROWS, shape: Callable[[Any, C.Batch], Any] = lambda k, b: (k, b)):
        self._max, self._shape = max_rows, shape
        self._rows: Dict[Tuple[Any, Any], List[Tuple[C.Batch, np.ndarray]]] = {}
        self._held = 0

    def add(self, tag, batch: C.Batch, keys: np.ndarray, label: Optional[Any] = None) -> Iterator[Any]:
        """Row i of ``batch`` under the integer key ``keys[i]``, or ``(label, keys[i])`` when a
        label is given; a key's rows keep the order they were added in."""
        n = C.length(batch)
        if not n:
            return
        self._rows.setdefault((tag, label), []).append((batch, keys))
        self._held += n
        if self._held > self._max:
            yield from self._drain()

    def finish(self) -> Iterator[Any]:
        for out in self._drain():
            yield in_global_window(out)

    def _drain(self) -> Iterator[Any]:
        rows, self._rows, self._held = self._rows, {}, 0
        for (tag, label), pairs in rows.items():
            keys = np.concatenate([k for _, k in pairs])
            for key, batch in C.split_by(C.concat(b for b, _ in pairs), keys):
                key = key if label is None else (label, key)
                yield self._shape(key, batch) if tag is None else beam.pvalue.TaggedOutput(tag, (key, batch))
