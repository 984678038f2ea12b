"""One byte range's records -> a columnar batch of good rows + its bad rows (bulk parsing).

Rows are checked in the order of parsing.py (form) then row_rules.py (values) then the
join (side tables). Most rows take the fast path: no quote or carriage return, the
right number of columns and plain ASCII digits (at most 18) in every used column; their
value and join rules are then checked on whole columns (numpy). Any other row, and any
row a column check flags, goes through the per-row functions (parsing.parse_log_line,
row_rules.check_values, parsing.join_reason), which give the reason of the dead letter,
so reasons, files, lines and offsets are those of the per-row rules by construction.

Good rows come out as a batch (columns.py) with ``row_id`` (file and offset), ``line`` and the
``parsing.USED_LOG_FIELDS``; their raw text stays in the file (the few rows that need it later,
for the duplicate key or a dead letter, read it again: reading.texts_at).
"""
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from components.log_example_gen import columns as C
from components.log_example_gen import bulk_lines, parsing, reading, row_rules
from schemas.kuairand_format import DAY_MS

FIELDS = parsing.USED_LOG_FIELDS
_FAST = re.compile(r"[0-9]{1,18}(?:,[0-9]{1,18})*")
_INT64_MAX = (1 << 63) - 1


class SideIds(NamedTuple):
    """The ids a log row may join: known users/videos (sorted arrays) and the ambiguous ones."""
    users: np.ndarray
    videos: np.ndarray
    ambiguous_users: np.ndarray
    ambiguous_videos: np.ndarray

    @classmethod
    def of(cls, users, videos, ambiguous: Optional[dict]) -> "SideIds":
        """From the side tables (side_columns.SideTable) and {'user', 'video': ambiguous ids}."""
        ambiguous = ambiguous or {}

        def arr(ids):
            return np.array(sorted(ids), dtype=np.int64)
        return cls(users.ids, videos.ids, arr(ambiguous.get("user", ())), arr(ambiguous.get("video", ())))


def _slow_reason(text: str, header: Sequence[str], rules, users, videos, ambiguous) -> Tuple[Optional[str], list]:
    row = parsing.parse_log_line(text, header)
    if isinstance(row, parsing.BadRow):
        return row.reason, []
    reason = row_rules.check_values(row, rules) or parsing.join_reason(row, users, videos, ambiguous)
    return reason, [getattr(row, f) for f in FIELDS]


def _flagged(v: Dict[str, np.ndarray], rules: row_rules.RowRules, ids: SideIds) -> np.ndarray:
    """Rows of fast-path values (non-negative ints) that break a value or join rule."""
    bad = np.zeros(len(v["user_id"]), dtype=bool)
    dates, inverse = np.unique(v["date"], return_inverse=True)
    starts = []
    for d in dates.tolist():
        try:
            starts.append(row_rules.day_start_ms(d))
        except (ValueError, OverflowError):
            starts.append(None)
    valid = np.array([s is not None for s in starts], dtype=bool)
    start = np.array([s if s is not None else 0 for s in starts], dtype=np.int64)[inverse]
    bad |= ~valid[inverse]
    for name in row_rules.BINARY_FIELDS:
        bad |= v[name] > 1
    bad |= (v["hourmin"] // 100 > 23) | (v["hourmin"] % 100 > 59)
    bad |= (v["play_time_ms"] > rules.max_play_time_ms) | (v["duration_ms"] > rules.max_duration_ms)
    tol = rules.date_time_tolerance_ms
    bad |= ~((start - tol <= v["time_ms"]) & (v["time_ms"] < start + DAY_MS + tol))
    bad |= np.isin(v["user_id"], ids.ambiguous_users) | np.isin(v["video_id"], ids.ambiguous_videos)
    bad |= ~np.isin(v["user_id"], ids.users) | ~np.isin(v["video_id"], ids.videos)
    return bad


def _slow(records: Sequence[reading.Record], header, rules, users, videos, ambiguous):
    """The per-row path: (good records, their values as an (n, len(FIELDS)) array, [(reason, record)])."""
    good, vals, bad = [], [], []
    for rec in records:
        reason, row = (rec.problem, []) if rec.problem else _slow_reason(rec.text, header, rules, users, videos,
                                                                          ambiguous)
        if reason is not None:
            bad.append((reason, rec))
            continue
        if any(not -_INT64_MAX <= x <= _INT64_MAX for x in row):
            raise ValueError(f"LogExampleGen: {rec.path} line {rec.line}: a value does not fit 64 bits: {rec.text!r}")
        good.append(rec)
        vals.append(row)
    return good, np.array(vals, dtype=np.int64).reshape(len(good), len(FIELDS)), bad


def _batch(file_index: int, values: np.ndarray, offsets, lines) -> C.Batch:
    batch = {f: values[:, k] for k, f in enumerate(FIELDS)}
    batch["row_id"] = C.row_ids(file_index, np.asarray(offsets, dtype=np.int64))
    batch["line"] = np.asarray(lines, dtype=np.int64)
    return batch


def parse_records(records: Sequence[reading.Record], file_index: int, header: Sequence[str],
                  rules: row_rules.RowRules, users, videos, ambiguous, ids: SideIds
                  ) -> Tuple[C.Batch, List[Tuple[str, reading.Record]]]:
    """Records of one file -> (good batch, [(reason, record)] of the bad ones), see the module doc."""
    idx = [header.index(f) for f in FIELDS]
    ncols = len(header)
    fast_rows, fast_values, slow = [], [], []
    for rec in records:
        if rec.problem:
            slow.append(rec)
            continue
        text = rec.text
        if '"' not in text and "\r" not in text:
            fields = text.split(",")
            if len(fields) == ncols:
                used = [fields[i] for i in idx]
                if _FAST.fullmatch(",".join(used)):
                    fast_rows.append(rec)
                    fast_values.append(used)
                    continue
        slow.append(rec)
    good_recs: List[reading.Record] = []
    good_vals = [np.zeros((0, len(FIELDS)), dtype=np.int64)]
    if fast_rows:
        mat = np.array(fast_values, dtype=np.int64).reshape(len(fast_rows), len(FIELDS))
        flagged = _flagged({f: mat[:, k] for k, f in enumerate(FIELDS)}, rules, ids)
        good_recs = [fast_rows[k] for k in np.flatnonzero(~flagged)]
        good_vals.append(mat[~flagged])
        slow.extend(fast_rows[k] for k in np.flatnonzero(flagged))
    more, vals, bad = _slow(slow, header, rules, users, videos, ambiguous)
    good_recs += more
    if not good_recs:
        return {}, bad
    return _batch(file_index, np.concatenate(good_vals + [vals]), [r.offset for r in good_recs],
                  [r.line for r in good_recs]), bad


def _field_values(lines: bulk_lines.Lines, ncols: int, idx: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]:
    """(fast, values): whether each plain line has ``ncols`` fields with 1-18 ASCII digits in every
    used one (the regex of ``parse_records``), and the (n, len(idx)) values of those fields."""
    buf, base = lines.buf, lines.base
    s, e = lines.start - base, lines.end - base
    commas = np.flatnonzero(buf == 44)
    c0 = np.searchsorted(commas, s)
    fast = np.searchsorted(commas, e) - c0 == ncols - 1
    sep = np.empty((len(s), ncols + 1), dtype=np.int64)
    sep[:, 0], sep[:, ncols] = s - 1, e
    if ncols > 1 and len(commas):
        sep[:, 1:ncols] = commas[np.minimum(c0[:, None] + np.arange(ncols - 1)[None, :], len(commas) - 1)]
    elif ncols > 1:
        sep[:, 1:ncols] = s[:, None]
    used = np.asarray(idx)
    first, stop = sep[:, used] + 1, sep[:, used + 1]
    width = stop - first
    quotes = lines.quotes
    fast &= np.searchsorted(quotes, e) == np.searchsorted(quotes, s)  # a quoted field: the csv module splits it
    fast &= ((width >= 1) & (width <= 18)).all(axis=1)
    # each used field right-aligned in a window as wide as its widest candidate: every byte of
    # the field a digit (else the line is not fast); its value by Horner's rule over the window
    values = np.zeros(first.shape, dtype=np.int64)
    for j in range(len(used)):
        w = int(width[fast, j].max()) if fast.any() else 0
        pos = stop[:, j, None] - w + np.arange(w)[None, :]
        inside = pos >= first[:, j, None]
        digit = np.take(buf, pos, mode="clip") - np.uint8(48)  # uint8: a byte below '0' wraps above 9
        fast &= ((digit <= 9) | ~inside).all(axis=1)
        digit[~inside] = 0
        v = values[:, j]
        for k in range(w):
            v *= 10
            v += digit[:, k]
    return fast, values


def parse_lines(lines: bulk_lines.Lines, path: str, file_index: int, header: Sequence[str],
                rules: row_rules.RowRules, users, videos, ambiguous, ids: SideIds
                ) -> Tuple[C.Batch, List[Tuple[str, reading.Record]], int]:
    """``parse_records`` on a range read by bulk_lines: the same rows, reasons and batch, with the
    fast checks on the bytes (numpy) instead of per record; + the number of records read."""
    fast, values = _field_values(lines, len(header), [header.index(f) for f in FIELDS])
    flagged = _flagged({f: values[:, k] for k, f in enumerate(FIELDS)}, rules, ids)
    ok = np.flatnonzero(fast & ~flagged)
    slow = bulk_lines.records(path, lines, np.flatnonzero(~fast | flagged)) + lines.others
    more, vals, bad = _slow(slow, header, rules, users, videos, ambiguous)
    good = _batch(file_index, np.concatenate([values[ok], vals]),
                  np.concatenate([lines.start[ok], np.array([r.offset for r in more], dtype=np.int64)]),
                  np.concatenate([lines.line[ok], np.array([r.line for r in more], dtype=np.int64)]))
    return (good if C.length(good) else {}), bad, len(ok) + len(slow)
