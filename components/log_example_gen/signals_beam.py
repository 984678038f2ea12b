"""Beam stages of the leakage-free signals on columnar batches (signals.py: equations;
signal_columns.py: the passes on arrays).

::

  kept rows as (tab, batch) ─► ((tab, time block), event / query rows)
        │  event: a row in its block k = ⌊t / W⌋;  query: a row in block ⌊(t − D) / W⌋
        ├─► block sums of the events ─CombinePerKey─► side input: each tab's sums before block k
        └─GroupByKey─► tab block pass (signal_columns.tab_block_pass) ─► e_tab, w_tab, r_tab,
              │                                                        tab_hour_ctr per row
              ├─► (user shard, ('tab', row_id + sig_tab_ctr, sig_tab_hour_ctr))
              └─► ((family, entity shard), batch) ─GroupByKey─► entity pass (signals.ENTITY_SIGNALS)
                                                  ─► (user shard, (family, row_id + its signals))

The tab pass is cut into time blocks of W (``tab_block_ms``): a row's known set
K(i) = {j: t_j < t_i − D} is every row of its tab in the blocks before ⌊(t_i − D) / W⌋ (their
sums, a side input of 52 numbers per block: signal_columns.TAB_SUMS) plus that block's rows
before t_i − D, so a worker holds one tab-block, not the tab (one tab is ~74 % of the
simulated log). Any W gives
the same signals; W is the longest whole number of hours whose rows, at the busiest day's
rate over all tabs, stay within ``TAB_BLOCK_ROWS``:

    W = max(1, ⌊TAB_BLOCK_ROWS · 24 / max_d n_d⌋) hours,   n_d = log rows of date d,

so a small log is cut into few blocks (every block costs a group, a spill file and a pass:
on the real logs' ~17k rows a day, hour blocks cost 11 % of LogExampleGen's time) and a
large one into hours. The output is
keyed by the user shard so beam_pipeline.py joins it to the users' rows
(CoGroupByKey) and example_batches.py adds the user statistics. An entity shard holds
every row of the keys hashed to it (signal_columns.entity_hash), so each pass sees whole
keys; adding a family to signals.ENTITY_SIGNALS adds its pass here with no other change.
"""
from typing import Any, Iterable, Iterator, Optional, Tuple

import apache_beam as beam
import numpy as np

from components.log_example_gen import columns as C
from components.log_example_gen import batch_buffer, signal_columns, signals, spill

TAB = "tab"


def _signal_batch(b: C.Batch, values: dict) -> C.Batch:
    out = {"row_id": b["row_id"], "user_id": b["user_id"]}
    out.update(values)
    return out


def _by_user_shard(family: str, out: C.Batch, user_shards: int) -> Iterator[Tuple[int, Tuple[str, C.Batch]]]:
    for shard, part in C.split_by(out, C.shard_of(out["user_id"], user_shards)):
        yield shard, (family, part)


HOUR_MS = 3_600_000
TAB_BLOCK_ROWS = 50_000  # rows of one tab block at most, at the busiest day's rate (module doc)
_EVENT, _QUERY = "event", "query"


def tab_block_ms(rows_per_date: Iterable[Tuple[Any, int]], max_rows: Optional[int] = None) -> int:
    """W of the module doc from the log's (date, rows) counts (no rows: an hour);
    max_rows: TAB_BLOCK_ROWS."""
    max_rows = TAB_BLOCK_ROWS if max_rows is None else max_rows
    busiest = max((n for _, n in rows_per_date), default=0)
    return HOUR_MS * max(1, max_rows * 24 // busiest if busiest else 1)


def _tab_blocks(element, delay_ms: int, block_ms: int):
    """(tab, batch) -> ((tab, block), (event, rows of the block)) and ((tab, block), (query,
    rows whose t - D falls in it)); an event carries only what the block sums need."""
    tab, b = element
    for block, part in C.split_by(b, b["time_ms"].astype(np.int64) // block_ms):
        yield (tab, block), (_EVENT, {k: part[k] for k in signal_columns.TAB_EVENT_COLUMNS})
    for block, part in C.split_by(b, (b["time_ms"].astype(np.int64) - delay_ms) // block_ms):
        yield (tab, block), (_QUERY, part)


def _block_sums(element):
    key, (kind, part) = element
    if kind == _EVENT:
        yield key, signal_columns.tab_block_sums(part)


def _add_sums(sums) -> dict:
    total = dict.fromkeys(signal_columns.TAB_SUMS, 0.0)
    for s in sums:
        for k in total:
            total[k] += s[k]
    return total


class _SumsBefore:
    """Each tab's sums over its blocks before k, from the ((tab, block), sums) of every block."""

    def __init__(self, block_sums):
        per_tab = {}
        for (tab, block), sums in sorted(block_sums):
            per_tab.setdefault(tab, []).append((block, sums))
        self._tabs = {}
        for tab, rows in per_tab.items():
            cum = np.cumsum([[0.0] * len(signal_columns.TAB_SUMS)]
                            + [[s[k] for k in signal_columns.TAB_SUMS] for _, s in rows], axis=0)
            self._tabs[tab] = (np.array([b for b, _ in rows], dtype=np.int64), cum)

    def before(self, tab, block: int) -> dict:
        blocks, cum = self._tabs.get(tab, (np.zeros(0, dtype=np.int64), np.zeros((1, len(signal_columns.TAB_SUMS)))))
        row = cum[int(np.searchsorted(blocks, block, side="left"))]
        return dict(zip(signal_columns.TAB_SUMS, row.tolist()))


class _TabBlockPass(beam.DoFn):
    """((tab, block), event and query rows) -> sig_tab_ctr, sig_tab_hour_ctr per user shard; the query rows with
    e_tab, w_tab, r_tab per entity shard (tagged ``entity``)."""

    def __init__(self, delay_ms: int, prior_ctr: float, user_shards: int, entity_shards: int):
        self._delay_ms, self._prior_ctr = delay_ms, prior_ctr
        self._user_shards, self._entity_shards = user_shards, entity_shards
        self._before = None

    def start_bundle(self):
        self._out = batch_buffer.BatchBuffer(shape=lambda shard, b: (shard, (TAB, b)))

    def finish_bundle(self):
        yield from self._out.finish()

    def process(self, element, block_sums):
        if self._before is None:  # the side input is the same for every element of a run
            self._before = _SumsBefore(block_sums)
        (tab, block), values = element
        events, queries = [], []
        for kind, part in values:
            (events if kind == _EVENT else queries).append(part)
        b = C.concat(queries)
        if not C.length(b):
            return
        b.update(signal_columns.tab_block_pass(C.concat(events), b, self._before.before(tab, block),
                                               self._delay_ms, self._prior_ctr))
        out = _signal_batch(b, {"sig_tab_ctr": b["e_tab"], "sig_tab_hour_ctr": b.pop("tab_hour_ctr")})
        yield from self._out.add(None, out, C.shard_of(out["user_id"], self._user_shards))
        del b["hour"]  # the tab pass's own: the entity passes do not read it
        for family in signals.ENTITY_SIGNALS:
            keys = C.shard_of(signal_columns.entity_hash(family, b), self._entity_shards)
            yield from self._out.add("entity", {k: b[k] for k in signal_columns.entity_columns(family)}, keys,
                                     label=family)


def _entity_pass(element, delay_ms: int, user_shards: int):
    (family, _), batches = element
    b = C.concat(batches)
    yield from _by_user_shard(family, _signal_batch(b, signal_columns.entity_pass(family, b, delay_ms)),
                              user_shards)


class RowSignals(beam.PTransform):
    """(tab, batch of kept rows: example_batches.signal_rows) -> two PCollections (the tab pass's,
    the entity passes') of (user shard, (family, batch of row_id, user_id and the family's
    signals)) for the tab pass (sig_tab_ctr, sig_tab_hour_ctr) and every entity family; the two
    groupings go through files under the spill folders when they are set (spill.py).
    ``rows_per_date``: a singleton side input of the log's [(date, rows)], for W (module doc)."""

    def __init__(self, label_delay_s: float, prior_ctr: float, user_shards: int, entity_shards: int,
                 rows_per_date, tab_spill_dir: Optional[str] = None, entity_spill_dir: Optional[str] = None):
        super().__init__()
        self._rows_per_date = rows_per_date
        self._spill_dirs = tab_spill_dir, entity_spill_dir
        self._delay_ms = int(round(label_delay_s * 1000))
        self._prior_ctr = prior_ctr
        self._user_shards, self._entity_shards = user_shards, entity_shards

    def expand(self, by_tab):
        blocks = by_tab | "TabBlocks" >> beam.FlatMap(
            lambda element, delay_ms, counts: _tab_blocks(element, delay_ms, tab_block_ms(counts)),
            self._delay_ms, self._rows_per_date)
        block_sums = (blocks
                      | "BlockSums" >> beam.FlatMap(_block_sums)
                      | "SumPerBlock" >> beam.CombinePerKey(_add_sums))
        tab = (blocks
               | "GroupByTabBlock" >> spill.GroupByKey(self._spill_dirs[0])
               | "TabPass" >> beam.ParDo(_TabBlockPass(self._delay_ms, self._prior_ctr, self._user_shards,
                                                       self._entity_shards), beam.pvalue.AsList(block_sums))
               .with_outputs("entity", main="tab"))
        entity = (tab.entity
                  | "GroupByEntity" >> spill.GroupByKey(self._spill_dirs[1])
                  | "EntityPass" >> beam.FlatMap(_entity_pass, self._delay_ms, self._user_shards))
        return tab.tab, entity


def family_names():
    return [TAB] + list(signals.ENTITY_SIGNALS)

