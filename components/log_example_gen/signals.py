"""Leakage-free running signals of an impression (pure Python, no Beam/TF; issues #15, #13).

Known set. A label (click, watch time) arrives ``D = label_delay_ms`` after its
impression. Row i (time t_i) may use the earlier impression j of its key iff

    j ∈ K(i)  ⇔  t_j + D < t_i          (strict: a tie t_j = t_i never counts, D = 0 included)

and j is *counted* (an exact duplicate row counts once: duplicate_rule, row_rules.py).
Every statistic below sums over K(i) only, so no row sees its own label, a label
with the same timestamp, or a label not yet arrived. A = ``PSEUDO_COUNT`` = 2.

Click signals (#15):

    e_tab(i)        = (Σ_{K_tab} y + A·p0) / (|K_tab| + A)        p0 = prior CTR (config)
    u_coec(i)       = (Σ_{K_user} y + A) / (Σ_{K_user} e_tab(j) + A)
    v_coec(i)       = (Σ_{K_video} y + A) / (Σ_{K_video} e_tab(j) + A)
    propensity(i)   = clip(e_tab(i) · u_coec(i) · v_coec(i), 0, 1)
    user_tab_ctr(i) = (Σ_{K_user, tab_j = tab_i} y + A·e_tab(i)) / (|K_user, tab_i| + A)
    user_lift(i)    = Σ_{K_user} (y_j − e_tab(j)) / (|K_user| + A)
    ctr_g(i)        = (Σ_{K_g} y + A·e_tab(i)) / (|K_g| + A)   g = author, music, (tag, tab),
                                                               (tab, duration bucket)
    tab_hour_ctr(i) = (Σ_{K_tab, h_j = h_i} y + A·e_tab(i)) / (|K_tab, h_j = h_i| + A)
                      h = hour of day of the log's hourmin (#37's time context; in the tab pass)
    last50_click(i) = (Σ_{R} y + A·e_tab(i)) / (|R| + A)        R = the 50 latest of K_user
    last50_watch(i) = mean_{R} w, 0 if R is empty

Watch-time signals (#13), with w_j = log1p(max(watch_s_j, 0)) and the capped watch ratio
r_j = min(max(watch_s_j, 0) / max(duration_s_j, 1 s), R_MAX), R_MAX = ``WATCH_RATIO_CAP``:

    w_tab(i)             = mean_{K_tab} w, 0 if K_tab is empty      (the prior of the means below)
    r_tab(i)             = mean_{K_tab} r, 0 if K_tab is empty
    watch_g(i)           = (Σ_{K_g} w + A·w_tab(i)) / (|K_g| + A)   g = video, author,
                                                                    (tab, duration bucket),
                                                                    (tag, tab) (#37)
    video_watch_ratio(i) = (Σ_{K_video} r + A·r_tab(i)) / (|K_video| + A)
    last50_watch_ratio(i)= mean_{R} r, 0 if R is empty

Passes (signals_beam.py runs each one per key after a GroupByKey): ``tab_pass``
(e_tab, w_tab, r_tab, tab_hour_ctr, and which rows count), ``entity_pass`` (every statistic of one
key: ``ENTITY_SIGNALS``) and ``user_pass`` (the user statistics, in user_examples.py on
the user's kept rows).
"""
import collections
import math
from typing import Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

PSEUDO_COUNT = 2.0
LAST_N = 50
WATCH_RATIO_CAP = 2.0  # r_j cap: replays of short videos (real logs: p95 1.19, p99 > 1000)
MIN_DURATION_S = 1.0   # r_j denominator floor: a row whose duration is unknown (0)
RowKey = Tuple[str, int]  # (source file, byte offset): one log record


def log_watch(watch_s: float) -> float:
    """w_j = log1p(max(watch_s, 0))."""
    return math.log1p(max(watch_s, 0.0))


def watch_ratio(watch_s: float, duration_s: float) -> float:
    """r_j = min(max(watch_s, 0) / max(duration_s, MIN_DURATION_S), WATCH_RATIO_CAP)."""
    return min(max(watch_s, 0.0) / max(duration_s, MIN_DURATION_S), WATCH_RATIO_CAP)


class SignalRow(NamedTuple):
    """What the per-key passes need of one good log row."""
    key: RowKey
    user_id: int
    time_ms: int
    is_click: int
    tab: int
    video_id: int
    author_id: int
    music_id: int
    tag_id: int
    duration_bucket: str
    duplicate_key: str
    watch_s: float
    duration_s: float
    hour: int  # hour of day of the log's hourmin (hourmin // 100)


class Known(NamedTuple):
    """A SignalRow with its tab priors (e_tab, w_tab, r_tab), whether it counts (not a
    duplicate copy) and its tab_hour_ctr."""
    row: SignalRow
    e_tab: float
    counted: bool
    w_tab: float
    r_tab: float
    tab_hour_ctr: float


def known_order(times: Sequence[int], delay_ms: int) -> Iterator[Tuple[str, int]]:
    """Yields ('add', j) and ('row', i) so that every j of K(i) is added before ('row', i)
    and no other: rows in time order, j added once t_j + delay_ms < t_i."""
    if delay_ms < 0:
        raise ValueError(f"label delay must be >= 0, got {delay_ms}")
    order = sorted(range(len(times)), key=lambda k: (times[k], k))
    p = 0
    for i in order:
        while p < len(order) and times[order[p]] + delay_ms < times[i]:
            yield "add", order[p]
            p += 1
        yield "row", i


def counted_flags(rows: Sequence[SignalRow], duplicate_rule: str) -> List[bool]:
    """False for the second and later copies of an exact duplicate (same time and text),
    in (time, file, offset) order, unless duplicate_rule is 'keep'."""
    flags = [True] * len(rows)
    if duplicate_rule == "keep":
        return flags
    seen = set()
    for k in sorted(range(len(rows)), key=lambda k: (rows[k].time_ms, rows[k].key)):
        dup = (rows[k].time_ms, rows[k].duplicate_key)
        flags[k] = dup not in seen
        seen.add(dup)
    return flags


def smoothed(total: float, n: float, prior: float) -> float:
    """(Σ x + A·prior) / (n + A): a running mean shrunk to ``prior``."""
    return (total + PSEUDO_COUNT * prior) / (n + PSEUDO_COUNT)


def _mean(total: float, n: float) -> float:
    return total / n if n else 0.0


def tab_pass(rows: Sequence[SignalRow], delay_ms: int, prior_ctr: float,
             duplicate_rule: str) -> List[Known]:
    """One tab's rows -> Known rows (e_tab, w_tab, r_tab, tab_hour_ctr), in input order."""
    counted = counted_flags(rows, duplicate_rule)
    clicks = n = watch = ratio = 0.0
    per_hour: Dict[int, List[float]] = collections.defaultdict(lambda: [0.0, 0.0])  # hour: [clicks, n]
    priors: List[Optional[Tuple[float, float, float, float]]] = [None] * len(rows)
    for what, k in known_order([r.time_ms for r in rows], delay_ms):
        r = rows[k]
        if what == "add":
            if counted[k]:
                clicks, n = clicks + r.is_click, n + 1
                watch += log_watch(r.watch_s)
                ratio += watch_ratio(r.watch_s, r.duration_s)
                per_hour[r.hour][0] += r.is_click
                per_hour[r.hour][1] += 1
        else:
            e = smoothed(clicks, n, prior_ctr)
            priors[k] = (e, _mean(watch, n), _mean(ratio, n), smoothed(*per_hour.get(r.hour, (0.0, 0.0)), e))
    return [Known(r, e, c, w, q, h) for r, (e, w, q, h), c in zip(rows, priors, counted)]


# The statistics an entity pass can give, from the running sums over K_g(i) and row i's
# tab priors (module doc): ctr_g, v_coec, watch_g, video_watch_ratio.
ENTITY_STATISTICS: Dict[str, Callable] = {
    "ctr": lambda s, rec: smoothed(s["clicks"], s["n"], rec.e_tab),
    "coec": lambda s, rec: (s["clicks"] + PSEUDO_COUNT) / (s["expected"] + PSEUDO_COUNT),
    "watch": lambda s, rec: smoothed(s["watch"], s["n"], rec.w_tab),
    "watch_ratio": lambda s, rec: smoothed(s["ratio"], s["n"], rec.r_tab),
}


def entity_pass(recs: Sequence[Known], delay_ms: int, stats: Dict[str, str]) -> List[Dict[str, float]]:
    """One key's Known rows -> {signal name: value} per row, in input order; ``stats`` maps
    each signal name to its statistic (a key of ``ENTITY_STATISTICS``)."""
    unknown = sorted(set(stats.values()) - set(ENTITY_STATISTICS))
    if unknown:
        raise ValueError(f"unknown entity statistics {unknown}; known: {sorted(ENTITY_STATISTICS)}")
    sums = dict(clicks=0.0, expected=0.0, n=0.0, watch=0.0, ratio=0.0)
    out: List[Optional[Dict[str, float]]] = [None] * len(recs)
    for what, k in known_order([r.row.time_ms for r in recs], delay_ms):
        rec = recs[k]
        if what == "add":
            if rec.counted:
                sums["clicks"] += rec.row.is_click
                sums["expected"] += rec.e_tab
                sums["n"] += 1
                sums["watch"] += log_watch(rec.row.watch_s)
                sums["ratio"] += watch_ratio(rec.row.watch_s, rec.row.duration_s)
        else:
            out[k] = {name: ENTITY_STATISTICS[stat](sums, rec) for name, stat in stats.items()}
    return out


class UserEvent(NamedTuple):
    """A kept row of one user, as the user pass needs it."""
    time_ms: int
    is_click: int
    watch_s: float
    tab: int
    e_tab: float
    duration_s: float


def user_pass(events: Sequence[UserEvent], delay_ms: int) -> List[Dict[str, float]]:
    """One user's kept rows (duplicates already out) -> user statistics per row."""
    clicks = expected = lift = n = 0.0
    per_tab: Dict[int, List[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    recent = collections.deque(maxlen=LAST_N)
    out: List[Optional[Dict[str, float]]] = [None] * len(events)
    for what, k in known_order([e.time_ms for e in events], delay_ms):
        e = events[k]
        if what == "add":
            clicks += e.is_click
            expected += e.e_tab
            lift += e.is_click - e.e_tab
            n += 1
            per_tab[e.tab][0] += e.is_click
            per_tab[e.tab][1] += 1
            recent.append((e.is_click, log_watch(e.watch_s), watch_ratio(e.watch_s, e.duration_s)))
            continue
        tab_clicks, tab_n = per_tab.get(e.tab, (0.0, 0.0))
        out[k] = {
            "sig_user_coec": (clicks + PSEUDO_COUNT) / (expected + PSEUDO_COUNT),
            "sig_user_tab_ctr": smoothed(tab_clicks, tab_n, e.e_tab),
            "sig_user_lift": lift / (n + PSEUDO_COUNT),
            "sig_last50_click": smoothed(sum(c for c, _, _ in recent), len(recent), e.e_tab),
            "sig_last50_watch": _mean(sum(w for _, w, _ in recent), len(recent)),
            "sig_last50_watch_ratio": _mean(sum(r for _, _, r in recent), len(recent)),
        }
    return out


def propensity(e_tab: float, u_coec: float, v_coec: float) -> float:
    return min(max(e_tab * u_coec * v_coec, 0.0), 1.0)


# The entity passes: key name -> (the SignalRow's key of that entity, {signal: statistic}).
# One GroupByKey per key; every signal of a key comes out of the same pass.
ENTITY_SIGNALS: Dict[str, Tuple[Callable, Dict[str, str]]] = {
    "video": (lambda r: r.video_id, {"sig_video_coec": "coec", "sig_video_watch": "watch",
                                     "sig_video_watch_ratio": "watch_ratio"}),
    "author": (lambda r: r.author_id, {"sig_author_ctr": "ctr", "sig_author_watch": "watch"}),
    "music": (lambda r: r.music_id, {"sig_music_ctr": "ctr"}),
    "tag_tab": (lambda r: (r.tag_id, r.tab), {"sig_tag_tab_ctr": "ctr", "sig_tag_tab_watch": "watch"}),
    "tab_duration": (lambda r: (r.tab, r.duration_bucket), {"sig_tab_duration_ctr": "ctr",
                                                            "sig_tab_duration_watch": "watch"}),
}


def no_history_signals(prior_ctr: float = 0.5) -> Dict[str, float]:
    """The entity signals of a row whose keys have no known earlier event (K empty):
    each statistic of ``entity_pass`` with empty sums and the empty tab's priors."""
    empty = Known(None, prior_ctr, True, 0.0, 0.0, prior_ctr)
    sums = dict(clicks=0.0, expected=0.0, n=0.0, watch=0.0, ratio=0.0)
    out = {"sig_tab_ctr": prior_ctr, "sig_tab_hour_ctr": prior_ctr}
    for _, stats in ENTITY_SIGNALS.values():
        out.update({name: ENTITY_STATISTICS[stat](sums, empty) for name, stat in stats.items()})
    return out


def row_signals(per_row: Dict[str, float], user: Dict[str, float]) -> Dict[str, float]:
    """The row's tab and entity signals (sig_tab_ctr, sig_tab_hour_ctr, ENTITY_SIGNALS) + its user statistics ->
    every signal of models.features.SIGNAL_FEATURES, propensity included."""
    out = dict(per_row)
    out.update(user)
    out["sig_propensity"] = propensity(out["sig_tab_ctr"], out["sig_user_coec"], out["sig_video_coec"])
    return out
