"""Value rules of one parsed log row, and the names of the row-level rules (pure Python).

``parse_log_line`` (parsing.py) checks the *form* of a row (columns, strict integers,
calendar date); ``check_values`` checks that the values are possible. The first
failing rule gives the reason (``kind:field``):

- ``negative:<field>``          ``user_id``, ``video_id`` or ``tab`` < 0
- ``out_of_range:<field>``      ``is_click``/``is_like``/``long_view`` not 0 or 1;
                                ``hourmin`` not hh*100+mm with hh <= 23, mm <= 59;
                                ``play_time_ms`` > max_play_time_ms; ``duration_ms`` > max_duration_ms
- ``date_time_mismatch:date``   ``time_ms`` is more than the tolerance outside the
                                UTC+8 calendar day named by ``date``

The date rule: with day start ``s`` (00:00 UTC+8 of ``date``, in ms) and tolerance
``tol``, a row passes iff ``s - tol <= time_ms < s + DAY_MS + tol``. The real
KuaiRand-Pure logs date 1,539 rows (0.9%) up to 2.2 h *after* their ``time_ms``
(the date of the hour bucket that closes the impression), hence a tolerance of hours,
not 0; a row dated on an eval day but stamped on an earlier day fails.

Rule names for whole-log decisions (their knobs in LogExampleGenConfig):

- ``DUPLICATE_RULES``: exact duplicate log rows (every column equal after trimming
  blanks) -> 'drop' (the first copy in (file, offset) order is kept, the others are
  counted in ``dropped_rows_by_rule['duplicate_row']``), 'dead_letter' (the extra copies are
  bad rows ``duplicate_row``) or 'keep' (each copy becomes an example).
- ``OUT_OF_WINDOW_RULES``: rows dated outside the date window (date_window.py) ->
  'dead_letter' (reason ``out_of_window:date``) or 'error' (the run fails naming the dates).
"""
import dataclasses
import datetime
from typing import Optional

from schemas.kuairand_format import DAY_MS, UTC_OFFSET_MS

DUPLICATE_RULES = ("drop", "dead_letter", "keep")
OUT_OF_WINDOW_RULES = ("dead_letter", "error")

BINARY_FIELDS = ("is_click", "is_like", "long_view")
NON_NEGATIVE_IDS = ("user_id", "video_id", "tab")
_EPOCH = datetime.date(1970, 1, 1)


@dataclasses.dataclass(frozen=True)
class RowRules:
    """Bounds of the value rules (values: LogExampleGenConfig)."""
    max_play_time_ms: int
    max_duration_ms: int
    date_time_tolerance_ms: int


def day_start_ms(yyyymmdd: int) -> int:
    """00:00 UTC+8 of a yyyymmdd day as Unix ms: 20220425 -> 1650816000000."""
    day = datetime.date(yyyymmdd // 10000, yyyymmdd // 100 % 100, yyyymmdd % 100)
    return (day - _EPOCH).days * DAY_MS - UTC_OFFSET_MS


def check_values(row, rules: RowRules) -> Optional[str]:
    """Reason the values of a parsed LogRow are impossible, or None (see the module doc)."""
    for name in NON_NEGATIVE_IDS:
        if getattr(row, name) < 0:
            return f"negative:{name}"
    for name in BINARY_FIELDS:
        if getattr(row, name) not in (0, 1):
            return f"out_of_range:{name}"
    if not (0 <= row.hourmin and row.hourmin // 100 <= 23 and row.hourmin % 100 <= 59):
        return "out_of_range:hourmin"
    if row.play_time_ms > rules.max_play_time_ms:
        return "out_of_range:play_time_ms"
    if row.duration_ms > rules.max_duration_ms:
        return "out_of_range:duration_ms"
    start = day_start_ms(row.date)
    if not start - rules.date_time_tolerance_ms <= row.time_ms < start + DAY_MS + rules.date_time_tolerance_ms:
        return "date_time_mismatch:date"
    return None
