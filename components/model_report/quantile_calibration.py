"""Quantile calibration of the model report: coverage before and after the conformal levels.

Coverage at level tau is ``c(tau) = P(y <= q_tau)`` (ideal: ``c(tau) = tau``). Three
curves when the evaluated model's CQE head carries split-conformal levels
(models/watch_time/conformal.py):

- eval days (TFMA ``quantile_coverage@tau`` of the served, calibrated quantiles);
- the validation split before the levels and after them, as the Trainer measured
  them when it fitted the levels (the head's ``conformal_coverage`` variable [2, N],
  read from the SavedModel's checkpoint; after = tau + at most (1 + tau)/n in sample).

`conformal_coverage(evaluation_uri)` finds the evaluated model through TFMA's
``eval_config.json`` (its model location) and returns ``None`` when the model has no
such variable (no CQE head, or a model trained before issue #13), so the plot falls
back to the eval-days curve alone.
"""
from __future__ import annotations

import os
from typing import Dict, Optional

import numpy as np
from matplotlib.figure import Figure

VARIABLE = "conformal_coverage"
LEVELS = "conformal_levels"


def _model_dir(evaluation_uri: str) -> Optional[str]:
    """SavedModel directory of the candidate model the evaluation scored."""
    if not os.path.exists(os.path.join(evaluation_uri, "eval_config.json")):
        return None  # not a TFMA output (e.g. a synthetic evaluation)
    from tensorflow_model_analysis.writers import eval_config_writer
    from tfx.utils import path_utils

    try:
        _, _, _, locations = eval_config_writer.load_eval_run(evaluation_uri)
    except Exception:  # no eval_config.json (e.g. a synthetic evaluation)
        return None
    uri = locations.get("candidate") or locations.get("")
    if not uri or uri == "<unknown>":
        uri = next((v for k, v in sorted(locations.items()) if k != "baseline"), None)
    if not uri:
        return None
    serving = path_utils.serving_model_path(uri)
    return serving if os.path.isdir(serving) else (uri if os.path.isdir(uri) else None)


def read_conformal_coverage(saved_model_dir: str) -> Optional[Dict[str, list]]:
    """``{"taus", "before", "after", "levels"}`` from a SavedModel's variables, or None."""
    import tensorflow as tf

    from models.watch_time.cqe import quantile_levels

    prefix = os.path.join(saved_model_dir, "variables", "variables")
    try:
        reader = tf.train.load_checkpoint(prefix)
    except Exception:  # not a SavedModel with variables
        return None
    names = reader.get_variable_to_shape_map()
    cov = [n for n in names if f"/{VARIABLE}/" in f"/{n}" and n.endswith("VARIABLE_VALUE")]
    off = [n for n in names if f"/{LEVELS}/" in f"/{n}" and n.endswith("VARIABLE_VALUE")]
    if len(cov) != 1:
        return None
    value = np.asarray(reader.get_tensor(cov[0]), np.float64)
    if value.ndim != 2 or value.shape[0] != 2 or not np.any(value):  # never fitted: all zeros
        return None
    return {"taus": quantile_levels(value.shape[1]).tolist(), "before": value[0].tolist(),
            "after": value[1].tolist(),
            "levels": np.asarray(reader.get_tensor(off[0])).tolist() if len(off) == 1 else None}


def conformal_coverage(evaluation_uri: str) -> Optional[Dict[str, list]]:
    """The evaluated model's conformal record (:func:`read_conformal_coverage`), or None."""
    model_dir = _model_dir(evaluation_uri)
    return read_conformal_coverage(model_dir) if model_dir else None


def _error(taus, cov) -> float:
    return float(np.mean(np.abs(np.asarray(cov) - np.asarray(taus))))


def plot_quantile_calibration(path: str, coverage: Dict[float, float],
                              conformal: Optional[Dict[str, list]] = None) -> str:
    """tau against coverage: eval days (``coverage``) and, with ``conformal``, the
    validation split before / after the levels. Legends carry mean |c(tau) - tau|."""
    taus = np.array(sorted(coverage))
    cov = np.array([coverage[t] for t in taus])
    fig = Figure(figsize=(5.5, 5))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([0, 1], [0, 1], ls="--", color="#7f8c8d", label="perfect")
    if conformal:
        ct = np.asarray(conformal["taus"])
        ax.plot(ct, conformal["before"], ls=":", color="#e67e22",
                label=f"validation, before conformal ({_error(ct, conformal['before']):.4f})")
        ax.plot(ct, conformal["after"], ls="-", lw=1, color="#27ae60",
                label=f"validation, after conformal ({_error(ct, conformal['after']):.4f})")
    ax.plot(taus, cov, marker="o", ms=3, color="#c0392b",
            label=f"eval days, served model ({_error(taus, cov):.4f})")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(r"quantile level $\tau$")
    ax.set_ylabel(r"empirical coverage $P(y \leq \hat q_\tau)$")
    ax.set_title("quantile calibration (legend: mean |coverage - tau|)", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path
