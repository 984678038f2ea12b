"""Tests of data/simulator/users.py: the user_features table."""
import numpy as np

from data.simulator.users import bin_labels


def test_user_table_value_kinds(default_run):
    _, _, users, _, _ = default_run
    assert set(users["user_active_degree"]) <= {
        "full_active", "high_active", "middle_active", "low_active", "2_14_day_new",
        "single_low_active", "30day_retention", "day_new", "UNKNOWN"}
    assert (users["follow_user_num_range"] == "0").eq(users["follow_user_num"] == 0).all()
    assert (users.loc[users["follow_user_num"] > 500, "follow_user_num_range"] == "500+").all()
    assert (users.loc[users["register_days"] > 730, "register_days_range"] == "730+").all()
    assert set(users["is_live_streamer"]) <= {-124, 1}
    for k in range(18):
        assert f"onehot_feat{k}" in users
    assert users["onehot_feat4"].dtype == np.float64 and users["onehot_feat0"].dtype == np.int64


def test_bin_labels_use_inclusive_lower_bounds():
    bins = [("0", 0), ("[1,10)", 1), ("[10,100)", 10), ("100+", 100)]
    labels = bin_labels(np.array([0, 1, 9, 10, 99, 100, 5000]), bins)
    assert labels.tolist() == ["0", "[1,10)", "[1,10)", "[10,100)", "[10,100)", "100+", "100+"]
