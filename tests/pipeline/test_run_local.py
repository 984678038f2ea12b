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


def test_each_component_line_has_its_time_and_the_process_peak_rss():
    """make run's console line per component (from LocalDagRunner's log records), kept for
    make_run_summary.json; a cached execution says so."""
    import logging

    from pipeline.run_local import _ComponentProgress

    class Console:
        lines = []

        def say(self, message=""):
            self.lines.append(message)

    progress = _ComponentProgress(Console())

    def log(message):
        progress.emit(logging.LogRecord("absl", logging.INFO, __file__, 1, message, None, None))

    log("Component Trainer is running.")
    assert progress.current == "Trainer"
    log("unrelated")
    log("Component Trainer is finished.")
    log("Component Evaluator is running.")
    log("A cached execution 7 is used.")
    log("Component Evaluator is finished.")
    assert [c["name"] for c in progress.components] == ["Trainer", "Evaluator"]
    assert [c["cached"] for c in progress.components] == [False, True] and progress.current is None
    assert all(c["process_peak_rss_mib"] > 0 and c["rss_after_mib"] > 0 for c in progress.components)
    assert Console.lines[0].split()[:1] == ["Trainer"] and "process peak RSS" in Console.lines[0]
    assert Console.lines[1].endswith("(cached)")
