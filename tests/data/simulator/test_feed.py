"""Tests of data/simulator/feed.py: exposure spread, sessions and UTC+8 timestamps."""
import datetime as dt

import pandas as pd


def test_activity_spread(default_run):
    _, log, _, _, _ = default_run
    per_user = log.groupby("user_id").size()
    assert (per_user >= 10).sum() >= 30
    assert (per_user <= 2).sum() >= 3


def test_time_sorted_inside_days_and_dates_are_utc8(default_run):
    _, log, _, _, _ = default_run
    assert log["time_ms"].is_monotonic_increasing
    start = dt.date(2022, 4, 25)
    # 2022-04-25 00:00 UTC+8 = 2022-04-24 16:00 UTC
    first_ms = 1650816000000
    assert (log["time_ms"] >= first_ms).all()
    assert (log["time_ms"] < first_ms + 6 * 86_400_000).all()
    local = pd.to_datetime(log["time_ms"], unit="ms", utc=True).dt.tz_convert("Asia/Shanghai")
    assert (local.dt.strftime("%Y%m%d").astype(int) == log["date"]).all()
    assert (local.dt.hour * 100 == log["hourmin"]).all()
    days = {int((start + dt.timedelta(days=k)).strftime("%Y%m%d")) for k in range(6)}
    assert set(log["date"]) == days
