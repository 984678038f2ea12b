"""The batched (columnar) LogExampleGen against its per-row reference: the columnar passes
against the brute-force signals, the columnar histories against history.build_histories,
and the whole Beam run against the per-row path (the pure functions user_examples.py,
signals.py and parsing.py wired as the Beam pipeline wired them before batching) on the
fixture logs and a small simulated log: the same examples feature by feature, the same
dead letters (reason, file, line, offset, raw text) and the same counts."""
import collections
import glob
import json
import os
import random

import numpy as np
import pytest

from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen import columns as C
from components.log_example_gen import (date_window, example_batches, history, parsing, reading, row_rules,
                                        signal_columns)
from components.log_example_gen import signals as S
from components.log_example_gen import time_split, user_batches
from components.log_example_gen import user_examples as UE
from models import features as F
from tests.components.log_example_gen.fixture_logs import D2, D3, make_config, run_component, write_inputs
from tests.components.log_example_gen.test_signals import brute_force, random_log


@pytest.mark.parametrize("delay_ms", [0, 250, 2000])
def test_columnar_passes_match_brute_force(delay_ms):
    for seed in range(3):
        rows = random_log(80, seed)
        expected, live = brute_force(rows, delay_ms)
        idx = [i for i in range(len(rows)) if live[i]]
        b = {"row_id": np.array(idx, dtype=np.int64)}
        for col, name in [("t", "time_ms"), ("user", "user_id"), ("video", "video_id"), ("tab", "tab"),
                          ("y", "is_click"), ("author", "author_id"), ("music", "music_id"), ("tag", "tag_id"),
                          ("hour", "hour")]:
            b[name] = np.array([rows[i][col] for i in idx], dtype=np.int64)
        b["duration_bucket"] = np.array([["<15s", "15-30s"].index(rows[i]["bucket"]) for i in idx])
        b["watch_s"] = np.array([rows[i]["watch"] for i in idx])
        b["duration_s"] = np.array([rows[i]["dur"] for i in idx])
        for k in ("e_tab", "w_tab", "r_tab", "tab_hour_ctr"):
            b[k] = np.zeros(len(idx))
        for _, part in C.split_by(dict(b, pos=np.arange(len(idx))), b["tab"]):
            for k, v in signal_columns.tab_pass(part, delay_ms, 0.3).items():
                b[k][part["pos"]] = v
        got = {"sig_tab_ctr": b["e_tab"], "sig_tab_hour_ctr": b["tab_hour_ctr"]}
        for family in S.ENTITY_SIGNALS:  # as signals_beam.py groups them: only the columns the pass reads
            got.update(signal_columns.entity_pass(family, {k: b[k] for k in signal_columns.entity_columns(family)},
                                                  delay_ms))
        got.update(signal_columns.user_pass(b["user_id"], b, delay_ms))
        got["sig_propensity"] = signal_columns.propensity(got["sig_tab_ctr"], got["sig_user_coec"],
                                                          got["sig_video_coec"])
        assert set(got) == set(F.SIGNAL_FEATURES)
        for name in F.SIGNAL_FEATURES:
            want = [expected[i][name] for i in idx]
            assert got[name] == pytest.approx(want, rel=1e-9, abs=1e-12), name


def test_tab_block_width_follows_the_busiest_day():
    """W = max(1, floor(B * 24 / max rows a day)) hours."""
    from components.log_example_gen.signals_beam import HOUR_MS, tab_block_ms

    assert tab_block_ms([("20220425", 17_000), ("20220426", 20_000)], max_rows=50_000) == 60 * HOUR_MS
    assert tab_block_ms([(1, 100_000)], max_rows=50_000) == 12 * HOUR_MS
    assert tab_block_ms([(1, 10 ** 8)], max_rows=50_000) == HOUR_MS  # never below an hour
    assert tab_block_ms([], max_rows=50_000) == HOUR_MS


@pytest.mark.parametrize("w", [3_600_000, 7 * 3_600_000])
@pytest.mark.parametrize("delay_ms", [0, 1_000, 5_400_000])  # none, inside a block, past the next block
def test_time_blocked_tab_pass_equals_the_whole_tab_pass(delay_ms, w):
    """signals_beam's tab pass by time blocks of width w (side input: the sums before each
    block) gives signal_columns.tab_pass over the whole tab, ties and block edges included."""
    from components.log_example_gen import signals_beam as SB

    rng = np.random.default_rng(7)
    n = 3000
    times = rng.integers(0, 6 * w, n)
    times[:40] = w * rng.integers(1, 5, 40)  # rows exactly on block edges
    times[40:80] = times[80:120] + delay_ms  # rows whose t - D equals another row's t (a tie: excluded)
    b = {"time_ms": times.astype(np.int64), "row_id": np.arange(n, dtype=np.int64),
         "is_click": rng.integers(0, 2, n), "watch_s": rng.exponential(10.0, n),
         "duration_s": rng.uniform(1.0, 60.0, n), "pos": np.arange(n)}
    b["hour"] = rng.integers(0, 24, n)  # the hour of day, independent of the blocks
    want = signal_columns.tab_pass(b, delay_ms, 0.3)
    groups, sums = {}, []
    for key, value in SB._tab_blocks((5, b), delay_ms, w):
        groups.setdefault(key, []).append(value)
        sums += list(SB._block_sums((key, value)))
    assert len({k for k, _ in sums}) == len(sums)  # one event part per block
    before = SB._SumsBefore([(k, SB._add_sums([s])) for k, s in sums])
    got = {k: np.full(n, np.nan) for k in want}
    for (tab, block), values in groups.items():
        events = C.concat([p for kind, p in values if kind == SB._EVENT])
        queries = C.concat([p for kind, p in values if kind == SB._QUERY])
        if C.length(queries):
            for k, v in signal_columns.tab_block_pass(events, queries, before.before(tab, block), delay_ms,
                                                      0.3).items():
                got[k][queries["pos"]] = v
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12, atol=1e-12, err_msg=k)
    assert len(groups) > 5


@pytest.mark.parametrize("min_watch_s", [0.0, 5.0])
def test_columnar_histories_match_build_histories(min_watch_s):
    rng = random.Random(5)
    rows = [dict(user=rng.choice([1, 2, 3]), t=rng.randrange(0, 30) * 100, video=rng.randrange(50),
                 y=rng.randint(0, 1), play=rng.randrange(0, 10_000), tab=rng.randrange(3)) for _ in range(200)]
    b = {"row_id": np.arange(len(rows), dtype=np.int64)}
    for col, name in [("user", "user_id"), ("t", "time_ms"), ("video", "video_id"), ("y", "is_click"),
                      ("play", "play_time_ms"), ("tab", "tab")]:
        b[name] = np.array([r[col] for r in rows], dtype=np.int64)
    b = C.take(b, C.sort_rows(b["user_id"], b["time_ms"], b["row_id"]))
    got = user_batches.histories(b, b["video_id"] + 1000, 4, min_watch_s)
    for user in (1, 2, 3):
        pos = np.flatnonzero(b["user_id"] == user)
        events = [history.HistoryEvent(int(b["time_ms"][k]), int(b["video_id"][k]), int(b["video_id"][k]) + 1000,
                                       int(b["is_click"][k]), b["play_time_ms"][k] / 1000.0, int(b["tab"][k]))
                  for k in pos]
        for k, h in zip(pos, history.build_histories(events, 4, min_watch_s)):
            assert got["length"][k] == h.length
            for name in user_batches.HISTORY_COLUMNS:
                assert got[name][k].tolist() == getattr(h, name), (name, k)


# ---------------------------------------------------------------- Beam run vs the per-row path

def reference_signal_row(g, videos):
    """GoodRow + video table -> signals.SignalRow (the per-row path's signal row)."""
    r, video = g.row, videos[g.row.video_id]
    duration_s = parsing.duration_s(r, video)
    return S.SignalRow(key=(g.source, g.offset), user_id=r.user_id, time_ms=r.time_ms, is_click=r.is_click,
                       tab=r.tab, video_id=r.video_id, author_id=video["author_id"], music_id=video["music_id"],
                       tag_id=video["tag_id"], duration_bucket=F.duration_bucket(duration_s),
                       duplicate_key=g.duplicate_key(), watch_s=r.play_time_ms / 1000.0, duration_s=duration_s,
                       hour=r.hourmin // 100)


def per_row_reference(input_dir, cfg):
    """The per-row path: every record parsed and checked alone, signals by the sequential
    passes per tab and per entity key, examples by user_examples.build_user_examples."""
    def side(pattern, parse_fn):
        out = {}
        for path in sorted(glob.glob(os.path.join(input_dir, pattern))):
            header = reading.read_header(path)
            for rec in reading.read_whole(path, os.path.getsize(path)):
                fields = parsing.split_csv_line(rec.text)
                try:
                    row_id, feats = parse_fn(dict(zip(header, fields)))
                except (ValueError, TypeError):
                    continue
                out[row_id] = feats
        return out
    users, videos = side("user_features*.csv", parsing.parse_user_row), side("video_features*.csv",
                                                                           parsing.parse_video_row)
    good, bad = [], []
    for path in sorted(glob.glob(os.path.join(input_dir, "log_*.csv"))):
        header = reading.read_header(path)
        for rec in reading.read_whole(path, os.path.getsize(path)):
            row = None if rec.problem else parsing.parse_log_line(rec.text, header)
            reason = rec.problem or (row.reason if isinstance(row, parsing.BadRow) else (
                row_rules.check_values(row, cfg.row_rules()) or parsing.join_reason(row, users, videos)))
            if reason:
                bad.append((reason, path, rec.line, rec.offset, rec.text))
            else:
                good.append(UE.GoodRow(row.time_ms, rec.path, rec.offset, rec.line, row, rec.text))
    dates = collections.Counter(g.row.date for g in good)
    window = date_window.infer_window(dict(dates), cfg.max_date_gap_days, list(cfg.date_window))
    split_of_date = time_split.assign_splits([d for d in dates if d in set(window)], list(cfg.train_days),
                                             list(cfg.eval_days), cfg.eval_last_n_days, cfg.validation_last_n_days)
    delay = int(round(cfg.label_delay_s * 1000))
    srows = [reference_signal_row(g, videos) for g in good if g.row.date in window]
    per_row = collections.defaultdict(dict)
    by_tab = collections.defaultdict(list)
    for r in srows:
        by_tab[r.tab].append(r)
    known = [k for rows in by_tab.values() for k in S.tab_pass(rows, delay, cfg.signal_prior_ctr, cfg.duplicate_rule)]
    for k in known:
        per_row[k.row.key].update(sig_tab_ctr=k.e_tab, sig_tab_hour_ctr=k.tab_hour_ctr)
    for key_fn, stats in S.ENTITY_SIGNALS.values():
        groups = collections.defaultdict(list)
        for k in known:
            groups[key_fn(k.row)].append(k)
        for recs in groups.values():
            for k, v in zip(recs, S.entity_pass(recs, delay, stats)):
                per_row[k.row.key].update(v)
    by_user = collections.defaultdict(list)
    for g in good:
        by_user[g.row.user_id].append(g)
    examples, dropped, history_only = collections.defaultdict(list), 0, 0
    for user_id, rows in by_user.items():
        for tag, payload in UE.build_user_examples(
                rows, users[user_id], videos, window, split_of_date, cfg.duplicate_rule, cfg.history_length,
                cfg.history_min_watch_s, span=cfg.span_window(), row_signals=per_row, label_delay_ms=delay):
            if tag == UE.BAD:
                reason, g = payload
                bad.append((reason, g.source, g.line, g.offset, g.text))
            elif tag == UE.DROPPED:
                dropped += 1
            elif tag == UE.HISTORY_ONLY:
                history_only += 1
            else:
                examples[tag].append(payload)
    return examples, bad, dropped, history_only


def _parse(serialized, history_length):
    import tensorflow as tf

    spec = F.raw_feature_spec(history_length)
    parsed = {k: v.numpy() for k, v in tf.io.parse_example(tf.constant(serialized), spec).items()}
    key = np.lexsort((parsed["video_id"][:, 0] if parsed["video_id"].ndim > 1 else parsed["video_id"],
                      np.reshape(parsed["time_ms"], -1), np.reshape(parsed["user_id"], -1)))
    return {k: v[key] for k, v in parsed.items()}


def _written(split_dir):
    import tensorflow as tf

    files = glob.glob(os.path.join(split_dir, "data_tfrecord-*.gz"))
    return [r.numpy() for r in tf.data.TFRecordDataset(files, compression_type="GZIP")]


def _compare(tmp, input_dir, **knobs):
    knobs = dict(max_bad_row_fraction=1.0, **knobs)
    cfg = make_config(**knobs)
    ref_examples, ref_bad, ref_dropped, ref_history_only = per_row_reference(input_dir, cfg)
    examples, dead_letter, _ = run_component(tmp, input_dir, **knobs)
    for split in time_split.SPLIT_NAMES:
        got = _written(bp.split_uri(examples.uri, split))
        assert len(got) == len(ref_examples[split]), split
        if not got:
            continue
        a, b = _parse(got, cfg.history_length), _parse(ref_examples[split], cfg.history_length)
        assert set(a) == set(b)
        for name in a:
            if a[name].dtype.kind == "f":  # float32 in the proto: sums may differ in the last bits
                np.testing.assert_allclose(a[name], b[name], rtol=2e-6, atol=1e-7, err_msg=name)
            else:
                assert np.array_equal(a[name], b[name]), name
    rows = []
    for path in glob.glob(os.path.join(dead_letter.uri, "bad_rows-*.jsonl")):
        rows += [json.loads(line) for line in open(path) if line.strip()]
    got_bad = sorted((r["reason"], r["source"], r["line"], r["offset"], r["raw"]) for r in rows if r["table"] == "log")
    assert got_bad == sorted(ref_bad)
    counts = bp.read_counts(dead_letter.uri)
    assert counts["bad_rows_by_reason"] == dict(collections.Counter(r[0] for r in ref_bad))
    assert counts["dropped_rows_by_rule"] == ({UE.DUPLICATE_ROW: ref_dropped} if ref_dropped else {})
    assert counts["history_only_rows"] == ref_history_only
    assert counts["splits"] == {s: len(ref_examples[s]) for s in time_split.SPLIT_NAMES}
    return counts


def test_batched_run_equals_the_per_row_path_on_the_fixture(tmp_path):
    write_inputs(str(tmp_path / "input"))
    counts = _compare(str(tmp_path), str(tmp_path / "input"), history_length=3, train_days=f"{D2}",
                      eval_days=f"{D3}", validation_last_n_days=0)
    assert counts["bad_rows"] == 10 and sum(counts["splits"].values()) == 6


@pytest.mark.parametrize("rule", ["drop", "dead_letter"])
def test_batched_run_equals_the_per_row_path_on_a_simulated_log(tmp_path, rule):
    from data.simulator import simulate

    paths = simulate(str(tmp_path / "input"), num_users=40, num_videos=30, num_days=4, seed=11)
    with open(paths["log"]) as f:  # an exact duplicate and a row from another day
        lines = f.read().splitlines()
    with open(paths["log"], "a") as f:
        stray = lines[9].split(",")
        stray[lines[0].split(",").index("date")] = "20991231"
        f.write(lines[5] + "\n" + ",".join(stray) + "\n")
    counts = _compare(str(tmp_path), str(tmp_path / "input"), history_length=5, duplicate_rule=rule)
    assert counts["good_rows"] > 300 and counts["bad_rows_by_reason"].get("date_time_mismatch:date") == 1
    copies = counts["dropped_rows"] if rule == "drop" else counts["bad_rows_by_reason"]["duplicate_row"]
    assert copies >= 1


def test_signal_rows_match_the_per_row_signal_row():
    row = parsing.LogRow(7, 10, 20220425, 1230, 5000, 1, 0, 1, 2500, 0, 3)
    video = {"author_id": 100, "music_id": 5, "tag_id": 9, "video_duration_s": 47.0}
    rows = {f: np.array([getattr(row, f)], dtype=np.int64) for f in parsing.USED_LOG_FIELDS}
    rows["row_id"] = np.array([12])
    cols = example_batches.signal_rows(rows, {k: np.array([v]) for k, v in video.items()})
    ref = reference_signal_row(UE.GoodRow(5000, "f", 12, 2, row, "x"), {10: video})
    assert cols["duration_s"][0] == ref.duration_s and cols["watch_s"][0] == ref.watch_s
    assert example_batches._BUCKET_LABELS[cols["duration_bucket"][0]] == ref.duration_bucket
