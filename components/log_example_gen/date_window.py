"""The date window: which log dates a run accepts (pure Python).

A single row dated 20991231 (or 19700101) must not become a split day: with no days
configured the split takes the last dates present as eval, so one such row would move
every real day one split earlier (and a 1970 row would enter every history).

Rule (``infer_window``):

- ``date_window`` configured: exactly those days are accepted.
- else: the dates are grouped into runs whose consecutive dates are at most
  ``max_gap_days`` calendar days apart (``max_gap_days = 1``: only adjacent days join);
  the run holding the most rows is the window (ties: the later run). A stray date far
  from the logs forms its own small run and falls outside.

Rows dated outside the window follow ``out_of_window_rule`` (row_rules.py). Example::

    infer_window({20220425: 900, 20220426: 950, 20991231: 1}, max_gap_days=1)
    -> [20220425, 20220426]
"""
import datetime
from typing import Dict, List, Sequence


def _ordinal(day: int) -> int:
    return datetime.date(day // 10000, day // 100 % 100, day % 100).toordinal()


def infer_window(rows_per_date: Dict[int, int], max_gap_days: int,
                 configured: Sequence[int] = ()) -> List[int]:
    """Accepted dates (sorted): ``configured`` if given, else the largest run of dates
    at most ``max_gap_days`` apart (see the module doc). Empty input -> []."""
    if configured:
        return sorted(configured)
    dates = sorted(rows_per_date)
    runs: List[List[int]] = []
    for day in dates:
        if runs and _ordinal(day) - _ordinal(runs[-1][-1]) <= max_gap_days:
            runs[-1].append(day)
        else:
            runs.append([day])
    best: List[int] = []
    best_rows = -1
    for run in runs:
        rows = sum(rows_per_date[d] for d in run)
        if rows >= best_rows:
            best, best_rows = run, rows
    return best


def outside(rows_per_date: Dict[int, int], window: Sequence[int]) -> Dict[int, int]:
    """{date: rows} of the dates outside the window."""
    inside = set(window)
    return {d: n for d, n in sorted(rows_per_date.items()) if d not in inside}
