"""Optional signal families of a user's recent outcomes, session, target match and watch (#37).

Computed on the kept rows of many users (a user shard, as columns: columns.py), behind
LogExampleGenConfig.signal_families: off by default, so the default examples are
unchanged. Notation as in signals.py, for row i of user u at t_i, with label delay D:

    K_g(i) = {j of u, in group g: t_j + D < t_i}   (labels: strict, ties never count)
    I_g(i) = {j of u, in group g: t_j < t_i}       (impressions: no label, known at once)

A label (click, watch, long view) is read only over K; an impression's time and its
video's ids (no label) are known when it is served, so pure counts of impressions use I
(t_j < t_i strict: ties excluded). A = PSEUDO_COUNT = 2, e = e_tab(i) (the row's tab CTR),
w_j = log1p(max(watch_j, 0)), R_N(S) = the N latest rows of S (ties by row_id), and
since(S) = log1p((t_i − max_{j∈S} t_j) / 1000 s), or NONE = −1 when S is empty.

``in_tab`` (g = (u, tab_i)):
    sig_user_tab_lastN_click = (Σ_{R_N(K_g)} y + A·e) / (|R_N(K_g)| + A)    N = 10, 20, 50
    sig_user_tab_since_click = since({j ∈ K_g: y_j = 1})

``recent`` (g = u):
    sig_lastN_click   = (Σ_{R_N(K_u)} y + A·e) / (|R_N(K_u)| + A)            N = 5, 10, 20
    sig_lastN_watch   = mean_{R_N(K_u)} w, 0 if empty                        N = 5, 10, 20
    sig_since_click   = since({j ∈ K_u: y_j = 1});  sig_since_long_view = since({j ∈ K_u: long_view_j = 1})
    sig_last_hour_n   = |{j ∈ I_u: t_j ≥ t_i − 3600 s}|

``session`` (a session is a run of u's rows, in time order, whose consecutive gaps are
<= SESSION_GAP_S = 30 min; s(i) = the time of the first row of i's session, so it depends
only on u's impression times <= t_i):
    sig_session_position = |{j ∈ I_u: t_j ≥ s(i)}|
    sig_session_clicks   = Σ_{j ∈ K_u, t_j ≥ s(i)} y_j
    sig_session_age      = log1p((t_i − s(i)) / 1000 s)

``target_match`` (g = (u, a) with a the candidate's author / tag / music; a missing id
(< 0) matches nothing: count 0, rate e):
    sig_user_{author,tag,music}_n = |I_g(i)|
    sig_user_{author,tag}_ctr     = (Σ_{K_g} y + A·e) / (|K_g| + A)

``watch`` (the watch side, #37: w_j as above, r_j = min(max(watch_j, 0) / max(duration_j,
1 s), 2) as in signals.py; the prior is the user's own mean over K_u, m_u(i) = mean_{K_u} w
and ρ_u(i) = mean_{K_u} r, 0 when K_u is empty; d_i = the candidate's duration bucket):
    sig_user_tab_lastN_ratio = (Σ_{R_N(K_(u,tab_i))} r + A·ρ_u(i)) / (|R_N| + A)  N = 10, 20
    sig_user_dur_watch       = (Σ_{K_(u,d_i)} w + A·m_u(i)) / (|K_(u,d_i)| + A)
    sig_user_author_watch    = (Σ_{K_(u,a_i)} w + A·m_u(i)) / (|K_(u,a_i)| + A)  (a missing author: m_u(i))

``time_context`` (g = (u, hour_i), the hour of day of the log's ``hourmin``):
    sig_user_hour_ctr = (Σ_{K_g} y + A·e) / (|K_g| + A);  sig_user_hour_n = |I_g(i)|
(the tab's CTR at this hour needs every user's rows: signals.py's sig_tab_hour_ctr, in the tab pass).

The per-row reference path (user_examples.py) does not compute them: they exist only in
the batched path and are tested against a naive loop over these equations
(tests/components/log_example_gen/test_signal_families.py).
"""
from typing import Dict, Sequence, Tuple

import numpy as np

from components.log_example_gen import columns as C
from components.log_example_gen import signal_columns as SC
from components.log_example_gen import signals as S
from models import features as F

NONE = -1.0
SESSION_GAP_S = 30 * 60.0
LAST_HOUR_S = 3600.0
TAB_WINDOWS = (10, 20, 50)
RECENT_WINDOWS = (5, 10, 20)
MATCH_KEYS = ("author", "tag", "music")
MATCH_RATES = ("author", "tag")
WATCH_TAB_WINDOWS = (10, 20)

# the names (and each one's model-input transform) are registered in models/features.py
FAMILIES: Dict[str, Tuple[str, ...]] = {f: tuple(names) for f, names in F.FAMILY_SIGNAL_TRANSFORMS.items()}
ALL_FEATURES: Tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)


def check_families(families: Sequence[str]) -> Tuple[str, ...]:
    """The families in FAMILIES order; ValueError naming an unknown one."""
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        raise ValueError(f"unknown signal families {unknown}; known: {list(FAMILIES)}")
    return tuple(f for f in FAMILIES if f in families)


def feature_names(families: Sequence[str]) -> Tuple[str, ...]:
    return tuple(name for f in check_families(families) for name in FAMILIES[f])


class _Groups:
    """Rows sorted by (group, time, row_id): order, starts, the label prefix p (t_j + D < t_i)
    and the impression prefix q (t_j < t_i)."""

    def __init__(self, group: np.ndarray, b: C.Batch, delay_ms: int):
        self.order = C.sort_rows(group, b["time_ms"], b["row_id"])
        self.g, self.t = group[self.order], b["time_ms"][self.order].astype(np.int64)
        self.starts = C.group_starts(self.g)
        self.p = C.known_prefix(self.g, self.t, delay_ms)
        self.q = C.known_prefix(self.g, self.t, 0)

    def sums(self, lo: np.ndarray, hi: np.ndarray, values: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """{name: Σ values[lo(i):hi(i)]} (sorted values; start <= lo, an empty range when lo >= hi)."""
        return C.range_sums(self.g, self.starts, np.minimum(lo, hi), hi, values)

    def since(self, flag: np.ndarray) -> np.ndarray:
        """since({j in K: flag_j}) per sorted row (``flag`` sorted)."""
        pos = np.arange(len(flag))
        last = np.maximum.accumulate(np.where(flag.astype(bool), pos, -1)) if len(flag) else pos
        q = last[np.maximum(self.p - 1, 0)] if len(flag) else pos
        has = (self.p > self.starts) & (q >= self.starts)
        gap_s = (self.t - self.t[np.where(has, q, 0)]) / 1000.0
        return np.where(has, np.log1p(np.maximum(gap_s, 0.0)), NONE)

    def known_mean(self, values: np.ndarray, prior: np.ndarray, missing: np.ndarray) -> np.ndarray:
        """(Σ_{K_g} values + A·prior) / (|K_g| + A) per sorted row (sorted inputs); ``prior``
        where ``missing`` (an id that matches nothing)."""
        s = C.prefix_sums(self.g, self.starts, self.p, {"v": values})["v"]
        return np.where(missing, prior, S.smoothed(s, (self.p - self.starts).astype(np.float64), prior))

    def unsort(self, out: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        return {k: C.unsort(np.asarray(v, dtype=np.float64), self.order) for k, v in out.items()}


def _windows(gr: _Groups, windows, e: np.ndarray, click: np.ndarray, watch: np.ndarray,
             click_name: str, watch_name: str = "") -> Dict[str, np.ndarray]:
    out = {}
    for n in windows:
        count, s = C.window_sums(gr.g, gr.starts, gr.p, n, {"click": click, "watch": watch})
        out[click_name.format(n)] = S.smoothed(s["click"], count, e)
        if watch_name:
            out[watch_name.format(n)] = np.where(count > 0, s["watch"] / np.maximum(count, 1), 0.0)
    return out


def in_tab(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    gr = _Groups(C.group_codes(b["user_id"], b["tab"]), b, delay_ms)
    click = b["is_click"][gr.order].astype(np.float64)
    out = _windows(gr, TAB_WINDOWS, b["e_tab"][gr.order], click, click, "sig_user_tab_last{}_click")
    out["sig_user_tab_since_click"] = gr.since(click)
    return gr.unsort(out)


def recent(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    gr = _Groups(C.group_codes(b["user_id"]), b, delay_ms)
    o = gr.order
    click = b["is_click"][o].astype(np.float64)
    watch = np.log1p(np.maximum(b["watch_s"][o], 0.0))
    out = _windows(gr, RECENT_WINDOWS, b["e_tab"][o], click, watch, "sig_last{}_click", "sig_last{}_watch")
    out["sig_since_click"] = gr.since(click)
    out["sig_since_long_view"] = gr.since(b["long_view"][o])
    hour_ago = C.known_prefix(gr.g, gr.t, int(LAST_HOUR_S * 1000))  # rows with t_j < t_i − 1 h
    out["sig_last_hour_n"] = gr.q - np.maximum(hour_ago, gr.starts)
    return gr.unsort(out)


def session(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    gr = _Groups(C.group_codes(b["user_id"]), b, delay_ms)
    n = len(gr.g)
    new = np.ones(n, dtype=bool)
    new[1:] = (gr.g[1:] != gr.g[:-1]) | (np.diff(gr.t) > SESSION_GAP_S * 1000)
    first = np.maximum.accumulate(np.where(new, np.arange(n), 0)) if n else np.zeros(0, dtype=np.int64)
    click = b["is_click"][gr.order].astype(np.float64)
    out = {"sig_session_position": gr.q - first,
           "sig_session_clicks": gr.sums(first, gr.p, {"c": click})["c"],
           "sig_session_age": np.log1p((gr.t - gr.t[first]) / 1000.0) if n else np.zeros(0)}
    return gr.unsort(out)


def _user_key(b: C.Batch, ids: np.ndarray, delay_ms: int, rate: bool) -> Dict[str, np.ndarray]:
    """{"n": |I_g|, "ctr": the smoothed CTR over K_g} for g = (user, ids); an id < 0 matches nothing."""
    gr = _Groups(C.group_codes(b["user_id"], ids), b, delay_ms)
    missing = ids[gr.order] < 0
    out = {"n": np.where(missing, 0, gr.q - gr.starts)}
    if rate:
        out["ctr"] = gr.known_mean(b["is_click"][gr.order].astype(np.float64), b["e_tab"][gr.order], missing)
    return gr.unsort(out)


def target_match(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    out = {}
    for key in MATCH_KEYS:
        out.update({f"sig_user_{key}_{k}": v
                    for k, v in _user_key(b, b[f"{key}_id"], delay_ms, key in MATCH_RATES).items()})
    return out


def time_context(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    return {f"sig_user_hour_{k}": v for k, v in _user_key(b, b["hour"], delay_ms, True).items()}


def watch(b: C.Batch, delay_ms: int) -> Dict[str, np.ndarray]:
    w = np.log1p(np.maximum(b["watch_s"], 0.0))
    r = SC.watch_ratio(b["watch_s"], b["duration_s"])
    user = _Groups(C.group_codes(b["user_id"]), b, delay_ms)
    s = C.prefix_sums(user.g, user.starts, user.p, {"w": w[user.order], "r": r[user.order]})
    n = user.p - user.starts
    prior = user.unsort({k: np.where(n > 0, s[k] / np.maximum(n, 1), 0.0) for k in s})  # m_u, ρ_u
    gr = _Groups(C.group_codes(b["user_id"], b["tab"]), b, delay_ms)
    ratio = r[gr.order]
    out = gr.unsort(_windows(gr, WATCH_TAB_WINDOWS, prior["r"][gr.order], ratio, ratio, "sig_user_tab_last{}_ratio"))
    for key, ids in (("dur", b["duration_bucket"]), ("author", b["author_id"])):
        gk = _Groups(C.group_codes(b["user_id"], ids), b, delay_ms)
        mean = gk.known_mean(w[gk.order], prior["w"][gk.order], ids[gk.order] < 0)
        out.update(gk.unsort({f"sig_user_{key}_watch": mean}))
    return out


_PASSES = {"in_tab": in_tab, "recent": recent, "session": session, "target_match": target_match,
           "time_context": time_context, "watch": watch}


def family_columns(b: C.Batch, families: Sequence[str], delay_ms: int) -> Dict[str, np.ndarray]:
    """Kept rows of whole users (columns user_id, time_ms, row_id, tab, is_click, watch_s,
    duration_s, duration_bucket, long_view, e_tab, author_id, tag_id, music_id, hour)
    -> {signal: float64 per row, rows' order} of the chosen families (module doc)."""
    out: Dict[str, np.ndarray] = {}
    for family in check_families(families):
        cols = _PASSES[family](b, delay_ms)
        if tuple(sorted(cols)) != tuple(sorted(FAMILIES[family])):  # the registry of models/features.py
            raise ValueError(f"signal family {family} computed {sorted(cols)}, registered {sorted(FAMILIES[family])}")
        out.update(cols)
    return out
