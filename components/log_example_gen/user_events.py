"""Each user's events, once, for lifelong histories (#38): a side output of LogExampleGen.

The examples carry the last ``history_length`` (50) events of each impression's user.
A model that reads a whole lifelong history (TWIN-style retrieval, a Titans memory
writer: bench/bench_lifelong.py, models/layers/titans_memory.py) needs thousands, and
writing them into every example would cost impressions x L values. With
``user_events`` on, LogExampleGen writes every user's history events once instead,
under the Examples artifact::

    <examples>/UserEvents/user_events-SSSSS-of-NNNNN.gz    (gzipped TFRecords, a file per user shard)

one tf.Example per user: ``user_id`` [u] and, in the order of the histories (time, then
row id: user_batches.histories), the int64 lists ``time_ms``, ``video_id``,
``author_id``, ``tab``, ``is_click`` and the float list ``watch_time_s`` of the user's
history events in the run's window: the kept rows (every split and the history-only
ones) watched ``>= history_min_watch_s``. The size grows with the events, each once.

For an impression of user u at time t, the lifelong history of length L is::

    long_history(events_u, t, L)[k] = the (c - k)-th event,  k < min(c, L),
    c = #events of u with time_ms < t

most recent first: the same events in the same order as the ``hist_*`` features for
L = history_length (the examples' 50 are its first 50), with ``time_gap_s`` = (t -
time_ms) / 1000 as theirs.
"""
import os
from typing import Dict, Iterable, List

import numpy as np
import pyarrow as pa

from components.log_example_gen import columns as C
from components.log_example_gen import record_files, user_batches

DIR = "UserEvents"
FILE_PREFIX, FILE_SUFFIX = "user_events", ".gz"
INT_COLUMNS = ("time_ms", "video_id", "author_id", "tab", "is_click")
FLOAT_COLUMNS = ("watch_time_s",)
COLUMNS = INT_COLUMNS + FLOAT_COLUMNS


def events_uri(examples_uri: str) -> str:
    return os.path.join(examples_uri, DIR)


def encode(rows: C.Batch, author_id: np.ndarray, min_watch_s: float) -> List[bytes]:
    """Kept rows sorted by (user, time, row_id) -> one serialized tf.Example per user
    with history events (module doc); tfx-bsl's Arrow encoder, no per-row Python."""
    from tfx_bsl.coders import example_coder

    watch_s = rows["play_time_ms"] / 1000.0
    kept = np.flatnonzero(user_batches.history_events(rows, min_watch_s))
    if not len(kept):
        return []
    users = rows["user_id"][kept]
    starts = np.flatnonzero(np.concatenate([[True], users[1:] != users[:-1]]))
    offsets = pa.array(np.append(starts, len(kept)).astype(np.int32))
    source = {"time_ms": rows["time_ms"], "video_id": rows["video_id"], "author_id": author_id,
              "tab": rows["tab"], "is_click": rows["is_click"], "watch_time_s": watch_s}
    arrays = [pa.ListArray.from_arrays(pa.array(np.arange(len(starts) + 1, dtype=np.int32)),
                                       pa.array(users[starts].astype(np.int64)))]
    arrays += [pa.ListArray.from_arrays(offsets, pa.array(source[k][kept].astype(
        np.int64 if k in INT_COLUMNS else np.float32))) for k in COLUMNS]
    batch = pa.RecordBatch.from_arrays(arrays, ["user_id", *COLUMNS])
    return example_coder.RecordBatchToExamplesEncoder().encode(batch)


def parse(records: Iterable[bytes]) -> Dict[int, Dict[str, np.ndarray]]:
    """Serialized per-user Examples -> {user id: {column: array in event order}}; a user in
    two records (it cannot happen: a user is in one shard) raises ValueError."""
    from tfx_bsl.coders import example_coder

    records = list(records)
    out: Dict[int, Dict[str, np.ndarray]] = {}
    if not records:
        return out
    batch = example_coder.ExamplesToRecordBatchDecoder().DecodeBatch(records)
    cols = {name: batch.column(name) for name in ["user_id", *COLUMNS]}
    for i in range(batch.num_rows):
        user = int(cols["user_id"][i].values[0].as_py())
        if user in out:
            raise ValueError(f"user {user} has two user-events records")
        events = {}
        for name in COLUMNS:
            values = cols[name][i].values
            events[name] = (np.zeros(0, np.int64 if name in INT_COLUMNS else np.float32) if values is None
                            else values.to_numpy(zero_copy_only=False))
        out[user] = events
    return out


def read(examples_uri: str) -> Dict[int, Dict[str, np.ndarray]]:
    """Every user's events from an Examples artifact LogExampleGen wrote with
    ``user_events`` on; ValueError if it has none."""
    from apache_beam.io.filesystems import FileSystems

    pattern = os.path.join(events_uri(examples_uri), f"{FILE_PREFIX}-*{FILE_SUFFIX}")
    paths = sorted(m.path for m in FileSystems.match([pattern])[0].metadata_list)
    if not paths:
        raise ValueError(f"no user events under {examples_uri} (LogExampleGen's user_events was off)")
    out: Dict[int, Dict[str, np.ndarray]] = {}
    for path in paths:
        part = parse(record_files.read_frames(path, record_files.keep_all))
        twice = set(part) & set(out)
        if twice:
            raise ValueError(f"{path}: users {sorted(twice)[:5]} are in another user-events file too")
        out.update(part)
    return out


def long_history(events: Dict[str, np.ndarray], t_ms: int, length: int) -> Dict[str, np.ndarray]:
    """The user's events with time_ms < t_ms, most recent first, at most ``length``, plus
    ``time_gap_s`` (module doc)."""
    if length < 1:
        raise ValueError(f"length must be >= 1, got {length}")
    c = int(np.searchsorted(events["time_ms"], t_ms, side="left"))
    pick = np.arange(c - 1, max(c - length, 0) - 1, -1)
    out = {k: v[pick] for k, v in events.items()}
    out["time_gap_s"] = (t_ms - out["time_ms"]) / 1000.0
    return out
