"""Time-based train/eval split by log date (yyyymmdd ints); pure Python.

Rules (``assign_splits``):
- ``train_days`` and ``eval_days`` both given: exactly those days; they must not overlap.
- only ``eval_days`` given: train = every date before the first eval day.
- only ``train_days`` given: eval = every date after the last train day.
- neither given: the last ``eval_last_n_days`` distinct dates are eval, every
  earlier date is train.
Dates in neither split are *history only*: their events feed the histories of
later impressions but are not emitted as examples.
"""
from typing import Dict, Iterable, List, Optional, Sequence

TRAIN = "train"
EVAL = "eval"
SPLIT_NAMES = [TRAIN, EVAL]


def parse_days(text: str) -> List[int]:
    """'20220425, 20220426' -> [20220425, 20220426]; '' -> []."""
    days = []
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        if not (part.isdigit() and len(part) == 8):
            raise ValueError(f"a day must be a yyyymmdd integer, got {part!r} in {text!r}")
        days.append(int(part))
    return days


def validate_split_config(train_days: Sequence[int], eval_days: Sequence[int],
                          eval_last_n_days: int) -> None:
    overlap = sorted(set(train_days) & set(eval_days))
    if overlap:
        raise ValueError(f"days {overlap} are in both train_days and eval_days")
    if not train_days and not eval_days and eval_last_n_days < 1:
        raise ValueError(
            f"eval_last_n_days must be >= 1 when no days are configured, got {eval_last_n_days}")


def assign_splits(dates: Iterable[int], train_days: Sequence[int], eval_days: Sequence[int],
                  eval_last_n_days: int) -> Dict[int, Optional[str]]:
    """Maps every date seen in the logs to 'train', 'eval' or None (history only)."""
    validate_split_config(train_days, eval_days, eval_last_n_days)
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
    return {d: TRAIN if d in train else EVAL if d in evals else None for d in dates}
