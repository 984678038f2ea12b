"""Logs too large for one users x videos matrix (feed.DENSE_DOT_LIMIT: the 4M-row bench
logs) compute u . v one chunk of users at a time: the same impressions and the same
outcomes as the one-matrix path, to the last bits of a dot product."""
import pandas as pd
import pytest

from data.simulator import feed, simulate


def _run(path):
    paths = simulate(str(path), num_users=60, num_videos=80, num_days=3, impressions_per_user_day=5.0, seed=5)
    return pd.read_csv(paths["log"]), pd.read_csv(paths["truth"])


def test_chunked_dot_gives_the_one_matrix_logs(tmp_path, monkeypatch):
    log, truth = _run(tmp_path / "dense")
    monkeypatch.setattr(feed, "DENSE_DOT_LIMIT", 0)
    monkeypatch.setattr(feed, "DOT_CHUNK_USERS", 7)  # 9 chunks, the last one partial
    chunked_log, chunked_truth = _run(tmp_path / "chunked")
    keys = ["user_id", "video_id", "time_ms", "tab"]
    assert len(log) > 500 and log[keys].equals(chunked_log[keys])
    assert log["is_click"].equals(chunked_log["is_click"]) and log["play_time_ms"].equals(chunked_log["play_time_ms"])
    for col in truth.columns:
        if truth[col].dtype.kind == "f":
            assert chunked_truth[col].to_numpy() == pytest.approx(truth[col].to_numpy(), rel=1e-9, abs=1e-12), col
