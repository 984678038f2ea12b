"""Beam: the user and video feature tables -> {id: features} and their bad rows.

Each file is read with reading.py (header with a byte-order mark accepted), each row
parsed by parsing.parse_user_row / parse_video_row. An id listed more than once:

- every copy parses to the same features -> one is kept, the others are counted
  (``side_dropped:<table>:duplicate_id``: nothing is lost, they are equal);
- the copies differ -> every copy is a bad side row ``duplicate_id:<table>_id`` and the
  id is *ambiguous*: its log rows become bad rows ``ambiguous_<table>_id`` instead of
  silently taking one of the copies.

Outputs (``read_side_table``): ``rows`` (id, features), ``bad`` (reason, dead-letter
JSON), ``dropped`` (count key) and ``ambiguous`` (ids).
"""
import json
from typing import Any, Dict, List

import apache_beam as beam

from components.log_example_gen import parsing, reading

METRICS_NAMESPACE = "log_example_gen"
BAD, DROPPED, AMBIGUOUS = "bad", "dropped", "ambiguous"


def dead_letter_record(table: str, source: str, line_no: int, offset: int, reason: str, raw: str) -> str:
    return json.dumps({"table": table, "source": source, "line": line_no, "offset": offset,
                       "reason": reason, "raw": raw}, sort_keys=True)


class _ParseSideRow(beam.DoFn):
    """reading.Record of a side table -> (id, (features, record)); bad rows -> BAD."""

    def __init__(self, table: str, headers: Dict[str, List[str]], parse_fn):
        self._table, self._headers, self._parse_fn = table, headers, parse_fn

    def process(self, rec: reading.Record):
        header = self._headers[rec.path]
        fields = None if rec.problem else parsing.split_csv_line(rec.text)
        if rec.problem:
            reason = rec.problem
        elif fields is None or len(fields) != len(header):
            reason = "malformed_row"
        else:
            try:
                row_id, feats = self._parse_fn(dict(zip(header, fields)))
                yield row_id, (feats, rec)
                return
            except ValueError as e:
                reason = str(e)
        beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_{self._table}_rows").inc()
        yield beam.pvalue.TaggedOutput(BAD, (f"{self._table}:{reason}", dead_letter_record(
            self._table, rec.path, rec.line, rec.offset, reason, rec.text)))


class _OnePerId(beam.DoFn):
    def __init__(self, table: str):
        self._table = table

    def process(self, element):
        row_id, copies = element
        copies = sorted(copies, key=lambda c: (c[1].path, c[1].offset))
        distinct = {json.dumps(f, sort_keys=True) for f, _ in copies}
        if len(distinct) == 1:
            yield row_id, copies[0][0]
            for _ in copies[1:]:
                yield beam.pvalue.TaggedOutput(DROPPED, f"side_dropped:{self._table}:duplicate_id")
            return
        reason = f"duplicate_id:{self._table}_id"
        yield beam.pvalue.TaggedOutput(AMBIGUOUS, row_id)
        for _, rec in copies:
            yield beam.pvalue.TaggedOutput(BAD, (f"{self._table}:{reason}", dead_letter_record(
                self._table, rec.path, rec.line, rec.offset, reason, rec.text)))


def read_side_table(pbegin, table: str, files, parse_fn):
    """files: [(path, size)] -> beam.pvalue.DoOutputsTuple with rows/bad/dropped/ambiguous."""
    files = [(p, s) for p, s in files if not reading.is_empty(s)]
    headers = {p: reading.read_header(p) for p, _ in files}
    parsed = (pbegin
              | f"Files_{table}" >> beam.Create(files)
              | f"Read_{table}" >> beam.FlatMap(lambda ps: reading.read_whole(*ps))
              | f"Parse_{table}" >> beam.ParDo(_ParseSideRow(table, headers, parse_fn))
              .with_output_types(Any).with_outputs(BAD, main="rows"))
    deduped = (parsed.rows
               | f"GroupById_{table}" >> beam.GroupByKey()
               | f"OnePerId_{table}" >> beam.ParDo(_OnePerId(table))
               .with_output_types(Any).with_outputs(BAD, DROPPED, AMBIGUOUS, main="rows"))
    bad = (parsed[BAD], deduped[BAD]) | f"Bad_{table}" >> beam.Flatten()
    return {"rows": deduped.rows, BAD: bad, DROPPED: deduped[DROPPED], AMBIGUOUS: deduped[AMBIGUOUS]}
