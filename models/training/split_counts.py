"""The rows of each split, as a file at the root of an Examples artifact.

LogExampleGen writes ``{split name: rows}`` to ``<artifact uri>/num_examples.json`` (the same
counts as its ``num_<split>_examples`` properties); the Trainer, whose FnArgs names a split's
files but not its artifact, reads them back to size its in-memory read before reading
(models/training/input.py). One module for both sides of that contract, free of TF Keras so
that LogExampleGen's executor does not import the model code.
"""
import json
import os
import re
from typing import Dict

import tensorflow as tf

SPLIT_COUNTS_FILE = "num_examples.json"


def write_split_counts(artifact_uri: str, rows: Dict[str, int]) -> None:
    """``rows`` ({split name: rows}) -> ``<artifact_uri>/SPLIT_COUNTS_FILE``."""
    with tf.io.gfile.GFile(os.path.join(artifact_uri, SPLIT_COUNTS_FILE), "w") as f:
        json.dump({split: int(n) for split, n in rows.items()}, f)


def split_rows(file_pattern):
    """Rows of the split(s) `file_pattern` names (``<artifact uri>/Split-<name>/<files>``, a
    pattern or a list, as FnArgs' train_files), from each artifact's `SPLIT_COUNTS_FILE`;
    None when a pattern is not a split's or its artifact has no such file (another ExampleGen)."""
    total = 0
    for pattern in [file_pattern] if isinstance(file_pattern, str) else file_pattern:
        split_dir = os.path.dirname(pattern)
        match = re.fullmatch(r"Split-(.+)", os.path.basename(split_dir))
        path = os.path.join(os.path.dirname(split_dir), SPLIT_COUNTS_FILE)
        if not match or not tf.io.gfile.exists(path):
            return None
        with tf.io.gfile.GFile(path) as f:
            rows = json.load(f).get(match.group(1))
        if not isinstance(rows, int):
            return None
        total += rows
    return total
