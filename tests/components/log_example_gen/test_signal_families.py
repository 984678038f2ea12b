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
                     "tag_id": rng.choice([-1, 7, 8]), "music_id": rng.choice([-1, 5]), "hour": rng.choice([0, 23]),
                     "duration_s": rng.choice([0.0, 0.5, 7.0, 40.0]), "duration_bucket": rng.randrange(3)})
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
        v["sig_user_hour_ctr"] = _rate([r for r in K if r["hour"] == i["hour"]], e)
        v["sig_user_hour_n"] = sum(1 for r in seen if r["hour"] == i["hour"])
        # watch: means shrunk to the user's own mean over K (w = log watch, r = capped watch ratio)
        w = {r["row_id"]: S.log_watch(r["watch_s"]) for r in user}
        ratio = {r["row_id"]: S.watch_ratio(r["watch_s"], r["duration_s"]) for r in user}
        m_w = sum(w[r["row_id"]] for r in K) / len(K) if K else 0.0
        m_r = sum(ratio[r["row_id"]] for r in K) / len(K) if K else 0.0
        for n in SF.WATCH_TAB_WINDOWS:
            last = _latest(k_tab, n)
            v[f"sig_user_tab_last{n}_ratio"] = (sum(ratio[r["row_id"]] for r in last) + A * m_r) / (len(last) + A)
        same_dur = [r for r in K if r["duration_bucket"] == i["duration_bucket"]]
        v["sig_user_dur_watch"] = (sum(w[r["row_id"]] for r in same_dur) + A * m_w) / (len(same_dur) + A)
        same_author = [r for r in K if r["author_id"] == i["author_id"]]
        v["sig_user_author_watch"] = m_w if i["author_id"] < 0 else (
            (sum(w[r["row_id"]] for r in same_author) + A * m_w) / (len(same_author) + A))
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
        r.update(user_id=1, tab=0, watch_s=0.0, e_tab=0.5, author_id=3, tag_id=-1, music_id=4, hour=1,
                 duration_s=10.0, duration_bucket=1)
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
    assert list(got["sig_user_hour_n"]) == [0, 0, 2, 3] and got["sig_user_hour_ctr"][3] == pytest.approx(0.5)


def test_a_new_session_after_the_gap_resets_position_clicks_and_age():
    gap = int(SF.SESSION_GAP_S * 1000)
    rows = [dict(row_id=k, time_ms=t, is_click=1) for k, t in enumerate([0, 10, 10 + gap + 1, 20 + gap + 1])]
    for r in rows:
        r.update(user_id=1, tab=0, long_view=0, watch_s=1.0, e_tab=0.5, author_id=1, tag_id=1, music_id=1, hour=2)
    got = SF.family_columns(batch(rows), ["session"], 0)
    assert list(got["sig_session_position"]) == [0, 1, 0, 1]
    assert list(got["sig_session_clicks"]) == [0, 1, 0, 1]
    assert got["sig_session_age"] == pytest.approx([0, math.log1p(0.01), 0, math.log1p(0.01)])


def test_watch_family_by_hand():
    """Watch means shrunk to the user's own known mean: ratios capped at 2, a missing author
    takes the prior, nothing known gives 0."""
    rows = [dict(row_id=0, time_ms=0, watch_s=10.0, duration_s=20.0, duration_bucket=1, author_id=3),
            dict(row_id=1, time_ms=1000, watch_s=30.0, duration_s=10.0, duration_bucket=2, author_id=3),
            dict(row_id=2, time_ms=2000, watch_s=0.0, duration_s=5.0, duration_bucket=1, author_id=-1)]
    for r in rows:
        r.update(user_id=1, tab=0, is_click=0, long_view=0, e_tab=0.5, tag_id=1, music_id=1, hour=2)
    got = SF.family_columns(batch(rows), ["watch"], 0)
    w1, w2 = math.log1p(10.0), math.log1p(30.0)
    m = (w1 + w2) / 2  # row 2's prior; r = 0.5 and min(3, 2) = 2, mean 1.25
    assert list(got["sig_user_tab_last10_ratio"]) == pytest.approx([0.0, (0.5 + 2 * 0.5) / 3, (0.5 + 2 + 2 * 1.25) / 4])
    assert list(got["sig_user_dur_watch"]) == pytest.approx([0.0, w1, (w1 + 2 * m) / 3])
    assert list(got["sig_user_author_watch"]) == pytest.approx([0.0, w1, m])


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


def _read_all(examples_uri, extra, history_length):
    import glob
    import os

    import tensorflow as tf

    from components.log_example_gen import beam_pipeline as bp
    from components.log_example_gen import time_split
    from models import features as F

    spec = dict(F.raw_feature_spec(history_length), **{k: tf.io.FixedLenFeature([1], tf.float32) for k in extra})
    parts = []
    for split in time_split.SPLIT_NAMES:
        files = glob.glob(os.path.join(bp.split_uri(examples_uri, split), "data_tfrecord-*.gz"))
        for records in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(4096):
            parts.append({k: v.numpy() for k, v in tf.io.parse_example(records, spec).items()})
    out = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    key = np.lexsort((out["video_id"].reshape(-1), out["time_ms"].reshape(-1), out["user_id"].reshape(-1)))
    return {k: v[key].reshape(len(key), -1)[:, 0] if v.size == len(key) else v[key] for k, v in out.items()}


def test_the_component_writes_the_families_only_when_on_and_leaves_the_rest_unchanged(tmp_path):
    """A simulated log through LogExampleGen with signal_families="all": every default feature
    is what the run without families writes, and each family feature is the naive loop's
    value on the written rows (every day is in a split, so they are all the kept rows)."""
    from data.simulator import simulate
    from tests.components.log_example_gen.fixture_logs import run_component

    simulate(str(tmp_path / "input"), num_users=30, num_days=4, num_videos=25, seed=5)
    off, _, _ = run_component(str(tmp_path / "off"), str(tmp_path / "input"), history_length=5)
    on, _, _ = run_component(str(tmp_path / "on"), str(tmp_path / "input"), history_length=5,
                             signal_families="all")
    base, got = _read_all(off.uri, (), 5), _read_all(on.uri, SF.ALL_FEATURES, 5)
    assert len(base["user_id"]) > 200 and set(got) - set(base) == set(SF.ALL_FEATURES)
    for k, v in base.items():
        assert np.array_equal(got[k], v), k
    import tensorflow as tf

    with pytest.raises(tf.errors.InvalidArgumentError, match="sig_user_tab_last10_click"):  # off: none written
        _read_all(off.uri, SF.ALL_FEATURES[:1], 5)
    cols = {"user_id": "user_id", "time_ms": "time_ms", "tab": "tab", "is_click": "is_click",
            "long_view": "long_view", "watch_s": "watch_time_s", "e_tab": "sig_tab_ctr",
            "author_id": "author_id", "tag_id": "tag_id", "music_id": "music_id", "hour": "hour",
            "duration_s": "duration_s", "duration_bucket": "duration_bucket"}
    scalar = lambda v: v.item() if isinstance(v, np.generic) else v  # noqa: E731 (duration_bucket: bytes, a key)
    rows = [dict({c: scalar(got[f][k]) for c, f in cols.items()}, row_id=k) for k in range(len(got["user_id"]))]
    want = naive(rows, 300_000)
    for name in SF.ALL_FEATURES:  # float32 in the proto
        np.testing.assert_allclose(got[name], [w[name] for w in want], rtol=1e-6, atol=1e-6, err_msg=name)


def test_the_config_switch_round_trips_and_is_absent_when_off():
    from components.log_example_gen.config import LogExampleGenConfig
    from tests.components.log_example_gen.fixture_logs import make_config

    off = make_config()
    assert off.signal_families == () and "signal_families" not in off.to_component_args()
    assert "signal_families" not in off.to_custom_config()
    on = make_config(signal_families="session, in_tab")
    assert on.signal_families == ("in_tab", "session")
    assert on.to_component_args()["signal_families"] == "in_tab,session"
    assert on.to_custom_config()["signal_families"] == ["in_tab", "session"]
    assert LogExampleGenConfig.from_custom_config(on.to_custom_config()) == on
    assert LogExampleGenConfig.from_exec_properties(dict(on.to_component_args(), input_base="/x")) == on
    assert make_config(signal_families="all").signal_families == tuple(SF.FAMILIES)
    with pytest.raises(ValueError, match=r"signal_families: unknown signal families \['sesion'\]"):
        make_config(signal_families="sesion")
