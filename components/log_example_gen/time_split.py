"""Time-based train/validation/eval split by log date (yyyymmdd ints); pure Python.

Rules (``assign_splits``), first train vs eval:
- ``train_days`` and ``eval_days`` both given: exactly those days; they must not overlap.
- only ``eval_days`` given: train = every date before the first eval day.
- only ``train_days`` given: eval = every date after the last train day.
- neither given: the last ``eval_last_n_days`` distinct dates are eval, every
  earlier date is train.
Then the last ``validation_last_n_days`` train dates present in the logs become the
validation split: the Trainer selects epochs on them (the one-epoch phenomenon,
DESIGN.md section 6) and never sees the eval days before the Evaluator does.
Dates in no split are *history only*: their events feed the histories of later
impressions but are not emitted as examples.

Day lists are text (``parse_days``): comma-separated yyyymmdd dates and inclusive
ranges, e.g. ``"20220425-20220502, 20220504"``.
"""
import datetime
import re
from typing import Dict, Iterable, List, Optional, Sequence

TRAIN = "train"
VALIDATION = "validation"
EVAL = "eval"
SPLIT_NAMES = [TRAIN, VALIDATION, EVAL]

_DAY_FORMAT = "%Y%m%d"
_DAY_RE = re.compile(r"^\d{8}$")


def _to_date(token: str, text: str) -> datetime.date:
    if not _DAY_RE.match(token):
        raise ValueError(f"a day must be a yyyymmdd date or an inclusive range yyyymmdd-yyyymmdd, "
                         f"got {token!r} in {text!r}")
    try:
        return datetime.datetime.strptime(token, _DAY_FORMAT).date()
    except ValueError:
        raise ValueError(f"{token!r} in {text!r} is not a calendar date (yyyymmdd)") from None


def check_day(day: int) -> int:
    """Returns ``day`` if it is a yyyymmdd calendar date (e.g. 20220425), else ValueError."""
    if isinstance(day, bool) or not isinstance(day, int):
        raise ValueError(f"a day must be a yyyymmdd int, got {day!r} ({type(day).__name__})")
    _to_date(str(day), str(day))
    return day


def parse_days(text: Optional[str], allow_empty: bool = True) -> List[int]:
    """Comma-separated yyyymmdd days and inclusive ``first-last`` ranges -> [yyyymmdd ints].

    ``"20220425, 20220426"`` -> ``[20220425, 20220426]``;
    ``"20220430-20220502,20220504"`` -> ``[20220430, 20220501, 20220502, 20220504]``
    (ranges cross month ends); ``""`` -> ``[]`` (ValueError if not ``allow_empty``).
    Days keep the written order. ValueError (naming the token) on a non-date, an
    empty range (last before first) or a day listed twice.
    """
    days: List[int] = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        bounds = [b.strip() for b in part.split("-")] if "-" in part else [part]
        if len(bounds) > 2 or any(not b for b in bounds):
            raise ValueError(f"a day must be a yyyymmdd date or an inclusive range yyyymmdd-yyyymmdd, "
                             f"got {part!r} in {text!r}")
        first = _to_date(bounds[0], text)
        last = _to_date(bounds[-1], text)
        if last < first:
            raise ValueError(f"empty day range {part!r} in {text!r}: the last day is before the first")
        for k in range((last - first).days + 1):
            day = int((first + datetime.timedelta(days=k)).strftime(_DAY_FORMAT))
            if day in days:
                raise ValueError(f"day {day} is listed twice in {text!r}")
            days.append(day)
    if not days and not allow_empty:
        raise ValueError(f"no days in {text!r}")
    return days


def format_days(days: Iterable[int]) -> str:
    """[20220425, 20220426] -> '20220425,20220426' (parse_days reads it back)."""
    return ",".join(str(check_day(d)) for d in days)


def validate_split_config(train_days: Sequence[int], eval_days: Sequence[int],
                          eval_last_n_days: int, validation_last_n_days: int = 0) -> None:
    overlap = sorted(set(train_days) & set(eval_days))
    if overlap:
        raise ValueError(f"days {overlap} are in both train_days and eval_days")
    if not train_days and not eval_days and eval_last_n_days < 1:
        raise ValueError(
            f"eval_last_n_days must be >= 1 when no days are configured, got {eval_last_n_days}")
    if validation_last_n_days < 0:
        raise ValueError(f"validation_last_n_days must be >= 0, got {validation_last_n_days}")


def assign_splits(dates: Iterable[int], train_days: Sequence[int], eval_days: Sequence[int],
                  eval_last_n_days: int, validation_last_n_days: int = 0) -> Dict[int, Optional[str]]:
    """Maps every date seen in the logs to 'train', 'validation', 'eval' or None
    (history only)."""
    validate_split_config(train_days, eval_days, eval_last_n_days, validation_last_n_days)
    dates = sorted(set(dates))
    train, evals = set(train_days), set(eval_days)
    if not train and not evals:
        n = min(eval_last_n_days, len(dates))
        evals = set(dates[len(dates) - n:])
        train = set(dates[:len(dates) - n])
    elif not train:
        train = {d for d in dates if d < min(evals)}
    elif not evals:
        evals = {d for d in dates if d > max(train)}
    seen_train = [d for d in dates if d in train]
    validation = set(seen_train[len(seen_train) - min(validation_last_n_days, len(seen_train)):])
    return {d: VALIDATION if d in validation else TRAIN if d in train else EVAL if d in evals else None
            for d in dates}
