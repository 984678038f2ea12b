"""Beam wiring of LogExampleGen: logs -> validated, joined, historied, split tf.Examples.

::

  log_*.csv ─plan byte ranges─► Reshuffle ─count quotes/newlines─► prefix sums (side input)
      │
      └─read a range as lines (bulk_lines.py) ─► parse it in bulk (parse_batch.py) ──bad──► dead letters
          (user/video tables: side_tables.py, one columnar side input each) │ good rows: a columnar batch
                                                                  ▼
   dates ─► window (date_window.py) ─► splits (time_split.py)   (user shard, batch)
                                                                  ▼ GroupByKey
                SelectRows (user_batches.py: window, duplicates) ──bad / dropped──► dead letters, counts
                     │ kept rows                       │ (tab, batch)
                     │                                 ▼
                     │        RowSignals (signals_beam.py: tab pass, entity passes, columnar)
                     ▼                                 ▼
               CoGroupByKey(user shard): kept rows + their signals
                                                       ▼
       BuildExamples (example_batches.py: user statistics, histories, features, tfx-bsl encoder +
                      example_block.py) writes the shard's file per split (record_files.py)
                                                       ▼
         Split-train / Split-validation / Split-eval/data_tfrecord-SSSSS-of-NNNNN.gz + counts.json + bad_rows-*.jsonl
         (+ UserEvents/user_events-SSSSS-of-NNNNN.gz with ``user_events``: user_events.py)

On the DirectRunner, which holds a GroupByKey's whole input in memory, the four groupings
(by user shard, tab, entity shard, and the join) go through files under the run's temporary
folder and only their paths are grouped (spill.py): 1M simulated rows peaked at 4.5 GB
before, 1.3 GB after. Distributed runners group out of process and spill nothing.

The math lives in the pure modules; this one only wires them. Rows travel as columnar
batches (columns.py), never one Python object or one Beam element per row (examples
are written by the stage that encodes them, one gzip stream per shard and split). Log files are read in byte
ranges in parallel (no worker holds a whole file); users are hashed to
``user_shards`` shards (about ``SHARD_BYTES`` of log each, at least ``MIN_SHARDS``), so a
worker holds one shard's rows as columns, not the log. Every record read ends up in
exactly one of: bad, dropped by rule, train, validation, eval, history-only
(counts.py). Rows are checked in this order: record (reading.py: encoding, quotes),
form (parsing.py), values (row_rules.py), join (side tables), window, duplicates.
"""
import os
import uuid
import zlib
from typing import Any, Dict, List, Tuple

import apache_beam as beam
import numpy as np

from components.log_example_gen import counts as counts_lib
from components.log_example_gen import (batch_buffer, bulk_lines, columns, date_window, example_batches,
                                        parse_batch, parsing, reading, record_files, row_rules, side_tables,
                                        signals_beam, spill, time_split, user_batches, user_events)
from components.log_example_gen import user_examples as ue
from components.log_example_gen.config import LogExampleGenConfig
from components.log_example_gen.counts import (COUNTS_FILE, BadRowFractionError,  # noqa: F401 (re-exported)
                                               check_bad_row_fraction, read_counts)
from components.log_example_gen.inputs import LOG, USER, VIDEO, ResolvedInputs
from components.log_example_gen.side_tables import dead_letter_record

METRICS_NAMESPACE = side_tables.METRICS_NAMESPACE
EXAMPLES_FILE_PREFIX, EXAMPLES_FILE_SUFFIX = "data_tfrecord", ".gz"  # TFX ExampleGen's file names
DEAD_LETTER_FILE_PREFIX, DEAD_LETTER_FILE_SUFFIX = "bad_rows", ".jsonl"
_BAD = ue.BAD


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


SHARD_BYTES = 4 << 20  # log bytes per user (and entity) shard: ~55k simulated rows, what a worker holds
MIN_SHARDS = 16  # enough shards to keep every worker busy on a small log
_COUNT, _DATES, _SIGNAL_ROWS = "count", "dates", "signal_rows"


def num_shards(files: List[Tuple[str, int]]) -> int:
    return max(MIN_SHARDS, -(-sum(size for _, size in files) // SHARD_BYTES))


IN_MEMORY_RUNNERS = ("SwitchingDirectRunner", "DirectRunner", "BundleBasedDirectRunner", "FnApiRunner")


def groups_in_memory(pipeline: beam.Pipeline) -> bool:
    """True for the runners that hold a GroupByKey's input in the driver's memory (the
    DirectRunner in either mode): LogExampleGen then groups through files (spill.py)."""
    return type(pipeline.runner).__name__ in IN_MEMORY_RUNNERS


def _bad_output(reason: str, source: str, line: int, offset: int, text: str):
    beam.metrics.Metrics.counter(METRICS_NAMESPACE, "bad_rows").inc()
    beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_rows_{parsing.BadRow(reason).kind}").inc()
    yield beam.pvalue.TaggedOutput(_BAD, (reason, dead_letter_record("log", source, line, offset, reason, text)))
    yield beam.pvalue.TaggedOutput(_COUNT, ("bad:" + reason, 1))


class _ReadAndParse(beam.DoFn):
    """ByteRange -> (user shard, batch of good rows); bad rows, counts and dates tagged."""

    def __init__(self, headers: Dict[str, List[str]], paths: List[str], rules: row_rules.RowRules, shards: int):
        self._headers, self._rules, self._shards = headers, rules, shards
        self._file_index = {p: k for k, p in enumerate(paths)}
        self._ids = None

    def process(self, r: reading.ByteRange, starts, users, videos, ambiguous):
        if self._ids is None:
            self._ids = parse_batch.SideIds.of(users, videos, ambiguous)
        start, args = starts[(r.path, r.start)], (self._rules, users, videos, ambiguous, self._ids)
        lines = bulk_lines.read_lines(r, start)
        if lines is None:  # a quote in the range: record by record
            records = list(reading.read_range(r, start))
            read = len(records)
            batch, bad = parse_batch.parse_records(records, self._file_index[r.path], self._headers[r.path], *args)
        else:
            batch, bad, read = parse_batch.parse_lines(lines, r.path, self._file_index[r.path], self._headers[r.path],
                                                 *args)
        yield beam.pvalue.TaggedOutput(_COUNT, ("read", read))
        for reason, rec in bad:
            yield from _bad_output(reason, rec.path, rec.line, rec.offset, rec.text)
        if not columns.length(batch):
            return
        dates, n = np.unique(batch["date"], return_counts=True)
        for d, k in zip(dates.tolist(), n.tolist()):
            yield beam.pvalue.TaggedOutput(_DATES, (d, k))
        yield from columns.split_by(batch, columns.shard_of(batch["user_id"], self._shards))


class _SelectRows(beam.DoFn):
    """(user shard, batches) -> (user shard, kept rows); (tab, signal rows) tagged; window and
    duplicate rules applied (user_batches.select_rows)."""

    def __init__(self, config: LogExampleGenConfig, paths: List[str]):
        self._rule, self._span, self._paths = config.duplicate_rule, config.span_window(), paths
        self._side = None

    def start_bundle(self):
        self._signal_rows = batch_buffer.BatchBuffer()  # a tab's rows of many user shards in one batch

    def finish_bundle(self):
        yield from self._signal_rows.finish()

    def _texts(self, rows: columns.Batch, positions: np.ndarray) -> List[str]:
        """The raw records of rows ``positions``, read again from their files (reading.texts_at)."""
        row_ids = rows["row_id"][positions].tolist()
        by_file: Dict[int, List[int]] = {}
        for row_id in row_ids:
            by_file.setdefault(columns.file_of(row_id), []).append(columns.offset_of(row_id))
        texts = {f: reading.texts_at(self._paths[f], offsets) for f, offsets in by_file.items()}
        return [texts[columns.file_of(r)][columns.offset_of(r)] for r in row_ids]

    def process(self, element, users, videos, window, split_of_date):
        shard, batches = element
        if self._side is None:
            self._side = example_batches.SideColumns(users, videos)
        kept, bad, dropped, rows = user_batches.select_rows(
            columns.concat(batches), np.array(sorted(window), dtype=np.int64), self._rule, self._texts)
        texts = self._texts(rows, np.array([k for _, k in bad], dtype=np.int64))
        for (reason, k), text in zip(bad, texts):
            row_id = int(rows["row_id"][k])
            yield from _bad_output(reason, self._paths[columns.file_of(row_id)], int(rows["line"][k]),
                                   columns.offset_of(row_id), text)
        if dropped:
            beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"dropped_{ue.DUPLICATE_ROW}").inc(dropped)
            yield beam.pvalue.TaggedOutput(_COUNT, ("dropped:" + ue.DUPLICATE_ROW, dropped))
        if not columns.length(kept):
            return
        del kept["line"]
        kept["split"] = user_batches.split_codes(kept, time_split.SPLIT_NAMES, split_of_date, self._span)
        yield shard, kept
        sig = example_batches.signal_rows(kept, self._side.videos_at(kept["video_id"]))
        yield from self._signal_rows.add(_SIGNAL_ROWS, sig, sig["tab"])


class _BuildExamples(beam.DoFn):
    """(user shard, {rows, signals}) -> the shard's gzipped TFRecord file per split
    (example_batches.py encodes, record_files.py writes); its path tagged ``written``."""

    def __init__(self, config: LogExampleGenConfig, examples_uri: str, run: str, shards: int):
        self._history_length = config.history_length
        self._min_watch_s = config.history_min_watch_s
        self._delay_ms = int(round(config.label_delay_s * 1000))
        self._families = config.signal_families
        self._user_events = config.user_events
        self._uri, self._run, self._shards = examples_uri, run, shards
        self._side = None

    def process(self, element, users, videos):
        shard, joined = element
        if self._side is None:
            self._side = example_batches.SideColumns(users, videos)
        rows = columns.concat(joined["rows"])
        if not columns.length(rows):
            return
        rows = columns.take(rows, columns.sort_rows(rows["user_id"], rows["time_ms"], rows["row_id"]))
        per_family: Dict[str, list] = {}
        for family, part in joined["signals"]:
            per_family.setdefault(family, []).append(part)
        signals = {}
        for family in signals_beam.family_names():
            part = columns.concat(per_family.get(family, []))
            ids = part.get("row_id", np.zeros(0, dtype=np.int64))
            order = np.argsort(ids)
            pos = np.minimum(np.searchsorted(ids[order], rows["row_id"]), max(len(ids) - 1, 0))
            if len(ids) != columns.length(rows) or not np.array_equal(ids[order][pos], rows["row_id"]):
                raise RuntimeError(f"LogExampleGen: the {family} signals do not cover the kept rows")
            signals.update({k: v[order][pos] for k, v in part.items() if k.startswith("sig_")})
        features = example_batches.feature_columns(rows, self._side, signals, self._history_length,
                                                   self._min_watch_s, self._delay_ms, self._families)
        n = columns.length(rows)
        history_only = int((rows["split"] < 0).sum())
        counter = beam.metrics.Metrics.counter
        counter(METRICS_NAMESPACE, "good_rows").inc(n)
        if history_only:
            counter(METRICS_NAMESPACE, "history_only_rows").inc(history_only)
            yield beam.pvalue.TaggedOutput(_COUNT, ("history_only", history_only))
        tmp = record_files.temp_dir(self._uri, self._run)
        for split, chunks in example_batches.examples_by_split(features, rows["split"], time_split.SPLIT_NAMES):
            writer = record_files.ShardWriter(os.path.join(split_uri(self._uri, split), record_files.shard_name(
                EXAMPLES_FILE_PREFIX, shard, self._shards, EXAMPLES_FILE_SUFFIX)), tmp)
            for records, tails in chunks:
                writer.write(records, tails)
            counter(METRICS_NAMESPACE, f"examples_{split}").inc(writer.count)
            yield beam.pvalue.TaggedOutput(_COUNT, ("split:" + split, writer.count))
            yield writer.close()
        if self._user_events:  # every user's history events once (user_events.py)
            records = user_events.encode(rows, features["author_id"][0], self._min_watch_s)
            if records:
                writer = record_files.ShardWriter(os.path.join(user_events.events_uri(self._uri), record_files.shard_name(
                    user_events.FILE_PREFIX, shard, self._shards, user_events.FILE_SUFFIX)), tmp)
                writer.write(records)
                counter(METRICS_NAMESPACE, "user_events_users").inc(writer.count)
                yield writer.close()


def _log_ranges(pbegin, files: List[Tuple[str, int]], range_bytes: int):
    """(byte ranges spread over the workers, side input of their RangeStarts)."""
    ranges = reading.plan_ranges([f for f in files if not reading.is_empty(f[1])], range_bytes)
    spread = pbegin | "Ranges" >> beam.Impulse() | "LogRanges" >> beam.FlatMap(lambda _: ranges) | "SpreadRanges" >> beam.Reshuffle()
    counts = spread | "CountQuotesAndLines" >> beam.Map(reading.count_range)
    starts = gather(pbegin, "RangeStarts", counts, reading.range_starts)
    return spread, beam.pvalue.AsSingleton(starts)


def gather(pbegin, label: str, pcoll, fn, *side_inputs):
    """One element, ``fn(list of pcoll's elements, *side inputs)``: the list as a side input (no
    combiner's stages, as beam.combiners.ToList would add), from its own beam.Impulse (a branch
    shared by stages that feed each other's side inputs cannot be fused into one stage)."""
    return (pbegin | f"{label}Seed" >> beam.Impulse()
            | label >> beam.Map(lambda _, items, *args: fn(items, *args), beam.pvalue.AsList(pcoll), *side_inputs))


def _ambiguous_ids(user_ids, video_ids):
    return {"user": set(user_ids), "video": set(video_ids)}


class LogsToExamples(beam.PTransform):
    """PBegin -> {'written': paths of the example files written under ``examples_uri``
    (Split-<split>/data_tfrecord-*.gz), 'dead_letter': JSON lines, 'counts': one counts.json
    text (counts.py)}. ``spill_groups``: the groupings by shard go through files under the run's
    temporary folder (spill.py; for the DirectRunner, which would hold them in memory)."""

    def __init__(self, inputs: ResolvedInputs, config: LogExampleGenConfig, examples_uri: str,
                 spill_groups: bool = False):
        super().__init__()
        self._inputs = inputs
        self._config = config
        self._examples_uri = examples_uri
        self.run_id = uuid.uuid4().hex
        self._spill = spill_groups

    def _spill_dir(self, name: str):
        return os.path.join(record_files.temp_dir(self._examples_uri, self.run_id), "spill", name) \
            if self._spill else None

    def expand(self, pbegin):
        cfg = self._config
        files = {t: [(f.path, f.size) for f in self._inputs.files[t]] for t in (LOG, USER, VIDEO)}
        headers = log_headers(files[LOG])
        empty_files = [p for p, s in files[LOG] if reading.is_empty(s)]
        users = side_tables.read_side_table(pbegin, "user", files[USER])
        videos = side_tables.read_side_table(pbegin, "video", files[VIDEO])
        users_si, videos_si = beam.pvalue.AsSingleton(users["rows"]), beam.pvalue.AsSingleton(videos["rows"])
        ambiguous_si = beam.pvalue.AsSingleton(
            pbegin | "Ambiguous" >> beam.Impulse()
            | "AmbiguousIds" >> beam.Map(lambda _, u, v: _ambiguous_ids(u, v),
                                         beam.pvalue.AsList(users["ambiguous"]),
                                         beam.pvalue.AsList(videos["ambiguous"])))

        paths = sorted(headers)
        shards = num_shards(files[LOG])
        spread, starts_si = _log_ranges(pbegin, files[LOG], cfg.read_range_bytes)
        parsed = (spread
                  | "ReadAndParse" >> beam.ParDo(
                      _ReadAndParse(headers, paths, cfg.row_rules(), shards), starts_si, users_si, videos_si,
                      ambiguous_si)
                  .with_output_types(Any).with_outputs(_BAD, _COUNT, _DATES, main="good"))

        date_counts = parsed[_DATES] | "RowsPerDate" >> beam.CombinePerKey(sum)
        date_list = gather(pbegin, "DateCounts", date_counts, list)
        window = date_list | "Window" >> beam.Map(
            lambda dc: date_window.infer_window(dict(dc), cfg.max_date_gap_days, list(cfg.date_window)))
        window_si = beam.pvalue.AsSingleton(window)
        split_of_date = date_list | "AssignSplits" >> beam.Map(
            lambda dc, w: time_split.assign_splits(
                [d for d, _ in dc if d in set(w)], list(cfg.train_days), list(cfg.eval_days),
                cfg.eval_last_n_days, cfg.validation_last_n_days), window_si)
        split_si = beam.pvalue.AsSingleton(split_of_date)

        selected = (parsed.good
                    | "GroupByUserShard" >> spill.GroupByKey(self._spill_dir("user_shard"))
                    | "SelectRows" >> beam.ParDo(_SelectRows(cfg, paths), users_si, videos_si, window_si, split_si)
                    .with_output_types(Any).with_outputs(_BAD, _COUNT, _SIGNAL_ROWS, main="rows"))
        row_signals = selected[_SIGNAL_ROWS] | "RowSignals" >> signals_beam.RowSignals(
            cfg.label_delay_s, cfg.signal_prior_ctr, shards, shards, beam.pvalue.AsSingleton(date_list),
            self._spill_dir("tab"), self._spill_dir("entity"))
        built = ({"rows": selected.rows, "tab_signals": row_signals[0], "entity_signals": row_signals[1]}
                 | "JoinSignals" >> spill.CoGroupByKey(self._spill_dir("join"), tags={
                     "tab_signals": "signals", "entity_signals": "signals"})
                 | "BuildExamples" >> beam.ParDo(_BuildExamples(cfg, self._examples_uri, self.run_id, shards),
                                                 users_si, videos_si)
                 .with_output_types(Any).with_outputs(_COUNT, main="written"))

        dead_letter = ((parsed[_BAD], selected[_BAD], users[_BAD], videos[_BAD])
                       | "AllBadRows" >> beam.Flatten()
                       | "DeadLetterJson" >> beam.Values())

        count_pairs = [
            parsed[_COUNT], selected[_COUNT], built[_COUNT],
            date_counts | "KeyDates" >> beam.Map(lambda dn: (f"date:{dn[0]}", dn[1])),
            users[_BAD] | "KeyBadUsers" >> beam.Map(lambda kv: ("side_bad:" + kv[0], 1)),
            videos[_BAD] | "KeyBadVideos" >> beam.Map(lambda kv: ("side_bad:" + kv[0], 1)),
            users[side_tables.DROPPED] | "KeyDroppedUsers" >> beam.Map(lambda k: (k, 1)),
            videos[side_tables.DROPPED] | "KeyDroppedVideos" >> beam.Map(lambda k: (k, 1)),
        ]
        per_key = count_pairs | "AllCountKeys" >> beam.Flatten() | "CountPerKey" >> beam.CombinePerKey(sum)
        counts = gather(pbegin, "Summarize", per_key,
                        lambda kc, splits, w: counts_lib.summarize_counts(kc, splits, w, empty_files), split_si,
                        window_si)

        return {"written": built.written, "dead_letter": dead_letter, "counts": counts}


def split_uri(examples_uri: str, split: str) -> str:
    return os.path.join(examples_uri, f"Split-{split}")


def write_log_examples(pbegin, inputs: ResolvedInputs, config: LogExampleGenConfig,
                       examples_uri: str, dead_letter_uri: str, spill_groups: bool = False) -> None:
    """Applies LogsToExamples and writes the TFX Examples layout + dead-letter dir:

    <examples_uri>/Split-{train,validation,eval}/data_tfrecord-*.gz,
    <dead_letter_uri>/bad_rows-*.jsonl and <dead_letter_uri>/counts.json.
    """
    to_examples = LogsToExamples(inputs, config, examples_uri, spill_groups)
    out = pbegin | "LogsToExamples" >> to_examples
    split_dirs = [split_uri(examples_uri, s) for s in time_split.SPLIT_NAMES]
    _ = (pbegin | "FinalizeExamplesSeed" >> beam.Impulse()
         | "EmptySplitsAndTemp" >> beam.Map(
             lambda _, written: record_files.finalize(examples_uri, to_examples.run_id, split_dirs, written,
                                                      EXAMPLES_FILE_PREFIX, EXAMPLES_FILE_SUFFIX),
             beam.pvalue.AsList(out["written"])))
    shards = num_shards([(f.path, f.size) for f in inputs.files[LOG]])
    dead_written = (out["dead_letter"]
                    | "DeadLetterShard" >> beam.Map(lambda line: (zlib.crc32(line.encode("utf-8")) % shards, line))
                    | "GroupDeadLetters" >> beam.GroupByKey()
                    | "WriteDeadLetters" >> beam.Map(_write_lines, dead_letter_uri, to_examples.run_id, shards))
    counts_written = out["counts"] | "WriteCounts" >> beam.Map(
        lambda text: _write_text(os.path.join(dead_letter_uri, COUNTS_FILE), text + "\n",
                                 record_files.temp_dir(dead_letter_uri, to_examples.run_id)))
    _ = (pbegin | "FinalizeDeadLettersSeed" >> beam.Impulse()
         | "EmptyDeadLettersAndTemp" >> beam.Map(
             lambda _, written, _counts: record_files.finalize(
                 dead_letter_uri, to_examples.run_id, [dead_letter_uri], written, DEAD_LETTER_FILE_PREFIX,
                 DEAD_LETTER_FILE_SUFFIX), beam.pvalue.AsList(dead_written), beam.pvalue.AsList(counts_written)))


def _write_text(path: str, text: str, tmp: str) -> str:
    writer = record_files.ShardWriter(path, tmp, gzip=False)
    writer.write_bytes(text.encode("utf-8"))
    return writer.close()


def _write_lines(element, uri: str, run: str, shards: int) -> str:
    """(shard, dead-letter JSON lines) -> bad_rows-SSSSS-of-NNNNN.jsonl, one line each (sorted: a
    rerun writes the same file)."""
    shard, lines = element
    name = record_files.shard_name(DEAD_LETTER_FILE_PREFIX, shard, shards, DEAD_LETTER_FILE_SUFFIX)
    return _write_text(os.path.join(uri, name), "".join(line + "\n" for line in sorted(lines)),
                       record_files.temp_dir(uri, run))
