"""counts.json: what happened to every log row of a run, and the checks on it.

Every log record read ends in exactly one of: bad (a dead-letter row with its reason),
dropped by a documented rule (``dropped_rows_by_rule``, e.g. ``duplicate_row``), or
good (an example of a split, or history-only)::

    rows_read == total_rows == good_rows + bad_rows + dropped_rows
    good_rows == train + validation + eval + history_only_rows
    bad_row_fraction = bad_rows / total_rows   (dropped rows are not bad)

Keys of the counted PCollection (``summarize_counts``): ``read``, ``bad:<reason>``,
``dropped:<rule>``, ``split:<split>``, ``history_only``, ``date:<yyyymmdd>`` (good rows
per date before the window), ``side_bad:<table>:<reason>``, ``side_dropped:<table>:<rule>``.
"""
import json
import os
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems

from components.log_example_gen import date_window, parsing, time_split

COUNTS_FILE = "counts.json"


class BadRowFractionError(ValueError):
    """Too many bad log rows: the run must not publish its examples."""


class OutOfWindowError(ValueError):
    """Rows dated outside the date window under ``out_of_window_rule='error'``."""


def _strip(counts: Dict[str, int], prefix: str) -> Dict[str, int]:
    return dict(sorted((k[len(prefix):], n) for k, n in counts.items() if k.startswith(prefix)))


def summarize_counts(key_counts: Iterable[Tuple[str, int]], split_of_date: Dict[int, Optional[str]],
                     window: Sequence[int], empty_files: Sequence[str] = ()) -> str:
    """[(count key, n)] -> counts.json text (see the module doc)."""
    counts = dict(key_counts)
    bad_by_reason = _strip(counts, "bad:")
    dropped_by_rule = _strip(counts, "dropped:")
    bad_by_kind: Dict[str, int] = {}
    for reason, n in bad_by_reason.items():
        kind = parsing.BadRow(reason).kind
        bad_by_kind[kind] = bad_by_kind.get(kind, 0) + n
    splits = {s: counts.get(f"split:{s}", 0) for s in time_split.SPLIT_NAMES}
    history_only = counts.get("history_only", 0)
    good = sum(splits.values()) + history_only
    bad, dropped = sum(bad_by_reason.values()), sum(dropped_by_rule.values())
    total = good + bad + dropped
    per_date = {int(d): n for d, n in _strip(counts, "date:").items()}
    dates = {name: sorted(d for d, s in split_of_date.items() if s == name) for name in time_split.SPLIT_NAMES}
    return json.dumps({
        "rows_read": counts.get("read", 0),
        "total_rows": total,
        "good_rows": good,
        "bad_rows": bad,
        "dropped_rows": dropped,
        "bad_row_fraction": bad / total if total else 0.0,
        "bad_rows_by_reason": bad_by_reason,
        "bad_rows_by_kind": dict(sorted(bad_by_kind.items())),
        "dropped_rows_by_rule": dropped_by_rule,
        "splits": splits,
        "history_only_rows": history_only,
        "split_dates": {**dates, "history_only": sorted(d for d, s in split_of_date.items() if s is None)},
        "date_window": list(window),
        "out_of_window_dates": {str(d): n for d, n in date_window.outside(per_date, window).items()},
        "bad_side_table_rows": _strip(counts, "side_bad:"),
        "dropped_side_table_rows": _strip(counts, "side_dropped:"),
        "empty_files": sorted(empty_files),
    }, indent=2, sort_keys=True)


def read_counts(dead_letter_uri: str) -> dict:
    with FileSystems.open(os.path.join(dead_letter_uri, COUNTS_FILE)) as f:
        return json.loads(f.read().decode("utf-8"))


def check_bad_row_fraction(counts: dict, max_bad_row_fraction: float, dead_letter_uri: str) -> None:
    """Raises BadRowFractionError if bad/total log rows exceeds the bound."""
    fraction = counts["bad_row_fraction"]
    if fraction > max_bad_row_fraction:
        raise BadRowFractionError(
            f"LogExampleGen: {counts['bad_rows']} of {counts['total_rows']} log rows are bad "
            f"(fraction {fraction:.4f} > max_bad_row_fraction {max_bad_row_fraction}); "
            f"by reason {counts['bad_rows_by_reason']}; dead-letter rows in {dead_letter_uri}")


def check_window(counts: dict, out_of_window_rule: str, dead_letter_uri: str) -> None:
    """Raises OutOfWindowError under the 'error' rule if any row is dated outside the window."""
    outside: Dict[str, int] = counts["out_of_window_dates"]
    if outside and out_of_window_rule == "error":
        raise OutOfWindowError(
            f"LogExampleGen: {sum(outside.values())} log rows are dated outside the date window "
            f"{counts['date_window'][:1]}..{counts['date_window'][-1:]}: rows per date {outside} "
            f"(out_of_window_rule='error'); the rows are in {dead_letter_uri}")


def check_totals(counts: dict) -> List[str]:
    """Broken accounting identities (empty list: every row is accounted for)."""
    problems = []
    if counts["rows_read"] != counts["total_rows"]:
        problems.append(f"rows_read {counts['rows_read']} != total_rows {counts['total_rows']}")
    if counts["good_rows"] + counts["bad_rows"] + counts["dropped_rows"] != counts["total_rows"]:
        problems.append("good + bad + dropped != total")
    return problems
