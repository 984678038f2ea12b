"""Kept rows of many users + their signals -> serialized tf.Examples, in bulk.

The columnar form of step 5 of user_examples.py and of parsing.example_features: every
raw feature of models.features as one Arrow list column (1 value, or L for the
histories), encoded by tfx-bsl's C++ ``RecordBatchToExamplesEncoder`` (the path TFX
uses for Arrow data). Values are those of parsing.example_features (ints as int64,
floats as float32 as in a tf.train.FloatList, strings as UTF-8 bytes); only the order of
the features inside the proto map may differ, which parsing ignores.
"""
from typing import Dict, Iterator, List, Tuple

import numpy as np
import pyarrow as pa

from components.log_example_gen import columns as C
from components.log_example_gen import example_block, parsing, signal_columns, signal_families, user_batches
from models import features as F

_VIDEO_INT = ("author_id", "music_id", "tag_id")
_VIDEO_STR = ("video_type", "upload_type")
USER_FLOAT = tuple(parsing.USER_NUMERIC_FEATURES)
USER_INT = tuple(parsing.USER_ONEHOT_FEATURES)


class SideColumns:
    """The user and video tables (side_columns.SideTable) as sorted id arrays + the columns
    the examples use (built once per worker)."""

    def __init__(self, users, videos):
        self.user_ids = users.ids
        self.user = {k: users.columns[k] for k in ("user_active_degree",) + USER_FLOAT + USER_INT}
        self.video_ids = videos.ids
        self.video = {k: videos.columns[k] for k in _VIDEO_INT + _VIDEO_STR + ("upload_ordinal",)}
        self.video["video_duration_s"] = np.maximum(videos.columns["video_duration_s"], 0.0)

    def users_at(self, ids: np.ndarray) -> Dict[str, np.ndarray]:
        return dict(zip(self.user, C.lookup(ids, self.user_ids, list(self.user.values()))))

    def videos_at(self, ids: np.ndarray) -> Dict[str, np.ndarray]:
        return dict(zip(self.video, C.lookup(ids, self.video_ids, list(self.video.values()))))


def duration_s(duration_ms: np.ndarray, video_duration_s: np.ndarray) -> np.ndarray:
    """parsing.duration_s on arrays."""
    return np.where(duration_ms > 0, duration_ms / 1000.0, video_duration_s)


_BUCKET_LABELS = np.array([F.duration_bucket(-1.0)] + [F.duration_bucket(float(b))
                                                      for b in F.DURATION_BUCKET_BOUNDARIES_S], dtype=object)


def duration_bucket_code(seconds: np.ndarray) -> np.ndarray:
    """Index of F.duration_bucket(seconds) in the bucket order (a bijection with the labels)."""
    return np.searchsorted(np.asarray(F.DURATION_BUCKET_BOUNDARIES_S, dtype=np.float64), seconds, side="right")


def video_age_days(date: np.ndarray, upload_ordinal: np.ndarray) -> np.ndarray:
    """parsing.video_age_days on arrays (-1: no upload date -> 0)."""
    dates, inverse = np.unique(date, return_inverse=True)
    ordinal = np.array([parsing.yyyymmdd_to_date(int(d)).toordinal() for d in dates], dtype=np.int64)[inverse]
    return np.where(upload_ordinal < 0, 0.0, np.maximum(ordinal - upload_ordinal, 0).astype(np.float64))


def signal_rows(rows: C.Batch, videos: Dict[str, np.ndarray]) -> C.Batch:
    """The columns the signal passes need (signals.SignalRow as columns)."""
    dur = duration_s(rows["duration_ms"], videos["video_duration_s"])
    return {"row_id": rows["row_id"], "user_id": rows["user_id"], "time_ms": rows["time_ms"],
            "is_click": rows["is_click"], "tab": rows["tab"], "video_id": rows["video_id"],
            "author_id": videos["author_id"], "music_id": videos["music_id"], "tag_id": videos["tag_id"],
            "duration_bucket": duration_bucket_code(dur), "watch_s": rows["play_time_ms"] / 1000.0,
            "duration_s": dur, "hour": rows["hourmin"] // 100}


def _list_column(values: np.ndarray, width: int, kind: str) -> pa.Array:
    n = len(values) // width if width else 0
    offsets = pa.array(np.arange(0, n * width + 1, width, dtype=np.int32))
    if kind == "int":
        flat = pa.array(np.ascontiguousarray(values, dtype=np.int64))
    elif kind == "float":
        flat = pa.array(np.ascontiguousarray(values, dtype=np.float32))
    else:  # each distinct string encoded once, then gathered
        distinct, inverse = np.unique(values.astype(np.str_), return_inverse=True)
        flat = pa.array([s.encode("utf-8") for s in distinct.tolist()], type=pa.binary()).take(
            pa.array(inverse.astype(np.int64)))
    return pa.ListArray.from_arrays(offsets, flat)


def feature_columns(rows: C.Batch, side: SideColumns, signals: Dict[str, np.ndarray], history_length: int,
                    min_watch_s: float, label_delay_ms: int,
                    families: Tuple[str, ...] = ()) -> Dict[str, Tuple[np.ndarray, int]]:
    """Kept rows sorted by (user, time, row_id) + {sig_tab_ctr, entity signals} in that order
    -> {feature: (flat values, values per row)} of parsing.example_features, + the float
    features of the optional signal ``families`` (signal_families.py)."""
    video, user = side.videos_at(rows["video_id"]), side.users_at(rows["user_id"])
    dur = duration_s(rows["duration_ms"], video["video_duration_s"])
    sig_rows = signal_rows(rows, video)
    sig_rows["e_tab"] = signals["sig_tab_ctr"]
    user_stats = signal_columns.user_pass(rows["user_id"], sig_rows, label_delay_ms)
    sig = dict(signals, **user_stats)
    sig["sig_propensity"] = signal_columns.propensity(sig["sig_tab_ctr"], sig["sig_user_coec"], sig["sig_video_coec"])
    hist = user_batches.histories(rows, video["author_id"], history_length, min_watch_s)
    one = {
        "user_id": rows["user_id"], "video_id": rows["video_id"], "author_id": video["author_id"],
        "music_id": video["music_id"], "tag_id": video["tag_id"], "tab": rows["tab"],
        "hour": rows["hourmin"] // 100, "user_active_degree": user["user_active_degree"],
        "video_type": video["video_type"], "upload_type": video["upload_type"], "duration_s": dur,
        "duration_bucket": _BUCKET_LABELS[duration_bucket_code(dur)],
        "video_age_days": video_age_days(rows["date"], video["upload_ordinal"]),
        F.HISTORY_LEN_FEATURE: hist["length"], F.LABEL_CLICK: rows["is_click"],
        F.LABEL_WATCH: rows["play_time_ms"] / 1000.0, "is_like": rows["is_like"], "long_view": rows["long_view"],
        "time_ms": rows["time_ms"], "date": rows["date"],
    }
    one.update({k: user[k] for k in USER_FLOAT + USER_INT})
    one.update({k: sig[k] for k in F.SIGNAL_FEATURES})
    if families:
        one.update(signal_families.family_columns(dict(sig_rows, long_view=rows["long_view"]), families,
                                                  label_delay_ms))
    out = {k: (v, 1) for k, v in one.items()}
    out.update({f"hist_{k}": (hist[k].reshape(-1), history_length) for k in user_batches.HISTORY_COLUMNS})
    return out


_KINDS = ([(k, "int") for k in F.RAW_INT_FEATURES + F.RAW_HISTORY_INT]
          + [(k, "float") for k in F.RAW_FLOAT_FEATURES + F.RAW_HISTORY_FLOAT]
          + [(k, "bytes") for k in F.RAW_BYTES_FEATURES])


def encode(features: Dict[str, Tuple[np.ndarray, int]], index: np.ndarray) -> Tuple[List[bytes], np.ndarray]:
    """The rows ``index`` as serialized tf.Examples, in two parts per row (records, tails):
    record i is ``records[i] + tails[i]``, the Example of the features whose encoding has
    a varying length (tfx-bsl's Arrow encoder) followed by the Example of the fixed-length
    ones (example_block.py; parsers merge the two)."""
    from tfx_bsl.coders import example_coder

    kinds = _KINDS + [(k, "float") for k in signal_families.ALL_FEATURES if k in features]
    if set(features) != {k for k, _ in kinds}:
        raise ValueError(f"features differ from the raw spec: {sorted(set(features) ^ {k for k, _ in kinds})}")
    arrays, names, fixed = [], [], []
    for name, kind in kinds:
        values, width = features[name]
        picked = values.reshape(-1, width)[index].reshape(-1) if width > 1 else values[index]
        size = example_block.fixed_length(kind, picked)
        if size:
            fixed.append((name, kind, picked, width, size))
        else:
            arrays.append(_list_column(picked, width, kind))
            names.append(name)
    tails = example_block.block(fixed, len(index))[0] if fixed else np.zeros((len(index), 0), dtype=np.uint8)
    if not names:
        return [b""] * len(index), tails
    return example_coder.RecordBatchToExamplesEncoder().encode(pa.RecordBatch.from_arrays(arrays, names)), tails


ENCODE_ROWS = 8192  # rows per encoder call: large batches, bounded memory


def examples_by_split(features: Dict[str, Tuple[np.ndarray, int]], split_code: np.ndarray,
                      split_names: List[str]) -> Iterator[Tuple[str, Iterator[Tuple[List[bytes], np.ndarray]]]]:
    """(split, chunks of (records, tails): ``encode``) for every split present (code -1: history only)."""
    for code, name in enumerate(split_names):
        index = np.flatnonzero(split_code == code)
        if len(index):
            yield name, (encode(features, index[k:k + ENCODE_ROWS]) for k in range(0, len(index), ENCODE_ROWS))

