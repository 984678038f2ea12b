"""Parsing and validation of KuaiRand-Pure-format rows, and tf.Example building.

Pure functions (no Beam): the Beam pipeline only wires them.

Log rows
--------
``parse_log_line`` turns one CSV line of a ``log_*.csv`` file into a ``LogRow`` or a
``BadRow(reason)``. Reasons (``kind:field`` where a field is involved):

- ``malformed_row``            csv error or wrong number of columns
- ``missing_field:<field>``    empty value in a used column
- ``non_numeric:<field>``      a used column is not a strict integer ("3.0" is accepted;
                               "1_0", "１０", "1e1" are not: ``to_int``)
- ``negative:<field>``         ``play_time_ms``, ``duration_ms`` or ``time_ms`` < 0
- ``invalid_date:date``        ``date`` is not a calendar yyyymmdd
- ``unknown_user_id`` / ``unknown_video_id``  (set by the join, see ``join_reason``)
- ``ambiguous_user_id`` / ``ambiguous_video_id``  the id is listed twice with different
                               values in its side table (side_tables.py)

Value rules (ranges, date vs time_ms) live in row_rules.py.

Only the columns the examples use are validated (``USED_LOG_FIELDS``); the
others (is_follow, profile_stay_time, ...) are ignored.

Side tables
-----------
``parse_user_row`` / ``parse_video_row`` take a {column: text} dict and return
(id, features). Missing categorical ids become ``MISSING_ID`` (-1), missing
strings ``MISSING_STRING`` (""), missing numbers 0.0. ``tag`` may be a quoted list
"20,67": the first tag is ``tag_id``. User ``onehot_feat*`` may be floats ("1.0").
"""
import csv
import datetime
import math
import re
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from models import features as F

from components.log_example_gen.history import History
from schemas.kuairand_format import LOG_COLUMNS, USER_ONEHOT_COLUMNS

# Integer log columns the examples are built from, validated in this order.
USED_LOG_FIELDS = ["user_id", "video_id", "date", "hourmin", "time_ms", "is_click",
                   "is_like", "long_view", "play_time_ms", "duration_ms", "tab"]
NON_NEGATIVE_FIELDS = {"play_time_ms", "duration_ms", "time_ms"}

MISSING_STRING = ""
USER_NUMERIC_FEATURES = ["follow_user_num", "fans_user_num", "friend_user_num",
                         "register_days", "is_lowactive_period", "is_live_streamer",
                         "is_video_author"]
USER_ONEHOT_FEATURES = USER_ONEHOT_COLUMNS


class BadRow(NamedTuple):
    """A row that cannot become an example; ``reason`` is e.g. 'negative:time_ms'."""
    reason: str

    @property
    def kind(self) -> str:
        """Reason without the field: 'negative:time_ms' -> 'negative'."""
        return self.reason.split(":", 1)[0]


class LogRow(NamedTuple):
    """A validated log row (only the used columns)."""
    user_id: int
    video_id: int
    date: int  # yyyymmdd
    hourmin: int
    time_ms: int
    is_click: int
    is_like: int
    long_view: int
    play_time_ms: int
    duration_ms: int
    tab: int


def split_csv_line(line: str) -> Optional[List[str]]:
    """One CSV line -> its fields (quotes honoured), or None on a csv error."""
    try:
        rows = list(csv.reader([line], strict=True))
    except csv.Error:
        return None
    return rows[0] if len(rows) == 1 else None


_STRICT_INT = re.compile(r"[+-]?[0-9]+(?:\.0*)?")


def to_int(text: str) -> int:
    """'12' -> 12, '-3' -> -3, '1.0' -> 1; ValueError for anything else.

    Strict: ASCII digits only, so Python's lenient forms are refused: '1_0',
    full-width '１０', '1e1', ' 1 0', 'inf', '0x1a' are not integers here.
    """
    if not _STRICT_INT.fullmatch(text):
        raise ValueError(f"not an integer: {text!r}")
    return int(text.split(".", 1)[0])


def yyyymmdd_to_date(value: int) -> datetime.date:
    return datetime.date(value // 10000, value // 100 % 100, value % 100)


def parse_log_line(line: str, columns: Sequence[str] = tuple(LOG_COLUMNS)) -> Union[LogRow, BadRow]:
    """Parses and validates one log line.

    ``columns`` is the file's header (default: the KuaiRand release order); it must
    contain every name of ``USED_LOG_FIELDS`` (see ``missing_log_columns``).
    """
    return parse_log_fields(split_csv_line(line), columns)


def parse_log_fields(fields: Optional[List[str]], columns: Sequence[str]) -> Union[LogRow, BadRow]:
    """``parse_log_line`` on a line already split into fields (None: a csv error)."""
    if fields is None or len(fields) != len(columns):
        return BadRow("malformed_row")
    by_name = dict(zip(columns, fields))
    values = {}
    for name in USED_LOG_FIELDS:
        text = by_name[name].strip()
        if not text:
            return BadRow(f"missing_field:{name}")
        try:
            value = to_int(text)
        except ValueError:
            return BadRow(f"non_numeric:{name}")
        if name in NON_NEGATIVE_FIELDS and value < 0:
            return BadRow(f"negative:{name}")
        values[name] = value
    try:
        yyyymmdd_to_date(values["date"])
    except (ValueError, OverflowError):  # not a calendar date (OverflowError: a year beyond C int)
        return BadRow("invalid_date:date")
    return LogRow(**values)


def missing_log_columns(columns: Sequence[str]) -> List[str]:
    """Used log columns absent from a header (empty list: the header is usable)."""
    return [c for c in USED_LOG_FIELDS if c not in columns]


def join_reason(row: LogRow, users: Dict[int, dict], videos: Dict[int, dict],
                ambiguous: Optional[Dict[str, Sequence[int]]] = None) -> Optional[str]:
    """Reason a valid log row cannot be joined with the side tables, else None.
    ``ambiguous``: {'user': ids, 'video': ids} listed twice with different values."""
    ambiguous = ambiguous or {}
    if row.user_id in ambiguous.get("user", ()):
        return "ambiguous_user_id"
    if row.video_id in ambiguous.get("video", ()):
        return "ambiguous_video_id"
    if row.user_id not in users:
        return "unknown_user_id"
    if row.video_id not in videos:
        return "unknown_video_id"
    return None


# ------------------------------------------------------------------ side tables

def _int_or(text: str, default: int) -> int:
    text = (text or "").strip()
    if not text:
        return default
    try:
        return to_int(text)
    except ValueError:
        return default


def _float_or(text: str, default: float) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        return default
    return value if math.isfinite(value) else default


def _required_id(row: Dict[str, str], name: str) -> int:
    text = (row.get(name) or "").strip()
    if not text:
        raise ValueError(f"missing_field:{name}")
    try:
        return to_int(text)
    except ValueError:
        raise ValueError(f"non_numeric:{name}") from None


def parse_user_row(row: Dict[str, str]) -> Tuple[int, dict]:
    """{column: text} of user_features*.csv -> (user_id, features).

    Raises ValueError(reason) if user_id is missing or not an integer.
    """
    user_id = _required_id(row, "user_id")
    feats = {"user_active_degree": (row.get("user_active_degree") or "").strip() or MISSING_STRING}
    for name in USER_NUMERIC_FEATURES:
        feats[name] = _float_or(row.get(name), 0.0)
    for name in USER_ONEHOT_FEATURES:
        feats[name] = _int_or(row.get(name), F.MISSING_ID)
    return user_id, feats


def _parse_upload_date(text: str) -> Optional[int]:
    """'2022-04-10' or '20220410' -> date ordinal, None if missing/invalid."""
    text = (text or "").strip()
    for fmt in ("%Y-%m-%d", "%Y%m%d"):
        try:
            return datetime.datetime.strptime(text, fmt).date().toordinal()
        except ValueError:
            pass
    return None


def parse_video_row(row: Dict[str, str]) -> Tuple[int, dict]:
    """{column: text} of video_features_basic*.csv -> (video_id, features).

    Raises ValueError(reason) if video_id is missing or not an integer.
    """
    video_id = _required_id(row, "video_id")
    first_tag = (row.get("tag") or "").split(",")[0]
    return video_id, {
        "author_id": _int_or(row.get("author_id"), F.MISSING_ID),
        "music_id": _int_or(row.get("music_id"), F.MISSING_ID),
        "tag_id": _int_or(first_tag, F.MISSING_ID),
        "video_type": (row.get("video_type") or "").strip() or MISSING_STRING,
        "upload_type": (row.get("upload_type") or "").strip() or MISSING_STRING,
        "upload_ordinal": _parse_upload_date(row.get("upload_dt")),
        "video_duration_s": _float_or(row.get("video_duration"), 0.0) / 1000.0,
    }


# ------------------------------------------------------------------ examples

def duration_s(row: LogRow, video: dict) -> float:
    """Log duration; if it is 0, the video table's duration; else 0."""
    if row.duration_ms > 0:
        return row.duration_ms / 1000.0
    return max(video.get("video_duration_s") or 0.0, 0.0)


def video_age_days(row: LogRow, video: dict) -> float:
    """Days from upload to the log date, clipped at 0; 0 if the upload date is missing."""
    upload = video.get("upload_ordinal")
    if upload is None:
        return 0.0
    return float(max(yyyymmdd_to_date(row.date).toordinal() - upload, 0))


def example_features(row: LogRow, user: dict, video: dict, history: History, signals: dict) -> dict:
    """Every raw feature of ``models.features`` for one impression: name -> value/list.
    ``signals``: every name of ``F.SIGNAL_FEATURES`` -> value (signals.row_signals)."""
    feats = {
        "user_id": row.user_id,
        "video_id": row.video_id,
        "author_id": video["author_id"],
        "music_id": video["music_id"],
        "tag_id": video["tag_id"],
        "tab": row.tab,
        "hour": row.hourmin // 100,
        "user_active_degree": user["user_active_degree"],
        "video_type": video["video_type"],
        "upload_type": video["upload_type"],
        "duration_s": duration_s(row, video),
        "duration_bucket": F.duration_bucket(duration_s(row, video)),
        "video_age_days": video_age_days(row, video),
        "hist_video_id": history.video_id,
        "hist_author_id": history.author_id,
        "hist_is_click": history.is_click,
        "hist_watch_time_s": history.watch_time_s,
        "hist_time_gap_s": history.time_gap_s,
        "hist_tab": history.tab,
        F.HISTORY_LEN_FEATURE: history.length,
        F.LABEL_CLICK: row.is_click,
        F.LABEL_WATCH: row.play_time_ms / 1000.0,
        "is_like": row.is_like,
        "long_view": row.long_view,
        "time_ms": row.time_ms,
        "date": row.date,
    }
    for name in USER_NUMERIC_FEATURES + USER_ONEHOT_FEATURES:
        feats[name] = user[name]
    for name in F.SIGNAL_FEATURES:
        feats[name] = float(signals[name])
    return feats


def to_tf_example(feats: dict):
    """name -> value/list dict (as from ``example_features``) -> tf.train.Example.

    The feature kinds come from models.features, so the result parses with
    ``raw_feature_spec(L)``; a missing or unexpected name raises ValueError.
    """
    import tensorflow as tf

    expected = set(F.RAW_INT_FEATURES + F.RAW_FLOAT_FEATURES + F.RAW_BYTES_FEATURES
                   + F.RAW_HISTORY_INT + F.RAW_HISTORY_FLOAT)
    if set(feats) != expected:
        raise ValueError(f"features differ from the raw spec: missing "
                         f"{sorted(expected - set(feats))}, extra {sorted(set(feats) - expected)}")

    def as_list(v):
        return v if isinstance(v, (list, tuple)) else [v]

    # Filled in place through the proto API: building tf.train.Feature objects and
    # copying them into the map cost ~5x more (the bottleneck of ingestion).
    example = tf.train.Example()
    fmap = example.features.feature
    for k in F.RAW_INT_FEATURES + F.RAW_HISTORY_INT:
        fmap[k].int64_list.value.extend(as_list(feats[k]))
    for k in F.RAW_FLOAT_FEATURES + F.RAW_HISTORY_FLOAT:
        fmap[k].float_list.value.extend(as_list(feats[k]))
    for k in F.RAW_BYTES_FEATURES:
        fmap[k].bytes_list.value.append(feats[k].encode("utf-8"))
    return example
