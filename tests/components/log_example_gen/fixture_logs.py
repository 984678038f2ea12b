"""Hand-written KuaiRand-format fixture logs shared by the LogExampleGen tests:
named good rows, bad rows with their expected reasons, writers and readers."""
import glob
import os

from components.log_example_gen import parsing as P
from models import features as F

BEAM_ARGS = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]

D1, D2, D3 = 20220425, 20220426, 20220427


def at(date, t_ms):
    """time_ms of a row dated `date`: noon UTC+8 of that day + t_ms (consistent with the date)."""
    from components.log_example_gen.row_rules import day_start_ms

    return day_start_ms(date) + 12 * 3_600_000 + t_ms

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


# Good rows, named for the assertions: (user, video, date, time_ms, kwargs). Rows b, c
# (D2) are 1 day + 1 s after a (D1); d (D3) 1 day + 3 s after them.
GOOD = {
    "a": (1, 10, D1, at(D1, 1000), dict(play_time_ms=8000, is_click=1)),
    "b": (1, 11, D2, at(D2, 2000), dict(play_time_ms=500, is_click=0, duration_ms=0)),
    "c": (1, 12, D2, at(D2, 2000), dict(play_time_ms=3000, is_click=1)),
    "d": (1, 10, D3, at(D3, 5000), dict(play_time_ms=12000, duration_ms=0, hourmin=2359, is_like=1)),
    "e": (2, 10, D2, at(D2, 3000), dict()),
    "f": (2, 12, D3, at(D3, 4000), dict()),
    "g": (3, 11, D3, at(D3, 6000), dict(long_view=1)),
}
DAY_S = 86_400.0
# Bad rows: (reason, line). Several sit in user 1's past (D2 before b, c) and must not
# enter any history.
BAD = [
    ("malformed_row", "1,10,20220426"),
    ("malformed_row", '1,"10,20220426"' + ",0" * 16),
    ("missing_field:play_time_ms", log_line(1, 10, D2, at(D2, 1500), play_time_ms="")),
    ("non_numeric:time_ms", log_line(1, 10, D2, "abc")),
    ("negative:play_time_ms", log_line(1, 10, D2, at(D2, 1600), play_time_ms=-5)),
    ("negative:duration_ms", log_line(1, 10, D2, at(D2, 1600), duration_ms=-1)),
    ("negative:time_ms", log_line(1, 10, D2, -1600)),
    ("unknown_user_id", log_line(99, 10, D2, at(D2, 1700))),
    ("unknown_video_id", log_line(1, 99, D2, at(D2, 1800))),
    ("invalid_date:date", log_line(1, 10, 20221345, at(D2, 1900))),
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


# Knob values for tests that do not care about a knob (they mirror pipeline/configs/
# at the time of writing; a test states every knob it asserts on).
KNOBS = dict(history_length=50, history_min_watch_s=0.0, train_days=(), eval_days=(),
             eval_last_n_days=2, validation_last_n_days=1, max_bad_row_fraction=0.01,
             duplicate_rule="drop", date_window=(), max_date_gap_days=2, out_of_window_rule="dead_letter",
             date_time_tolerance_s=3 * 3600.0, max_play_time_ms=86_400_000, max_duration_ms=86_400_000,
             read_range_bytes=4 << 20, label_delay_s=300.0, signal_prior_ctr=0.3)


def make_config(**overrides):
    from components.log_example_gen.config import LogExampleGenConfig

    return LogExampleGenConfig(**{**KNOBS, **overrides})


def run_component(tmp, input_base, beam_args=BEAM_ARGS, **knobs):
    """Runs the executor in-process on a fresh Beam pipeline; returns
    (examples, dead_letter, pipeline) — pipeline.result holds the Beam counters."""
    import apache_beam as beam
    from tfx.types import standard_artifacts

    from components.log_example_gen.artifacts import DeadLetterRows
    from components.log_example_gen.executor import run_log_example_gen

    examples = standard_artifacts.Examples()
    examples.uri = os.path.join(tmp, "examples")
    dead_letter = DeadLetterRows()
    dead_letter.uri = os.path.join(tmp, "dead_letter")
    pipeline = beam.Pipeline(argv=beam_args)
    run_log_example_gen(pipeline, input_base, make_config(**knobs), examples, dead_letter)
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
