"""bench/ranker_data.freeze_user_state against hand-computed frozen rows."""
import numpy as np

from bench.ranker_data import USER_STATE_FEATURES, USER_TAB_STATE_FEATURES, freeze_user_state


def test_user_state_lists():
    assert "sig_user_coec" in USER_STATE_FEATURES and "hist_is_click" in USER_STATE_FEATURES
    assert "sig_tab_ctr" not in USER_STATE_FEATURES  # request context, not user state
    assert USER_TAB_STATE_FEATURES[0] == "sig_user_tab_ctr"
    # signal families (#37): recent / session per user, in-tab (and the in-tab watch ratios) per
    # (user, tab); the per-(user, candidate author/tag/music/duration) and per-(user, hour)
    # ones are not frozen
    assert {"sig_last5_click", "sig_since_long_view", "sig_session_position"} <= set(USER_STATE_FEATURES)
    assert set(USER_TAB_STATE_FEATURES[1:]) == {"sig_user_tab_last10_click", "sig_user_tab_last20_click",
                                                "sig_user_tab_last50_click", "sig_user_tab_since_click",
                                                "sig_user_tab_last10_ratio", "sig_user_tab_last20_ratio"}
    assert not ({"sig_user_author_n", "sig_user_hour_ctr", "sig_user_dur_watch", "sig_user_author_watch"}
                & set(USER_STATE_FEATURES + USER_TAB_STATE_FEATURES))


def test_freeze_user_state_by_hand():
    # rows: user 7 at t=30 (tab 1), t=10 (tab 2), t=20 (tab 1); user 8 at t=5 (tab 1)
    user = np.array([7, 7, 7, 8])
    tab = np.array([1, 2, 1, 1])
    t = np.array([30, 10, 20, 5])
    raw = {"hist_is_click": np.array([[1, 0], [0, 0], [1, 1], [0, 1]]),
           "hist_len": np.array([3, 1, 2, 4]),
           "sig_user_coec": np.array([2.0, 0.5, 1.5, 1.0], np.float32),
           "sig_user_lift": np.array([0.3, 0.1, 0.2, 0.0], np.float32),
           "sig_user_tab_ctr": np.array([0.9, 0.4, 0.6, 0.5], np.float32),
           "sig_tab_ctr": np.array([0.4, 0.5, 0.45, 0.42], np.float32),
           "sig_video_coec": np.array([1.5, 1.0, 3.0, 0.8], np.float32),
           "sig_propensity": np.array([1.0, 0.25, 1.0, 0.336], np.float32),
           "video_id": np.array([11, 12, 13, 14]),
           "sig_session_position": np.array([5.0, 0.0, 3.0, 2.0], np.float32),
           "sig_user_tab_last10_click": np.array([0.8, 0.3, 0.7, 0.1], np.float32),
           "sig_user_author_n": np.array([4.0, 1.0, 2.0, 0.0], np.float32)}
    out = freeze_user_state(raw, user, tab, t)
    # per user: user 7's first row is row 1 (t=10), user 8's is row 3
    np.testing.assert_array_equal(out["hist_is_click"], [[0, 0], [0, 0], [0, 0], [0, 1]])
    np.testing.assert_array_equal(out["hist_len"], [1, 1, 1, 4])
    np.testing.assert_allclose(out["sig_user_coec"], [0.5, 0.5, 0.5, 1.0])
    np.testing.assert_allclose(out["sig_user_lift"], [0.1, 0.1, 0.1, 0.0])
    # per (user, tab): (7, 1) first at row 2 (t=20), (7, 2) row 1, (8, 1) row 3
    np.testing.assert_allclose(out["sig_user_tab_ctr"], [0.6, 0.4, 0.6, 0.5])
    np.testing.assert_allclose(out["sig_session_position"], [0.0, 0.0, 0.0, 2.0])  # per user
    np.testing.assert_allclose(out["sig_user_tab_last10_click"], [0.7, 0.3, 0.7, 0.1])  # per (user, tab)
    np.testing.assert_array_equal(out["sig_user_author_n"], raw["sig_user_author_n"])  # keeps running
    # context and candidate features untouched
    np.testing.assert_array_equal(out["sig_tab_ctr"], raw["sig_tab_ctr"])
    np.testing.assert_array_equal(out["video_id"], raw["video_id"])
    # propensity = clip(e_tab(i) * u_coec(first(u)) * v_coec(i), 0, 1)
    np.testing.assert_allclose(out["sig_propensity"], [0.4 * 0.5 * 1.5, 0.5 * 0.5 * 1.0, 0.45 * 0.5 * 3.0, 0.336],
                               rtol=1e-6)
    assert out["sig_propensity"].dtype == np.float32
    raw["sig_video_coec"][2] = 10.0
    assert freeze_user_state(raw, user, tab, t)["sig_propensity"][2] == 1.0  # clipped
    assert raw["sig_user_coec"][0] == 2.0  # input not modified


def test_freeze_without_signals():
    raw = {"hist_len": np.array([2, 5]), "tab": np.array([0, 0])}
    out = freeze_user_state(raw, np.array([1, 1]), raw["tab"], np.array([9, 3]))
    np.testing.assert_array_equal(out["hist_len"], [5, 5])
    assert set(out) == set(raw)


def test_cache_key_follows_log_signals(monkeypatch):
    """A work dir built with other model signals (Transform's inputs) is not reused."""
    from bench.ranker_data import cache_key
    from pipeline import configs

    monkeypatch.setattr(configs, "LOG_SIGNALS", ("sig_tab_ctr",))
    one = cache_key("logs", [20220425], [20220504])
    monkeypatch.setattr(configs, "LOG_SIGNALS", ())
    assert cache_key("logs", [20220425], [20220504]) != one
    assert one == cache_key("logs", [20220425], [20220504]) | {"log_signals": ["sig_tab_ctr"]}
