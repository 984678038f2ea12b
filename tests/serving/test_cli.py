"""serving.cli: TF Serving's flag names, the model config file, `python -m serving`."""
import logging
import os
import re
import runpy
import signal
import subprocess
import sys

import pytest
import tensorflow as tf

import serving
from serving import cli, client
from serving.config import ServingConfig
from serving.model_config import read_model_config
from serving.server_core import configure_switch_interval, configure_tensorflow_threads
from tests.serving.tiny_model import MODEL, make_instance, save_model

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cli_flags_and_model_config(tmp_path):
    args = cli.build_arg_parser().parse_args(
        ["--model_base_path", "/m/x", "--model_name", "watchtime_ranker", "--port", "8501",
         "--file_system_poll_wait_seconds", "5"])
    assert (args.model_base_path, args.model_name, args.port,
            args.file_system_poll_wait_seconds) == ("/m/x", "watchtime_ranker", 8501, 5.0)
    assert cli.build_arg_parser().parse_args(["--rest_api_port", "9000"]).port == 9000
    assert cli.main(["--model_base_path", str(tmp_path / "missing")]) == 2
    config = tmp_path / "models.config"
    config.write_text('model_config_list { config { name: "a" base_path: "models/a" '
                      'model_platform: "tensorflow" } }')
    assert read_model_config(str(config)) == {"a": str(tmp_path / "models" / "a")}
    repo_config = os.path.join(os.path.dirname(serving.__file__), "models.config")
    assert read_model_config(repo_config) == {
        "watchtime_ranker": "/models/watchtime_ranker"}


def test_python_dash_m_serving_runs_the_cli(tmp_path, monkeypatch, capsys):
    missing = str(tmp_path / "missing")
    monkeypatch.setattr(sys, "argv", ["python -m serving", "--model_base_path", missing])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("serving", run_name="__main__")
    assert exit_.value.code == 2
    assert missing in capsys.readouterr().err


def test_the_readme_server_command_serves_with_its_thread_pools(tmp_path, served):
    """`python -m serving --model_base_path … --port …` as the README runs it, in its own
    process (TF Serving's thread-pool flags apply there), answering the same predictions
    as the in-test server, and stopping cleanly on SIGTERM."""
    save_model(tmp_path / MODEL / "1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "serving", "--model_base_path", str(tmp_path / MODEL),
         "--model_name", MODEL, "--port", "0", "--tensorflow_intra_op_parallelism", "1",
         "--tensorflow_inter_op_parallelism", "2"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:  # the server prints its URL once the model is loaded
            lines.append(line)
            if line.startswith("Serving model"):
                break
        assert "TensorFlow thread pools: intra-op 1, inter-op 2\n" in lines, "".join(lines)
        url = re.search(r"at (http://\S+)/v1/models/", lines[-1]).group(1)
        assert client.wait_until_available(url, MODEL, timeout=5) == 1
        instances = [make_instance(i) for i in range(3)]
        assert client.predict(url, MODEL, instances) == client.predict(served["url"], MODEL, instances)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out


def test_thread_pools_are_kept_once_tensorflow_runs(caplog):
    tf.constant(1.0) + 1.0  # the runtime is up in this process
    have = (tf.config.threading.get_intra_op_parallelism_threads(),
            tf.config.threading.get_inter_op_parallelism_threads())
    assert configure_tensorflow_threads(ServingConfig()) == have  # 0 = leave as is
    with caplog.at_level(logging.WARNING):
        assert configure_tensorflow_threads(
            ServingConfig(tensorflow_intra_op_parallelism=have[0] + 3)) == have
    assert "--tensorflow_intra_op_parallelism=%d not applied" % (have[0] + 3) in caplog.text
    with pytest.raises(ValueError, match="inter_op_parallelism must be >= 0"):
        configure_tensorflow_threads(ServingConfig(tensorflow_inter_op_parallelism=-1))


def test_switch_interval_is_set_for_serving():
    before = sys.getswitchinterval()
    try:
        assert configure_switch_interval(ServingConfig(python_switch_interval_ms=0.7)) == pytest.approx(0.0007)
        assert configure_switch_interval(ServingConfig(python_switch_interval_ms=0)) == pytest.approx(0.0007)
        assert cli.build_arg_parser().parse_args(["--python_switch_interval_ms", "2"]).python_switch_interval_ms == 2.0
    finally:
        sys.setswitchinterval(before)
