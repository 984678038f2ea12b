"""The report's calibration warning: mean prediction / observed rate outside +-tolerance.

TFMA's ``calibration`` metric of an output is c = sum(prediction) / sum(label) (weighted);
c = 1 means the model predicts the observed rate on average. With |c - 1| > tolerance
(default 10 %) the report says so under "Overall metrics", with the mean prediction and
the mean label behind it, so a reader does not take the ranking metrics (which ignore
a constant scale) as the whole story.
"""
from typing import Dict, List

CALIBRATION_TOLERANCE = 0.10


def calibration_warnings(metrics: Dict[str, Dict[str, float]], tolerance: float = CALIBRATION_TOLERANCE
                         ) -> List[str]:
    """One sentence per output whose ``calibration`` is outside 1 +- ``tolerance``
    (``metrics``: {output: {metric: value}} of one slice)."""
    lines = []
    for output in sorted(metrics):
        c = metrics[output].get("calibration")
        if c is None or abs(c - 1.0) <= tolerance:
            continue
        pred, label = metrics[output].get("mean_prediction"), metrics[output].get("mean_label")
        behind = f" (mean prediction {pred:.3g} vs observed {label:.3g})" if pred is not None and label else ""
        lines.append(f"{output or '(all)'} calibration {c:.3g}{behind}: the model predicts "
                     f"{abs(c - 1.0):.0%} {'more' if c > 1 else 'less'} than observed on average, outside "
                     f"the +-{tolerance:.0%} band")
    return lines
