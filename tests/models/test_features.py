"""The feature spec, the committed schema and derived slice features agree."""
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from models import features as F
from pipeline import configs
from schemas.make_schema import HERE, build_schema


def test_committed_schema_matches_the_feature_spec():
    with open(f"{HERE}/schema.pbtxt") as f:
        committed = text_format.Parse(f.read(), schema_pb2.Schema())
    assert committed == build_schema(configs.HISTORY_LENGTH, families=False), "run: python -m schemas.make_schema"


def test_duration_bucket_edges():
    assert [F.duration_bucket(x) for x in (0.0, 14.99, 15.0, 29.9, 30.0, 119.0, 120.0, 299.9, 300.0, 1e5)] == [
        "<15s", "<15s", "15-30s", "15-30s", "30-60s", "60-120s", "120-300s", "120-300s", ">=300s", ">=300s"]


def test_serving_features_exclude_labels_and_meta():
    leaked = set(F.SERVING_RAW_FEATURES) & set(F.LABELS + F.EXTRA_OUTCOMES + F.META_FEATURES + F.META_BYTES_FEATURES)
    assert not leaked


def test_signals_are_always_raw_and_model_inputs_only_when_enabled():
    import pytest

    assert set(F.SIGNAL_FEATURES) <= set(F.RAW_FLOAT_FEATURES) and "hist_tab" in F.RAW_HISTORY_INT
    assert F.parse_enabled_signals("") == () == F.parse_enabled_signals(" none ")
    assert F.parse_enabled_signals("all") == tuple(F.SIGNAL_FEATURES) + ("hist_tab",)
    assert F.parse_enabled_signals("hist_tab, sig_user_lift") == ("sig_user_lift", "hist_tab")
    # the default (#37): the 12 click signals, by name
    assert F.parse_enabled_signals("standard") == (
        "sig_propensity", "sig_tab_ctr", "sig_user_coec", "sig_video_coec", "sig_user_tab_ctr", "sig_user_lift",
        "sig_author_ctr", "sig_music_ctr", "sig_tag_tab_ctr", "sig_tab_duration_ctr", "sig_last50_click",
        "sig_last50_watch")
    assert F.parse_enabled_signals("hist_tab,standard") == tuple(F.STANDARD_SIGNALS) + ("hist_tab",)
    with pytest.raises(ValueError, match="sig_nope"):
        F.parse_enabled_signals("sig_nope")
    assert set(F.USER_SIGNAL_FEATURES) <= set(F.SIGNAL_FEATURES)
    # #37's time context: the tab's CTR at this hour depends on the request (tab, hour), not the candidate
    assert F.SIGNAL_TRANSFORMS["sig_tab_hour_ctr"] == "logit" and "sig_tab_hour_ctr" in F.USER_SIGNAL_FEATURES
    # watch-time signals (#13): the user's is user side, the video's, author's and tab x duration's
    # depend on the candidate; all are already log1p means or capped ratios (no transform)
    watch = ["sig_video_watch", "sig_video_watch_ratio", "sig_author_watch", "sig_tab_duration_watch",
             "sig_last50_watch_ratio", "sig_tag_tab_watch"]
    assert set(watch) <= set(F.SIGNAL_FEATURES) and all(F.SIGNAL_TRANSFORMS[k] == "none" for k in watch)
    assert set(F.USER_SIGNAL_FEATURES) & set(watch) == {"sig_last50_watch_ratio"}


def _features_with(log_signals):
    """models.features' lists with LOG_SIGNALS=`log_signals` (None: unset), read at import (a
    fresh interpreter)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from models import features as F; print(json.dumps(dict(num=F.NUMERIC_FEATURES, "
            "serving=F.SERVING_RAW_FEATURES, user=F.USER_CONTEXT_FEATURES, cand=F.CANDIDATE_FEATURES, "
            "shared=F.ID_SHARED_VOCAB, inputs=F.model_input_names(), lists=F.SERVING_LIST_FEATURES, "
            "spec_lists=[k for k in F.SERVING_RAW_FEATURES if F.raw_feature_spec(5)[k].shape])))")
    env = {k: v for k, v in os.environ.items() if k != "LOG_SIGNALS"}
    if log_signals is not None:
        env["LOG_SIGNALS"] = log_signals
    return json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True,
                                     text=True).stdout)


def test_default_signals_are_the_12_and_none_restores_the_signal_free_model():
    """Unset LOG_SIGNALS = "standard" (#37): the 12 click signals are model and serving inputs,
    the user's ones on serving_rank's user side; LOG_SIGNALS=none (or "") gives the old model."""
    default = _features_with(None)
    assert default["num"] == F.BASE_NUMERIC_FEATURES + F.SIGNAL_FEATURES[:12]
    assert set(F.SIGNAL_FEATURES[:12]) <= set(default["serving"]) and "hist_tab" not in default["serving"]
    assert set(default["user"]) & set(F.SIGNAL_FEATURES) == {"sig_tab_ctr", "sig_user_coec", "sig_user_tab_ctr",
                                                             "sig_user_lift", "sig_last50_click", "sig_last50_watch"}
    assert {"sig_propensity", "sig_video_coec", "sig_author_ctr"} <= set(default["cand"])
    for off in ("none", ""):
        got = _features_with(off)
        assert got["num"] == F.BASE_NUMERIC_FEATURES
        assert not set(F.SIGNAL_FEATURES + ["hist_tab"]) & set(got["serving"] + got["inputs"])


def test_enabled_signals_reach_numerics_serving_and_the_user_side():
    """LOG_SIGNALS=all, read when models.features is imported (a fresh interpreter)."""
    got = _features_with("all")
    assert got["num"] == F.BASE_NUMERIC_FEATURES + F.SIGNAL_FEATURES
    assert set(F.SIGNAL_FEATURES + ["hist_tab"]) <= set(got["serving"])
    assert set(F.USER_SIGNAL_FEATURES + ["hist_tab"]) <= set(got["user"])
    assert set(F.SIGNAL_FEATURES) - set(F.USER_SIGNAL_FEATURES) <= set(got["cand"])
    assert got["shared"]["hist_tab"] == "tab" and "sig_propensity_xf" in got["inputs"]
    # the request's list features (REST instances, serving/client.py) are exactly its [L] ones
    assert sorted(got["lists"]) == sorted(got["spec_lists"]) and "hist_tab" in got["lists"]
    assert sorted(F.SERVING_LIST_FEATURES) == sorted(k for k in F.SERVING_RAW_FEATURES if F.raw_feature_spec(5)[k].shape)
