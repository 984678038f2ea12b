"""The user and video tables as columns: parsed a column at a time, looked up by id (numpy).

The columnar form of parsing.parse_user_row / parse_video_row (which stay the per-row
reference, tests/components/log_example_gen/test_bulk.py checks the two agree): every
feature is a function of one column's text, so each column is parsed once per distinct
text (the tables repeat few values) with parsing's own functions::

    feature[f](row) = g_f(text of column c_f in row)     (g_f, c_f: USER_FEATURES, VIDEO_FEATURES)

and only the id is parsed per row (parsing._required_id, whose ValueError is the bad row's
reason). A ``SideTable`` holds the kept ids (sorted) and the feature columns (numbers as
numpy numbers, strings as numpy unicode: no Python object per row); ``id in table``
tells whether a log row joins.
"""
import csv
import pickle
import zlib
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from components.log_example_gen import parsing
from models import features as F


def _text(t: Optional[str]) -> str:
    return (t or "").strip() or parsing.MISSING_STRING


def _first_tag(t: Optional[str]) -> int:
    return parsing._int_or((t or "").split(",")[0], F.MISSING_ID)


# feature -> (column, g): parsing.parse_user_row / parse_video_row one column at a time
USER_FEATURES: Dict[str, Tuple[str, Callable]] = {"user_active_degree": ("user_active_degree", _text)}
USER_FEATURES.update({k: (k, lambda t: parsing._float_or(t, 0.0)) for k in parsing.USER_NUMERIC_FEATURES})
USER_FEATURES.update({k: (k, lambda t: parsing._int_or(t, F.MISSING_ID)) for k in parsing.USER_ONEHOT_FEATURES})
VIDEO_FEATURES: Dict[str, Tuple[str, Callable]] = {
    "author_id": ("author_id", lambda t: parsing._int_or(t, F.MISSING_ID)),
    "music_id": ("music_id", lambda t: parsing._int_or(t, F.MISSING_ID)),
    "tag_id": ("tag", _first_tag),
    "video_type": ("video_type", _text),
    "upload_type": ("upload_type", _text),
    "upload_ordinal": ("upload_dt", parsing._parse_upload_date),
    "video_duration_s": ("video_duration", lambda t: parsing._float_or(t, 0.0) / 1000.0),
}
TABLES = {"user": ("user_id", USER_FEATURES), "video": ("video_id", VIDEO_FEATURES)}


def split_fields(text: str) -> Optional[List[str]]:
    """parsing.split_csv_line, with str.split where the csv module would give the same fields."""
    if not text or '"' in text or "\r" in text or "\n" in text or "\x00" in text:
        return parsing.split_csv_line(text)
    return text.split(",")


def split_all(texts: Sequence[str]) -> List[Optional[List[str]]]:
    """[split_fields(t) for t in texts] with one csv pass when every text is one csv row (quotes
    balanced, no line end or NUL inside; the pass fails or miscounts otherwise: per text then)."""
    if not any("\r" in t or "\n" in t or "\x00" in t or not t for t in texts):
        try:
            rows = list(csv.reader(texts, strict=True))
        except csv.Error:
            rows = []
        if len(rows) == len(texts):
            return rows
    return [split_fields(t) for t in texts]


def parse_ids(texts: Sequence[str], name: str) -> Tuple[np.ndarray, List[Optional[str]]]:
    """(ids, reasons): parsing._required_id of every text (reason None where it parses; id 0 otherwise)."""
    ids, reasons = np.zeros(len(texts), dtype=np.int64), [None] * len(texts)
    for k, t in enumerate(texts):
        if t.isascii() and t.isdigit():
            ids[k] = int(t)
            continue
        try:
            ids[k] = parsing._required_id({name: t}, name)
        except ValueError as e:
            reasons[k] = str(e)
    return ids, reasons


def parse_column(texts: Optional[Sequence[str]], n: int, g: Callable) -> list:
    """[g(t) for t in texts], g called once per distinct text (None texts: the column is absent)."""
    if texts is None:
        return [g(None)] * n
    cache: dict = {}
    return [cache[t] if t in cache else cache.setdefault(t, g(t)) for t in texts]


def feature_columns(table: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> Dict[str, list]:
    """Rows of fields (``len(header)`` each) -> {feature: values} of parse_user_row / parse_video_row."""
    _, spec = TABLES[table]
    by_name = dict(zip(header, zip(*rows))) if rows else {}
    return {f: parse_column(by_name.get(c), len(rows), g) for f, (c, g) in spec.items()}


class SideTable:
    """Kept ids (sorted, unique) and their feature columns as numpy arrays (module doc)."""

    def __init__(self, ids: np.ndarray, columns: Dict[str, np.ndarray]):
        self.ids, self.columns = ids, columns

    def __contains__(self, key) -> bool:
        k = int(np.searchsorted(self.ids, key))
        return k < len(self.ids) and int(self.ids[k]) == key

    def __len__(self) -> int:
        return len(self.ids)

    def __getstate__(self):  # a side input of three stages: kept packed (Packed)
        return _pack(self.ids, self.columns)

    def __setstate__(self, state):
        self.ids, self.columns = _unpack(state)

    @classmethod
    def of(cls, ids: np.ndarray, columns: Dict[str, np.ndarray]) -> "SideTable":
        """From unique ids in any order and their columns (``arrays``)."""
        order = np.argsort(ids, kind="stable")
        return cls(ids[order], {k: v[order] for k, v in columns.items()})


def _pack(*values) -> bytes:
    return zlib.compress(pickle.dumps(values, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _unpack(blob: bytes):
    return pickle.loads(zlib.decompress(blob))


class Packed:
    """A value held as its zlib-compressed (level 1) pickle; ``value()`` unpacks a copy.

    For the side tables and their per-file parts, which travel as Beam side inputs: the
    in-process runner keeps each consuming stage's encoded side input until the pipeline
    ends (no decoded copy: its state cache is off, components/beam_in_process.py).
    Fixed-width strings (paths, string features) and 64-bit columns of small values are
    mostly zero or repeated bytes: the 4M-row simulation's 80k-user table, raw texts then
    included, pickled to 22.1 MB, packed 2.2 MB (75 ms). ``SideTable`` pickles the same way
    (it is unpacked where it is used)."""

    __slots__ = ("blob",)

    def __init__(self, value):
        self.blob = _pack(value)

    def __getstate__(self):
        return self.blob

    def __setstate__(self, blob):
        self.blob = blob

    def value(self):
        return _unpack(self.blob)[0]


def arrays(table: str, feats: Dict[str, list]) -> Dict[str, np.ndarray]:
    """feature_columns' lists as numpy arrays (strings as unicode, a missing upload date as -1)."""
    _, spec = TABLES[table]
    out = {}
    for f in spec:
        values = feats[f]
        if f == "upload_ordinal":
            values = [-1 if v is None else v for v in values]
        sample = next((v for v in values if v is not None), 0)
        dtype = np.str_ if isinstance(sample, str) else np.float64 if isinstance(sample, float) else np.int64
        out[f] = np.array(values, dtype=dtype) if len(values) else np.zeros(0, dtype=dtype)
    return out


def row_features(columns: Dict[str, np.ndarray], k: int) -> dict:
    """Row k of ``arrays`` as the features dict of the per-row parser (None: no upload date)."""
    out = {f: v[k].item() for f, v in columns.items()}
    if out.get("upload_ordinal") == -1:
        out["upload_ordinal"] = None
    return out
