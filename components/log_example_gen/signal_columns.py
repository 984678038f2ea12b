"""The passes of signals.py on columnar batches (numpy), one call per group of rows.

The equations, the known set K(i) (t_j + D < t_i) and the statistics are those of
signals.py, which stays the reference (the brute-force tests check it, and
tests/components/log_example_gen/test_batched.py checks these passes against it):

- ``tab_pass``: one tab's kept rows -> e_tab, w_tab, r_tab, tab_hour_ctr per row (``tab_block_pass``:
  the same, one time block of the tab at a time);
- ``entity_pass``: rows of many keys of one entity family (signals.ENTITY_SIGNALS)
  -> that family's signals, with signals.ENTITY_STATISTICS applied to arrays;
- ``user_pass``: many users' kept rows -> the user statistics of signals.user_pass.

Rows are the kept (window, duplicates) rows: they all count. Inside a group the sums
run in (time, row_id) order, as the sequential passes do.
"""
import functools
from types import SimpleNamespace
from typing import Dict, Tuple

import numpy as np

from components.log_example_gen import columns as C
from components.log_example_gen import signals as S


def log_watch(watch_s: np.ndarray) -> np.ndarray:
    """signals.log_watch on arrays."""
    return np.log1p(np.maximum(watch_s, 0.0))


def watch_ratio(watch_s: np.ndarray, duration_s: np.ndarray) -> np.ndarray:
    """signals.watch_ratio on arrays."""
    return np.minimum(np.maximum(watch_s, 0.0) / np.maximum(duration_s, S.MIN_DURATION_S), S.WATCH_RATIO_CAP)


def _mean(total: np.ndarray, n: np.ndarray) -> np.ndarray:
    return np.where(n > 0, total / np.maximum(n, 1), 0.0)


def _known(group: np.ndarray, b: C.Batch, delay_ms: int, values: Dict[str, np.ndarray]):
    """(order, sums over K(i) in sorted order incl. 'n') for rows grouped by ``group``."""
    order = C.sort_rows(group, b["time_ms"], b["row_id"])
    g, t = group[order], b["time_ms"][order]
    starts = C.group_starts(g)
    p = C.known_prefix(g, t, delay_ms)
    sums = C.prefix_sums(g, starts, p, {k: v[order] for k, v in values.items()})
    sums["n"] = (p - starts).astype(np.float64)
    return order, g, starts, p, sums


def _row_values(b: C.Batch) -> Dict[str, np.ndarray]:
    return {"clicks": b["is_click"].astype(np.float64), "watch": log_watch(b["watch_s"]),
            "ratio": watch_ratio(b["watch_s"], b["duration_s"])}


_TAB_VALUES = ("clicks", "watch", "ratio")
HOURS = 24
# a time block's sums: the tab's n and _TAB_VALUES, and its n and clicks per hour of day
TAB_SUMS = ("n",) + _TAB_VALUES + tuple(f"{k}_h{h}" for k in ("n", "clicks") for h in range(HOURS))
TAB_EVENT_COLUMNS = ("time_ms", "is_click", "watch_s", "duration_s", "hour")  # what tab_block_sums / _pass read of events


def tab_pass(b: C.Batch, delay_ms: int, prior_ctr: float) -> Dict[str, np.ndarray]:
    """One tab's rows -> {e_tab, w_tab, r_tab, tab_hour_ctr} in the rows' order (signals.tab_pass):
    the tab as one time block with nothing before it (``tab_block_pass``)."""
    return tab_block_pass(b, b, dict.fromkeys(TAB_SUMS, 0.0), delay_ms, prior_ctr)


def tab_block_sums(events: C.Batch) -> Dict[str, float]:
    """The sums ``tab_block_pass`` adds up, over all rows of ``events`` (one time block)."""
    values = _row_values(events)
    hour = events["hour"].astype(np.int64)
    per_hour = {"n": np.bincount(hour, minlength=HOURS), "clicks": np.bincount(hour, values["clicks"], HOURS)}
    return {"n": float(C.length(events)), **{k: float(values[k].sum()) for k in _TAB_VALUES},
            **{f"{k}_h{h}": float(v[h]) for k, v in per_hour.items() for h in range(HOURS)}}


def _hour_known(events: C.Batch, queries: C.Batch, limit: np.ndarray):
    """(n, clicks) per query over the events of its hour of day with t_j < limit."""
    n, clicks = np.zeros(len(limit)), np.zeros(len(limit))
    if "hour" not in events:  # no events in the block
        return n, clicks
    for h in np.unique(queries["hour"]):
        mine, q = events["hour"] == h, queries["hour"] == h
        times, click = events["time_ms"][mine], events["is_click"][mine]
        order = np.argsort(times, kind="stable")
        k = np.searchsorted(times[order], limit[q], side="left")
        n[q], clicks[q] = k, np.concatenate([[0.0], np.cumsum(click[order])])[k]
    return n, clicks


def tab_block_pass(events: C.Batch, queries: C.Batch, before: Dict[str, float], delay_ms: int,
                   prior_ctr: float) -> Dict[str, np.ndarray]:
    """{e_tab, w_tab, r_tab, tab_hour_ctr} of the ``queries`` rows, in their order, from the
    running sums of their tab over K(i) = {j: t_j < t_i - D} (of their tab and hour of day for
    tab_hour_ctr), cut at time blocks [kW, (k+1)W):

        S(i) = before + Σ_{j ∈ events, t_j < t_i - D} v_j

    where every query's t_i - D falls in one block, ``events`` are the tab's rows in that
    block and ``before`` the sums of ``tab_block_sums`` over all its earlier blocks (the
    time-blocked tab pass of signals_beam.py, whose memory is one block's, not the tab's)."""
    if not C.length(queries):
        return {k: np.zeros(0) for k in ("e_tab", "w_tab", "r_tab", "tab_hour_ctr")}
    times = events.get("time_ms", np.zeros(0, dtype=np.int64))
    order = np.argsort(times, kind="stable")
    limit = queries["time_ms"].astype(np.int64) - delay_ms
    known = np.searchsorted(times[order], limit, side="left")
    s = {"n": before["n"] + known.astype(np.float64)}
    values = _row_values(events) if len(times) else {k: np.zeros(0) for k in _TAB_VALUES}
    for k in _TAB_VALUES:
        s[k] = before[k] + np.concatenate([[0.0], np.cumsum(values[k][order])])[known]
    e_tab = S.smoothed(s["clicks"], s["n"], prior_ctr)
    hour = queries["hour"].astype(np.int64)
    hour_n, hour_clicks = _hour_known(events, queries, limit)
    hour_n += np.array([before[f"n_h{h}"] for h in range(HOURS)])[hour]
    hour_clicks += np.array([before[f"clicks_h{h}"] for h in range(HOURS)])[hour]
    return {"e_tab": e_tab, "w_tab": _mean(s["watch"], s["n"]), "r_tab": _mean(s["ratio"], s["n"]),
            "tab_hour_ctr": S.smoothed(hour_clicks, hour_n, e_tab)}


def entity_key(family: str, b: C.Batch) -> np.ndarray:
    """Group codes of the family's key (signals.ENTITY_SIGNALS' key function on columns)."""
    key_fn, _ = S.ENTITY_SIGNALS[family]
    key = key_fn(SimpleNamespace(**b))
    return C.group_codes(*(key if isinstance(key, tuple) else (key,)))


class _ColumnNames:
    """Records the columns a key function reads (``entity_columns``)."""

    def __init__(self):
        self.names = []

    def __getattr__(self, name):
        self.names.append(name)
        return name


ENTITY_ROW_COLUMNS = ("row_id", "user_id", "time_ms", "is_click", "watch_s", "duration_s", "e_tab", "w_tab", "r_tab")


@functools.lru_cache(maxsize=None)  # asked for every tab block and family
def entity_columns(family: str) -> Tuple[str, ...]:
    """The columns ``entity_pass`` reads for ``family``: ENTITY_ROW_COLUMNS and its key's (the
    rows grouped by entity carry only these: the tab pass's rows with every family's keys
    made this grouping ~half of LogExampleGen's spilled bytes)."""
    key_fn, _ = S.ENTITY_SIGNALS[family]
    names = _ColumnNames()
    key_fn(names)
    return ENTITY_ROW_COLUMNS + tuple(n for n in dict.fromkeys(names.names) if n not in ENTITY_ROW_COLUMNS)


def entity_hash(family: str, b: C.Batch) -> np.ndarray:
    """A stable integer per key value of the family (for sharding: equal keys, equal hash)."""
    key_fn, _ = S.ENTITY_SIGNALS[family]
    key = key_fn(SimpleNamespace(**b))
    h = np.zeros(C.length(b), dtype=np.int64)
    for part in (key if isinstance(key, tuple) else (key,)):
        h = (h * 1_000_003 + part.astype(np.int64)) & 0x7FFFFFFF
    return h


def entity_pass(family: str, b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    """Rows of any keys of one family -> {signal: values} in the rows' order (signals.entity_pass)."""
    _, stats = S.ENTITY_SIGNALS[family]
    values = _row_values(b)
    values["expected"] = b["e_tab"]
    order, _, _, _, sums = _known(entity_key(family, b), b, delay_ms, values)
    rec = SimpleNamespace(e_tab=b["e_tab"][order], w_tab=b["w_tab"][order], r_tab=b["r_tab"][order])
    return {name: C.unsort(np.asarray(S.ENTITY_STATISTICS[stat](sums, rec), dtype=np.float64), order)
            for name, stat in stats.items()}


def user_pass(user_code: np.ndarray, b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    """Kept rows of many users (``user_code`` per row; columns time_ms, row_id, is_click,
    watch_s, duration_s, tab, e_tab) -> the user statistics of signals.user_pass."""
    click, e_tab = b["is_click"].astype(np.float64), b["e_tab"]
    vals = _row_values(b)
    order, g, starts, p, s = _known(user_code, b, delay_ms, {"clicks": click, "expected": e_tab,
                                                              "lift": click - e_tab})
    e = e_tab[order]
    tab_code = C.group_codes(user_code, b["tab"])
    _, _, _, _, ts = _known(tab_code, b, delay_ms, {"clicks": click})
    tab_order = C.sort_rows(tab_code, b["time_ms"], b["row_id"])
    tab_clicks = C.unsort(ts["clicks"], tab_order)[order]
    tab_n = C.unsort(ts["n"], tab_order)[order]
    recent_n, recent = C.window_sums(g, starts, p, S.LAST_N, {k: vals[k][order] for k in ("clicks", "watch",
                                                                                          "ratio")})
    out = {
        "sig_user_coec": (s["clicks"] + S.PSEUDO_COUNT) / (s["expected"] + S.PSEUDO_COUNT),
        "sig_user_tab_ctr": S.smoothed(tab_clicks, tab_n, e),
        "sig_user_lift": s["lift"] / (s["n"] + S.PSEUDO_COUNT),
        "sig_last50_click": S.smoothed(recent["clicks"], recent_n, e),
        "sig_last50_watch": _mean(recent["watch"], recent_n),
        "sig_last50_watch_ratio": _mean(recent["ratio"], recent_n),
    }
    return {k: C.unsort(v, order) for k, v in out.items()}


def propensity(e_tab: np.ndarray, u_coec: np.ndarray, v_coec: np.ndarray) -> np.ndarray:
    """signals.propensity on arrays."""
    return np.clip(e_tab * u_coec * v_coec, 0.0, 1.0)
