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
"""
from typing import Dict, Iterable, List, Optional, Sequence

TRAIN = "train"
VALIDATION = "validation"
EVAL = "eval"
SPLIT_NAMES = [TRAIN, VALIDATION, EVAL]


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
