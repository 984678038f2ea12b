"""Beam wiring of LogExampleGen: logs -> validated, joined, historied, split tf.Examples.

::

  log_*.csv ─plan byte ranges─► Reshuffle ─count quotes/newlines─► prefix sums (side input)
                                  │
                                  └─read records (reading.py)─► ParseAndValidate ──bad──► dead letters
                                        (user/video tables: side_tables.py, side inputs) │ good
                                                                                         ▼
       dates ─► window (date_window.py) ─► splits (time_split.py)       │  RowSignals (signals_beam.py:
                                                                   │   per tab, video, author, ... )
                                                                  CoGroupByKey(user_id): rows + signals
                                                                                         ▼
                         BuildExamples (user_examples.py: window, duplicates, histories, split)
                                                                                         ▼
         Split-train / Split-validation / Split-eval gzipped TFRecords + counts.json + bad_rows-*.jsonl

The math lives in the pure modules; this one only wires them. Log files are read in
byte ranges in parallel (no worker holds a whole file), histories are built per user
after the GroupByKey (no worker holds the whole log). Every record read ends up in
exactly one of: bad, dropped by rule, train, validation, eval, history-only
(counts.py). Rows are checked in this order: record (reading.py: encoding, quotes),
form (parsing.py), values (row_rules.py), join (side tables), window, duplicates.
"""
import os
from typing import Any, Dict, List, Tuple

import apache_beam as beam

from components.log_example_gen import counts as counts_lib
from components.log_example_gen import date_window, parsing, reading, row_rules, side_tables, signals_beam, time_split
from components.log_example_gen import user_examples as ue
from components.log_example_gen.config import LogExampleGenConfig
from components.log_example_gen.counts import (COUNTS_FILE, BadRowFractionError,  # noqa: F401 (re-exported)
                                               check_bad_row_fraction, read_counts)
from components.log_example_gen.inputs import LOG, USER, VIDEO, ResolvedInputs
from components.log_example_gen.side_tables import dead_letter_record

METRICS_NAMESPACE = side_tables.METRICS_NAMESPACE
EXAMPLES_FILE_PREFIX = "data_tfrecord"  # TFX ExampleGen's file names
DEAD_LETTER_FILE_PREFIX = "bad_rows"
_BAD, _DROPPED = ue.BAD, ue.DROPPED


def log_headers(files: List[Tuple[str, int]]) -> Dict[str, List[str]]:
    """{path: header} of the non-empty log files; ValueError naming a file that lacks
    a used column."""
    headers = {}
    for path, size in files:
        if reading.is_empty(size):
            continue
        header = reading.read_header(path)
        missing = parsing.missing_log_columns(header)
        if missing:
            raise ValueError(f"LogExampleGen: log file {path!r} lacks columns {missing} (header {header})")
        headers[path] = header
    return headers


class _ParseAndValidateLog(beam.DoFn):
    """reading.Record -> (user_id, GoodRow) or a bad row (reason, dead-letter JSON)."""

    def __init__(self, headers: Dict[str, List[str]], rules: row_rules.RowRules):
        self._headers, self._rules = headers, rules

    def setup(self):
        self._bad = beam.metrics.Metrics.counter(METRICS_NAMESPACE, "bad_rows")

    def process(self, rec: reading.Record, users, videos, ambiguous):
        if rec.problem:
            reason = rec.problem
        else:
            row = parsing.parse_log_line(rec.text, self._headers[rec.path])
            if isinstance(row, parsing.BadRow):
                reason = row.reason
            else:
                reason = (row_rules.check_values(row, self._rules)
                          or parsing.join_reason(row, users, videos, ambiguous))
        if reason is None:
            yield row.user_id, ue.GoodRow(row.time_ms, rec.path, rec.offset, rec.line, row, rec.text)
            return
        self._bad.inc()
        beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_rows_{parsing.BadRow(reason).kind}").inc()
        yield beam.pvalue.TaggedOutput(
            _BAD, (reason, dead_letter_record("log", rec.path, rec.line, rec.offset, reason, rec.text)))


class _BuildExamples(beam.DoFn):
    """One user's good rows -> user_examples.build_user_examples -> tagged outputs."""

    def __init__(self, config: LogExampleGenConfig):
        self._duplicate_rule = config.duplicate_rule
        self._history_length = config.history_length
        self._min_watch_s = config.history_min_watch_s
        self._span = config.span_window()  # None: day splits
        self._delay_ms = int(round(config.label_delay_s * 1000))

    def process(self, element, users, videos, window, split_of_date):
        user_id, joined = element
        row_signals = {}
        for key, name, value in joined["signals"]:
            row_signals.setdefault(key, {})[name] = value
        for tag, payload in ue.build_user_examples(
                joined["rows"], users[user_id], videos, window, split_of_date, self._duplicate_rule,
                self._history_length, self._min_watch_s, span=self._span, row_signals=row_signals,
                label_delay_ms=self._delay_ms):
            if tag == _BAD:
                reason, g = payload
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, "bad_rows").inc()
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_rows_{parsing.BadRow(reason).kind}").inc()
                yield beam.pvalue.TaggedOutput(_BAD, (reason, dead_letter_record(
                    "log", g.source, g.line, g.offset, reason, g.text)))
            elif tag == _DROPPED:
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"dropped_{payload}").inc()
                yield beam.pvalue.TaggedOutput(_DROPPED, payload)
            elif tag == ue.HISTORY_ONLY:
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, "good_rows").inc()
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, "history_only_rows").inc()
                yield beam.pvalue.TaggedOutput(tag, payload)
            else:
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, "good_rows").inc()
                beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"examples_{tag}").inc()
                yield beam.pvalue.TaggedOutput(tag, payload)


def _read_log_records(pbegin, files: List[Tuple[str, int]], range_bytes: int):
    ranges = reading.plan_ranges([f for f in files if not reading.is_empty(f[1])], range_bytes)
    spread = pbegin | "LogRanges" >> beam.Create(ranges) | "SpreadRanges" >> beam.Reshuffle()
    starts = (spread
              | "CountQuotesAndLines" >> beam.Map(reading.count_range)
              | "RangeCounts" >> beam.combiners.ToList()
              | "RangeStarts" >> beam.Map(reading.range_starts))
    return spread | "ReadRecords" >> beam.FlatMap(
        lambda r, st: reading.read_range(r, st[(r.path, r.start)]), beam.pvalue.AsSingleton(starts))


def _ambiguous_ids(user_ids, video_ids):
    return {"user": set(user_ids), "video": set(video_ids)}


class LogsToExamples(beam.PTransform):
    """PBegin -> {'train', 'validation', 'eval': serialized tf.Examples,
    'dead_letter': JSON lines, 'counts': one counts.json text (counts.py)}."""

    def __init__(self, inputs: ResolvedInputs, config: LogExampleGenConfig):
        super().__init__()
        self._inputs = inputs
        self._config = config

    def expand(self, pbegin):
        cfg = self._config
        files = {t: [(f.path, f.size) for f in self._inputs.files[t]] for t in (LOG, USER, VIDEO)}
        headers = log_headers(files[LOG])
        empty_files = [p for p, s in files[LOG] if reading.is_empty(s)]
        users = side_tables.read_side_table(pbegin, "user", files[USER], parsing.parse_user_row)
        videos = side_tables.read_side_table(pbegin, "video", files[VIDEO], parsing.parse_video_row)
        users_si, videos_si = beam.pvalue.AsDict(users["rows"]), beam.pvalue.AsDict(videos["rows"])
        ambiguous_si = beam.pvalue.AsSingleton(
            pbegin | "Ambiguous" >> beam.Create([None])
            | "AmbiguousIds" >> beam.Map(lambda _, u, v: _ambiguous_ids(u, v),
                                         beam.pvalue.AsList(users["ambiguous"]),
                                         beam.pvalue.AsList(videos["ambiguous"])))

        records = _read_log_records(pbegin, files[LOG], cfg.read_range_bytes)
        parsed = (records
                  | "ParseAndValidate" >> beam.ParDo(
                      _ParseAndValidateLog(headers, cfg.row_rules()), users_si, videos_si, ambiguous_si)
                  .with_output_types(Any).with_outputs(_BAD, main="good"))

        date_counts = (parsed.good
                       | "Dates" >> beam.Map(lambda kv: kv[1].row.date)
                       | "RowsPerDate" >> beam.combiners.Count.PerElement())
        date_list = date_counts | "DateCounts" >> beam.combiners.ToList()
        window = date_list | "Window" >> beam.Map(
            lambda dc: date_window.infer_window(dict(dc), cfg.max_date_gap_days, list(cfg.date_window)))
        window_si = beam.pvalue.AsSingleton(window)
        split_of_date = date_list | "AssignSplits" >> beam.Map(
            lambda dc, w: time_split.assign_splits(
                [d for d, _ in dc if d in set(w)], list(cfg.train_days), list(cfg.eval_days),
                cfg.eval_last_n_days, cfg.validation_last_n_days), window_si)
        split_si = beam.pvalue.AsSingleton(split_of_date)

        row_signals = parsed.good | "RowSignals" >> signals_beam.RowSignals(
            videos_si, window_si, cfg.label_delay_s, cfg.signal_prior_ctr, cfg.duplicate_rule)
        built = ({"rows": parsed.good, "signals": row_signals}
                 | "GroupByUser" >> beam.CoGroupByKey()
                 | "BuildExamples" >> beam.ParDo(_BuildExamples(cfg), users_si, videos_si, window_si, split_si)
                 .with_output_types(Any)
                 .with_outputs(_BAD, _DROPPED, ue.HISTORY_ONLY, *time_split.SPLIT_NAMES, main="unused"))

        dead_letter = ((parsed[_BAD], built[_BAD], users[_BAD], videos[_BAD])
                       | "AllBadRows" >> beam.Flatten()
                       | "DeadLetterJson" >> beam.Values())

        count_pairs = [
            records | "KeyRead" >> beam.Map(lambda _: ("read", 1)),
            parsed[_BAD] | "KeyBad" >> beam.Map(lambda kv: ("bad:" + kv[0], 1)),
            built[_BAD] | "KeyBadUser" >> beam.Map(lambda kv: ("bad:" + kv[0], 1)),
            built[_DROPPED] | "KeyDropped" >> beam.Map(lambda rule: ("dropped:" + rule, 1)),
            built[ue.HISTORY_ONLY] | "KeyHistoryOnly" >> beam.Map(lambda _: ("history_only", 1)),
            date_counts | "KeyDates" >> beam.Map(lambda dn: (f"date:{dn[0]}", dn[1])),
            users[_BAD] | "KeyBadUsers" >> beam.Map(lambda kv: ("side_bad:" + kv[0], 1)),
            videos[_BAD] | "KeyBadVideos" >> beam.Map(lambda kv: ("side_bad:" + kv[0], 1)),
            users[side_tables.DROPPED] | "KeyDroppedUsers" >> beam.Map(lambda k: (k, 1)),
            videos[side_tables.DROPPED] | "KeyDroppedVideos" >> beam.Map(lambda k: (k, 1)),
        ] + [built[s] | f"Key{s}" >> beam.Map(lambda _, s=s: ("split:" + s, 1)) for s in time_split.SPLIT_NAMES]
        counts = (count_pairs
                  | "AllCountKeys" >> beam.Flatten()
                  | "CountPerKey" >> beam.CombinePerKey(sum)
                  | "CountList" >> beam.combiners.ToList()
                  | "Summarize" >> beam.Map(
                      lambda kc, splits, w: counts_lib.summarize_counts(kc, splits, w, empty_files),
                      split_si, window_si))

        out = {s: built[s] for s in time_split.SPLIT_NAMES}
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
