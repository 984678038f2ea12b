"""Beam stage of the leakage-free signals (signals.py has the equations and passes).

::

  good rows (user_id, GoodRow) ─in window─► SignalRow ─key tab─► GroupByKey ─► tab_pass ─► Known (e_tab, w_tab, r_tab)
        Known ─key video / author / music / (tag, tab) / (tab, duration bucket)─► GroupByKey ─► entity_pass
        sig_tab_ctr + the entity signals (signals.ENTITY_SIGNALS) ─► (user_id, (row key, name, value))

The output is keyed by user so beam_pipeline.py joins it to the user's rows
(CoGroupByKey) and user_examples.py adds the user statistics (signals.user_pass)
on the user's kept rows. Every pass sorts its key's rows by time inside one worker;
no statistic is computed on the driver.
"""
from typing import Dict, Iterable, List, Tuple

import apache_beam as beam

from components.log_example_gen import parsing, signals
from models import features as F


def signal_row(g, videos: Dict[int, dict]) -> signals.SignalRow:
    """GoodRow (user_examples.GoodRow) + the video table -> SignalRow."""
    r, video = g.row, videos[g.row.video_id]
    duration_s = parsing.duration_s(r, video)
    return signals.SignalRow(
        key=(g.source, g.offset), user_id=r.user_id, time_ms=r.time_ms, is_click=r.is_click,
        tab=r.tab, video_id=r.video_id, author_id=video["author_id"], music_id=video["music_id"],
        tag_id=video["tag_id"], duration_bucket=F.duration_bucket(duration_s),
        duplicate_key=g.duplicate_key(), watch_s=r.play_time_ms / 1000.0, duration_s=duration_s)


def _tab_pass(element, delay_ms: int, prior_ctr: float, duplicate_rule: str) -> List[signals.Known]:
    _, rows = element
    return signals.tab_pass(list(rows), delay_ms, prior_ctr, duplicate_rule)


def _entity_pass(element, stats: Dict[str, str], delay_ms: int) -> Iterable[Tuple[int, Tuple]]:
    _, recs = element
    recs = list(recs)
    for rec, values in zip(recs, signals.entity_pass(recs, delay_ms, stats)):
        for name, value in values.items():
            yield rec.row.user_id, (rec.row.key, name, value)


class RowSignals(beam.PTransform):
    """(user_id, GoodRow) -> (user_id, (row key, signal name, value)) for sig_tab_ctr and
    the entity signals of every in-window row (signals.py)."""

    def __init__(self, videos_si, window_si, label_delay_s: float, prior_ctr: float, duplicate_rule: str):
        super().__init__()
        self._videos_si, self._window_si = videos_si, window_si
        self._delay_ms = int(round(label_delay_s * 1000))
        self._prior_ctr, self._duplicate_rule = prior_ctr, duplicate_rule

    def expand(self, good):
        delay = self._delay_ms
        rows = good | "SignalRows" >> beam.FlatMap(
            lambda kv, videos, window: [signal_row(kv[1], videos)] if kv[1].row.date in window else [],
            self._videos_si, self._window_si)
        known = (rows
                 | "KeyByTab" >> beam.Map(lambda r: (r.tab, r))
                 | "GroupByTab" >> beam.GroupByKey()
                 | "TabPass" >> beam.FlatMap(_tab_pass, delay, self._prior_ctr, self._duplicate_rule))
        outputs = [known | "TabCtr" >> beam.Map(lambda k: (k.row.user_id, (k.row.key, "sig_tab_ctr", k.e_tab)))]
        for name, (key_fn, stats) in signals.ENTITY_SIGNALS.items():
            outputs.append(known
                           | f"KeyBy_{name}" >> beam.Map(lambda k, key_fn=key_fn: (key_fn(k.row), k))
                           | f"GroupBy_{name}" >> beam.GroupByKey()
                           | f"Pass_{name}" >> beam.FlatMap(_entity_pass, stats, delay))
        return outputs | "AllRowSignals" >> beam.Flatten()
