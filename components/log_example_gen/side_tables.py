"""Beam: the user and video feature tables -> one columnar table each and their bad rows.

Each file is read with reading.py (header with a byte-order mark accepted) and parsed a
column at a time (side_columns.py, the columnar form of parsing.parse_user_row /
parse_video_row): one element per file, never one per row. An id listed more than once:

- every copy parses to the same features -> one is kept, the others are counted
  (``side_dropped:<table>:duplicate_id``: nothing is lost, they are equal);
- the copies differ -> every copy is a bad side row ``duplicate_id:<table>_id`` and the
  id is *ambiguous*: its log rows become bad rows ``ambiguous_<table>_id`` instead of
  silently taking one of the copies.

Outputs (``read_side_table``): ``rows`` (one side_columns.SideTable), ``bad`` (reason,
dead-letter JSON), ``dropped`` (count key) and ``ambiguous`` (ids).
"""
import json
from typing import Any, Dict, List

import apache_beam as beam
import numpy as np

from components.log_example_gen import bulk_lines, reading, side_columns

METRICS_NAMESPACE = "log_example_gen"
BAD, DROPPED, AMBIGUOUS = "bad", "dropped", "ambiguous"


def dead_letter_record(table: str, source: str, line_no: int, offset: int, reason: str, raw: str) -> str:
    return json.dumps({"table": table, "source": source, "line": line_no, "offset": offset,
                       "reason": reason, "raw": raw}, sort_keys=True)


def _bad(table: str, rec: reading.Record, reason: str):
    beam.metrics.Metrics.counter(METRICS_NAMESPACE, f"bad_{table}_rows").inc()
    return beam.pvalue.TaggedOutput(BAD, (f"{table}:{reason}", dead_letter_record(
        table, rec.path, rec.line, rec.offset, reason, rec.text)))


def _parse_file(path_size, table: str, headers: Dict[str, List[str]]):
    """One file -> one columnar part of its parsed rows (ids, where they are, feature arrays:
    no Python object per row), packed (side_columns.Packed: a side input); bad rows tagged.
    The texts stay in the file: only an ambiguous id's copies need theirs (``reading.texts_at``)."""
    path, size = path_size
    header = headers[path]
    id_name, _ = side_columns.TABLES[table]
    recs, rows = [], []
    records = bulk_lines.read_records(path, size)
    split = side_columns.split_all([rec.text for rec in records if not rec.problem])
    fields_of = iter(split)
    for rec in records:
        fields = None if rec.problem else next(fields_of)
        if rec.problem:
            yield _bad(table, rec, rec.problem)
        elif fields is None or len(fields) != len(header):
            yield _bad(table, rec, "malformed_row")
        else:
            recs.append(rec)
            rows.append(fields)
    k = header.index(id_name) if id_name in header else None
    ids, reasons = side_columns.parse_ids([r[k] if k is not None else "" for r in rows], id_name)
    ok = [i for i, reason in enumerate(reasons) if reason is None]
    for i, reason in enumerate(reasons):
        if reason is not None:
            yield _bad(table, recs[i], reason)
    feats = side_columns.arrays(table, side_columns.feature_columns(table, header, [rows[i] for i in ok]))
    yield side_columns.Packed({
        "path": np.array([path] * len(ok), dtype=np.str_), "id": ids[ok],
        "offset": np.array([recs[i].offset for i in ok], dtype=np.int64),
        "line": np.array([recs[i].line for i in ok], dtype=np.int64), "features": feats})


def _one_per_id(parts, table: str):
    """Every file's part (Packed) -> the SideTable of the ids kept; duplicates dropped or made
    ambiguous."""
    parts = [p for p in (packed.value() for packed in parts) if len(p["id"])]
    cat = {k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0, dtype=np.int64)
           for k in ("path", "id", "offset", "line")}
    feats = {f: np.concatenate([p["features"][f] for p in parts]) for f in (parts[0]["features"] if parts else {})}
    order = np.lexsort((cat["offset"], cat["path"], cat["id"])) if parts else np.zeros(0, dtype=np.int64)
    ids = cat["id"][order]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    keep = first.copy()
    ambiguous: List[int] = []  # the copies of ambiguous ids
    for start in np.flatnonzero(first & np.append(~first[1:], False)).tolist():  # ids with copies: rare
        end = start + 1
        while end < len(ids) and ids[end] == ids[start]:
            end += 1
        copies = order[start:end].tolist()
        if len({json.dumps(side_columns.row_features(feats, c), sort_keys=True) for c in copies}) == 1:
            for _ in copies[1:]:
                yield beam.pvalue.TaggedOutput(DROPPED, f"side_dropped:{table}:duplicate_id")
            continue
        keep[start] = False
        yield beam.pvalue.TaggedOutput(AMBIGUOUS, int(ids[start]))
        ambiguous += copies
    texts = {p: reading.texts_at(p, [int(cat["offset"][c]) for c in ambiguous if cat["path"][c] == p])
             for p in sorted({str(cat["path"][c]) for c in ambiguous})}
    for c in ambiguous:
        path, offset = str(cat["path"][c]), int(cat["offset"][c])
        yield _bad(table, reading.Record(path, int(cat["line"][c]), offset, texts[path][offset], None),
                   f"duplicate_id:{table}_id")
    kept = order[keep]
    if not parts:
        feats = side_columns.arrays(table, {f: [] for f in side_columns.TABLES[table][1]})
    yield side_columns.SideTable.of(cat["id"][kept].astype(np.int64), {f: v[kept] for f, v in feats.items()})


def read_side_table(pbegin, table: str, files):
    """files: [(path, size)] -> {rows: one SideTable, bad, dropped, ambiguous} (module doc)."""
    files = [(p, s) for p, s in files if not reading.is_empty(s)]
    headers = {p: reading.read_header(p) for p, _ in files}
    parsed = (pbegin
              | f"Start_{table}" >> beam.Impulse()
              | f"Files_{table}" >> beam.FlatMap(lambda _: files)
              | f"Parse_{table}" >> beam.FlatMap(_parse_file, table, headers)
              .with_output_types(Any).with_outputs(BAD, main="rows"))
    deduped = (pbegin
               | f"AllFiles_{table}" >> beam.Impulse()
               | f"OnePerId_{table}" >> beam.FlatMap(lambda _, parts: _one_per_id(parts, table),
                                                     beam.pvalue.AsList(parsed.rows))
               .with_output_types(Any).with_outputs(BAD, DROPPED, AMBIGUOUS, main="rows"))
    bad = (parsed[BAD], deduped[BAD]) | f"Bad_{table}" >> beam.Flatten()
    return {"rows": deduped.rows, BAD: bad, DROPPED: deduped[DROPPED], AMBIGUOUS: deduped[AMBIGUOUS]}

