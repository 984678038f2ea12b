"""serving.cli: TF Serving's flag names, the model config file, `python -m serving`."""
import os
import runpy
import sys

import pytest

import serving
from serving import cli
from serving.model_config import read_model_config


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
