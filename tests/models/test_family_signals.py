"""The signal families (#37) as model inputs: LOG_SIGNALS names, the schema with the
families, the implied LOG_SIGNAL_FAMILIES, and end to end through Transform, DIN and the
serving signatures (a fresh interpreter: models.features reads LOG_SIGNALS at import)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from components.log_example_gen import signal_families as SF
from models import features as F
from pipeline import configs
from pipeline.configs.ingestion import _signal_families
from schemas.make_schema import FAMILIES_DIR, HERE, build_schema


def test_log_signals_take_family_names():
    session = ("sig_session_position", "sig_session_clicks", "sig_session_age")
    assert F.parse_enabled_signals("session") == session
    assert F.parse_enabled_signals("sig_user_lift, session") == ("sig_user_lift",) + session
    assert F.parse_enabled_signals("families") == tuple(F.FAMILY_FEATURES)
    assert len(F.FAMILY_FEATURES) == 27 == len(set(F.FAMILY_FEATURES))
    # "all" is not a family: the 19 signals (17 before sig_tag_tab_watch, 18 before sig_tab_hour_ctr; records
    # list theirs in log_signals) and hist_tab
    assert F.parse_enabled_signals("all") == tuple(F.SIGNAL_FEATURES) + ("hist_tab",)
    assert F.parse_enabled_signals("all,families") == tuple(F.SIGNAL_FEATURES) + ("hist_tab",) + tuple(F.FAMILY_FEATURES)
    with pytest.raises(ValueError, match="sesion"):
        F.parse_enabled_signals("sesion")
    assert F.family_inputs(("sig_user_lift", "sig_user_hour_n", "sig_since_click")) == ("recent", "time_context")
    assert F.family_inputs(F.SIGNAL_FEATURES) == ()


def test_the_registry_is_what_log_example_gen_computes():
    assert SF.FAMILIES == {f: tuple(names) for f, names in F.FAMILY_SIGNAL_TRANSFORMS.items()}
    assert set(F.FAMILY_TRANSFORMS.values()) <= {"logit", "log1p", "none"}
    assert not set(F.FAMILY_FEATURES) & set(F.SIGNAL_FEATURES + F.RAW_FLOAT_FEATURES)
    # user side = the user and the request context (tab, hour); target_match and the watch
    # family's per-duration / per-author means read the candidate
    assert set(F.FAMILY_FEATURES) - set(F.USER_FAMILY_FEATURES) == set(F.FAMILY_SIGNAL_TRANSFORMS["target_match"]) | {
        "sig_user_dur_watch", "sig_user_author_watch"}


def test_schemas_with_and_without_families():
    def committed(folder):
        with open(os.path.join(folder, "schema.pbtxt")) as f:
            return text_format.Parse(f.read(), schema_pb2.Schema())

    plain, with_families = committed(HERE), committed(os.path.join(HERE, FAMILIES_DIR))
    assert plain == build_schema(configs.HISTORY_LENGTH, families=False), "run: python -m schemas.make_schema"
    assert with_families == build_schema(configs.HISTORY_LENGTH, families=True), "run: python -m schemas.make_schema"
    added = {f.name for f in with_families.feature} - {f.name for f in plain.feature}
    assert added == set(F.FAMILY_FEATURES)


def test_families_as_inputs_imply_log_example_gen_writes_them():
    assert _signal_families("", ()) == "" and _signal_families("session", ()) == "session"
    assert _signal_families("", ("in_tab",)) == "all" == _signal_families("all", ("in_tab",))
    with pytest.raises(ValueError, match=r"LOG_SIGNALS uses the signal families \['in_tab'\].*LOG_SIGNAL_FAMILIES='session'"):
        _signal_families("session", ("in_tab",))


def test_count_signals_get_log1p():
    import tensorflow as tf

    from models.preprocessing import signal_transform

    x = np.array([-1.0, 0.0, 3.0, 100.0], np.float32)
    np.testing.assert_allclose(signal_transform(tf.constant(x), "log1p"), [0.0, 0.0, np.log(4.0), np.log(101.0)],
                               rtol=1e-6)
    with pytest.raises(ValueError, match="unknown signal transform 'sqrt'"):
        signal_transform(tf.constant(x), "sqrt")


def _zscore(x):
    return (x - x.mean()) / x.std()


def test_a_family_signal_reaches_transform_din_and_the_serving_signatures(tmp_path):
    """LOG_SIGNALS=session,sig_user_author_ctr: the pipeline reads the families' schema and has
    LogExampleGen write them; Transform gives log1p / identity / logit then z-score; DIN takes
    the four as inputs; serving_default takes them raw (and scores as the model does on the
    transformed rows); serving_rank sends the session ones on the user side only."""
    env = dict(os.environ, LOG_SIGNALS="session,sig_user_author_ctr")
    env.pop("LOG_SIGNAL_FAMILIES", None)
    out = subprocess.run([sys.executable, "-m", "tests.models.family_signals_worker", str(tmp_path)], env=env,
                         capture_output=True, text=True, cwd=os.path.dirname(HERE))
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["schema_path"] == os.path.join(HERE, FAMILIES_DIR) and got["signal_families"] == list(SF.FAMILIES)
    session = ["sig_session_position", "sig_session_clicks", "sig_session_age"]
    assert {k + "_xf" for k in session + ["sig_user_author_ctr"]} <= set(got["model_inputs"])
    assert not {k + "_xf" for k in F.FAMILY_FEATURES if k not in session + ["sig_user_author_ctr"]} & set(got["model_inputs"])
    assert set(session + ["sig_user_author_ctr"]) <= set(got["serving_inputs"])
    assert set(session) <= set(got["rank_user_side"]) and "sig_user_author_ctr" not in got["rank_user_side"]
    raw = {k: np.asarray(v, np.float64) for k, v in got["raw"].items()}
    p = raw["sig_user_author_ctr"]
    want = {"sig_session_position": _zscore(np.log1p(raw["sig_session_position"])),
            "sig_session_age": _zscore(raw["sig_session_age"]),
            "sig_user_author_ctr": _zscore(np.log(p / (1 - p)))}
    for k, v in want.items():
        np.testing.assert_allclose(got["xf"][k], v, rtol=1e-4, atol=1e-5, err_msg=k)
    assert np.std(want["sig_session_position"]) > 0
    np.testing.assert_allclose(got["served_click"], got["direct_click"], rtol=1e-5, atol=1e-6)
