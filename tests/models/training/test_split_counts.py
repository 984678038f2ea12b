"""The split counts file of an Examples artifact (models/training/split_counts.py)."""
import json
import os

from models.training.split_counts import SPLIT_COUNTS_FILE, split_rows, write_split_counts


def test_split_rows_reads_the_artifact_counts(tmp_path):
    uri = str(tmp_path / "examples")
    for split in ("train", "eval"):
        os.makedirs(os.path.join(uri, f"Split-{split}"))
    pattern = lambda split: os.path.join(uri, f"Split-{split}", "*")  # noqa: E731  (FnArgs' form)
    assert split_rows([pattern("train")]) is None  # no counts file: another ExampleGen's artifact
    write_split_counts(uri, {"train": 7, "eval": 3})
    with open(os.path.join(uri, SPLIT_COUNTS_FILE)) as f:
        assert json.load(f) == {"train": 7, "eval": 3}
    assert split_rows([pattern("train")]) == 7 and split_rows(pattern("eval")) == 3
    assert split_rows([pattern("train"), pattern("eval")]) == 10
    assert split_rows([pattern("validation")]) is None  # a split the file does not name
    assert split_rows([os.path.join(uri, "*")]) is None  # not a split's files
