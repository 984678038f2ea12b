"""Fuzz: a log folder with >= 30 kinds of bad rows and files (issue #12's six cases
included). Row by row, each bad row is dead-lettered with its expected reason (file and
line) or handled by its documented rule, the good rows' examples are identical to a
run on the good rows alone, and good + bad + dropped == total.

The good-rows run uses 2 workers (``multi_threading``: no shared mutable state between
bundles). Both runs go through Beam's FnApiRunner, which pickles every DoFn and side
input; 2 worker *processes* (``multi_processing``) cost ~100 s here on a loaded machine
(every worker imports TF), so they are exercised by bench/bench_ingestion.py, which
checks that 1 and 2 worker processes give the same counts on the real logs."""
import glob
import json
import os

import pytest

from components.log_example_gen import beam_pipeline as bp
from components.log_example_gen import counts as counts_lib
from components.log_example_gen import parsing as P
from tests.components.log_example_gen.fixture_logs import (D1, D2, D3, GOOD, USER_HEADER, USER_ROWS, VIDEO_HEADER,
                                                           VIDEO_ROWS, at, by_key, good_line, log_line,
                                                           read_examples, run_component)

L = 3
HEADER = ",".join(P.LOG_COLUMNS)
# 12:00 UTC+8 on 2099-12-31 and 1970-01-02: dates consistent with time_ms, far outside the logs
T_2099, T_1970 = at(20991231, 0), at(19700102, 0)
USER4_A = "4,full_active,0,0,0,1,1,1,1,1,1,1,1," + ",".join(["0"] * 18)
USER4_B = "4,high_active,0,0,0,1,1,1,1,1,1,1,1," + ",".join(["0"] * 18)

# (expected reason, line) in log_rows.csv; all are user 1 or 2 rows placed before the
# good rows in time where that matters, so a leak would change a good row's history.
BAD_ROWS = [
    ("malformed_row", "1,10,20220426"),
    ("malformed_row", log_line(1, 10, D2, at(D2, 10)) + ",0"),
    ("malformed_row", '1,"10,20220426"' + ",0" * 16),
    ("missing_field:user_id", log_line("", 10, D2, at(D2, 11))),
    ("missing_field:play_time_ms", log_line(1, 10, D2, at(D2, 12), play_time_ms="")),
    ("non_numeric:user_id", log_line("abc", 10, D2, at(D2, 13))),
    ("non_numeric:user_id", log_line("1_0", 10, D2, at(D2, 14))),
    ("non_numeric:user_id", log_line("\uff11\uff10", 10, D2, at(D2, 15))),  # full-width 10
    ("non_numeric:user_id", log_line("1e1", 10, D2, at(D2, 16))),
    ("non_numeric:time_ms", log_line(1, 10, D2, "7.5")),
    ("non_numeric:video_id", log_line(1, "inf", D2, at(D2, 17))),
    ("non_numeric:time_ms", log_line(1, 10, D2, "0x1a")),
    ("negative:play_time_ms", log_line(1, 10, D2, at(D2, 18), play_time_ms=-5)),
    ("negative:duration_ms", log_line(1, 10, D2, at(D2, 19), duration_ms=-1)),
    ("negative:time_ms", log_line(1, 10, D2, -1600)),
    ("negative:user_id", log_line(-1, 10, D2, at(D2, 20))),
    ("negative:tab", log_line(1, 10, D2, at(D2, 21), tab=-2)),
    ("out_of_range:is_click", log_line(1, 10, D2, at(D2, 22), is_click=2)),
    ("out_of_range:is_click", log_line(1, 10, D2, at(D2, 23), is_click=-1)),
    ("out_of_range:is_click", log_line(1, 10, D2, at(D2, 24), is_click=7)),
    ("out_of_range:is_like", log_line(1, 10, D2, at(D2, 25), is_like=3)),
    ("out_of_range:long_view", log_line(1, 10, D2, at(D2, 26), long_view=2)),
    ("out_of_range:hourmin", log_line(1, 10, D2, at(D2, 27), hourmin=2500)),
    ("out_of_range:hourmin", log_line(1, 10, D2, at(D2, 28), hourmin=-100)),
    ("out_of_range:hourmin", log_line(1, 10, D2, at(D2, 29), hourmin=1261)),
    ("out_of_range:play_time_ms", log_line(1, 10, D2, at(D2, 30), play_time_ms=10 ** 15)),
    ("out_of_range:duration_ms", log_line(1, 10, D2, at(D2, 31), duration_ms=10 ** 15)),
    ("invalid_date:date", log_line(1, 10, 20221345, at(D2, 32))),
    # dated on the eval day D3, stamped on D1: would enter the histories of b, c (D2)
    ("date_time_mismatch:date", log_line(1, 11, D3, at(D1, 500))),
    ("out_of_window:date", log_line(1, 12, 20991231, T_2099)),  # would become the eval day
    ("out_of_window:date", log_line(2, 12, 19700102, T_1970)),  # would enter e's history
    ("unknown_user_id", log_line(99, 10, D2, at(D2, 33))),
    ("unknown_video_id", log_line(1, 99, D2, at(D2, 34))),
    ("ambiguous_user_id", log_line(4, 10, D2, at(D2, 35))),  # user 4 listed twice, differently
    ("quoted_newline", log_line(1, '"10\n"', D2, at(D2, 36))),  # one row over two lines
    ("invalid_utf8", log_line(1, 10, D2, at(D2, 37), tab="1\udcff")),
]


def _write(path, text, encoding="utf-8", errors="strict"):
    with open(path, "wb") as f:
        f.write(text.encode(encoding, errors))


def write_good_only(folder):
    os.makedirs(folder, exist_ok=True)
    _write(os.path.join(folder, "log_good.csv"), "\n".join([HEADER] + [good_line(n) for n in GOOD]) + "\n")
    _write(os.path.join(folder, "user_features_pure.csv"), "\n".join([USER_HEADER] + USER_ROWS) + "\n")
    _write(os.path.join(folder, "video_features_basic_pure.csv"), "\n".join([VIDEO_HEADER] + VIDEO_ROWS) + "\n")


def write_fuzz(folder):
    """Returns {raw text: (file, line)} of the bad rows and the number of rows written."""
    os.makedirs(folder, exist_ok=True)
    where, n_rows = {}, 0
    # rows: a, b, c, e among the bad rows (blank lines, a duplicate of e and a
    # whitespace-padded duplicate of a: dropped by the duplicate rule)
    lines = [HEADER, good_line("a"), ""]
    for reason, text in BAD_ROWS[:20]:
        lines.append(text)
    lines += [good_line("b"), good_line("c"), good_line("e"), good_line("e"),
              " " + good_line("a").replace(",", " , ")]
    lines += [text for _, text in BAD_ROWS[20:]]
    body = "\n".join(lines) + "\n\n"
    path = os.path.join(folder, "log_rows.csv")
    _write(path, body, errors="surrogateescape")
    line_no = 1
    for text in lines[1:]:
        line_no += 1
        if text in dict((t, r) for r, t in BAD_ROWS):
            where[text] = (path, line_no)
        line_no += text.count("\n")
        n_rows += bool(text.strip())
    # d: header with a byte-order mark and the columns in another order, CRLF line ends
    cols = list(reversed(P.LOG_COLUMNS))
    vals = dict(zip(P.LOG_COLUMNS, P.split_csv_line(good_line("d"))))
    _write(os.path.join(folder, "log_bom_reordered.csv"),
           "\ufeff" + ",".join(cols) + "\r\n" + ",".join(vals[c] for c in cols) + "\r\n")
    n_rows += 1
    # f, g: no trailing newline; then an unterminated quote running to the end of the file
    tail = log_line(2, '"12', D3, at(D3, 9000))
    _write(os.path.join(folder, "log_tail.csv"),
           "\n".join([HEADER, good_line("f"), good_line("g"), tail, log_line(2, 10, D3, at(D3, 9500))]))
    where[tail + "\n" + log_line(2, 10, D3, at(D3, 9500))] = (os.path.join(folder, "log_tail.csv"), 4)
    n_rows += 3
    _write(os.path.join(folder, "log_empty.csv"), "")  # 0 bytes: listed in empty_files
    _write(os.path.join(folder, "log_header_only.csv"), HEADER + "\n")
    _write(os.path.join(folder, "user_features_pure.csv"),
           "\n".join([USER_HEADER] + USER_ROWS + [USER_ROWS[0], USER4_A, USER4_B]) + "\n")
    _write(os.path.join(folder, "video_features_basic_pure.csv"),
           "\ufeff" + "\n".join([VIDEO_HEADER] + VIDEO_ROWS) + "\n")
    return where, n_rows


KNOBS = dict(history_length=L, train_days=(), eval_days=(), eval_last_n_days=1, validation_last_n_days=1,
             max_bad_row_fraction=1.0, read_range_bytes=97)  # small ranges: records cross range ends


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("fuzz"))
    where, n_rows = write_fuzz(os.path.join(tmp, "fuzz"))
    ex, dl, _ = run_component(os.path.join(tmp, "out_fuzz"), os.path.join(tmp, "fuzz"), **KNOBS)
    write_good_only(os.path.join(tmp, "good"))
    ex_good, dl_good, _ = run_component(
        os.path.join(tmp, "out_good"), os.path.join(tmp, "good"),
        beam_args=["--direct_running_mode=multi_threading", "--direct_num_workers=2"], **KNOBS)
    return dict(where=where, n_rows=n_rows, examples=ex, dead_letter=dl, examples_good=ex_good,
                counts=bp.read_counts(dl.uri), counts_good=bp.read_counts(dl_good.uri))


def _dead_letters(uri):
    rows = []
    for path in glob.glob(os.path.join(uri, "bad_rows-*.jsonl")):
        rows += [json.loads(line) for line in open(path) if line.strip()]
    return rows


def test_at_least_30_kinds_of_bad_rows_and_files():
    kinds = {text for _, text in BAD_ROWS}
    file_kinds = ["unterminated_quote", "empty file", "header-only file", "BOM + reordered header + CRLF",
                  "no trailing newline", "blank lines", "exact duplicate", "padded duplicate",
                  "identical duplicate user", "conflicting duplicate user", "BOM video table"]
    assert len(kinds) + len(file_kinds) >= 30 and len(kinds) == len(BAD_ROWS)


def test_every_bad_row_is_dead_lettered_with_its_reason_file_and_line(runs):
    log_rows = [r for r in _dead_letters(runs["dead_letter"].uri) if r["table"] == "log"]
    got = {r["raw"]: r for r in log_rows}
    assert len(got) == len(log_rows)
    expected = {text: reason for reason, text in BAD_ROWS}
    expected[max(runs["where"], key=lambda t: t.count(log_line(2, 10, D3, at(D3, 9500))))] = "unterminated_quote"
    assert {raw: r["reason"] for raw, r in got.items()} == {
        raw.replace("\udcff", "\ufffd"): reason for raw, reason in expected.items()}
    for raw, (path, line) in runs["where"].items():
        r = got[raw.replace("\udcff", "\ufffd")]
        assert (r["source"], r["line"]) == (path, line), raw
    side = sorted((r["table"], r["reason"], r["line"]) for r in _dead_letters(runs["dead_letter"].uri)
                  if r["table"] != "log")
    assert side == [("user", "duplicate_id:user_id", 6), ("user", "duplicate_id:user_id", 7),
                    ("video", "non_numeric:video_id", 5)]
    # an ambiguous id's copies carry their own text (read again from the table file)
    assert sorted(r["raw"] for r in _dead_letters(runs["dead_letter"].uri)
                  if r["reason"] == "duplicate_id:user_id") == sorted([USER4_A, USER4_B])


def test_good_rows_unchanged_and_every_row_accounted_for(runs):
    c = runs["counts"]
    assert c["total_rows"] == c["rows_read"] == runs["n_rows"]
    assert c["good_rows"] + c["bad_rows"] + c["dropped_rows"] == c["total_rows"]
    assert c["good_rows"] == len(GOOD) and c["bad_rows"] == len(BAD_ROWS) + 1
    assert c["dropped_rows_by_rule"] == {"duplicate_row": 2}
    assert c["dropped_side_table_rows"] == {"user:duplicate_id": 1}
    assert c["out_of_window_dates"] == {"19700102": 1, "20991231": 1} and c["date_window"] == [D1, D2, D3]
    assert c["split_dates"] == {"train": [D1], "validation": [D2], "eval": [D3], "history_only": []}
    assert [os.path.basename(p) for p in c["empty_files"]] == ["log_empty.csv"]
    assert c["splits"] == runs["counts_good"]["splits"] == {"train": 1, "validation": 3, "eval": 3}
    for split in ("train", "validation", "eval"):
        fuzz = by_key(read_examples(bp.split_uri(runs["examples"].uri, split), L))
        good = by_key(read_examples(bp.split_uri(runs["examples_good"].uri, split), L))
        assert fuzz.keys() == good.keys() and fuzz == good, split
    evals = by_key(read_examples(bp.split_uri(runs["examples"].uri, "eval"), L))
    assert evals[(2, 12, GOOD["f"][3])]["hist_video_id"] == [10, -1, -1]  # e once, no 1970 row


def test_bounds_and_rules_fail_the_run_with_clear_messages(runs):
    c, uri = runs["counts"], runs["dead_letter"].uri
    with pytest.raises(bp.BadRowFractionError, match=r"37 of 46 log rows are bad .*max_bad_row_fraction 0.5"):
        bp.check_bad_row_fraction(c, 0.5, uri)
    with pytest.raises(counts_lib.OutOfWindowError, match=r"2 log rows .*'19700102': 1, '20991231': 1"):
        counts_lib.check_window(c, "error", uri)
    counts_lib.check_window(c, "dead_letter", uri)
    assert counts_lib.check_totals(c) == []


def test_whole_file_errors_name_the_file(tmp_path):
    for name, text, match in [
            ("log_a.csv", "user,video\n1,2\n", r"log_a.csv' lacks columns \['user_id'"),
            ("log_b.csv", HEADER + ",user_id\n", r"log_b.csv' repeats columns \['user_id'\]"),
            ("log_c.csv", "\n1,2\n", "log_c.csv' has no CSV header line")]:
        path = str(tmp_path / name)
        _write(path, text)
        with pytest.raises(ValueError, match=match):
            bp.log_headers([(path, os.path.getsize(path))])
    path = str(tmp_path / "log_d.csv")
    with open(path, "wb") as f:
        f.write(b"\xff\xfeu\x00s\x00\n")
    with pytest.raises(ValueError, match="log_d.csv' is not UTF-8"):
        bp.log_headers([(path, 6)])
    bom = str(tmp_path / "log_e.csv")
    _write(bom, "\ufeff" + HEADER + "\n")
    assert bp.log_headers([(bom, os.path.getsize(bom))])[bom][0] == "user_id"
