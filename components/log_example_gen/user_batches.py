"""Users' rows as columns: window, duplicates and leakage-free histories (numpy).

The columnar form of steps 1-4 of user_examples.py (which stays the per-user reference):
rows of many users are sorted by ``(user, time, row_id)`` (row_id: file, offset);
rows dated outside the window are bad ``out_of_window:date``; an exact duplicate of
a kept row (same user, time and trimmed text) is dropped / bad / kept by
``duplicate_rule``. Histories (history.py) of the kept rows: for row i the eligible
(``watch_s >= min_watch_s``) rows j of its user with ``t_j < t_i``, most recent first
(later row_id first among equal times), the L most recent, padded::

    c(i) = #eligible rows of i's user before p(i) (columns.known_prefix with D = 0)
    hist(i)[k] = the (c(i) - k)-th eligible row of the user,  k < min(c(i), L)
"""
import re
from typing import Callable, Dict, List, Tuple

import numpy as np

from components.log_example_gen import columns as C
from components.log_example_gen import parsing
from components.log_example_gen import span as span_lib
from models.features import HISTORY_PAD_ID

HISTORY_COLUMNS = ("video_id", "author_id", "is_click", "watch_time_s", "time_gap_s", "tab")
_PAD = {"video_id": HISTORY_PAD_ID, "author_id": HISTORY_PAD_ID, "tab": HISTORY_PAD_ID,
        "is_click": 0, "watch_time_s": 0.0, "time_gap_s": 0.0}


_QUOTE_OR_SPACE = re.compile(r'[\s"]')


def duplicate_key(text: str) -> str:
    """user_examples.GoodRow.duplicate_key of a raw record (a record with no quote and no
    white space is its own key: split on commas, nothing to strip, joined back)."""
    if text and _QUOTE_OR_SPACE.search(text) is None:
        return text
    return ",".join(f.strip() for f in (parsing.split_csv_line(text) or [text]))


def select_rows(b: C.Batch, window: np.ndarray, duplicate_rule: str,
                texts: Callable[[C.Batch, np.ndarray], List[str]]
                ) -> Tuple[C.Batch, List[Tuple[str, int]], int, C.Batch]:
    """Rows of whole users -> (kept rows sorted by (user, time, row_id), [(reason, position in
    the sorted rows)] of the bad ones, number dropped by the duplicate rule, the sorted rows).
    ``texts(sorted rows, positions)``: their raw records (rows carry no text: only rows that
    share their user and time with another in-window row need theirs, one call)."""
    order = C.sort_rows(b["user_id"], b["time_ms"], b["row_id"])
    b = C.take(b, order)
    inside = np.isin(b["date"], window)
    bad = [("out_of_window:date", int(k)) for k in np.flatnonzero(~inside)]
    keep = inside.copy()
    dropped = 0
    w = np.flatnonzero(inside)
    if duplicate_rule != "keep" and len(w) > 1:
        u, t = b["user_id"][w], b["time_ms"][w]
        same = (u[1:] == u[:-1]) & (t[1:] == t[:-1])
        run_id = np.concatenate([[0], np.cumsum(~same)])  # runs of in-window rows sharing (user, time)
        in_run = np.zeros(len(w), dtype=bool)
        in_run[:-1] |= same
        in_run[1:] |= same
        positions = w[in_run]
        keys = [duplicate_key(text) for text in texts(b, positions)] if len(positions) else []
        seen = set()
        for pos, run, key in zip(positions.tolist(), run_id[in_run].tolist(), keys):
            if (run, key) in seen:
                keep[pos] = False
                if duplicate_rule == "drop":
                    dropped += 1
                else:
                    bad.append(("duplicate_row", pos))
            seen.add((run, key))
    return C.take(b, keep), bad, dropped, b


def history_events(b: C.Batch, min_watch_s: float) -> np.ndarray:
    """Rows that enter histories: watched >= ``min_watch_s`` (bool per row)."""
    return b["play_time_ms"] / 1000.0 >= min_watch_s


def histories(b: C.Batch, author_id: np.ndarray, history_length: int, min_watch_s: float) -> Dict[str, np.ndarray]:
    """Kept rows sorted by (user, time, row_id) -> {column: (n, L) array} + 'length' (module doc)."""
    if history_length < 1:
        raise ValueError(f"history_length must be >= 1, got {history_length}")
    n, L = C.length(b), history_length
    g, t = b["user_id"], b["time_ms"]
    starts = C.group_starts(g)
    p = C.known_prefix(g, t, 0)
    watch_s = b["play_time_ms"] / 1000.0
    is_event = history_events(b, min_watch_s)
    eligible = np.flatnonzero(is_event)
    before = np.concatenate([[0], np.cumsum(is_event)])  # eligible rows before a position
    last, first = before[p] - 1, before[starts]
    idx = last[:, None] - np.arange(L)[None, :]
    valid = idx >= first[:, None]
    pos = eligible[np.where(valid, idx, 0)] if len(eligible) else np.zeros((n, L), dtype=np.int64)
    src = {"video_id": b["video_id"], "author_id": author_id, "is_click": b["is_click"],
           "watch_time_s": watch_s, "tab": b["tab"]}
    out = {k: np.where(valid, v[pos], _PAD[k]) for k, v in src.items()}
    out["time_gap_s"] = np.where(valid, (t[:, None] - t[pos]) / 1000.0, 0.0)
    out["length"] = valid.sum(axis=1).astype(np.int64)
    return out


def split_codes(b: C.Batch, split_names: List[str], split_of_date: Dict[int, str], span=None) -> np.ndarray:
    """Index in ``split_names`` of every row's split, -1: history only (time_split.py by date,
    or span.py's SpanWindow.split_of by time and user)."""
    code = {name: k for k, name in enumerate(split_names)}
    if span is not None:
        t, even = b["time_ms"], b["user_id"] % 2 == 0
        holdout = (span.end_ms <= t) & (t < span.end_ms + span.holdout_ms)
        return np.select([(span.start_ms <= t) & (t < span.end_ms), holdout & even, holdout & ~even],
                         [code[span_lib.TRAIN], code[span_lib.VALIDATION], code[span_lib.EVAL]], -1)
    dates, inverse = np.unique(b["date"], return_inverse=True)
    per_date = np.array([code.get(split_of_date.get(int(d)), -1) for d in dates], dtype=np.int64)
    return per_date[inverse] if len(dates) else np.zeros(0, dtype=np.int64)
