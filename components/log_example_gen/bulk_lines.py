"""A byte range of a log file as arrays of lines (numpy): the bulk form of reading.read_range.

When the range starts outside a quoted field and every newline of it (and of the tail
read past its end to finish its last record) is outside quotes (an even number of ``"``
before it in the range), every record is one physical line, so with
``nl`` the positions of the newlines (file offsets) and ``line(start)`` from the range's
prefix sums (reading.RangeStart)::

    record starts  s = {start if start = 0} U {nl_k + 1 : start <= nl_k + 1 < end}
    record end     e(s) = the first newline >= s (or the end of the file), minus a '\\r' before it
    line(s)        = line(start) + #{nl_k : start <= nl_k < s}

which are the offsets, lines and texts ``read_range`` gives record by record (header at
offset 0 skipped). Lines that are not plain (a byte outside printable ASCII, an empty
line, a very long line) become ``reading.Record`` objects through ``reading``'s own
decoding, so their problems and texts are those of the per-record reader. A range with a
newline inside quotes returns None: the caller reads it with ``read_range``.
"""
from typing import List, NamedTuple, Optional

import numpy as np
from apache_beam.io.filesystems import FileSystems

from components.log_example_gen import reading

MAX_FAST_LINE = 4096  # longer lines take the per-record path (texts are gathered as a 2-d array)
_TAIL_CHUNK = 1 << 16


class Lines(NamedTuple):
    buf: np.ndarray  # uint8 bytes of the range from ``base``
    base: int  # file offset of buf[0]
    start: np.ndarray  # file offsets of the plain records
    end: np.ndarray  # file offsets where their text ends
    line: np.ndarray  # their 1-based line numbers
    others: List[reading.Record]  # every other record of the range, from reading's rules
    quotes: np.ndarray  # positions in buf of the range's '"' bytes (a plain record has none)


def _read(r: reading.ByteRange):
    base = max(r.start - 1, 0)
    with FileSystems.open(r.path, compression_type="uncompressed") as f:
        f.seek(base)
        data = f.read(r.end - base)
        if data and not data.endswith(b"\n"):  # the last record runs past the range: to its newline
            parts = [data]
            while True:
                chunk = f.read(_TAIL_CHUNK)
                if not chunk:
                    break
                k = chunk.find(b"\n")
                parts.append(chunk if k < 0 else chunk[:k + 1])
                if k >= 0:
                    break
            data = b"".join(parts)
    return data, base


def read_lines(r: reading.ByteRange, start: reading.RangeStart) -> Optional[Lines]:
    """The records starting in [r.start, r.end) (module doc), or None if a newline is inside quotes."""
    if start.quote_parity:
        return None
    data, base = _read(r)
    buf = np.frombuffer(data, dtype=np.uint8)
    nl = np.flatnonzero(buf == 10) + base
    quotes = np.zeros(0, dtype=np.int64)
    if b'"' in data:
        quotes = np.flatnonzero(buf == 34)
        quotes = quotes[quotes >= r.start - base]  # the byte before the range is not in it
        if (np.searchsorted(quotes, nl - base) % 2).any() or len(quotes) % 2:
            return None  # a newline inside quotes (a record of several lines) or a quote never closed
    starts = nl + 1
    if r.start == 0:
        starts = np.concatenate([[0], starts])
    starts = starts[(starts >= r.start) & (starts < r.end)]
    k = np.searchsorted(nl, starts)  # the newline ending each record
    has_nl = k < len(nl)
    nl_at = nl[np.minimum(k, len(nl) - 1)] if len(nl) else np.zeros(len(k), dtype=np.int64)
    ends = np.where(has_nl, nl_at, base + len(data))
    lines = start.line + k - np.searchsorted(nl, r.start)
    keep = starts != 0
    starts, ends, lines, has_nl = starts[keep], ends[keep], lines[keep], has_nl[keep]
    cr = (ends > starts) & (buf[np.maximum(ends - 1 - base, 0)] == 13)
    text_ends = ends - cr
    plain = (text_ends > starts) & (text_ends - starts <= MAX_FAST_LINE)
    odd = np.flatnonzero((buf < 32) | (buf > 126))  # positions: few (the newlines, non-ASCII bytes)
    plain &= np.searchsorted(odd, text_ends - base) == np.searchsorted(odd, starts - base)
    others = []
    for s, e, n in zip(starts[~plain].tolist(), (ends + has_nl)[~plain].tolist(), lines[~plain].tolist()):
        text, problem = reading.decode_record(data[s - base:e - base], s)
        if text.strip() or problem:
            others.append(reading.Record(r.path, n, s, text, problem))
    return Lines(buf, base, starts[plain], text_ends[plain], lines[plain], others, quotes)


def records(path: str, lines: Lines, index: np.ndarray) -> List[reading.Record]:
    """The plain records ``index`` as reading.Record objects (blank ones left out, as read_range does)."""
    text = lines.buf.tobytes().decode("latin-1")  # plain records are ASCII: one character a byte
    base, record = lines.base, reading.Record
    return [record(path, n, s, t, None) for s, e, n in zip(lines.start[index].tolist(), lines.end[index].tolist(),
                                                          lines.line[index].tolist())
            for t in (text[s - base:e - base],) if t.strip()]


def read_records(path: str, size: int) -> List[reading.Record]:
    """Every record of a whole file (header skipped), as reading.read_whole gives them."""
    lines = read_lines(reading.ByteRange(path, 0, size), reading.RangeStart(0, 1))
    if lines is None:
        return list(reading.read_whole(path, size))
    return sorted(records(path, lines, np.arange(len(lines.start))) + lines.others, key=lambda rec: rec.offset)
