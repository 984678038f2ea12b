"""Leakage-free signals (signals.py, signals_beam.py): hand-made values (ties, label
delay, duplicates; click and watch-time signals), the passes against a brute-force O(n²) evaluation of the equations,
no use of the row's own or a later label, and the Beam pipeline end to end."""
import collections
import math
import os
import random

import pytest

from components.log_example_gen import signals as S
from models import features as F

P0 = 0.3


def srow(i, t, y, tab=1, user=1, video=10, author=100, music=5, tag=7, bucket="<15s", dup=None,
         watch=0.0, duration=10.0, hour=12):
    return S.SignalRow(key=("f", i), user_id=user, time_ms=t, is_click=y, tab=tab, video_id=video,
                       author_id=author, music_id=music, tag_id=tag, duration_bucket=bucket,
                       duplicate_key=dup if dup is not None else f"row{i}", watch_s=watch, duration_s=duration,
                       hour=hour)


def known(row, e_tab, counted, w_tab=0.0, r_tab=0.0):
    return S.Known(row, e_tab, counted, w_tab, r_tab, e_tab)


# ---------------------------------------------------------------- hand-made values

def test_tab_ctr_excludes_ties_and_honours_the_label_delay():
    rows = [srow(0, 0, 1), srow(1, 0, 0), srow(2, 1000, 1), srow(3, 1000, 1)]
    e = [k.e_tab for k in S.tab_pass(rows, 0, P0, "drop")]
    # t=0: nothing earlier (the tie at t=0 is excluded both ways): p0
    # t=1000: the two t=0 rows, (1 + 0 + 2·0.3) / (2 + 2); the tie at 1000 is excluded
    assert e == pytest.approx([0.3, 0.3, 0.4, 0.4])
    # label delay 500 ms: 0 + 500 < 1000, both known; 1000 ms: 0 + 1000 < 1000 fails
    assert [k.e_tab for k in S.tab_pass(rows, 500, P0, "drop")] == pytest.approx([0.3, 0.3, 0.4, 0.4])
    assert [k.e_tab for k in S.tab_pass(rows, 1000, P0, "drop")] == pytest.approx([0.3] * 4)


def test_exact_duplicates_count_once_unless_kept():
    rows = [srow(0, 0, 1, dup="same"), srow(1, 0, 1, dup="same"), srow(2, 5, 0)]
    known = S.tab_pass(rows, 0, P0, "drop")
    assert [k.counted for k in known] == [True, False, True]
    assert known[2].e_tab == pytest.approx((1 + 0.6) / 3)
    assert S.tab_pass(rows, 0, P0, "keep")[2].e_tab == pytest.approx((2 + 0.6) / 4)


def test_entity_ctr_and_video_coec_by_hand():
    recs = [known(srow(0, 0, 1), 0.5, True), known(srow(1, 10, 0), 0.25, True),
            known(srow(2, 10, 1), 0.2, True), known(srow(3, 20, 1), 0.4, False)]

    def stat(delay, kind):
        return [v["x"] for v in S.entity_pass(recs, delay, {"x": kind})]
    # row 2 ties row 1: sees row 0 only; ctr smoothed toward its own e_tab
    assert stat(0, "ctr") == pytest.approx([0.5, (1 + 0.5) / 3, (1 + 0.4) / 3, (2 + 0.8) / 5])
    # coec (Σy + 2)/(Σe + 2); row 3 is not counted but still gets a value
    assert stat(0, "coec") == pytest.approx([1.0, 3 / 2.5, 3 / 2.5, 4 / 2.95])
    assert stat(10, "coec") == pytest.approx([1.0, 1.0, 1.0, 3 / 2.5])
    with pytest.raises(ValueError, match="median"):
        S.entity_pass(recs, 0, {"x": "median"})


def test_watch_signals_by_hand():
    # tab: t=0 watch e−1 s of 10 s, its tie at t=0 watch 30 s of 10 s (ratio 3, capped at 2),
    # t=5 a row and its exact duplicate (the copy never counts), t=9 the last row
    rows = [srow(0, 0, 1, watch=math.e - 1, dup="a"), srow(1, 0, 0, watch=30.0),
            srow(2, 5, 1, watch=99.0, dup="b"), srow(3, 5, 1, watch=99.0, dup="b"),
            srow(4, 9, 0, watch=0.5, duration=0.5)]
    k = S.tab_pass(rows, 0, P0, "drop")
    w01 = (1.0 + math.log1p(30.0)) / 2
    r01 = ((math.e - 1) / 10 + 2.0) / 2
    # t=0: nothing known (tie excluded): w_tab = r_tab = 0; t=5: rows 0, 1; t=9: rows 0, 1, 2 (3 is a copy)
    assert [x.w_tab for x in k] == pytest.approx([0, 0, w01, w01, (2 * w01 + math.log1p(99.0)) / 3])
    assert [x.r_tab for x in k] == pytest.approx([0, 0, r01, r01, (2 * r01 + 2.0) / 3])
    assert [x.counted for x in k] == [True, True, True, False, True]
    # label delay 5 ms: at t=9 only t=0 is known (0 + 5 < 9; 5 + 5 < 9 fails)
    assert S.tab_pass(rows, 5, P0, "drop")[4].w_tab == pytest.approx(w01)
    # one video's rows, its own tab priors: (Σw + 2·w_tab) / (n + 2), (Σr + 2·r_tab) / (n + 2)
    stats = {"w": "watch", "r": "watch_ratio"}
    got = S.entity_pass(k, 0, stats)
    assert got[0] == pytest.approx({"w": 0.0, "r": 0.0}) and got[1] == got[0]
    assert got[2] == pytest.approx({"w": (2 * w01 + 2 * w01) / 4, "r": (2 * r01 + 2 * r01) / 4})
    w3, r3 = 2 * w01 + math.log1p(99.0), 2 * r01 + 2.0
    assert got[4] == pytest.approx({"w": (w3 + 2 * w3 / 3) / 5, "r": (r3 + 2 * r3 / 3) / 5})
    assert S.watch_ratio(0.5, 0.0) == pytest.approx(0.5) and S.watch_ratio(-1.0, 10.0) == 0.0


def test_user_pass_by_hand():
    ev = [S.UserEvent(0, 1, math.e - 1, 1, 0.5, 10.0), S.UserEvent(100, 0, 0.0, 2, 0.25, 10.0),
          S.UserEvent(200, 1, 0.0, 1, 0.2, 10.0)]
    out = S.user_pass(ev, 0)
    assert out[0] == pytest.approx({"sig_user_coec": 1.0, "sig_user_tab_ctr": 0.5, "sig_user_lift": 0.0,
                                    "sig_last50_click": 0.5, "sig_last50_watch": 0.0,
                                    "sig_last50_watch_ratio": 0.0})
    assert out[2]["sig_user_coec"] == pytest.approx(3 / 2.75)
    assert out[2]["sig_user_tab_ctr"] == pytest.approx((1 + 0.4) / 3)  # tab 1 only: event 0
    assert out[2]["sig_user_lift"] == pytest.approx((0.5 - 0.25) / 4)
    assert out[2]["sig_last50_click"] == pytest.approx((1 + 0.4) / 4)
    assert out[2]["sig_last50_watch"] == pytest.approx(0.5)  # mean(log1p(e - 1), log1p(0))
    assert out[2]["sig_last50_watch_ratio"] == pytest.approx((math.e - 1) / 10 / 2)
    # delay 100 ms: event 2 at 200 knows only event 0 (0 + 100 < 200; 100 + 100 < 200 fails)
    assert S.user_pass(ev, 100)[2]["sig_user_lift"] == pytest.approx(0.5 / 3)


def test_last50_keeps_the_latest_fifty():
    ev = ([S.UserEvent(t, 1 if t < 10 else 0, 5.0 if t < 10 else 1.0, 1, 0.5, 10.0) for t in range(60)]
          + [S.UserEvent(100, 0, 0.0, 1, 0.5, 10.0)])
    # the 50 latest before t=100 are t = 10..59, all unclicked, each watched 1 s of 10 s
    last = S.user_pass(ev, 0)[-1]
    assert last["sig_last50_click"] == pytest.approx(1.0 / 52)
    assert last["sig_last50_watch"] == pytest.approx(math.log(2.0))
    assert last["sig_last50_watch_ratio"] == pytest.approx(0.1)


def test_propensity_is_clipped():
    assert S.propensity(0.5, 3.0, 1.0) == 1.0 and S.propensity(0.2, 1.5, 2.0) == pytest.approx(0.6)


# ---------------------------------------------------------------- brute force

def random_log(n, seed, tie_prone=True):
    """Rows as dicts, sorted by time (ties and a duplicate included), list order = file order."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        video = rng.choice([10, 11, 12])
        rows.append(dict(t=rng.randrange(0, 40 if tie_prone else 10_000) * 250, user=rng.choice([1, 2, 3]),
                         video=video, tab=rng.choice([0, 1]), y=rng.randint(0, 1),
                         watch=float(rng.randint(0, 30)), bucket=rng.choice(["<15s", "15-30s"]),
                         hour=rng.choice([8, 21])))
        # durations: under 1 s (the ratio's floor), 10 s (ratios above the cap) and 20 s
        rows[-1]["dur"] = rng.choice([0.5, 10.0]) if rows[-1]["bucket"] == "<15s" else 20.0
    rows.append(dict(rows[3]))  # an exact duplicate
    rows.sort(key=lambda r: r["t"])
    for r in rows:
        r.update(author=100 + r["video"] % 10, music=[555, 0, 777][r["video"] % 10], tag=[20, -1, 6][r["video"] % 10])
    return rows


def brute_force(rows, delay_ms, p0=P0):
    """The equations of signals.py evaluated directly (duplicates: the later copies out)."""
    A = S.PSEUDO_COUNT
    keys = [tuple(sorted(r.items())) for r in rows]
    live = [k not in keys[:i] for i, k in enumerate(keys)]

    def K(i, same):
        return [j for j in range(len(rows)) if live[j] and rows[j]["t"] + delay_ms < rows[i]["t"] and same(j)]

    def eq(i, *names):
        return lambda j: all(rows[j][k] == rows[i][k] for k in names)

    def w(j):
        return math.log1p(rows[j]["watch"])

    def r(j):
        return min(rows[j]["watch"] / max(rows[j]["dur"], 1.0), S.WATCH_RATIO_CAP)

    def mean(f, js):
        return sum(f(j) for j in js) / len(js) if js else 0.0

    e, w_tab, r_tab = [], [], []
    for i in range(len(rows)):
        Kt = K(i, eq(i, "tab"))
        e.append((sum(rows[j]["y"] for j in Kt) + A * p0) / (len(Kt) + A))
        w_tab.append(mean(w, Kt))
        r_tab.append(mean(r, Kt))
    out = []
    for i in range(len(rows)):
        def ctr(js):
            return (sum(rows[j]["y"] for j in js) + A * e[i]) / (len(js) + A)

        def coec(js):
            return (sum(rows[j]["y"] for j in js) + A) / (sum(e[j] for j in js) + A)

        def watch(js):
            return (sum(w(j) for j in js) + A * w_tab[i]) / (len(js) + A)
        Ku, Kv = K(i, eq(i, "user")), K(i, eq(i, "video"))
        recent = sorted(Ku, key=lambda j: (rows[j]["t"], j))[-S.LAST_N:]
        s = {"sig_tab_ctr": e[i], "sig_user_coec": coec(Ku), "sig_video_coec": coec(Kv),
             "sig_user_tab_ctr": ctr(K(i, eq(i, "user", "tab"))),
             "sig_user_lift": sum(rows[j]["y"] - e[j] for j in Ku) / (len(Ku) + A),
             "sig_author_ctr": ctr(K(i, eq(i, "author"))), "sig_music_ctr": ctr(K(i, eq(i, "music"))),
             "sig_tag_tab_ctr": ctr(K(i, eq(i, "tag", "tab"))),
             "sig_tab_duration_ctr": ctr(K(i, eq(i, "tab", "bucket"))),
             "sig_last50_click": ctr(recent),
             "sig_last50_watch": mean(w, recent),
             "sig_video_watch": watch(Kv),
             "sig_video_watch_ratio": (sum(r(j) for j in Kv) + A * r_tab[i]) / (len(Kv) + A),
             "sig_author_watch": watch(K(i, eq(i, "author"))),
             "sig_tab_duration_watch": watch(K(i, eq(i, "tab", "bucket"))),
             "sig_tag_tab_watch": watch(K(i, eq(i, "tag", "tab"))),
             "sig_tab_hour_ctr": ctr(K(i, eq(i, "tab", "hour"))),
             "sig_last50_watch_ratio": mean(r, recent)}
        s["sig_propensity"] = min(max(e[i] * s["sig_user_coec"] * s["sig_video_coec"], 0.0), 1.0)
        out.append(s)
    return out, live


def passes(rows, delay_ms, p0=P0):
    """The passes as signals_beam.py / user_examples.py group them, in plain Python."""
    srows = [S.SignalRow(("f", i), r["user"], r["t"], r["y"], r["tab"], r["video"], r["author"], r["music"],
                         r["tag"], r["bucket"], str(sorted(r.items())), r["watch"], r["dur"], r["hour"])
             for i, r in enumerate(rows)]
    per_row = collections.defaultdict(dict)

    def grouped(items, key):
        groups = collections.defaultdict(list)
        for it in items:
            groups[key(it)].append(it)
        return groups.values()

    known = [k for g in grouped(srows, lambda r: r.tab) for k in S.tab_pass(g, delay_ms, p0, "drop")]
    for k in known:
        per_row[k.row.key].update(sig_tab_ctr=k.e_tab, sig_tab_hour_ctr=k.tab_hour_ctr)
    for key_fn, stats in S.ENTITY_SIGNALS.values():
        for g in grouped(known, lambda k: key_fn(k.row)):
            for k, v in zip(g, S.entity_pass(g, delay_ms, stats)):
                per_row[k.row.key].update(v)
    counted = {k.row.key for k in known if k.counted}
    out = {}
    for g in grouped([r for r in srows if r.key in counted], lambda r: r.user_id):
        ev = [S.UserEvent(r.time_ms, r.is_click, r.watch_s, r.tab, per_row[r.key]["sig_tab_ctr"], r.duration_s)
              for r in g]
        for r, stats in zip(g, S.user_pass(ev, delay_ms)):
            out[r.key[1]] = S.row_signals(per_row[r.key], stats)
    return out


@pytest.mark.parametrize("delay_ms", [0, 250, 2000])
def test_passes_match_brute_force(delay_ms):
    for seed in range(3):
        rows = random_log(80, seed)
        expected, live = brute_force(rows, delay_ms)
        got = passes(rows, delay_ms)
        assert set(got) == {i for i in range(len(rows)) if live[i]}
        for i, s in got.items():
            assert set(s) == set(F.SIGNAL_FEATURES)
            assert s == pytest.approx(expected[i], rel=1e-9, abs=1e-12), i


def test_no_signal_uses_the_rows_own_or_an_unknown_label():
    delay = 500
    rows = random_log(60, seed=7)
    base = passes(rows, delay)
    for i in range(0, len(rows), 7):
        if i not in base:
            continue
        flipped = [dict(r, y=1 - r["y"], watch=r["watch"] + 99) if r["t"] + delay >= rows[i]["t"] else r
                   for r in rows]  # row i, its ties and every label not yet known at t_i
        assert passes(flipped, delay)[i] == pytest.approx(base[i]), i


# ---------------------------------------------------------------- Beam, end to end

@pytest.mark.parametrize("block_rows", [None, 1])  # the default W (one block here); hour blocks
def test_pipeline_writes_the_brute_force_signals(tmp_path, monkeypatch, block_rows):
    from components.log_example_gen import beam_pipeline as bp
    from components.log_example_gen import signals_beam
    from tests.components.log_example_gen import fixture_logs as FL

    if block_rows is not None:
        monkeypatch.setattr(signals_beam, "TAB_BLOCK_ROWS", block_rows)

    rows = random_log(40, seed=3)
    folder = tmp_path / "input"
    FL.write_inputs(str(folder), with_bad=False)
    for name in os.listdir(folder):
        if name.startswith("log_"):
            os.remove(folder / name)
    day_of = [FL.D1, FL.D2, FL.D3]
    for r in rows:  # spread over the three days, order and ties kept
        r["date"] = day_of[min(r["t"] // 3500, 2)]
    lines = [FL.log_line(r["user"], r["video"], r["date"], FL.at(r["date"], r["t"]), is_click=r["y"],
                         play_time_ms=int(r["watch"] * 1000), tab=r["tab"],
                         duration_ms=int(r["dur"] * 1000), hourmin=r["hour"] * 100 + 30) for r in rows]
    with open(folder / "log_all.csv", "w") as f:
        f.write(",".join(FL.P.LOG_COLUMNS) + "\n" + "\n".join(lines) + "\n")
    delay_s = 0.25  # one time step: the previous step's labels are not known yet
    dates = [r.pop("date") for r in rows]
    for r, date in zip(rows, dates):
        r["t"] = FL.at(date, r["t"])
    expected, live = brute_force(rows, int(delay_s * 1000))
    examples, _, _ = FL.run_component(str(tmp_path), str(folder), history_length=3, train_days=f"{FL.D2}",
                                      eval_days=f"{FL.D3}", validation_last_n_days=0, label_delay_s=delay_s)
    written = FL.read_examples(bp.split_uri(examples.uri, "train"), 3) + FL.read_examples(
        bp.split_uri(examples.uri, "eval"), 3)
    def key(user, video, t, tab, watch):
        return user, video, t, tab, round(watch)

    want = {key(r["user"], r["video"], r["t"], r["tab"], r["watch"]): expected[i]
            for i, r in enumerate(rows) if live[i] and dates[i] != FL.D1}  # D1: history only
    assert len(written) == len(want) == sum(live[i] and dates[i] != FL.D1 for i in range(len(rows)))
    for ex in written:
        exp = want[key(ex["user_id"], ex["video_id"], ex["time_ms"], ex["tab"], ex["watch_time_s"])]
        for name in F.SIGNAL_FEATURES:
            assert ex[name] == pytest.approx(exp[name], rel=1e-5, abs=1e-6), name
    # hist_tab: the scenes of the history items, padded like hist_video_id
    for ex in written:
        assert len(ex["hist_tab"]) == 3
        assert all((v == -1) == (p >= ex["hist_len"]) for p, v in enumerate(ex["hist_tab"]))
