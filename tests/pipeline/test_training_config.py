"""pipeline/configs/training.py: the environment knobs of the DIN options."""
import os
import subprocess
import sys

import pytest

from models.rankers.din import LONG_MEMORIES

CODE = "from pipeline import configs; print(configs.RANKER_PARAMS['din']['dual_attention'])"


def _configs(code=CODE, **env):
    base = {k: v for k, v in os.environ.items() if k not in ("DIN_DUAL_ATTENTION", "DIN_LONG_MEMORY", "LOG_SIGNALS")}
    return subprocess.run([sys.executable, "-c", code], env=dict(base, **env), capture_output=True, text=True)


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


@pytest.mark.parametrize("env,expected", [({}, "none")] + [({"DIN_LONG_MEMORY": m}, m) for m in LONG_MEMORIES])
def test_long_memory_follows_din_long_memory(env, expected):
    """Every memory DIN builds is accepted by the knob (the config spells them out so it
    need not import TensorFlow)."""
    out = _configs("from pipeline import configs; print(configs.RANKER_PARAMS['din']['long_memory'])", **env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == expected


def test_unknown_long_memory_is_a_clear_error():
    out = _configs(DIN_LONG_MEMORY="twin")
    assert out.returncode != 0 and "DIN_LONG_MEMORY must be none or titans" in out.stderr
