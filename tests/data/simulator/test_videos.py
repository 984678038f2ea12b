"""Tests of data/simulator/videos.py: the video_features_basic table."""
import numpy as np


def test_video_table_value_kinds(default_run):
    _, _, _, videos, _ = default_run
    assert set(videos["video_type"]) <= {"NORMAL", "AD"}
    assert videos["upload_dt"].str.fullmatch(r"\d{4}-\d{2}-\d{2}").all()
    tags = videos["tag"].dropna()
    assert tags.str.fullmatch(r"\d+(,\d+)*").all() and tags.str.contains(",").any()
    assert videos["video_duration"].dtype == np.float64
    assert (videos["video_duration"] >= 5000).all()
