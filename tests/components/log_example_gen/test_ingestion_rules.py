"""Pure parts of the ingestion rules: splittable reads (exact at any range size), the
date window, the value rules, strict integers and the duplicate rules."""
import os
import random

import pytest

from components.log_example_gen import date_window as W
from components.log_example_gen import parsing as P
from components.log_example_gen import reading as R
from components.log_example_gen import row_rules as RR
from components.log_example_gen import user_examples as UE
from tests.components.log_example_gen.fixture_logs import D2, at, log_line


def test_byte_ranges_read_every_record_once_at_any_range_size(tmp_path):
    rng = random.Random(0)
    path = str(tmp_path / "f.csv")
    for _ in range(150):
        lines = ["a,b,c"]
        for i in range(rng.randint(0, 12)):
            k = rng.random()
            lines.append(f'{i},"x\ny",{i}' if k < 0.15 else f'{i},"q""z",{i}' if k < 0.2 else
                         "" if k < 0.25 else f"{i},{i * 2},{i * 3}")
        if rng.random() < 0.1:
            lines.append('9,"open,9')
        body = "\n".join(lines) + ("\n" if rng.random() < 0.7 else "")
        with open(path, "w") as f:
            f.write(body)
        size = os.path.getsize(path)
        whole = list(R.read_whole(path, size))
        for rb in (1, 2, 3, 7, 16, 1000):
            ranges = R.plan_ranges([(path, size)], rb)
            starts = R.range_starts([R.count_range(r) for r in ranges])
            assert [rec for r in ranges for rec in R.read_range(r, starts[(r.path, r.start)])] == whole
        for rec in whole:  # offsets and line numbers point at the record
            assert body[rec.offset:].startswith(rec.text)
            assert body.count("\n", 0, rec.offset) + 1 == rec.line
            assert rec.problem == ("unterminated_quote" if rec.text.startswith('9,"open') else
                                   "quoted_newline" if "\n" in rec.text else None)


def test_date_window_hand_computed():
    counts = {20220425: 900, 20220426: 950, 20220428: 10, 20991231: 1, 19700102: 5}
    assert W.infer_window(counts, 1) == [20220425, 20220426]
    assert W.infer_window(counts, 2) == [20220425, 20220426, 20220428]
    assert W.infer_window(counts, 2, configured=[20220426]) == [20220426]
    assert W.outside(counts, [20220425, 20220426]) == {19700102: 5, 20220428: 10, 20991231: 1}
    assert W.infer_window({}, 1) == [] and W.infer_window({20220101: 1, 20220301: 1}, 1) == [20220301]


def test_value_rules_and_date_time_tolerance():
    assert RR.day_start_ms(20220425) == 1650816000000  # 2022-04-25 00:00 UTC+8
    rules = RR.RowRules(max_play_time_ms=1000, max_duration_ms=2000, date_time_tolerance_ms=3_600_000)
    ok = P.parse_log_line(log_line(1, 10, D2, at(D2, 0), play_time_ms=1000, duration_ms=2000, hourmin=2359))
    assert RR.check_values(ok, rules) is None
    start = RR.day_start_ms(D2)
    for t, want in [(start - 3_600_000, None), (start - 3_600_001, "date_time_mismatch:date"),
                    (start + 86_400_000 + 3_599_999, None), (start + 86_400_000 + 3_600_000,
                                                             "date_time_mismatch:date")]:
        assert RR.check_values(ok._replace(time_ms=t), rules) == want, t
    assert RR.check_values(ok._replace(play_time_ms=1001), rules) == "out_of_range:play_time_ms"
    assert RR.check_values(ok._replace(hourmin=2360), rules) == "out_of_range:hourmin"
    assert RR.check_values(ok._replace(video_id=-3), rules) == "negative:video_id"


@pytest.mark.parametrize("text,value", [("12", 12), ("-3", -3), ("+4", 4), ("1.0", 1), ("007", 7),
                                        ("1_0", None), ("\uff11\uff10", None), ("1e1", None), ("inf", None),
                                        ("nan", None), ("0x1a", None), ("7.5", None), ("1 0", None), ("", None)])
def test_strict_integers(text, value):
    if value is None:
        with pytest.raises(ValueError):
            P.to_int(text)
    else:
        assert P.to_int(text) == value


def _good(name, t, video=10, text=None):
    row = P.parse_log_line(log_line(1, video, D2, t))
    return UE.GoodRow(t, "f.csv", name, 2, row, text or log_line(1, video, D2, t))


@pytest.mark.parametrize("rule,tags", [("drop", ["dropped"] + ["validation"] * 3),
                                       ("dead_letter", ["bad"] + ["validation"] * 3),
                                       ("keep", ["validation"] * 4)])
def test_duplicate_rules(rule, tags):
    t = at(D2, 0)
    rows = [_good(0, t), _good(1, t, text=" " + log_line(1, 10, D2, t)), _good(2, t, video=11), _good(3, t + 1)]
    videos = {10: {"author_id": 1, "music_id": 1, "tag_id": 1, "video_type": "", "upload_type": "",
                   "upload_ordinal": None, "video_duration_s": 1.0}}
    videos[11] = dict(videos[10])
    user = {"user_active_degree": "", **{k: 0.0 for k in P.USER_NUMERIC_FEATURES},
            **{k: 0 for k in P.USER_ONEHOT_FEATURES}}
    out = list(UE.build_user_examples(rows, user, videos, [D2], {D2: "validation"}, rule, 3, 0.0))
    assert sorted(tag for tag, _ in out) == sorted(tags)
    if rule == "dead_letter":
        assert [p[0] for tag, p in out if tag == "bad"] == ["duplicate_row"]
