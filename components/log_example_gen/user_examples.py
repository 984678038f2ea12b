"""One user's examples: window, duplicates, leakage-free histories, splits (pure Python).

Runs after the GroupByKey on ``user_id`` (beam_pipeline.py), so only one user's rows
are in memory at a time. Steps, in order:

1. sort the user's good rows by ``(time_ms, file, byte offset)`` (deterministic ties);
2. rows dated outside the date window (date_window.py) -> bad ``out_of_window:date``;
3. exact duplicate rows (same text in every column) -> ``duplicate_rule``
   (row_rules.py): 'drop' keeps the first copy and counts the others,
   'dead_letter' makes the copies bad rows ``duplicate_row``, 'keep' keeps all;
4. histories of the remaining rows (history.build_histories: strictly earlier events)
   and their leakage-free signals: the row's entity signals (``row_signals``, from
   signals_beam.py) + the user statistics (signals.user_pass) over the kept rows;
5. each row -> a tf.Example of its date's split, or history-only (a date in no split);
   with a span window (span.py) the row's time and user decide the split instead.

Steps 2-3 happen before 4, so an out-of-window or duplicate row never enters a history.
Yields ``(tag, payload)``: ``(BAD, (reason, GoodRow))``, ``(DROPPED, rule)``,
``(HISTORY_ONLY, date)`` or ``(split, serialized tf.Example)``.
"""
from typing import Dict, Iterable, Iterator, NamedTuple, Optional, Tuple

from components.log_example_gen import history as history_lib
from components.log_example_gen import parsing
from components.log_example_gen import signals as signals_lib

BAD = "bad"
DROPPED = "dropped"
HISTORY_ONLY = "history_only"
DUPLICATE_ROW = "duplicate_row"
OUT_OF_WINDOW = "out_of_window:date"


class GoodRow(NamedTuple):
    """A parsed, validated, joinable log row and where it came from."""
    time_ms: int
    source: str
    offset: int
    line: int
    row: parsing.LogRow
    text: str  # the raw record (dead letters) and, trimmed, the duplicate key

    def duplicate_key(self) -> str:
        return ",".join(f.strip() for f in (parsing.split_csv_line(self.text) or [self.text]))


def build_user_examples(rows: Iterable[GoodRow], user: dict, videos: Dict[int, dict],
                        window: Iterable[int], split_of_date: Dict[int, Optional[str]],
                        duplicate_rule: str, history_length: int,
                        min_watch_s: float, span=None, row_signals: Optional[Dict] = None,
                        label_delay_ms: int = 0) -> Iterator[Tuple[str, object]]:
    """See the module doc. ``row_signals``: {(source, offset): {signal: value}} of the
    user's rows (sig_tab_ctr and the entity signals of signals.py); None: every entity
    signal is computed as for a row with no earlier event (test callers)."""
    inside = set(window)
    kept = []
    same_time: list = []  # rows kept at the current time_ms (exact duplicates share it)
    keys: Optional[set] = None  # their duplicate keys, computed only when a time repeats
    for g in sorted(rows, key=lambda r: (r.time_ms, r.source, r.offset)):
        if g.row.date not in inside:
            yield BAD, (OUT_OF_WINDOW, g)
            continue
        if duplicate_rule != "keep":
            if not same_time or same_time[0].time_ms != g.time_ms:
                same_time, keys = [], None
            elif keys is None:
                keys = {r.duplicate_key() for r in same_time}
            if keys is not None:
                key = g.duplicate_key()
                if key in keys:
                    yield (DROPPED, DUPLICATE_ROW) if duplicate_rule == "drop" else (BAD, (DUPLICATE_ROW, g))
                    continue
                keys.add(key)
            same_time.append(g)
        kept.append(g)
    per_row = [_entity_signals(row_signals, g) for g in kept]
    kept = [g.row for g in kept]
    events = [history_lib.HistoryEvent(
        time_ms=r.time_ms, video_id=r.video_id, author_id=videos[r.video_id]["author_id"],
        is_click=r.is_click, watch_time_s=r.play_time_ms / 1000.0, tab=r.tab) for r in kept]
    histories = history_lib.build_histories(events, history_length, min_watch_s)
    user_stats = signals_lib.user_pass([signals_lib.UserEvent(
        r.time_ms, r.is_click, r.play_time_ms / 1000.0, r.tab, s["sig_tab_ctr"],
        parsing.duration_s(r, videos[r.video_id])) for r, s in zip(kept, per_row)], label_delay_ms)
    for row, hist, entity, stats in zip(kept, histories, per_row, user_stats):
        split = span.split_of(row.time_ms, row.user_id) if span is not None else split_of_date.get(row.date)
        if split is None:
            yield HISTORY_ONLY, row.date
            continue
        feats = parsing.example_features(row, user, videos[row.video_id], hist,
                                         signals_lib.row_signals(entity, stats))
        yield split, parsing.to_tf_example(feats).SerializeToString()


def _entity_signals(row_signals: Optional[Dict], g: GoodRow) -> Dict[str, float]:
    return signals_lib.no_history_signals() if row_signals is None else row_signals[(g.source, g.offset)]
