"""The report's quantile-calibration plot: validation before / after conformal levels
next to the eval-day coverage (components/model_report/quantile_calibration.py)."""
import numpy as np
import pytest

from components.model_report import quantile_calibration as QC
from components.model_report import report as R


def test_plot_with_and_without_conformal_record(tmp_path):
    taus = [0.1, 0.5, 0.9]
    coverage = {0.1: 0.12, 0.5: 0.5, 0.9: 0.88}
    record = {"taus": taus, "before": [0.2, 0.6, 0.95], "after": [0.1, 0.5, 0.9], "levels": [0.05, 0.5, 0.85]}
    for name, conformal in (("with.png", record), ("without.png", None)):
        path = R.plot_quantile_calibration(str(tmp_path / name), coverage, conformal)
        assert (tmp_path / name).stat().st_size > 1000 and path.endswith(name)
    assert QC._error(taus, record["before"]) == pytest.approx(np.mean([0.1, 0.1, 0.05]))


def test_no_model_or_no_variable_gives_none(tmp_path):
    assert QC.conformal_coverage(str(tmp_path)) is None  # no eval_config.json
    assert QC.read_conformal_coverage(str(tmp_path)) is None  # no variables
