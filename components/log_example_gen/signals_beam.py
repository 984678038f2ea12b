"""Beam stages of the leakage-free signals on columnar batches (signals.py: equations;
signal_columns.py: the passes on arrays).

::

  kept rows as (tab, batch) ─GroupByKey─► tab pass ─► e_tab, w_tab, r_tab per row
        ├─► (user shard, ('tab', row_id + sig_tab_ctr))
        └─► ((family, entity shard), batch) ─GroupByKey─► entity pass (signals.ENTITY_SIGNALS)
                                              ─► (user shard, (family, row_id + its signals))

The output is keyed by the user shard so beam_pipeline.py joins it to the users' rows
(CoGroupByKey) and example_batches.py adds the user statistics. An entity shard holds
every row of the keys hashed to it (signal_columns.entity_hash), so each pass sees whole
keys; adding a family to signals.ENTITY_SIGNALS adds its pass here with no other change.
A tab's rows are one worker's columns (~100 bytes a row).
"""
from typing import Iterator, Optional, Tuple

import apache_beam as beam

from components.log_example_gen import columns as C
from components.log_example_gen import signal_columns, signals, spill

TAB = "tab"


def _signal_batch(b: C.Batch, values: dict) -> C.Batch:
    out = {"row_id": b["row_id"], "user_id": b["user_id"]}
    out.update(values)
    return out


def _by_user_shard(family: str, out: C.Batch, user_shards: int) -> Iterator[Tuple[int, Tuple[str, C.Batch]]]:
    for shard, part in C.split_by(out, C.shard_of(out["user_id"], user_shards)):
        yield shard, (family, part)


def _tab_pass(element, delay_ms: int, prior_ctr: float, user_shards: int, entity_shards: int):
    _, batches = element
    b = C.concat(batches)
    b.update(signal_columns.tab_pass(b, delay_ms, prior_ctr))
    yield from _by_user_shard(TAB, _signal_batch(b, {"sig_tab_ctr": b["e_tab"]}), user_shards)
    for family in signals.ENTITY_SIGNALS:
        keys = C.shard_of(signal_columns.entity_hash(family, b), entity_shards)
        for shard, part in C.split_by(b, keys):
            yield beam.pvalue.TaggedOutput("entity", ((family, shard), part))


def _entity_pass(element, delay_ms: int, user_shards: int):
    (family, _), batches = element
    b = C.concat(batches)
    yield from _by_user_shard(family, _signal_batch(b, signal_columns.entity_pass(family, b, delay_ms)),
                              user_shards)


class RowSignals(beam.PTransform):
    """(tab, batch of kept rows: example_batches.signal_rows) -> two PCollections (the tab pass's,
    the entity passes') of (user shard, (family, batch of row_id, user_id and the family's
    signals)) for sig_tab_ctr and every entity family; the two
    groupings go through files under the spill folders when they are set (spill.py)."""

    def __init__(self, label_delay_s: float, prior_ctr: float, user_shards: int, entity_shards: int,
                 tab_spill_dir: Optional[str] = None, entity_spill_dir: Optional[str] = None):
        super().__init__()
        self._spill_dirs = tab_spill_dir, entity_spill_dir
        self._delay_ms = int(round(label_delay_s * 1000))
        self._prior_ctr = prior_ctr
        self._user_shards, self._entity_shards = user_shards, entity_shards

    def expand(self, by_tab):
        tab = (by_tab
               | "GroupByTab" >> spill.GroupByKey(self._spill_dirs[0])
               | "TabPass" >> beam.FlatMap(_tab_pass, self._delay_ms, self._prior_ctr, self._user_shards,
                                           self._entity_shards).with_outputs("entity", main="tab"))
        entity = (tab.entity
                  | "GroupByEntity" >> spill.GroupByKey(self._spill_dirs[1])
                  | "EntityPass" >> beam.FlatMap(_entity_pass, self._delay_ms, self._user_shards))
        return tab.tab, entity


def family_names():
    return [TAB] + list(signals.ENTITY_SIGNALS)

