"""Beam wiring of LogExampleGen: logs -> validated, joined, historied, split tf.Examples.

::

  log_*.csv ──read (file, line)──► ParseAndJoin ──bad──► dead-letter JSON lines
                                    │ good (user side tables as side inputs)
                                    ▼
                         GroupByKey(user_id) ──► BuildExamples (sort by time,
                                    │             history.build_histories,
                                    │             time_split.assign_splits)
                                    ▼
         Split-train / Split-validation / Split-eval gzipped TFRecords (+ history-only count)

The math lives in parsing.py, history.py and time_split.py; this module only wires
it. The files to read come resolved (inputs.resolve_inputs: span, fingerprint). Every
log row ends up in exactly one of: dead-letter (bad), train, validation, eval, or
history-only, and ``counts.json`` (next to the dead-letter rows) records each
number, so ``good + bad == total`` and ``good == train + validation + eval + history_only``.

Files are read whole, one file per worker (so each dead-letter row can name its
line number); a Reshuffle then spreads the parsing.
"""
import json
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from components.log_example_gen import history as history_lib
from components.log_example_gen import parsing
from components.log_example_gen import time_split
from components.log_example_gen.config import LogExampleGenConfig
from components.log_example_gen.inputs import LOG, USER, VIDEO, ResolvedInputs

METRICS_NAMESPACE = "log_example_gen"
EXAMPLES_FILE_PREFIX = "data_tfrecord"  # TFX ExampleGen's file names
DEAD_LETTER_FILE_PREFIX = "bad_rows"
COUNTS_FILE = "counts.json"

_BAD = "bad"
_HISTORY_ONLY = "history_only"


class BadRowFractionError(ValueError):
    """Too many bad log rows: the run must not publish its examples."""


# ------------------------------------------------------------------ file reading

def read_numbered_lines(path: str) -> Iterator[Tuple[str, int, str]]:
    """(path, 1-based line number, text without line end) for every line of a file."""
    with FileSystems.open(path) as f:
        line_no = 0
        while True:
            raw = f.readline()
            if not raw:
                return
            line_no += 1
            yield path, line_no, raw.decode("utf-8", errors="replace").rstrip("\r\n")


def read_header(path: str) -> List[str]:
    for _, _, text in read_numbered_lines(path):
        fields = parsing.split_csv_line(text)
        if not fields:
            break
        return [f.strip() for f in fields]
    raise ValueError(f"LogExampleGen: {path!r} has no CSV header line")


def _data_lines(path: str) -> Iterator[Tuple[str, int, str]]:
    """Lines after the header; blank lines are not rows and are skipped."""
    for source, line_no, text in read_numbered_lines(path):
        if line_no > 1 and text.strip():
            yield source, line_no, text


class ReadNumberedLines(beam.PTransform):
    """Files -> PCollection of (path, line number, text) for every data line."""

    def __init__(self, paths: Sequence[str]):
        super().__init__()
        self._paths = list(paths)

    def expand(self, pbegin):
        return (pbegin
                | "Files" >> beam.Create(self._paths)
                | "ReadLines" >> beam.FlatMap(_data_lines)
                | "Spread" >> beam.Reshuffle())


def dead_letter_record(table: str, source: str, line_no: int, reason: str, raw: str) -> str:
    return json.dumps({"table": table, "source": source, "line": line_no,
                       "reason": reason, "raw": raw}, sort_keys=True)


# ------------------------------------------------------------------ side tables

class _ParseSideRow(beam.DoFn):
    """(path, line, text) of a side table -> (id, features); bad rows -> dead letter."""

    def __init__(self, table: str, headers: Dict[str, List[str]], parse_fn):
        self._table = table
        self._headers = headers
        self._parse_fn = parse_fn

    def process(self, element):
        source, line_no, text = element
        header = self._headers[source]
        fields = parsing.split_csv_line(text)
        reason = None
        if fields is None or len(fields) != len(header):
            reason = "malformed_row"
        else:
            try:
                yield self._parse_fn(dict(zip(header, fields)))
                return
            except ValueError as e:
                reason = str(e)
        beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_{self._table}_rows").inc()
        yield beam.pvalue.TaggedOutput(
            _BAD, (f"{self._table}:{reason}",
                   dead_letter_record(self._table, source, line_no, reason, text)))


def _read_side_table(pbegin, table: str, paths: List[str], parse_fn):
    headers = {p: read_header(p) for p in paths}
    return (pbegin
            | f"Read_{table}_table" >> ReadNumberedLines(paths)
            | f"Parse_{table}_table" >> beam.ParDo(_ParseSideRow(table, headers, parse_fn))
            .with_output_types(Any)
            .with_outputs(_BAD, main="rows"))


# ------------------------------------------------------------------ log rows

class _ParseAndValidateLog(beam.DoFn):
    """(path, line, text) -> (user_id, (time_ms, path, line, LogRow)) or a bad row."""

    def __init__(self, headers: Dict[str, List[str]]):
        self._headers = headers

    def setup(self):
        ns = METRICS_NAMESPACE
        self._good = beam.metrics.Metrics.counter(ns, "good_rows")
        self._bad = beam.metrics.Metrics.counter(ns, "bad_rows")

    def process(self, element, users, videos):
        source, line_no, text = element
        row = parsing.parse_log_line(text, self._headers[source])
        reason = row.reason if isinstance(row, parsing.BadRow) else parsing.join_reason(row, users, videos)
        if reason is None:
            self._good.inc()
            yield row.user_id, (row.time_ms, source, line_no, row)
            return
        self._bad.inc()
        beam.metrics.Metrics.counter(
            METRICS_NAMESPACE, f"bad_rows_{parsing.BadRow(reason).kind}").inc()
        yield beam.pvalue.TaggedOutput(
            _BAD, (reason, dead_letter_record("log", source, line_no, reason, text)))


class _BuildExamples(beam.DoFn):
    """One user's good rows -> histories -> serialized tf.Examples tagged by split."""

    def __init__(self, history_length: int, min_watch_s: float):
        self._history_length = history_length
        self._min_watch_s = min_watch_s

    def process(self, element, users, videos, split_of_date):
        user_id, rows = element
        # Ties in time are broken by file and line so the output is deterministic;
        # build_histories keeps same-millisecond events out of each other's history.
        rows = [r for _, _, _, r in sorted(rows, key=lambda x: x[:3])]
        events = [history_lib.HistoryEvent(
            time_ms=r.time_ms, video_id=r.video_id,
            author_id=videos[r.video_id]["author_id"], is_click=r.is_click,
            watch_time_s=r.play_time_ms / 1000.0) for r in rows]
        histories = history_lib.build_histories(events, self._history_length, self._min_watch_s)
        user = users[user_id]
        for row, hist in zip(rows, histories):
            split = split_of_date.get(row.date)
            if split is None:
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, "history_only_rows").inc()
                yield beam.pvalue.TaggedOutput(_HISTORY_ONLY, row.date)
                continue
            beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"examples_{split}").inc()
            feats = parsing.example_features(row, user, videos[row.video_id], hist)
            yield beam.pvalue.TaggedOutput(split, parsing.to_tf_example(feats).SerializeToString())


def summarize_counts(key_counts, split_of_date: Dict[int, Optional[str]]) -> str:
    """[(count key, n)] -> counts.json text (see LogsToExamples)."""
    counts = dict(key_counts)
    bad_by_reason = {k[len("bad:"):]: n for k, n in counts.items() if k.startswith("bad:")}
    side_bad = {k[len("side_bad:"):]: n for k, n in counts.items() if k.startswith("side_bad:")}
    bad_by_kind: Dict[str, int] = {}
    for reason, n in bad_by_reason.items():
        kind = parsing.BadRow(reason).kind
        bad_by_kind[kind] = bad_by_kind.get(kind, 0) + n
    good = counts.get("good", 0)
    bad = sum(bad_by_reason.values())
    total = good + bad
    dates = {name: sorted(d for d, s in split_of_date.items() if s == name)
             for name in time_split.SPLIT_NAMES}
    return json.dumps({
        "total_rows": total,
        "good_rows": good,
        "bad_rows": bad,
        "bad_row_fraction": bad / total if total else 0.0,
        "bad_rows_by_reason": dict(sorted(bad_by_reason.items())),
        "bad_rows_by_kind": dict(sorted(bad_by_kind.items())),
        "splits": {s: counts.get(f"split:{s}", 0) for s in time_split.SPLIT_NAMES},
        "history_only_rows": counts.get(_HISTORY_ONLY, 0),
        "split_dates": {**dates, _HISTORY_ONLY: sorted(
            d for d, s in split_of_date.items() if s is None)},
        "bad_side_table_rows": dict(sorted(side_bad.items())),
    }, indent=2, sort_keys=True)


class LogsToExamples(beam.PTransform):
    """PBegin -> {'train', 'eval': serialized tf.Examples, 'dead_letter': JSON lines,
    'counts': one counts.json text}.

    counts.json: total_rows, good_rows, bad_rows, bad_row_fraction,
    bad_rows_by_reason, bad_rows_by_kind, splits {train, validation, eval}, history_only_rows,
    split_dates {train, validation, eval, history_only}, bad_side_table_rows.
    """

    def __init__(self, inputs: ResolvedInputs, config: LogExampleGenConfig):
        super().__init__()
        self._inputs = inputs
        self._config = config

    def expand(self, pbegin):
        cfg = self._config
        log_paths = self._inputs.paths(LOG)
        log_headers = {}
        for path in log_paths:
            header = read_header(path)
            missing = parsing.missing_log_columns(header)
            if missing:
                raise ValueError(f"LogExampleGen: log file {path!r} lacks columns {missing}")
            log_headers[path] = header
        users = _read_side_table(pbegin, "user", self._inputs.paths(USER), parsing.parse_user_row)
        videos = _read_side_table(pbegin, "video", self._inputs.paths(VIDEO), parsing.parse_video_row)
        users_si = beam.pvalue.AsDict(users.rows)
        videos_si = beam.pvalue.AsDict(videos.rows)

        parsed = (pbegin
                  | "ReadLogs" >> ReadNumberedLines(log_paths)
                  | "ParseAndValidate" >> beam.ParDo(
                      _ParseAndValidateLog(log_headers), users_si, videos_si)
                  .with_output_types(Any)  # the yields mix keyed rows and TaggedOutputs
                  .with_outputs(_BAD, main="good"))

        split_of_date = (parsed.good
                         | "Dates" >> beam.Map(lambda kv: kv[1][3].date)
                         | "DistinctDates" >> beam.Distinct()
                         | "AllDates" >> beam.combiners.ToList()
                         | "AssignSplits" >> beam.Map(
                             time_split.assign_splits, list(cfg.train_days), list(cfg.eval_days),
                             cfg.eval_last_n_days, cfg.validation_last_n_days))
        split_si = beam.pvalue.AsSingleton(split_of_date)

        examples = (parsed.good
                    | "GroupByUser" >> beam.GroupByKey()
                    | "BuildExamples" >> beam.ParDo(
                        _BuildExamples(cfg.history_length, cfg.history_min_watch_s),
                        users_si, videos_si, split_si)
                    .with_output_types(Any)
                    .with_outputs(_HISTORY_ONLY, *time_split.SPLIT_NAMES))

        dead_letter = ((parsed[_BAD], users[_BAD], videos[_BAD])
                       | "AllBadRows" >> beam.Flatten()
                       | "DeadLetterJson" >> beam.Values())

        count_keys = [
            parsed.good | "KeyGood" >> beam.Map(lambda _: "good"),
            parsed[_BAD] | "KeyBad" >> beam.Map(lambda kv: "bad:" + kv[0]),
            users[_BAD] | "KeyBadUsers" >> beam.Map(lambda kv: "side_bad:" + kv[0]),
            videos[_BAD] | "KeyBadVideos" >> beam.Map(lambda kv: "side_bad:" + kv[0]),
            examples[_HISTORY_ONLY] | "KeyHistoryOnly" >> beam.Map(lambda _: _HISTORY_ONLY),
        ] + [examples[s] | f"Key{s}" >> beam.Map(lambda _, s=s: "split:" + s)
             for s in time_split.SPLIT_NAMES]
        counts = (count_keys
                  | "AllCountKeys" >> beam.Flatten()
                  | "CountPerKey" >> beam.combiners.Count.PerElement()
                  | "CountList" >> beam.combiners.ToList()
                  | "Summarize" >> beam.Map(summarize_counts, split_si))

        out = {s: examples[s] for s in time_split.SPLIT_NAMES}
        out.update(dead_letter=dead_letter, counts=counts)
        return out


def split_uri(examples_uri: str, split: str) -> str:
    return os.path.join(examples_uri, f"Split-{split}")


def write_log_examples(pbegin, inputs: ResolvedInputs, config: LogExampleGenConfig,
                       examples_uri: str, dead_letter_uri: str) -> None:
    """Applies LogsToExamples and writes the TFX Examples layout + dead-letter dir:

    <examples_uri>/Split-{train,validation,eval}/data_tfrecord-*.gz,
    <dead_letter_uri>/bad_rows-*.jsonl and <dead_letter_uri>/counts.json.
    """
    out = pbegin | "LogsToExamples" >> LogsToExamples(inputs, config)
    for s in time_split.SPLIT_NAMES:
        _ = out[s] | f"Write{s}" >> beam.io.WriteToTFRecord(
            os.path.join(split_uri(examples_uri, s), EXAMPLES_FILE_PREFIX), file_name_suffix=".gz")
    _ = out["dead_letter"] | "WriteDeadLetter" >> beam.io.WriteToText(
        os.path.join(dead_letter_uri, DEAD_LETTER_FILE_PREFIX), file_name_suffix=".jsonl")
    _ = out["counts"] | "WriteCounts" >> beam.io.WriteToText(
        os.path.join(dead_letter_uri, COUNTS_FILE), shard_name_template="", num_shards=1)


def read_counts(dead_letter_uri: str) -> dict:
    with FileSystems.open(os.path.join(dead_letter_uri, COUNTS_FILE)) as f:
        return json.loads(f.read().decode("utf-8"))


def check_bad_row_fraction(counts: dict, max_bad_row_fraction: float, dead_letter_uri: str) -> None:
    """Raises BadRowFractionError if bad/total log rows exceeds the bound."""
    fraction = counts["bad_row_fraction"]
    if fraction > max_bad_row_fraction:
        raise BadRowFractionError(
            f"LogExampleGen: {counts['bad_rows']} of {counts['total_rows']} log rows are bad "
            f"(fraction {fraction:.4f} > max_bad_row_fraction {max_bad_row_fraction}); "
            f"by reason {counts['bad_rows_by_reason']}; dead-letter rows in {dead_letter_uri}")
