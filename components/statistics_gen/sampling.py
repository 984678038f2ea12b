"""Which examples a split's statistics read: a deterministic Bernoulli sample.

The rate of a split with N examples (the ``num_<split>_examples`` LogExampleGen records)
and a budget of B rows is

    r = min(1, B / N)      (B = 0 or N unknown: r = 1, every example),

unless the user names one (TFX's ``StatsOptions.sample_rate`` or ``sample_rate_by_split``).
A budget below ``MIN_SAMPLE_ROWS`` is refused: a sample of a few rows can come out empty
(P = e^-B), and statistics of no rows would make ExampleValidator report every feature
missing.
Record k of file f is kept iff  splitmix64(k + seed_f) < r * 2^64,  seed_f = crc32 of the
file's name, so a rerun on the same files reads the same sample and the expected sample
size is r * N.
"""
import os
import zlib
from typing import Callable, Mapping, Optional

import numpy as np

from components.log_example_gen.record_files import keep_all
from models.evaluation.tfma.sampling import splitmix64

MIN_SAMPLE_ROWS = 1000
_TWO_64 = float(2 ** 64)
_CHUNK = 4096


def split_rate(split: str, sample_rows: int, num_examples: Optional[int],
               explicit: Mapping[str, float], default_rate: Optional[float]) -> float:
    """The sampling rate of ``split`` (module doc); an explicit rate is checked to be in (0, 1]."""
    rate = explicit.get(split, default_rate)
    if rate is not None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"sample rate of split {split!r} must be in (0, 1], got {rate}")
        return float(rate)
    check_sample_rows(sample_rows)
    if not sample_rows or not num_examples:
        return 1.0
    return min(1.0, sample_rows / num_examples)


def check_sample_rows(sample_rows: int) -> None:
    if sample_rows < 0 or 0 < sample_rows < MIN_SAMPLE_ROWS:
        raise ValueError(f"sample_rows must be 0 (every example) or >= {MIN_SAMPLE_ROWS} (module doc), "
                         f"got {sample_rows}")


def record_mask(path: str, rate: float) -> Callable[[int], np.ndarray]:
    """``keep(start)`` for record_files.read_frames: which of records start..start+4095 of
    ``path`` are kept."""
    if rate >= 1.0:
        return keep_all
    seed = np.uint64(zlib.crc32(os.path.basename(path).encode()))
    threshold = np.uint64(rate * _TWO_64)  # < 2^64: a float below 1 is at most 1 - 2^-53
    return lambda start: splitmix64(np.arange(start, start + _CHUNK, dtype=np.uint64) + seed) < threshold
