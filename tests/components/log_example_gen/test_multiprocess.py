"""LogExampleGen on 2 worker *processes* (DirectRunner ``multi_processing``) gives what one
in-process worker gives: the same tf.Examples per split, the same dead letters and the
same counts.json; so does one worker grouping in memory, as a distributed runner groups
(the DirectRunner groups through spill files, spill.py), and no spill file is left. Each Beam SDK worker is a separate Python process that unpickles the
DoFns and side inputs, so this proves the pipeline's functions and config pickle, and that
no step relies on module-level state filled by the driver or by another bundle (a worker
that missed it would drop, duplicate or mis-split rows).

Small simulated logs (+ a duplicate and a bad row) read in 2 KB byte ranges (13 ranges of a 26 KB file, so
records cross range ends and the work splits into many bundles). A poller records the SDK
worker processes the runner starts, so the test knows two processes really ran at once.
Cost: each worker process imports Beam and, through the pipeline's modules, TFX/TF.
"""
import glob
import gzip
import json
import os
import threading

import pytest

from components.log_example_gen import beam_pipeline as bp
from models.training.split_counts import SPLIT_COUNTS_FILE
from tests.components.log_example_gen.fixture_logs import run_component

KNOBS = dict(eval_last_n_days=1, validation_last_n_days=1, max_bad_row_fraction=1.0, read_range_bytes=2048)
ONE = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TWO = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def _write_logs(folder: str) -> None:
    from data.simulator import simulate

    simulate(folder, num_users=30, num_videos=40, num_days=4, impressions_per_user_day=4.0, seed=3)
    [log] = glob.glob(os.path.join(folder, "log_*.csv"))
    with open(log) as f:
        lines = f.read().splitlines()
    with open(log, "a") as f:  # a dropped exact duplicate and a dead-lettered row
        f.write(lines[5] + "\n" + lines[6].replace(",", ",x", 1) + "\n")


class _WorkerProcesses:
    """Pids of the Beam SDK worker processes started under this process while active, and
    the most of them alive at once."""

    def __init__(self):
        self.pids, self.most_at_once, self._stop = set(), 0, threading.Event()

    def _poll(self):
        import psutil

        me = psutil.Process()
        while not self._stop.wait(0.2):
            alive = set()
            for child in me.children(recursive=True):
                try:
                    # the Python worker itself, not the `sh -c` Beam starts it with
                    if "apache_beam.runners.worker.sdk_worker_main" in child.cmdline():
                        alive.add(child.pid)
                except psutil.Error:
                    pass
            self.pids |= alive
            self.most_at_once = max(self.most_at_once, len(alive))

    def __enter__(self):
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _examples(examples_uri: str) -> dict:
    """{split: sorted deterministically re-serialized tf.Examples} from the gzipped
    TFRecords (framing: 8-byte length, 4-byte crc, data, 4-byte crc). Re-serialized because
    a proto map's byte order follows the writing process's string hash seed."""
    import tensorflow as tf

    out = {}
    for split_dir in glob.glob(os.path.join(examples_uri, "Split-*")):
        records = []
        for path in glob.glob(os.path.join(split_dir, "*.gz")):
            data, i = gzip.open(path).read(), 0
            while i < len(data):
                n = int.from_bytes(data[i:i + 8], "little")
                records.append(tf.train.Example.FromString(data[i + 12:i + 12 + n])
                               .SerializeToString(deterministic=True))
                i += 16 + n
        out[os.path.basename(split_dir)] = sorted(records)
    return out


def _dead_letters(uri: str) -> list:
    return sorted(line for path in glob.glob(os.path.join(uri, "bad_rows-*.jsonl"))
                  for line in open(path) if line.strip())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("multiprocess"))
    logs = os.path.join(tmp, "logs")
    _write_logs(logs)
    out = {}
    for name, args in (("one", ONE), ("two", TWO), ("no_spill", ONE)):
        with _WorkerProcesses() as workers, pytest.MonkeyPatch.context() as patch:
            if name == "no_spill":
                patch.setattr(bp, "groups_in_memory", lambda pipeline: False)
            examples, dead_letter, _ = run_component(os.path.join(tmp, name), logs, beam_args=args, **KNOBS)
        out[name] = dict(examples=_examples(examples.uri), dead_letters=_dead_letters(dead_letter.uri),
                         counts=bp.read_counts(dead_letter.uri), workers=workers,
                         left=sorted(os.listdir(examples.uri)))
    return out


def test_two_worker_processes_really_ran(runs):
    assert runs["one"]["workers"].pids == set()  # in_memory: the test process itself
    assert runs["two"]["workers"].most_at_once == 2


def test_same_examples_dead_letters_and_counts_as_one_process(runs):
    one, two = runs["one"], runs["two"]
    counts = one["counts"]
    assert counts["dropped_rows"] == 1 and counts["bad_rows"] == 1, counts
    assert all(counts["splits"][s] > 0 for s in ("train", "validation", "eval")), counts["splits"]
    assert two["counts"] == counts
    assert set(two["examples"]) == {"Split-train", "Split-validation", "Split-eval"}
    for split, records in one["examples"].items():
        assert len(records) == counts["splits"][split.split("-")[1]], split
        assert two["examples"][split] == records, split
    assert two["dead_letters"] == one["dead_letters"] and len(one["dead_letters"]) == 1
    assert json.loads(one["dead_letters"][0])["table"] == "log"


def test_grouping_in_memory_gives_what_grouping_through_spill_files_gives(runs):
    one, in_memory = runs["one"], runs["no_spill"]
    assert in_memory["counts"] == one["counts"]
    assert in_memory["examples"] == one["examples"] and in_memory["dead_letters"] == one["dead_letters"]
    for run in runs.values():  # the spill files went with the run's temporary folder
        assert run["left"] == ["Split-eval", "Split-train", "Split-validation", SPLIT_COUNTS_FILE], run["left"]
