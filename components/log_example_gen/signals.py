"""Leakage-free running signals of an impression (pure Python, no Beam/TF; issue #15).

Known set. A label (click, watch time) arrives ``D = label_delay_ms`` after its
impression. Row i (time t_i) may use the earlier impression j of its key iff

    j ∈ K(i)  ⇔  t_j + D < t_i          (strict: a tie t_j = t_i never counts, D = 0 included)

and j is *counted* (an exact duplicate row counts once: duplicate_rule, row_rules.py).
Every statistic below sums over K(i) only, so no row sees its own label, a label
with the same timestamp, or a label not yet arrived. A = ``PSEUDO_COUNT`` = 2.

    e_tab(i)        = (Σ_{K_tab} y + A·p0) / (|K_tab| + A)        p0 = prior CTR (config)
    u_coec(i)       = (Σ_{K_user} y + A) / (Σ_{K_user} e_tab(j) + A)
    v_coec(i)       = (Σ_{K_video} y + A) / (Σ_{K_video} e_tab(j) + A)
    propensity(i)   = clip(e_tab(i) · u_coec(i) · v_coec(i), 0, 1)
    user_tab_ctr(i) = (Σ_{K_user, tab_j = tab_i} y + A·e_tab(i)) / (|K_user, tab_i| + A)
    user_lift(i)    = Σ_{K_user} (y_j − e_tab(j)) / (|K_user| + A)
    ctr_g(i)        = (Σ_{K_g} y + A·e_tab(i)) / (|K_g| + A)   g = author, music, (tag, tab),
                                                               (tab, duration bucket)
    last50_click(i) = (Σ_{R} y + A·e_tab(i)) / (|R| + A)        R = the 50 latest of K_user
    last50_watch(i) = mean_{R} log1p(watch_s), 0 if R is empty

Passes (signals_beam.py runs each one per key after a GroupByKey): ``tab_pass``
(e_tab, and which rows count), ``entity_pass`` (ctr_g or v_coec) and ``user_pass``
(the user statistics, in user_examples.py on the user's kept rows).
"""
import collections
import math
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

PSEUDO_COUNT = 2.0
LAST_N = 50
RowKey = Tuple[str, int]  # (source file, byte offset): one log record


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


class Known(NamedTuple):
    """A SignalRow with its e_tab and whether it counts (not a duplicate copy)."""
    row: SignalRow
    e_tab: float
    counted: bool


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


def smoothed(clicks: float, n: float, prior: float) -> float:
    return (clicks + PSEUDO_COUNT * prior) / (n + PSEUDO_COUNT)


def tab_pass(rows: Sequence[SignalRow], delay_ms: int, prior_ctr: float,
             duplicate_rule: str) -> List[Known]:
    """One tab's rows -> Known rows (e_tab), in input order."""
    counted = counted_flags(rows, duplicate_rule)
    clicks = n = 0
    e_tab: List[Optional[float]] = [None] * len(rows)
    for what, k in known_order([r.time_ms for r in rows], delay_ms):
        if what == "add":
            if counted[k]:
                clicks, n = clicks + rows[k].is_click, n + 1
        else:
            e_tab[k] = smoothed(clicks, n, prior_ctr)
    return [Known(r, e, c) for r, e, c in zip(rows, e_tab, counted)]


def entity_pass(recs: Sequence[Known], delay_ms: int, coec: bool = False) -> List[float]:
    """One key's Known rows -> ctr_g(i) (or v_coec(i) with coec=True), in input order."""
    clicks = expected = n = 0.0
    out: List[Optional[float]] = [None] * len(recs)
    for what, k in known_order([r.row.time_ms for r in recs], delay_ms):
        if what == "add":
            if recs[k].counted:
                clicks += recs[k].row.is_click
                expected += recs[k].e_tab
                n += 1
        elif coec:
            out[k] = (clicks + PSEUDO_COUNT) / (expected + PSEUDO_COUNT)
        else:
            out[k] = smoothed(clicks, n, recs[k].e_tab)
    return out


class UserEvent(NamedTuple):
    """A kept row of one user, as the user pass needs it."""
    time_ms: int
    is_click: int
    watch_s: float
    tab: int
    e_tab: float


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
            recent.append((e.is_click, math.log1p(max(e.watch_s, 0.0))))
            continue
        tab_clicks, tab_n = per_tab.get(e.tab, (0.0, 0.0))
        out[k] = {
            "sig_user_coec": (clicks + PSEUDO_COUNT) / (expected + PSEUDO_COUNT),
            "sig_user_tab_ctr": smoothed(tab_clicks, tab_n, e.e_tab),
            "sig_user_lift": lift / (n + PSEUDO_COUNT),
            "sig_last50_click": smoothed(sum(c for c, _ in recent), len(recent), e.e_tab),
            "sig_last50_watch": sum(w for _, w in recent) / len(recent) if recent else 0.0,
        }
    return out


def propensity(e_tab: float, u_coec: float, v_coec: float) -> float:
    return min(max(e_tab * u_coec * v_coec, 0.0), 1.0)


# The keys of the entity passes: name -> the SignalRow's key of that entity.
ENTITY_KEYS = {
    "sig_video_coec": lambda r: r.video_id,
    "sig_author_ctr": lambda r: r.author_id,
    "sig_music_ctr": lambda r: r.music_id,
    "sig_tag_tab_ctr": lambda r: (r.tag_id, r.tab),
    "sig_tab_duration_ctr": lambda r: (r.tab, r.duration_bucket),
}


def no_history_signals(prior_ctr: float = 0.5) -> Dict[str, float]:
    """The entity signals of a row whose keys have no known earlier event (K empty)."""
    return {"sig_tab_ctr": prior_ctr, "sig_video_coec": 1.0,
            **{name: prior_ctr for name in ENTITY_KEYS if name != "sig_video_coec"}}


def row_signals(per_row: Dict[str, float], user: Dict[str, float]) -> Dict[str, float]:
    """The row's entity signals (sig_tab_ctr and ENTITY_KEYS) + its user statistics ->
    every signal of models.features.SIGNAL_FEATURES, propensity included."""
    out = dict(per_row)
    out.update(user)
    out["sig_propensity"] = propensity(out["sig_tab_ctr"], out["sig_user_coec"], out["sig_video_coec"])
    return out
