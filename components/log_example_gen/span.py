"""Span windows: which rows one LogExampleGen run emits as examples (TFX's span); pure Python.

A span run (``LogExampleGenConfig.span_index >= 0``) still reads every log row, so each
behaviour history sees every earlier event exactly as a one-shot run over the same rows
does (histories are built per user over all rows, history.py); only the split of a row
depends on the span. For span k with ``[start_ms, end_ms)`` and ``holdout_ms`` H::

    split(row) = train        if start_ms <= time_ms < end_ms
               = validation   if end_ms <= time_ms < end_ms + H and user_id is even
               = eval         if end_ms <= time_ms < end_ms + H and user_id is odd
               = history only otherwise (earlier rows feed histories; later rows nothing)

So the train splits of spans 0, 1, ..., k concatenated are exactly the rows of
``[start_0, end_k)`` with the one-shot run's features and histories (the test in
tests/components/log_example_gen/test_spans.py). The holdout is the first H of the
*next* span: unseen by this span's model (the Trainer's validation, the Evaluator's
eval, the Publisher's verification rows), and trained on by the next span, so no row
is lost to evaluation. Users split validation/eval by parity (deterministic, disjoint).

``span_window(k, origin_ms, span_hours, holdout_hours)`` gives span k of a continuous
run: ``[origin + k·S, origin + (k+1)·S)``; it needs logs up to ``origin + (k+1)·S + H``.
"""
from typing import NamedTuple, Optional

HOUR_MS = 3_600_000
TRAIN, VALIDATION, EVAL = "train", "validation", "eval"  # time_split.SPLIT_NAMES


class SpanWindow(NamedTuple):
    """Span ``index`` trains on ``[start_ms, end_ms)``, holds out ``[end_ms, end_ms + holdout_ms)``."""
    index: int
    start_ms: int
    end_ms: int
    holdout_ms: int

    def check(self) -> "SpanWindow":
        if self.index < 0:
            raise ValueError(f"span index must be >= 0, got {self.index}")
        if not 0 <= self.start_ms < self.end_ms:
            raise ValueError(f"span {self.index}: need 0 <= start_ms < end_ms, got [{self.start_ms}, {self.end_ms})")
        if self.holdout_ms <= 0:
            raise ValueError(f"span {self.index}: holdout_ms must be > 0 (validation and eval rows), "
                             f"got {self.holdout_ms}")
        return self

    def split_of(self, time_ms: int, user_id: int) -> Optional[str]:
        """The split of a row (module doc), None: history only."""
        if self.start_ms <= time_ms < self.end_ms:
            return TRAIN
        if self.end_ms <= time_ms < self.end_ms + self.holdout_ms:
            return VALIDATION if user_id % 2 == 0 else EVAL
        return None

    def describe(self) -> str:
        return (f"span {self.index}: train [{self.start_ms}, {self.end_ms}) ms, holdout "
                f"[{self.end_ms}, {self.end_ms + self.holdout_ms}) ms (validation: even user_id, eval: odd)")


def span_window(index: int, origin_ms: int, span_hours: float, holdout_hours: float) -> SpanWindow:
    """Span ``index`` of a continuous run whose span 0 starts at ``origin_ms``."""
    if span_hours <= 0 or holdout_hours <= 0:
        raise ValueError(f"span_hours and holdout_hours must be > 0, got {span_hours}, {holdout_hours}")
    length = int(round(span_hours * HOUR_MS))
    return SpanWindow(index, origin_ms + index * length, origin_ms + (index + 1) * length,
                      int(round(holdout_hours * HOUR_MS))).check()
