"""pipeline/configs/training.py: the environment knobs of the DIN options."""
import os
import subprocess
import sys

import pytest

CODE = "from pipeline import configs; print(configs.RANKER_PARAMS['din']['dual_attention'])"


def _configs(**env):
    base = {k: v for k, v in os.environ.items() if k not in ("DIN_DUAL_ATTENTION", "LOG_SIGNALS")}
    return subprocess.run([sys.executable, "-c", CODE], env=dict(base, **env), capture_output=True, text=True)


@pytest.mark.parametrize("env,expected", [({}, "False"),
                                          ({"DIN_DUAL_ATTENTION": "1", "LOG_SIGNALS": "hist_tab"}, "True"),
                                          ({"DIN_DUAL_ATTENTION": "0", "LOG_SIGNALS": "all"}, "False")])
def test_dual_attention_follows_din_dual_attention(env, expected):
    out = _configs(**env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected


@pytest.mark.parametrize("env,message", [
    ({"DIN_DUAL_ATTENTION": "1"}, "add hist_tab to LOG_SIGNALS"),
    ({"DIN_DUAL_ATTENTION": "1", "LOG_SIGNALS": "sig_user_coec"}, "add hist_tab to LOG_SIGNALS"),
    ({"DIN_DUAL_ATTENTION": "yes"}, "DIN_DUAL_ATTENTION must be 0 or 1"),
])
def test_dual_attention_without_the_history_scenes_is_a_clear_error(env, message):
    out = _configs(**env)
    assert out.returncode != 0 and message in out.stderr
