"""Leakage-free behaviour histories for one user's events (pure Python, no Beam/TF).

For an impression at time t the history is the user's *earlier* events, i.e. those
with ``time_ms < t`` (strictly: an event at the same millisecond as the impression,
or later, never appears), that pass the watch filter ``watch_time_s >= min_watch_s``
(``min_watch_s = 0`` keeps every earlier impression, clicked or not: the outcomes
are features of the history). They are ordered **most recent first** (among
earlier events sharing a millisecond, the later one in input order counts as more
recent) and truncated to the ``history_length`` most recent ones.

Every list has exactly ``history_length`` entries: the real entries come first and
the tail is padded with ``HISTORY_PAD_ID`` (-1) for ids (``video_id``,
``author_id``, ``tab``: the scene of the item) and 0 for values (``is_click``, ``watch_time_s``, ``time_gap_s``).
``length`` is the number of real entries, so the mask is ``position < length``.

Example (L = 3, min_watch_s = 0)::

    events (time_ms, video_id): (1000, 7) (2000, 8) (2000, 9) (5000, 4)
    history of (2000, 8):  video_id [7, -1, -1], time_gap_s [1.0, 0, 0], length 1
    history of (5000, 4):  video_id [9, 8, 7],   time_gap_s [3.0, 3.0, 4.0], length 3
"""
import collections
from typing import List, NamedTuple, Sequence

from models.features import HISTORY_PAD_ID


class HistoryEvent(NamedTuple):
    """One earlier impression of a user, as far as histories need it."""
    time_ms: int
    video_id: int
    author_id: int
    is_click: int
    watch_time_s: float
    tab: int = HISTORY_PAD_ID  # the scene the event was shown in


class History(NamedTuple):
    """A padded history of fixed length L (see the module docstring)."""
    video_id: List[int]
    author_id: List[int]
    is_click: List[int]
    watch_time_s: List[float]
    time_gap_s: List[float]
    tab: List[int]
    length: int


def empty_history(history_length: int) -> History:
    """The history of a user's first impression: only padding."""
    return _padded([], 0, history_length)


def _padded(recent_first: Sequence[HistoryEvent], now_ms: int, history_length: int) -> History:
    pad = history_length - len(recent_first)
    return History(
        video_id=[e.video_id for e in recent_first] + [HISTORY_PAD_ID] * pad,
        author_id=[e.author_id for e in recent_first] + [HISTORY_PAD_ID] * pad,
        is_click=[e.is_click for e in recent_first] + [0] * pad,
        watch_time_s=[float(e.watch_time_s) for e in recent_first] + [0.0] * pad,
        time_gap_s=[(now_ms - e.time_ms) / 1000.0 for e in recent_first] + [0.0] * pad,
        tab=[e.tab for e in recent_first] + [HISTORY_PAD_ID] * pad,
        length=len(recent_first),
    )


def build_histories(events: Sequence[HistoryEvent], history_length: int,
                    min_watch_s: float = 0.0) -> List[History]:
    """Histories of every event of one user.

    Args:
      events: the user's events sorted by ``time_ms`` ascending (ties in any order).
      history_length: L, the fixed length of every list (>= 1).
      min_watch_s: only earlier events with ``watch_time_s >= min_watch_s`` enter.

    Returns:
      ``histories[i]`` is the history of ``events[i]``: earlier events with
      ``time_ms < events[i].time_ms``, most recent first, padded to L.

    Raises:
      ValueError: if L < 1, min_watch_s < 0 or the events are not sorted by time.
    """
    if history_length < 1:
        raise ValueError(f"history_length must be >= 1, got {history_length}")
    if min_watch_s < 0:
        raise ValueError(f"min_watch_s must be >= 0, got {min_watch_s}")
    # The L most recent eligible events strictly before the current timestamp group.
    window = collections.deque(maxlen=history_length)
    histories: List[History] = []
    i, n = 0, len(events)
    while i < n:
        t = events[i].time_ms
        j = i
        while j < n and events[j].time_ms == t:
            j += 1
        if j < n and events[j].time_ms < t:
            raise ValueError(
                f"events must be sorted by time_ms: {events[j].time_ms} after {t}")
        # Every event of this timestamp group sees the window as it was before the
        # group, so same-millisecond events never leak into each other.
        recent_first = list(reversed(window))
        for k in range(i, j):
            histories.append(_padded(recent_first, events[k].time_ms, history_length))
        for k in range(i, j):
            if events[k].watch_time_s >= min_watch_s:
                window.append(events[k])
        i = j
    return histories
