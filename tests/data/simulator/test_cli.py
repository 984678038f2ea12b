"""Tests of data/simulator/cli.py."""
import os

from data.simulator import cli, writer


def test_cli_writes_files(tmp_path):
    out = tmp_path / "cli"
    assert cli.main(["--out", str(out), "--users", "20", "--videos", "30", "--days", "2",
                     "--seed", "1"]) == 0
    assert sorted(os.listdir(out)) == sorted(
        [writer.LOG_FILE, writer.USER_FILE, writer.VIDEO_FILE, writer.TRUTH_FILE])
