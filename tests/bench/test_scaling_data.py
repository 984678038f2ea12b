"""bench/scaling_data.py: the log subsampler of the scaling bench's logs axis, the validation
alignment and the run cache's separation of the data axes (no TensorFlow, no training)."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from bench import scaling_data as D
from schemas.kuairand_format import LOG_COLUMNS

TRAIN_DAYS = (20220425, 20220426, 20220427)  # 20220427: the validation day
EVAL_DAYS = (20220428,)
KEEP = {20220427, 20220428}
FRACTIONS = (1 / 32, 1 / 8, 1 / 2)


def _row(user, video, date, time_ms, click):
    values = {"user_id": user, "video_id": video, "date": date, "hourmin": 1200, "time_ms": time_ms,
              "is_click": click, "long_view": 0, "play_time_ms": 1500 * click, "duration_ms": 9000, "tab": 1}
    return ",".join(str(values.get(c, 0)) for c in LOG_COLUMNS)


def _logs(tmp_path, n_per_day=1500):
    """Two log files (the days split across them) in the real column format + side tables."""
    rng = np.random.default_rng(3)
    logs = tmp_path / "logs"
    logs.mkdir()
    days = TRAIN_DAYS + EVAL_DAYS
    rows = {d: [_row(int(rng.integers(1, 300)), int(rng.integers(1, 900)), d, 1650800000000 + k * 86_400_000 + j * 997,
                     int(rng.integers(0, 2))) for j in range(n_per_day)] for k, d in enumerate(days)}
    header = ",".join(LOG_COLUMNS)
    (logs / "log_standard_a.csv").write_text("\n".join([header] + rows[days[0]] + rows[days[1]]) + "\n")
    (logs / "log_standard_b.csv").write_text("\r\n".join([header] + rows[days[2]] + rows[days[3]]) + "\r\n")
    (logs / "user_features_pure.csv").write_text("user_id,user_active_degree\n1,full_active\n")
    (logs / "video_features_basic_pure.csv").write_text("video_id,author_id\n1,7\n")
    (logs / "README.md").write_text("not a table\n")
    return logs, rows


def _lines(path):
    return path.read_bytes().splitlines(keepends=True)


def _subsample(logs, out):
    dirs = {f: str(out / f"logs_f{D.fraction_name(f)}") for f in FRACTIONS}
    return dirs, D.subsample_logs(str(logs), dirs, KEEP)


def test_subsampled_logs_nested_whole_days_share_and_tables(tmp_path):
    logs, rows = _logs(tmp_path)
    dirs, (stats, rewritten) = _subsample(logs, tmp_path / "work")
    assert rewritten == sorted(FRACTIONS)
    kept = {}
    for f, d in dirs.items():
        assert sorted(os.listdir(d)) == ["log_standard_a.csv", "log_standard_b.csv", "subsample.json",
                                         "user_features_pure.csv", "video_features_basic_pure.csv"]
        for side in ("user_features_pure.csv", "video_features_basic_pure.csv"):  # whole, unchanged
            assert open(os.path.join(d, side), "rb").read() == (logs / side).read_bytes()
        kept[f] = {}
        for name in ("log_standard_a.csv", "log_standard_b.csv"):
            src, out = _lines(logs / name), _lines(tmp_path / "work" / os.path.basename(d) / name)
            assert out[0] == src[0]  # header (and line ends) byte for byte
            assert set(out[1:]) <= set(src[1:])
            kept[f][name] = out[1:]
    for f in FRACTIONS:
        rows_f = [r.decode().rstrip("\r\n") for name in kept[f] for r in kept[f][name]]
        by_day = {d: [r for r in rows_f if r.split(",")[2] == str(d)] for d in rows}
        for d in KEEP:  # validation and eval days: every row, in file order
            assert by_day[d] == rows[d]
        thinned = sum(len(by_day[d]) for d in rows if d not in KEEP)
        total = sum(len(rows[d]) for d in rows if d not in KEEP)
        assert abs(thinned / total - f) < 3 * np.sqrt(f * (1 - f) / total) + 1e-9, (f, thinned / total)
        assert stats[f] == {"log_rows": 6000, "whole_day_rows": 3000, "thinned_day_rows": 3000,
                            "thinned_day_rows_kept": thinned}
    for small, large in zip(FRACTIONS, FRACTIONS[1:]):  # nested
        for name in kept[small]:
            assert set(kept[small][name]) <= set(kept[large][name])
        assert len(kept[small]["log_standard_a.csv"]) < len(kept[large]["log_standard_a.csv"])  # the thinned days'
        assert kept[small]["log_standard_b.csv"] == kept[large]["log_standard_b.csv"]  # validation + eval days


def test_subsample_is_deterministic_and_stamped(tmp_path):
    logs, _ = _logs(tmp_path, n_per_day=300)
    dirs, (first, _) = _subsample(logs, tmp_path / "one")
    again, (second, _) = _subsample(logs, tmp_path / "two")
    for f in FRACTIONS:
        for name in ("log_standard_a.csv", "log_standard_b.csv"):
            assert open(os.path.join(dirs[f], name), "rb").read() == open(os.path.join(again[f], name), "rb").read()
    assert first == second
    # a matching stamp: nothing rewritten; other keep days (or other source files): rewritten
    assert D.subsample_logs(str(logs), dirs, KEEP) == (first, [])
    assert D.subsample_logs(str(logs), {FRACTIONS[0]: dirs[FRACTIONS[0]]}, {20220428})[1] == [FRACTIONS[0]]
    stamp = json.load(open(os.path.join(dirs[FRACTIONS[0]], "subsample.json")))
    assert stamp["keep_whole_days"] == [20220428] and stamp["fraction"] == FRACTIONS[0]
    with open(logs / "log_standard_a.csv", "a") as fh:
        fh.write(_row(5, 5, 20220425, 1650800000001, 1) + "\n")
    assert D.subsample_logs(str(logs), dirs, KEEP)[1] == sorted(FRACTIONS)


def test_row_hash_and_unparsed_rows():
    u = D.row_hash([712, 712, 13414], [5239, 5239, 6831], [1650812741436, 1650812741436, 1650812934945])
    assert u[0] == u[1] != u[2] and np.all((0 <= u) & (u < 1))
    # ~uniform: the share below f over many keys
    n = 20000
    share = (D.row_hash(np.arange(n) % 97, np.arange(n) // 97, 1650800000000 + np.arange(n)) < 0.25).mean()
    assert abs(share - 0.25) < 0.015
    rows = [_row(1, 2, 20220425, 3, 1).encode() + b"\n", b"garbage,row\n", b'1,"2,x",20220425\n']
    got, date = D._keys(rows, [LOG_COLUMNS.index(c) for c in D.KEY_COLUMNS])
    assert got[0] == D.row_hash([1], [2], [3])[0] and date.tolist() == [20220425, -1, -1]
    assert 0 <= got[1] < 1 and got[1] == D._keys([b"garbage,row\r\n"], [0, 1, 4, 2])[0][0]  # by its text


def test_quoted_newline_is_one_record():
    import io

    text = b'h1,h2\n1,"a\nb"\n2,c\n'
    assert list(D._records(io.BytesIO(text))) == [b"h1,h2\n", b'1,"a\nb"\n', b"2,c\n"]


def test_validation_order_aligns_and_refuses_other_impressions():
    ref = {"user": np.array([3, 1, 2, 1]), "video": np.array([9, 8, 7, 8]), "time_ms": np.array([5, 6, 7, 6]),
           "click": np.array([[1.0], [0.0], [1.0], [1.0]]), "watch": np.array([[2.0], [0.0], [3.0], [4.0]])}
    perm = np.array([2, 0, 3, 1])
    shuffled = {k: v[perm] for k, v in ref.items()}
    index = D.validation_order(ref, shuffled)
    for k in ref:
        np.testing.assert_array_equal(shuffled[k][index], ref[k])
    other = dict(shuffled, time_ms=shuffled["time_ms"] + np.array([0, 0, 0, 1]))
    with pytest.raises(ValueError, match="validation day must be kept whole"):
        D.validation_order(ref, other)
    with pytest.raises(ValueError, match="validation"):
        D.validation_order(ref, {k: v[:3] for k, v in shuffled.items()})


def test_data_axis_env_and_cache_axis():
    assert D.data_axis_from_env({}) == "logs" and D.data_axis_from_env({"BENCH_SCALING_DATA_AXIS": "examples"}) == "examples"
    with pytest.raises(ValueError, match="BENCH_SCALING_DATA_AXIS"):
        D.data_axis_from_env({"BENCH_SCALING_DATA_AXIS": "rows"})
    assert D.cache_axis({"fraction": 0.5}) == "examples"  # cached before the field: the examples axis
    assert D.cache_axis({"fraction": 0.5, "data_axis": "logs"}) == "logs"
    assert D.cache_axis({"fraction": 1.0, "data_axis": "logs"}) == D.cache_axis({"fraction": 1.0}) == "full"


def test_run_cache_keeps_the_data_axes_apart(tmp_path):
    from bench.bench_scaling import RunCache

    labels = np.array([0.0, 1.0, 1.0])
    cache = RunCache(str(tmp_path), labels)
    old = {"ranker": "din", "axes": ["data"], "fraction": 0.25, "size": 1.0, "embedding_dim": 16, "seed": 0,
           "lr_multiplier": 1.0, "batch_size": 256, "max_epochs": 3, "signals": [], "val_logloss": 0.6}
    cache.put(dict(old), np.array([0.5, 0.6, 0.7]))  # a run cached before the data axis existed
    full = dict(old, fraction=1.0, data_axis="examples", val_logloss=0.55)
    cache.put(full, np.array([0.4, 0.5, 0.6]))
    cache = RunCache(str(tmp_path), labels)  # reloaded from BENCH_WORK
    run = {k: old[k] for k in ("ranker", "axes", "fraction", "size", "embedding_dim")}
    args = (1.0, 0, 256, 3)
    assert cache.get(run, *args, data_axis="logs") is None
    hit = cache.get(run, *args, data_axis="examples")
    assert hit[0]["val_logloss"] == 0.6 and hit[0]["cached"]
    assert cache.get(run, *args) is not None  # the default: the examples axis
    # full data: the same run in both modes
    assert cache.get(dict(run, fraction=1.0), *args, data_axis="logs")[0]["val_logloss"] == 0.55
    cache.put(dict(old, data_axis="logs", val_logloss=0.65), np.array([0.6, 0.6, 0.7]))
    assert cache.get(run, *args, data_axis="logs")[0]["val_logloss"] == 0.65
    assert cache.get(run, *args, data_axis="examples")[0]["val_logloss"] == 0.6
    assert cache.get(run, *args, signals=["sig_tab_ctr"], data_axis="logs") is None


def test_run_order_logs_axis_is_fraction_major():
    from bench.bench_scaling import DEFAULT, run_order

    seed_major = run_order(["din"], DEFAULT, 16, "examples")
    logs = run_order(["din"], DEFAULT, 16, "logs")
    assert sorted(map(repr, seed_major)) == sorted(map(repr, logs)) and len(logs) == 13 + 6 + 6
    fractions = [r["fraction"] for _, r in logs]
    assert fractions == sorted(fractions, reverse=True)  # each fraction's logs loaded once, full data first
    assert [s for s, r in logs if r["fraction"] == 1 / 32] == [0, 1, 2]
    assert [s for s, _ in seed_major] == sorted(s for s, _ in seed_major)


def test_fraction_data_loads_thinned_logs_one_fraction_at_a_time(tmp_path, monkeypatch):
    """FractionData's wiring with a stand-in for the pipeline (load_data): the logs axis loads
    BENCH_WORK/logs_f<f>/ into pipeline_f<f>/, trains on all its rows and scores the full
    logs' validation impressions in their order; the examples axis takes prefixes of one order."""
    logs, _ = _logs(tmp_path, n_per_day=200)
    work = tmp_path / "work"
    calls = []
    val_keys = {"user": np.arange(5), "video": np.arange(5) + 10, "time_ms": np.arange(5) * 7,
                "click": np.array([[1.0], [0.0], [1.0], [0.0], [1.0]]), "watch": np.ones((5, 1))}

    def fake_load(logs_dir, work_dir, train_days, eval_days):
        calls.append((os.path.basename(logs_dir), os.path.basename(work_dir)))
        n = sum(len(_lines(p)) - 1 for p in Path(logs_dir).glob("log_*.csv"))
        perm = np.random.default_rng(len(calls)).permutation(5)  # another row order per pipeline run
        vy = {"click_prob": val_keys["click"][perm], "watch_time_s": val_keys["watch"][perm]}
        vx = {"x": np.arange(5)[perm]}
        info = {"validation_days": [20220427], "train_examples": n, "logs": logs_dir}
        keys = {k: v[perm] for k, v in val_keys.items()}
        return (({"x": np.arange(n)}, {"click_prob": np.zeros((n, 1))}), (vx, vy), np.arange(n)[::-1]), {}, info, keys

    monkeypatch.setattr(D, "load_data", fake_load)
    data = D.FractionData("logs", str(logs), str(work), list(TRAIN_DAYS), list(EVAL_DAYS), FRACTIONS + (1.0,))
    (train, (vx, vy)), rows, _ = data(1.0)
    assert calls == [("logs", "work")] and rows.size == 800
    full_x, full_click = vx["x"].copy(), vy["click_prob"].copy()
    (train, (vx, vy)), rows, _ = data(1 / 8)
    assert calls[-1] == ("logs_f0.125", "pipeline_f0.125")
    assert sorted(os.listdir(work)) == ["logs_f0.03125", "logs_f0.125", "logs_f0.5"]  # one pass writes all
    np.testing.assert_array_equal(rows, np.arange(train[1]["click_prob"].shape[0]))
    assert 400 < rows.size < 400 + 400 * 0.125 * 2  # the two whole days + ~1/8 of the other two
    np.testing.assert_array_equal(vx["x"], full_x)  # the full logs' validation order
    np.testing.assert_array_equal(vy["click_prob"], full_click)
    assert not np.array_equal(full_x, np.random.default_rng(2).permutation(5))  # it was reordered
    assert data.fraction_info["0.125"]["train_examples"] == rows.size
    data(1 / 8)
    assert len(calls) == 2  # still in memory
    (work / "pipeline_f0.5").mkdir()
    (work / "pipeline_f0.5" / "bench_days.json").write_text("{}")
    data(1 / 2)
    assert (work / "pipeline_f0.5" / "bench_days.json").exists()  # logs unchanged: the pipeline cache stays
    assert data.fraction_info["0.03125"]["log_rows"] == 800 and "train_examples" not in data.fraction_info["0.03125"]
    (work / "pipeline_f0.03125").mkdir()
    (work / "pipeline_f0.03125" / "bench_days.json").write_text("{}")
    with open(logs / "log_standard_a.csv", "a") as fh:  # the source logs changed since
        fh.write(_row(5, 5, 20220425, 1650800000001, 1) + "\n")
    data(1 / 32)
    assert not (work / "pipeline_f0.03125" / "bench_days.json").exists()  # rethinned: the pipeline reruns
    assert data.fraction_info["0.03125"]["log_rows"] == 801

    ex = D.FractionData("examples", str(logs), str(work), list(TRAIN_DAYS), list(EVAL_DAYS), FRACTIONS + (1.0,))
    n = len(calls)
    (train, _), rows, _ = ex(1 / 8)
    assert len(calls) == n and rows.size == round(801 / 8)  # 801 rows since the one added
    np.testing.assert_array_equal(rows, np.arange(801 - 100, 801))  # the first 100 of the order (801 - 1 .. 0)
