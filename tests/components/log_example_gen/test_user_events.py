"""LogExampleGen's user events (#38, components/log_example_gen/user_events.py): the
lifelong history against a naive loop, the side output of a real run against the
examples' own histories (the first history_length events of each impression's long
history are its hist_* features) and against the kept rows, and off by default."""
import os

import numpy as np
import pytest

from components.log_example_gen import user_events as E
from components.log_example_gen.config import LogExampleGenConfig
from components.log_example_gen.executor import USER_EVENTS_PROPERTY
from models import features as F
from tests.components.log_example_gen.fixture_logs import KNOBS, read_examples, run_component


def naive_long_history(events, t, length):
    out = {k: [] for k in events}
    for j in range(len(events["time_ms"]) - 1, -1, -1):  # events in history order: latest last
        if events["time_ms"][j] < t and len(out["time_ms"]) < length:
            for k in events:
                out[k].append(events[k][j])
    out["time_gap_s"] = [(t - x) / 1000.0 for x in out["time_ms"]]
    return out


def test_long_history_equals_a_naive_loop():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(0, 40))
        events = {"time_ms": np.sort(rng.integers(0, 30, n)) * 1000, "video_id": rng.integers(0, 99, n),
                  "watch_time_s": rng.random(n).astype(np.float32)}
        for t in (-1, 0, 5000, 14_000, 29_000, 31_000):
            for length in (1, 3, 50):
                got, want = E.long_history(events, t, length), naive_long_history(events, t, length)
                assert set(got) == set(want)
                for k in want:
                    assert got[k].tolist() == pytest.approx(want[k]), (k, t, length)
    with pytest.raises(ValueError, match="length"):
        E.long_history(events, 0, 0)


@pytest.fixture(scope="module")
def events_run(tmp_path_factory):
    from data.simulator import simulate

    tmp = tmp_path_factory.mktemp("user_events")
    simulate(str(tmp / "input"), num_users=40, num_videos=30, num_days=4, seed=11)
    examples, dead_letter, pipeline = run_component(str(tmp), str(tmp / "input"), history_length=5,
                                                    history_min_watch_s=2.0, user_events=True)
    rows = [dict(e, split=s) for s in ("train", "validation", "eval")
            for e in read_examples(os.path.join(examples.uri, f"Split-{s}"), 5)]
    return examples, dead_letter, pipeline, rows


def test_the_examples_histories_are_the_first_events_of_the_long_history(events_run):
    examples, _, _, rows = events_run
    assert examples.get_string_custom_property(USER_EVENTS_PROPERTY) == E.DIR
    events = E.read(examples.uri)
    assert len(rows) > 300 and set(events) == {r["user_id"] for r in rows if r["watch_time_s"] >= 2.0}
    for r in rows:
        n = r[F.HISTORY_LEN_FEATURE]
        long = E.long_history(events[r["user_id"]], r["time_ms"], 5) if r["user_id"] in events else None
        assert (0 if long is None else len(long["time_ms"])) == n
        for name in ("video_id", "author_id", "is_click", "tab", "watch_time_s", "time_gap_s"):
            want = r[f"hist_{name}"][:n]
            got = [] if long is None else long[name].tolist()
            assert got == pytest.approx(want, rel=1e-6), name


def test_the_user_events_are_the_kept_rows_watched_long_enough(events_run):
    examples, dead_letter, _, rows = events_run
    assert dead_letter.get_int_custom_property("history_only_rows") == 0  # every kept row is an example
    events = E.read(examples.uri)
    for user in {r["user_id"] for r in rows}:
        want = sorted((r["time_ms"], r["video_id"], r["author_id"], r["tab"], r["is_click"],
                       round(r["watch_time_s"], 3)) for r in rows if r["user_id"] == user
                      and r["watch_time_s"] >= 2.0)
        ev = events.get(user)
        got = [] if ev is None else [(int(t), int(v), int(a), int(tab), int(c), round(float(w), 3)) for
                                     t, v, a, tab, c, w in zip(*(ev[k] for k in E.COLUMNS))]
        assert np.all(np.diff([g[0] for g in got]) >= 0)  # history order: by time
        assert sorted(got) == want, user


def test_a_long_history_reaches_past_the_examples_50(events_run):
    examples, _, _, rows = events_run
    events = E.read(examples.uri)
    last = max(rows, key=lambda r: len(events.get(r["user_id"], {"time_ms": []})["time_ms"]))
    long = E.long_history(events[last["user_id"]], 1 << 62, 10_000)
    assert len(long["time_ms"]) > 5 and np.all(np.diff(long["time_ms"]) <= 0)


def test_off_by_default_and_a_clear_error_when_read(tmp_path):
    from data.simulator import simulate

    simulate(str(tmp_path / "input"), num_users=10, num_videos=10, num_days=4, seed=3)
    examples, _, _ = run_component(str(tmp_path), str(tmp_path / "input"), history_length=5)
    assert not os.path.exists(E.events_uri(examples.uri))
    assert not examples.has_custom_property(USER_EVENTS_PROPERTY)
    with pytest.raises(ValueError, match="user_events was off"):
        E.read(examples.uri)


def test_config_keeps_the_default_cache_key_and_round_trips():
    off = LogExampleGenConfig(**KNOBS)
    assert "user_events" not in off.to_custom_config() and "user_events" not in off.to_component_args()
    on = LogExampleGenConfig(**KNOBS, user_events=True)
    assert on.to_component_args()["user_events"] == 1
    assert LogExampleGenConfig.from_exec_properties(on.to_component_args()) == on
    assert LogExampleGenConfig.from_custom_config(on.to_custom_config()) == on
    with pytest.raises(ValueError, match="user_events must be a bool"):
        LogExampleGenConfig(**KNOBS, user_events=2)


def test_lifelong_histories_go_through_log_example_gen(tmp_path):
    """The lifelong simulation (data/simulator/lifelong.py) written as logs: at each
    user's request, the long history from the user events is the simulated history and
    the candidates' hist_* features are its last 5 events."""
    from data.simulator.lifelong import LifelongParams, simulate_lifelong, write_logs

    data = simulate_lifelong(12, seed=3, params=LifelongParams(num_videos=400, num_topics=20, history_length=120,
                                                               candidates=4))
    paths = write_logs(data, str(tmp_path / "input"))
    examples, _, _ = run_component(str(tmp_path), str(tmp_path / "input"), history_length=5, user_events=True)
    events = E.read(examples.uri)
    assert sorted(events) == list(range(12))
    for u in range(12):
        n = int(data.history_length[u])
        long = E.long_history(events[u], paths["request_ms"], 120)
        assert long["video_id"][::-1].tolist() == data.history[u, 120 - n:].tolist()
    eval_rows = [r for r in read_examples(os.path.join(examples.uri, "Split-eval"), 5)
                 if r["time_ms"] == paths["request_ms"]]
    # a candidate drawn twice with the same label is an exact duplicate row: dropped (duplicate_rule)
    assert len(eval_rows) == len({(u, v, y) for u in range(12) for v, y in zip(data.candidates[u], data.labels[u])})
    for r in eval_rows:
        u = r["user_id"]
        assert r["hist_video_id"] == data.history[u, -5:][::-1].tolist()
        assert r["video_id"] in data.candidates[u].tolist()
