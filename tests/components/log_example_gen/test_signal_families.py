"""The optional signal families (signal_families.py, #37) against a naive O(n²) loop over
their equations on small random logs full of ties, rows at the delay boundary and users'
first impressions, plus hand-made values and the no-leak property (a row's own label, a
tied label and a label younger than the delay never change its signals)."""
import math
import random

import numpy as np
import pytest

from components.log_example_gen import signal_families as SF
from components.log_example_gen import signals as S

A = S.PSEUDO_COUNT


def random_rows(n, seed, delay_ms):
    rng = random.Random(seed)
    rows, t = [], {}
    for k in range(n):
        user = rng.randrange(4)
        # steps of 0 (ties), exactly the delay (the boundary), +1 ms, and gaps past a session
        step = rng.choice([0, 0, delay_ms, delay_ms + 1, 1000, 60_000, 20 * 60_000, 40 * 60_000])
        t[user] = t.get(user, rng.randrange(3) * 1000) + step
        rows.append({"row_id": k, "user_id": user, "time_ms": t[user], "tab": rng.randrange(2),
                     "is_click": rng.randrange(2), "long_view": rng.randrange(2), "watch_s": rng.random() * 30,
                     "e_tab": rng.choice([0.3, 0.45, 0.6]), "author_id": rng.choice([-1, 1, 2]),
                     "tag_id": rng.choice([-1, 7, 8]), "music_id": rng.choice([-1, 5])})
    rng.shuffle(rows)  # the passes may not rely on the input order
    return rows


def batch(rows):
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def _latest(rows, n):
    return sorted(rows, key=lambda r: (r["time_ms"], r["row_id"]))[-n:] if n else []


def _since(rows, t_i):
    return math.log1p((t_i - max(r["time_ms"] for r in rows)) / 1000.0) if rows else SF.NONE


def _rate(rows, e):
    return (sum(r["is_click"] for r in rows) + A * e) / (len(rows) + A)


def naive(rows, delay_ms):
    """Every family's value per row, straight from the module doc's equations."""
    out = []
    for i in rows:
        t, e = i["time_ms"], i["e_tab"]
        user = [r for r in rows if r["user_id"] == i["user_id"]]
        K = [r for r in user if r["time_ms"] + delay_ms < t]
        seen = [r for r in user if r["time_ms"] < t]
        k_tab = [r for r in K if r["tab"] == i["tab"]]
        v = {}
        for n in SF.TAB_WINDOWS:
            v[f"sig_user_tab_last{n}_click"] = _rate(_latest(k_tab, n), e)
        v["sig_user_tab_since_click"] = _since([r for r in k_tab if r["is_click"]], t)
        for n in SF.RECENT_WINDOWS:
            last = _latest(K, n)
            v[f"sig_last{n}_click"] = _rate(last, e)
            v[f"sig_last{n}_watch"] = (sum(math.log1p(r["watch_s"]) for r in last) / len(last)) if last else 0.0
        v["sig_since_click"] = _since([r for r in K if r["is_click"]], t)
        v["sig_since_long_view"] = _since([r for r in K if r["long_view"]], t)
        v["sig_last_hour_n"] = sum(1 for r in seen if r["time_ms"] >= t - 3_600_000)
        # session start: walk back over the user's times <= t while gaps stay <= 30 min
        times = sorted({r["time_ms"] for r in user if r["time_ms"] <= t})
        s = times[-1]
        for earlier in reversed(times[:-1]):
            if s - earlier > SF.SESSION_GAP_S * 1000:
                break
            s = earlier
        v["sig_session_position"] = sum(1 for r in seen if r["time_ms"] >= s)
        v["sig_session_clicks"] = sum(r["is_click"] for r in K if r["time_ms"] >= s)
        v["sig_session_age"] = math.log1p((t - s) / 1000.0)
        for key in SF.MATCH_KEYS:
            a = i[f"{key}_id"]
            v[f"sig_user_{key}_n"] = 0 if a < 0 else sum(1 for r in seen if r[f"{key}_id"] == a)
            if key in SF.MATCH_RATES:
                v[f"sig_user_{key}_ctr"] = e if a < 0 else _rate([r for r in K if r[f"{key}_id"] == a], e)
        out.append(v)
    return out


@pytest.mark.parametrize("delay_ms", [0, 300_000])
def test_families_match_the_naive_loop(delay_ms):
    for seed in range(4):
        rows = random_rows(120, seed, delay_ms)
        got = SF.family_columns(batch(rows), list(SF.FAMILIES), delay_ms)
        want = naive(rows, delay_ms)
        assert set(got) == set(SF.ALL_FEATURES)
        for name in SF.ALL_FEATURES:
            assert got[name] == pytest.approx([w[name] for w in want], rel=1e-9, abs=1e-12), (name, seed)


def test_hand_made_values_ties_delay_boundary_and_first_impression():
    D = 1000
    rows = [  # one user, one tab: t = 0 (click), 0 (tie, skip), 1000 (at the boundary), 1001
        dict(row_id=0, time_ms=0, is_click=1, long_view=1),
        dict(row_id=1, time_ms=0, is_click=0, long_view=0),
        dict(row_id=2, time_ms=1000, is_click=1, long_view=0),
        dict(row_id=3, time_ms=1001, is_click=0, long_view=0),
    ]
    for r in rows:
        r.update(user_id=1, tab=0, watch_s=0.0, e_tab=0.5, author_id=3, tag_id=-1, music_id=4)
    got = SF.family_columns(batch(rows), list(SF.FAMILIES), D)
    # first impressions (and the tie at t=0): nothing known -> prior, NONE, zero counts
    assert list(got["sig_last5_click"][:2]) == [0.5, 0.5]
    assert list(got["sig_since_click"][:2]) == [SF.NONE, SF.NONE]
    assert list(got["sig_session_position"]) == [0, 0, 2, 3]
    # t=1000: 0 + 1000 < 1000 fails -> labels unknown, the two impressions are counted
    assert got["sig_last5_click"][2] == 0.5 and got["sig_user_author_n"][2] == 2
    assert got["sig_user_author_ctr"][2] == 0.5
    # t=1001: the two t=0 labels are known: (1 + 0 + 2·0.5) / (2 + 2)
    assert got["sig_last5_click"][3] == pytest.approx(0.5)
    assert got["sig_user_tab_last10_click"][3] == pytest.approx(0.5)
    assert got["sig_since_click"][3] == pytest.approx(math.log1p(1.001))
    assert got["sig_since_long_view"][3] == pytest.approx(math.log1p(1.001))
    assert got["sig_session_clicks"][3] == 1 and got["sig_session_age"][3] == pytest.approx(math.log1p(1.001))
    assert list(got["sig_user_tag_n"]) == [0, 0, 0, 0]  # missing tag: matches nothing
    assert got["sig_user_tag_ctr"][3] == 0.5
    assert list(got["sig_last_hour_n"]) == [0, 0, 2, 3]


def test_a_new_session_after_the_gap_resets_position_clicks_and_age():
    gap = int(SF.SESSION_GAP_S * 1000)
    rows = [dict(row_id=k, time_ms=t, is_click=1) for k, t in enumerate([0, 10, 10 + gap + 1, 20 + gap + 1])]
    for r in rows:
        r.update(user_id=1, tab=0, long_view=0, watch_s=1.0, e_tab=0.5, author_id=1, tag_id=1, music_id=1)
    got = SF.family_columns(batch(rows), ["session"], 0)
    assert list(got["sig_session_position"]) == [0, 1, 0, 1]
    assert list(got["sig_session_clicks"]) == [0, 1, 0, 1]
    assert got["sig_session_age"] == pytest.approx([0, math.log1p(0.01), 0, math.log1p(0.01)])


def test_own_tied_and_unarrived_labels_never_change_a_row():
    delay_ms = 300_000
    rows = random_rows(150, 11, delay_ms)
    base = SF.family_columns(batch(rows), list(SF.FAMILIES), delay_ms)
    order = {r["row_id"]: k for k, r in enumerate(rows)}
    target = rows[len(rows) // 2]
    flipped = [dict(r, is_click=1 - r["is_click"], long_view=1 - r["long_view"], watch_s=r["watch_s"] + 99)
               if r["user_id"] == target["user_id"] and r["time_ms"] + delay_ms >= target["time_ms"] else r
               for r in rows]
    got = SF.family_columns(batch(flipped), list(SF.FAMILIES), delay_ms)
    k = order[target["row_id"]]
    for name in SF.ALL_FEATURES:
        assert got[name][k] == base[name][k], name


def test_families_are_checked_and_ordered():
    assert SF.check_families(["session", "in_tab"]) == ("in_tab", "session")
    assert SF.feature_names(["session"]) == SF.FAMILIES["session"]
    with pytest.raises(ValueError, match="unknown signal families"):
        SF.check_families(["in_tab", "nope"])
