"""Atomic versioned publish: keep-K, stale temp dirs, and a publish killed between
write and rename that leaves the served version unchanged."""
import os
import signal
import subprocess
import sys
import time

import pytest

from components.publisher import versioning

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _assemble(text):
    def write(temp):
        os.makedirs(os.path.join(temp, "variables"))
        with open(os.path.join(temp, "saved_model.pb"), "w") as f:
            f.write(text)
    return write


def test_keeps_the_last_k_and_refuses_to_overwrite(tmp_path):
    base = str(tmp_path / "m")
    for v in (5, 6, 7, 8):
        result = versioning.publish_version(base, _assemble(str(v)), keep=2, version=v)
    assert versioning.list_versions(base) == [7, 8] and result["removed_versions"] == [6]
    assert open(os.path.join(base, "8", "saved_model.pb")).read() == "8"
    assert versioning.next_version(base, now=3) == 9  # never below the newest + 1
    with pytest.raises(FileExistsError):
        versioning.publish_version(base, _assemble("x"), keep=2, version=8)

    def broken(temp):
        _assemble("half")(temp)
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        versioning.publish_version(base, broken, keep=2, version=9)
    assert sorted(os.listdir(base)) == ["7", "8"]  # no half version, no temp left


KILLED = r"""
import os, sys, time
sys.path.insert(0, sys.argv[2])
from components.publisher import versioning
def wait(temp):
    print("WRITTEN", flush=True)
    time.sleep(600)
def assemble(temp):
    os.makedirs(temp)
    open(os.path.join(temp, "saved_model.pb"), "w").write("new")
versioning.publish_version(sys.argv[1], assemble, keep=3, version=2, before_rename=wait)
"""


def test_publish_killed_between_write_and_rename(tmp_path):
    base = str(tmp_path / "m")
    versioning.publish_version(base, _assemble("old"), keep=3, version=1)
    proc = subprocess.Popen([sys.executable, "-c", KILLED, base, ROOT], stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        line = ""
        while "WRITTEN" not in line and time.time() < deadline:
            line = proc.stdout.readline()
        assert "WRITTEN" in line, "the publisher subprocess never reached the rename"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    names = os.listdir(base)
    assert versioning.list_versions(base) == [1]  # still serving the old version
    assert any(n.startswith(versioning.TEMP_PREFIX) for n in names)  # the killed half, non-numeric
    result = versioning.publish_version(base, _assemble("next"), keep=3, version=2)
    assert result["stale_temps_removed"] and sorted(os.listdir(base)) == ["1", "2"]
    assert open(os.path.join(base, "2", "saved_model.pb")).read() == "next"
