"""pipeline/run_local.py: what `make run` serves after a run (issue #34: a candidate the
Evaluator did not bless is a normal outcome; exit 1 only when nothing can serve)."""
import os

from pipeline.run_local import what_serves


def test_nothing_to_serve_without_a_version(tmp_path):
    base = tmp_path / "serving_model" / "watchtime_ranker"
    serving, line = what_serves(str(base), None, False)  # the base does not even exist yet
    assert serving is None and line.startswith("nothing to serve")
    (base / ".publishing-5-123").mkdir(parents=True)  # a killed publish's temp dir is no version
    assert what_serves(str(base), None, None)[0] is None


def test_a_held_back_candidate_leaves_the_incumbent_serving(tmp_path):
    base = tmp_path / "watchtime_ranker"
    for version in ("9", "10", "notes"):  # numeric order: 10 is the newest, not "9"
        (base / version).mkdir(parents=True)
    serving, line = what_serves(str(base), None, False)
    assert serving == os.path.join(str(base), "10")
    assert "serving the incumbent" in line and "was not blessed and is held back" in line
    assert "was not pushed" in what_serves(str(base), None, True)[1]  # blessed, the publisher refused


def test_this_runs_push_serves(tmp_path):
    base = tmp_path / "watchtime_ranker"
    (base / "10").mkdir(parents=True)
    serving, line = what_serves(str(base), str(base / "10") + "/", True)
    assert serving == os.path.join(str(base), "10") and "(this run's model)" in line
