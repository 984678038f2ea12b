"""LogExampleGen's pure parts: leakage-free histories, row parsing, time split."""
import random

import pytest

from components.log_example_gen import history as H
from components.log_example_gen import parsing as P
from components.log_example_gen import time_split as T
from models import features as F
from tests.components.log_example_gen.fixture_logs import (BAD, D1, D2, D3, at, USER_HEADER, USER_ROWS,
                                                           VIDEO_HEADER, VIDEO_ROWS, good_line, log_line)


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
    assert row == P.LogRow(user_id=1, video_id=10, date=D3, hourmin=2359, time_ms=at(D3, 5000),
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


def test_parse_days_lists_and_inclusive_ranges():
    assert T.parse_days("20220430-20220502") == [20220430, 20220501, 20220502]  # across a month end
    assert T.parse_days("20220425-20220427, 20220504") == [D1, D2, D3, 20220504]
    assert T.parse_days("20220504 , 20220425 - 20220426") == [20220504, D1, D2]  # written order
    assert T.parse_days("20220425-20220425") == [D1]
    assert T.parse_days("20240228-20240301") == [20240228, 20240229, 20240301]  # leap year
    assert T.parse_days("20230228-20230301") == [20230228, 20230301]
    assert T.parse_days("20211231-20220101") == [20211231, 20220101]
    assert len(T.parse_days("20220425-20220502")) == 8  # bench/bench_rankers.py's default train days
    assert T.parse_days("") == [] and T.parse_days(None) == [] and T.parse_days(" , ") == []
    assert T.format_days([D1, D3]) == "20220425,20220427"
    assert T.parse_days(T.format_days([D3, D1])) == [D3, D1]
    assert T.check_day(20240229) == 20240229


@pytest.mark.parametrize("text,match", [
    ("2022-04-25", "yyyymmdd"),
    ("abc", "yyyymmdd"),
    ("2022042", "yyyymmdd"),
    ("202204250", "yyyymmdd"),
    ("20220425-", "yyyymmdd"),
    ("20220425-20220426-20220427", "yyyymmdd"),
    ("20221345", "'20221345' in '20221345' is not a calendar date"),
    ("20230229", "not a calendar date"),
    ("20220425-20220431", "'20220431' in '20220425-20220431' is not a calendar date"),
    ("20220502-20220430", "empty day range '20220502-20220430'"),
    ("20220425,20220425", "day 20220425 is listed twice"),
    ("20220425-20220427,20220426", "day 20220426 is listed twice"),
])
def test_parse_days_refuses_bad_text_naming_the_token(text, match):
    with pytest.raises(ValueError, match=match):
        T.parse_days(text)


def test_parse_days_empty_refused_on_request_and_check_day_types():
    with pytest.raises(ValueError, match="no days in ' '"):
        T.parse_days(" ", allow_empty=False)
    assert T.parse_days("20220425", allow_empty=False) == [D1]
    for bad in (20220230, True, "20220425", 20220425.0):
        with pytest.raises(ValueError, match="yyyymmdd"):
            T.check_day(bad)
