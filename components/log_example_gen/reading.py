"""Splittable reading of CSV files: byte ranges, exact record boundaries and line numbers.

A file is cut into byte ranges of about ``range_bytes`` (``plan_ranges``) that workers
read in parallel. Records follow RFC 4180: a record ends at a newline outside quotes,
i.e. at a newline where the number of ``"`` characters since the start of the file is
even (a doubled ``""`` inside a quoted field counts twice). A range owns the records
that *start* inside it and reads the last one past its end if needed, so every record
is read exactly once whatever the range size.

To know whether a range starts inside a quoted field, and at which line, one cheap
pass counts the quotes and newlines of every range (``count_range``, ``bytes.count``);
prefix sums over those counts (``range_starts``) give each range its quote parity and
line number at its first byte, so record boundaries and line numbers are exact with
no worker reading a whole file::

    quote_parity(start_k) = (sum_{j<k} quotes_j) mod 2,   line(start_k) = 1 + sum_{j<k} newlines_j

Records (``read_range``) carry the file, the 1-based line and the byte offset where
they start, the decoded text without its line end, and a ``problem``:
``invalid_utf8``, ``quoted_newline`` (a quoted field holds a newline: the record spans
several lines, one dead letter) or ``unterminated_quote`` (a quote opened and never
closed: the record runs to the end of the file). The header (the record at offset 0)
is read once by ``read_header``, which strips a UTF-8 byte-order mark; blank records
are not rows. A 0-byte file has no header and no rows (``is_empty``).
"""
import dataclasses
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

from apache_beam.io.filesystems import FileSystems

BOM = b"\xef\xbb\xbf"
_CHUNK = 1 << 20


class ByteRange(NamedTuple):
    path: str
    start: int
    end: int


class Record(NamedTuple):
    path: str
    line: int  # 1-based line where the record starts
    offset: int  # byte offset where the record starts
    text: str
    problem: Optional[str]


@dataclasses.dataclass(frozen=True)
class RangeStart:
    quote_parity: int
    line: int


def plan_ranges(files: Sequence[Tuple[str, int]], range_bytes: int) -> List[ByteRange]:
    """(path, size) pairs -> byte ranges of at most ``range_bytes`` covering each file."""
    if range_bytes < 1:
        raise ValueError(f"range_bytes must be >= 1, got {range_bytes}")
    out = []
    for path, size in files:
        for start in range(0, max(size, 1), range_bytes):
            out.append(ByteRange(path, start, min(start + range_bytes, size)))
    return out


def count_range(r: ByteRange) -> Tuple[str, int, int, int]:
    """(path, start, quotes, newlines) in the bytes [start, end) of the file."""
    quotes = newlines = 0
    with FileSystems.open(r.path, compression_type="uncompressed") as f:
        f.seek(r.start)
        left = r.end - r.start
        while left > 0:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                break
            left -= len(chunk)
            quotes += chunk.count(b'"')
            newlines += chunk.count(b"\n")
    return r.path, r.start, quotes, newlines


def range_starts(counts: Sequence[Tuple[str, int, int, int]]) -> Dict[Tuple[str, int], RangeStart]:
    """Prefix sums of ``count_range`` results: {(path, start): RangeStart}."""
    out = {}
    by_path: Dict[str, List[Tuple[int, int, int]]] = {}
    for path, start, quotes, newlines in counts:
        by_path.setdefault(path, []).append((start, quotes, newlines))
    for path, rows in by_path.items():
        quotes_before, lines_before = 0, 0
        for start, quotes, newlines in sorted(rows):
            out[(path, start)] = RangeStart(quotes_before % 2, 1 + lines_before)
            quotes_before += quotes
            lines_before += newlines
    return out


def _decode(raw: bytes, offset: int) -> Tuple[str, Optional[str]]:
    if offset == 0 and raw.startswith(BOM):
        raw = raw[len(BOM):]
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), "invalid_utf8"


def decode_record(raw: bytes, offset: int) -> Tuple[str, Optional[str]]:
    """The bytes of one record (with its line end) -> (text without the line end, problem or None)."""
    text, problem = _decode(raw, offset)
    text = text[:-1] if text.endswith("\n") else text
    return (text[:-1] if text.endswith("\r") else text), problem


def _next_record(f, pos: int, line: int, parity: int):
    """Reads physical lines up to the end of the current record (a newline outside quotes)
    -> (chunks, pos, line, parity) after it; no chunks at end of file."""
    chunks = []
    while True:
        raw = f.readline()
        if not raw:
            break
        chunks.append(raw)
        pos += len(raw)
        parity ^= raw.count(b'"') & 1
        if raw.endswith(b"\n"):
            line += 1
            if parity == 0:
                break
    return chunks, pos, line, parity


def read_range(r: ByteRange, start: RangeStart, skip_header: bool = True) -> Iterator[Record]:
    """The records that start in [r.start, r.end) (see the module doc)."""
    with FileSystems.open(r.path, compression_type="uncompressed") as f:
        pos, line, parity = r.start, start.line, start.quote_parity
        if pos > 0:
            f.seek(pos - 1)
            at_record_start = f.read(1) == b"\n" and parity == 0
        else:
            at_record_start = True
        if not at_record_start:  # inside a line or a quoted field: go to the next record
            chunks, pos, line, parity = _next_record(f, pos, line, parity)
            if not chunks:
                return
        while pos < r.end:
            rec_start, rec_line = pos, line
            chunks, pos, line, parity = _next_record(f, pos, line, parity)
            if not chunks:
                return
            if rec_start == 0 and skip_header:
                continue
            text, problem = decode_record(b"".join(chunks), rec_start)
            if problem is None and parity == 1:
                problem = "unterminated_quote"
            elif problem is None and len(chunks) > 1:
                problem = "quoted_newline"
            if text.strip() or problem:
                yield Record(r.path, rec_line, rec_start, text, problem)


def texts_at(path: str, offsets: Iterable[int]) -> Dict[int, str]:
    """{offset: text} of the records of ``path`` that start at ``offsets``, read
    again by ``read_range``'s rules (one open of the file): the rows carry no text, the few
    that need theirs (duplicate checks, dead letters) read it here. ValueError if an offset
    is not where a record starts."""
    out: Dict[int, str] = {}
    with FileSystems.open(path, compression_type="uncompressed") as f:
        for offset in sorted(set(offsets)):
            if offset > 0:
                f.seek(offset - 1)
                if f.read(1) != b"\n":
                    raise ValueError(f"{path}: no record starts at offset {offset}")
            else:
                f.seek(0)
            chunks = _next_record(f, offset, 1, 0)[0]
            out[offset] = decode_record(b"".join(chunks), offset)[0]
    return out


def read_whole(path: str, size: int, skip_header: bool = True) -> Iterator[Record]:
    """Every record of one file in one range (small side tables, tests)."""
    r = ByteRange(path, 0, size)
    return read_range(r, RangeStart(0, 1), skip_header)


def is_empty(size: int) -> bool:
    return size == 0


def read_header(path: str) -> List[str]:
    """Column names of the first record (UTF-8 byte-order mark stripped, names trimmed);
    ValueError naming the file if there is none or it is not UTF-8."""
    import csv

    with FileSystems.open(path, compression_type="uncompressed") as f:
        raw = f.readline()
    if raw.startswith(BOM):
        raw = raw[len(BOM):]
    try:
        text = raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise ValueError(f"LogExampleGen: the header line of {path!r} is not UTF-8") from None
    try:
        rows = list(csv.reader([text], strict=True))
    except csv.Error:
        rows = []
    if len(rows) != 1 or not any(c.strip() for c in rows[0]):
        raise ValueError(f"LogExampleGen: {path!r} has no CSV header line")
    names = [c.strip() for c in rows[0]]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"LogExampleGen: the header of {path!r} repeats columns {dupes}")
    return names
