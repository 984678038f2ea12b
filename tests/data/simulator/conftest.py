"""Shared fixture of the simulator tests: one default-size run per test session."""
import pandas as pd
import pytest

from data.simulator import simulate


@pytest.fixture(scope="session")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim_default")
    result = simulate(str(out))  # default size: 300 users, 400 videos, 6 days
    log = pd.read_csv(result["log"])
    users = pd.read_csv(result["user_features"])
    videos = pd.read_csv(result["video_features"])
    truth = pd.read_csv(result["truth"])
    return result, log, users, videos, truth
