"""LogExampleGen: parsing, leakage-free histories, time split, dead letters, TFX run."""
import glob
import json
import os
import random

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter

from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen import history as H
from components.log_example_gen import parsing as P
from components.log_example_gen import time_split as T
from models import features as F
from tests.conftest import KUAIRAND_DIR

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]

D1, D2, D3 = 20220425, 20220426, 20220427

USER_HEADER = ("user_id,user_active_degree,is_lowactive_period,is_live_streamer,is_video_author,"
               "follow_user_num,follow_user_num_range,fans_user_num,fans_user_num_range,"
               "friend_user_num,friend_user_num_range,register_days,register_days_range,"
               + ",".join(f"onehot_feat{i}" for i in range(18)))
USER_ROWS = [
    '1,full_active,0,-124,1,514,500+,150,"[100,1k)",34,"[30,60)",799,730+,'
    '1,1,29,949,1.0,0,0,14,135,6,3,0,0.0,1.0,0.0,0.0,0.0,0.0',
    '2,high_active,1,0,0,20,"(0,50]",3,"[1,10)",1,"[1,5)",30,"[0,60)",'
    '0,6,28,27,,0,0,19,378,3,3,0,,,,,,',
    '3,UNKNOWN,0,1,0,0,0,0,0,0,0,0,0,' + ",".join(["0"] * 18),
]
VIDEO_HEADER = ("video_id,author_id,video_type,upload_dt,upload_type,visible_status,video_duration,"
                "server_width,server_height,music_id,music_type,tag")
VIDEO_ROWS = [
    '10,100,NORMAL,2022-04-10,LongImport,0.0,87433.0,720.0,1280.0,555,9.0,"20,67"',
    "11,101,AD,2022-04-30,UNKNOWN,0.0,,720.0,1280.0,0,,",
    "12,102,NORMAL,,Web,0.0,30000.0,720.0,1280.0,777,9.0,6",
    "notanid,103,NORMAL,2022-04-10,Web,0.0,1.0,1.0,1.0,1,1.0,1",  # bad side row
]


def log_line(user, video, date, time_ms, *, hourmin=1230, is_click=1, play_time_ms=5000,
             duration_ms=10000, tab=1, is_like=0, long_view=0, **override):
    vals = dict(user_id=user, video_id=video, date=date, hourmin=hourmin, time_ms=time_ms,
                is_click=is_click, is_like=is_like, long_view=long_view,
                play_time_ms=play_time_ms, duration_ms=duration_ms, tab=tab)
    vals.update(override)
    return ",".join(str(vals.get(c, 0)) for c in P.LOG_COLUMNS)


# Good rows, named for the assertions: (user, video, date, time_ms, kwargs).
GOOD = {
    "a": (1, 10, D1, 1000, dict(play_time_ms=8000, is_click=1)),
    "b": (1, 11, D2, 2000, dict(play_time_ms=500, is_click=0, duration_ms=0)),
    "c": (1, 12, D2, 2000, dict(play_time_ms=3000, is_click=1)),
    "d": (1, 10, D3, 5000, dict(play_time_ms=12000, duration_ms=0, hourmin=2359, is_like=1)),
    "e": (2, 10, D2, 3000, dict()),
    "f": (2, 12, D3, 4000, dict()),
    "g": (3, 11, D3, 6000, dict(long_view=1)),
}
# Bad rows: (reason, line). Two sit in user 1's past (t=1500, 1800) and must not
# enter any history.
BAD = [
    ("malformed_row", "1,10,20220426"),
    ("malformed_row", '1,"10,20220426' + ",0" * 16),
    ("missing_field:play_time_ms", log_line(1, 10, D2, 1500, play_time_ms="")),
    ("non_numeric:time_ms", log_line(1, 10, D2, "abc")),
    ("negative:play_time_ms", log_line(1, 10, D2, 1600, play_time_ms=-5)),
    ("negative:duration_ms", log_line(1, 10, D2, 1600, duration_ms=-1)),
    ("negative:time_ms", log_line(1, 10, D2, -1600)),
    ("unknown_user_id", log_line(99, 10, D2, 1700)),
    ("unknown_video_id", log_line(1, 99, D2, 1800)),
    ("invalid_date:date", log_line(1, 10, 20221345, 1900)),
]


def good_line(name):
    user, video, date, t, kw = GOOD[name]
    return log_line(user, video, date, t, **kw)


def write_inputs(folder, with_bad=True):
    """Two log files (+ a blank line); returns {line text: (file, line number)}."""
    os.makedirs(folder, exist_ok=True)
    header = ",".join(P.LOG_COLUMNS)
    files = {
        "log_part1.csv": [good_line(n) for n in "abc"] + ([b for _, b in BAD[:5]] if with_bad else []),
        "log_part2.csv": [good_line(n) for n in "defg"] + ([b for _, b in BAD[5:]] if with_bad else []),
    }
    where = {}
    for name, lines in files.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(header + "\n")
            for i, line in enumerate(lines):
                f.write(line + "\n")
                where[line] = (path, i + 2)
            f.write("\n")  # trailing blank line: not a row
    with open(os.path.join(folder, "user_features_pure.csv"), "w") as f:
        f.write("\n".join([USER_HEADER] + USER_ROWS) + "\n")
    with open(os.path.join(folder, "video_features_basic_pure.csv"), "w") as f:
        f.write("\n".join([VIDEO_HEADER] + VIDEO_ROWS) + "\n")
    return where


def run_component(tmp, input_base, **params):
    """Runs the component function in-process (test_call); returns (counts, pipeline)."""
    from tfx.types import standard_artifacts

    from components.log_example_gen.artifacts import DeadLetterRows
    from components.log_example_gen.component import LogExampleGen

    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(tmp, "examples")
    dead_letter = DeadLetterRows()
    dead_letter.uri = os.path.join(tmp, "dead_letter")
    pipeline = beam.Pipeline(argv=BEAM_ARGS)
    LogExampleGen.test_call(examples=examples, dead_letter=dead_letter, input_base=input_base,
                            beam_pipeline=pipeline, **params)
    return examples, dead_letter, pipeline


def read_examples(split_dir, history_length):
    import tensorflow as tf

    files = glob.glob(os.path.join(split_dir, "data_tfrecord-*.gz"))
    assert files, f"no data_tfrecord-*.gz in {split_dir}"
    spec = F.raw_feature_spec(history_length)
    out = []
    for batch in tf.data.TFRecordDataset(files, compression_type="GZIP").batch(1024):
        parsed = {k: v.numpy() for k, v in tf.io.parse_example(batch, spec).items()}
        for i in range(len(batch)):
            out.append({k: v[i] if v.dtype == object else v[i].tolist() for k, v in parsed.items()})
    return out


def by_key(examples):
    return {(e["user_id"], e["video_id"], e["time_ms"]): e for e in examples}


def key_of(name):
    user, video, _, t, _ = GOOD[name]
    return user, video, t


# ---------------------------------------------------------------- pure: history

def brute_force_history(events, i, L, min_watch_s):
    earlier = [e for e in events if e.time_ms < events[i].time_ms and e.watch_time_s >= min_watch_s]
    # most recent first; ties keep reverse input order (later input = "more recent")
    recent = [e for _, e in sorted(enumerate(earlier), key=lambda x: (-x[1].time_ms, -x[0]))][:L]
    return recent


def test_history_matches_brute_force_with_ties_filter_and_truncation():
    rng = random.Random(0)
    for _ in range(200):
        n = rng.randint(0, 25)
        times = sorted(rng.randint(0, 15) * 1000 for _ in range(n))
        events = [H.HistoryEvent(t, rng.randint(1, 9), rng.randint(100, 109), rng.randint(0, 1),
                                 rng.choice([0.0, 0.5, 2.0, 7.5])) for t in times]
        L = rng.randint(1, 6)
        min_watch = rng.choice([0.0, 1.0, 5.0])
        hists = H.build_histories(events, L, min_watch)
        assert len(hists) == n
        for i, h in enumerate(hists):
            want = brute_force_history(events, i, L, min_watch)
            k = len(want)
            assert h.length == k
            assert h.video_id == [e.video_id for e in want] + [F.HISTORY_PAD_ID] * (L - k)
            assert h.author_id == [e.author_id for e in want] + [F.HISTORY_PAD_ID] * (L - k)
            assert h.is_click == [e.is_click for e in want] + [0] * (L - k)
            assert h.watch_time_s == [e.watch_time_s for e in want] + [0.0] * (L - k)
            assert h.time_gap_s == pytest.approx(
                [(events[i].time_ms - e.time_ms) / 1000 for e in want] + [0.0] * (L - k))
            # leakage: nothing at or after the impression time
            assert all(g > 0 for g in h.time_gap_s[:k])


def test_history_hand_computed_docstring_example():
    ev = [H.HistoryEvent(1000, 7, 70, 1, 3.0), H.HistoryEvent(2000, 8, 80, 0, 0.0),
          H.HistoryEvent(2000, 9, 90, 1, 9.0), H.HistoryEvent(5000, 4, 40, 0, 1.0)]
    h = H.build_histories(ev, 3)
    assert h[0] == H.empty_history(3)
    assert h[1].video_id == [7, -1, -1] and h[1].time_gap_s == [1.0, 0.0, 0.0] and h[1].length == 1
    assert h[2].video_id == [7, -1, -1]  # same-millisecond event 8 is not in 9's history
    assert h[3].video_id == [9, 8, 7] and h[3].author_id == [90, 80, 70]
    assert h[3].time_gap_s == [3.0, 3.0, 4.0] and h[3].is_click == [1, 0, 1]
    # truncation to L=2 keeps the most recent; min-watch 2 s drops event 8 (0 s)
    assert H.build_histories(ev, 2)[3].video_id == [9, 8]
    assert H.build_histories(ev, 3, min_watch_s=2.0)[3].video_id == [9, 7, -1]
    with pytest.raises(ValueError, match="sorted"):
        H.build_histories(list(reversed(ev)), 3)
    with pytest.raises(ValueError, match="history_length"):
        H.build_histories(ev, 0)


# ---------------------------------------------------------------- pure: parsing

def test_parse_log_line_reasons():
    for reason, line in BAD:
        if reason.startswith("unknown"):
            row = P.parse_log_line(line)
            assert isinstance(row, P.LogRow)
            assert P.join_reason(row, {1: {}}, {10: {}}) == reason
        else:
            assert P.parse_log_line(line) == P.BadRow(reason), line
    row = P.parse_log_line(good_line("d"))
    assert row == P.LogRow(user_id=1, video_id=10, date=D3, hourmin=2359, time_ms=5000,
                           is_click=1, is_like=1, long_view=0, play_time_ms=12000,
                           duration_ms=0, tab=1)
    assert P.parse_log_line(log_line(1, 10, D2, "7.0")).time_ms == 7  # "7.0" is an integer
    assert P.parse_log_line(log_line(1, 10, D2, "7.5")) == P.BadRow("non_numeric:time_ms")
    assert P.BadRow("negative:time_ms").kind == "negative"


def test_parse_side_rows():
    u_header = USER_HEADER.split(",")
    uid, u = P.parse_user_row(dict(zip(u_header, P.split_csv_line(USER_ROWS[1]))))
    assert uid == 2 and u["onehot_feat4"] == F.MISSING_ID and u["onehot_feat12"] == F.MISSING_ID
    assert u["onehot_feat1"] == 6 and u["register_days"] == 30.0
    uid, u = P.parse_user_row(dict(zip(u_header, P.split_csv_line(USER_ROWS[0]))))
    assert u["onehot_feat4"] == 1 and u["is_live_streamer"] == -124.0
    assert u["fans_user_num"] == 150.0 and u["user_active_degree"] == "full_active"
    v_header = VIDEO_HEADER.split(",")
    vid, v = P.parse_video_row(dict(zip(v_header, P.split_csv_line(VIDEO_ROWS[0]))))
    assert (vid, v["author_id"], v["tag_id"], v["music_id"]) == (10, 100, 20, 555)
    assert v["video_duration_s"] == pytest.approx(87.433)
    vid, v = P.parse_video_row(dict(zip(v_header, P.split_csv_line(VIDEO_ROWS[1]))))
    assert v["tag_id"] == F.MISSING_ID and v["video_duration_s"] == 0.0
    with pytest.raises(ValueError, match="non_numeric:video_id"):
        P.parse_video_row(dict(zip(v_header, P.split_csv_line(VIDEO_ROWS[3]))))


# ---------------------------------------------------------------- pure: time split

def test_time_split_rules():
    dates = [D3, D1, D2, D1]
    assert T.assign_splits(dates, [], [], 1) == {D1: "train", D2: "train", D3: "eval"}
    assert T.assign_splits(dates, [], [], 2) == {D1: "train", D2: "eval", D3: "eval"}
    assert T.assign_splits(dates, [D2], [D3], 2) == {D1: None, D2: "train", D3: "eval"}
    assert T.assign_splits(dates, [], [D3], 2) == {D1: "train", D2: "train", D3: "eval"}
    assert T.assign_splits(dates, [D1], [], 2) == {D1: "train", D2: "eval", D3: "eval"}
    # the last n train dates present in the logs become validation
    assert T.assign_splits(dates, [], [], 1, 1) == {D1: "train", D2: "validation", D3: "eval"}
    assert T.assign_splits(dates, [D1, D2, 20220430], [D3], 2, 1) == {D1: "train", D2: "validation", D3: "eval"}
    assert T.assign_splits(dates, [], [], 1, 2) == {D1: "validation", D2: "validation", D3: "eval"}
    assert T.parse_days(" 20220425,20220426 ,") == [D1, D2]
    with pytest.raises(ValueError, match="both"):
        T.assign_splits(dates, [D2], [D2], 1)
    with pytest.raises(ValueError, match="yyyymmdd"):
        T.parse_days("2022-04-25")
    with pytest.raises(ValueError, match="validation_last_n_days must be >= 0"):
        T.assign_splits(dates, [], [], 1, -1)


# ---------------------------------------------------------------- Beam run on fixtures

@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("leg"))
    where = write_inputs(os.path.join(tmp, "input"))
    examples, dead_letter, pipeline = run_component(
        tmp, os.path.join(tmp, "input"), history_length=3, train_days=f"{D2}",
        eval_days=f"{D3}", validation_last_n_days=0, max_bad_row_fraction=1.0)
    return dict(tmp=tmp, where=where, examples=examples, dead_letter=dead_letter,
                pipeline=pipeline, counts=bp.read_counts(dead_letter.uri))


def test_dead_letter_counts_and_counters_agree(fixture_run):
    counts, dl_uri = fixture_run["counts"], fixture_run["dead_letter"].uri
    rows = []
    for path in glob.glob(os.path.join(dl_uri, "bad_rows-*.jsonl")):
        rows += [json.loads(line) for line in open(path) if line.strip()]
    log_rows = [r for r in rows if r["table"] == "log"]
    assert sorted((r["reason"], r["raw"]) for r in log_rows) == sorted(BAD)
    for r in log_rows:  # source file and line number point at the raw line
        assert (r["source"], r["line"]) == fixture_run["where"][r["raw"]]
    side = [r for r in rows if r["table"] != "log"]
    assert [(r["table"], r["reason"], r["line"]) for r in side] == [("video", "non_numeric:video_id", 5)]

    expected_by_reason = {}
    for reason, _ in BAD:
        expected_by_reason[reason] = expected_by_reason.get(reason, 0) + 1
    assert counts["bad_rows_by_reason"] == expected_by_reason
    assert counts["bad_rows_by_kind"] == {"malformed_row": 2, "missing_field": 1, "non_numeric": 1,
                                          "negative": 3, "unknown_user_id": 1,
                                          "unknown_video_id": 1, "invalid_date": 1}
    assert counts["good_rows"] == len(GOOD) and counts["bad_rows"] == len(BAD)
    assert counts["total_rows"] == counts["good_rows"] + counts["bad_rows"] == 17
    assert counts["bad_row_fraction"] == pytest.approx(10 / 17)
    assert counts["splits"] == {"train": 3, "validation": 0, "eval": 3} and counts["history_only_rows"] == 1
    assert counts["split_dates"] == {"train": [D2], "validation": [], "eval": [D3], "history_only": [D1]}
    assert counts["bad_side_table_rows"] == {"video:non_numeric:video_id": 1}

    result = fixture_run["pipeline"].result
    counters = {m.key.metric.name: m.committed for m in result.metrics().query(
        MetricsFilter().with_namespace(bp.METRICS_NAMESPACE))["counters"]}
    assert counters["good_rows"] == 7 and counters["bad_rows"] == 10
    for kind, n in counts["bad_rows_by_kind"].items():
        assert counters[f"bad_rows_{kind}"] == n
    assert counters["examples_train"] == 3 and counters["examples_eval"] == 3
    assert counters["history_only_rows"] == 1 and counters["bad_video_rows"] == 1

    dl = fixture_run["dead_letter"]
    assert dl.get_int_custom_property("bad_rows") == 10
    assert dl.get_int_custom_property("good_rows") == 7


def test_examples_written_with_features_and_leakage_free_histories(fixture_run):
    from tfx.types import artifact_utils

    examples = fixture_run["examples"]
    assert artifact_utils.decode_split_names(examples.split_names) == ["train", "validation", "eval"]
    train = by_key(read_examples(bp.split_uri(examples.uri, "train"), 3))
    evals = by_key(read_examples(bp.split_uri(examples.uri, "eval"), 3))
    # nothing lost: every good row is train, eval or history-only (a)
    assert set(train) == {key_of(n) for n in "bce"}
    assert set(evals) == {key_of(n) for n in "dfg"}

    b, c, d = train[key_of("b")], train[key_of("c")], evals[key_of("d")]
    # b and c share a timestamp: each sees only a (a history-only day still feeds
    # histories; the bad rows at t=1500/1800 never do).
    for ex in (b, c):
        assert ex["hist_video_id"] == [10, -1, -1] and ex["hist_author_id"] == [100, -1, -1]
        assert ex["hist_is_click"] == [1, 0, 0] and ex["hist_len"] == 1
        assert ex["hist_watch_time_s"] == pytest.approx([8.0, 0, 0])
        assert ex["hist_time_gap_s"] == pytest.approx([1.0, 0, 0])
    # d: most recent first (c after b in the file), gaps from d's own time
    assert d["hist_video_id"] == [12, 11, 10] and d["hist_author_id"] == [102, 101, 100]
    assert d["hist_is_click"] == [1, 0, 1] and d["hist_len"] == 3
    assert d["hist_watch_time_s"] == pytest.approx([3.0, 0.5, 8.0])
    assert d["hist_time_gap_s"] == pytest.approx([3.0, 3.0, 4.0])
    # user 2's and 3's first impressions: empty histories
    assert train[key_of("e")]["hist_len"] == 0 and evals[key_of("g")]["hist_len"] == 0
    assert evals[key_of("f")]["hist_video_id"] == [10, -1, -1]

    # derived and joined features
    assert d["hour"] == 23 and d["duration_s"] == pytest.approx(87.433)  # log 0 -> video table
    assert d["video_age_days"] == 17.0 and d["watch_time_s"] == pytest.approx(12.0)
    assert d["is_like"] == 1 and d["date"] == D3 and d["time_ms"] == 5000
    assert d["tag_id"] == 20 and d["music_id"] == 555 and d["author_id"] == 100
    assert d["user_active_degree"] == b"full_active" and d["onehot_feat4"] == 1
    assert d["is_live_streamer"] == -124.0 and d["fans_user_num"] == 150.0
    assert b["duration_s"] == 0.0 and b["tag_id"] == -1 and b["video_type"] == b"AD"
    assert b["video_age_days"] == 0.0  # uploaded after the log date: clipped
    assert c["video_age_days"] == 0.0 and c["duration_s"] == 10.0  # no upload date
    assert train[key_of("e")]["onehot_feat4"] == F.MISSING_ID and b["is_click"] == 0
    assert evals[key_of("g")]["long_view"] == 1


def test_bad_fraction_above_bound_fails_with_clear_message(tmp_path):
    write_inputs(str(tmp_path / "input"))
    with pytest.raises(bp.BadRowFractionError) as err:
        run_component(str(tmp_path), str(tmp_path / "input"), history_length=3,
                      train_days=f"{D2}", eval_days=f"{D3}", validation_last_n_days=0,
                      max_bad_row_fraction=0.5)
    msg = str(err.value)
    assert "10 of 17" in msg and "0.5882" in msg and "max_bad_row_fraction 0.5" in msg
    assert str(tmp_path / "dead_letter") in msg


# ---------------------------------------------------------------- TFX LocalDagRunner

@pytest.mark.e2e
def test_component_under_local_dag_runner(tmp_path):
    from ml_metadata.proto import metadata_store_pb2  # noqa: F401
    from tfx import v1 as tfx
    from tfx.orchestration import metadata
    from tfx.types import artifact_utils

    from components.log_example_gen.component import LogExampleGen
    from pipeline import configs

    input_base = str(tmp_path / "input")
    write_inputs(input_base, with_bad=False)
    db = str(tmp_path / "metadata.db")
    gen = LogExampleGen(input_base=input_base, history_length=4, history_min_watch_s=1.0,
                        eval_last_n_days=1)
    pipe = tfx.dsl.Pipeline(
        pipeline_name="leg_test", pipeline_root=str(tmp_path / "root"), components=[gen],
        metadata_connection_config=tfx.orchestration.metadata.sqlite_metadata_connection_config(db),
        beam_pipeline_args=configs.BEAM_PIPELINE_ARGS)
    tfx.orchestration.LocalDagRunner().run(pipe)

    from components.log_example_gen.artifacts import DeadLetterRows

    with metadata.Metadata(tfx.orchestration.metadata.sqlite_metadata_connection_config(db)) as m:
        [art] = m.store.get_artifacts_by_type("Examples")
        [dl] = m.store.get_artifacts_by_type(DeadLetterRows.TYPE_NAME)
    assert artifact_utils.decode_split_names(art.properties["split_names"].string_value) == [
        "train", "validation", "eval"]
    assert dl.custom_properties["bad_rows"].int_value == 0
    # default split: eval = last day, validation = the last train day (configs)
    train = by_key(read_examples(os.path.join(art.uri, "Split-train"), 4))
    validation = by_key(read_examples(os.path.join(art.uri, "Split-validation"), 4))
    evals = by_key(read_examples(os.path.join(art.uri, "Split-eval"), 4))
    assert set(train) == {key_of("a")} and set(validation) == {key_of(n) for n in "bce"}
    assert set(evals) == {key_of(n) for n in "dfg"}
    # min watch 1 s: b (0.5 s) is left out of d's history
    d = evals[key_of("d")]
    assert d["hist_video_id"] == [12, 10, -1, -1] and d["hist_len"] == 2
    assert d["hist_time_gap_s"] == pytest.approx([3.0, 4.0, 0, 0])


# ---------------------------------------------------------------- real data smoke

@pytest.mark.skipif(not os.path.isdir(KUAIRAND_DIR),
                    reason=f"KuaiRand-Pure data not found at {KUAIRAND_DIR}")
def test_real_kuairand_subset(tmp_path):
    input_base = tmp_path / "input"
    input_base.mkdir()
    n_rows = 0
    for path in glob.glob(os.path.join(KUAIRAND_DIR, "log_*.csv")):
        with open(path) as src, open(input_base / os.path.basename(path), "w") as dst:
            for i, line in enumerate(src):
                if i >= 3000:
                    break
                dst.write(line)
                n_rows += i > 0
    for pattern in ("user_features*.csv", "video_features_basic*.csv"):
        for path in glob.glob(os.path.join(KUAIRAND_DIR, pattern)):
            os.symlink(path, input_base / os.path.basename(path))

    # the first 3000 lines of each file cover two dates: train and eval, no validation day
    examples, dead_letter, _ = run_component(str(tmp_path), str(input_base), eval_last_n_days=1,
                                             validation_last_n_days=0)
    counts = bp.read_counts(dead_letter.uri)
    assert counts["bad_rows"] == 0 and counts["total_rows"] == n_rows
    assert counts["splits"]["train"] + counts["splits"]["eval"] == n_rows
    L = 50  # configs.HISTORY_LENGTH
    exs = (read_examples(bp.split_uri(examples.uri, "train"), L)
           + read_examples(bp.split_uri(examples.uri, "eval"), L))
    assert len(exs) == n_rows
    assert any(e["hist_len"] > 0 for e in exs)
    for e in exs:
        k = e["hist_len"]
        assert all(g > 0 for g in e["hist_time_gap_s"][:k])
        assert e["hist_video_id"][k:] == [F.HISTORY_PAD_ID] * (L - k)
        assert e["duration_s"] >= 0 and e["watch_time_s"] >= 0
