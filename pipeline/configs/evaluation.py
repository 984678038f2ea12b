"""The Evaluator: blessing gates and report slices."""


# ---------------------------------------------------------------- Evaluator
# Blessing gates on the overall eval slice (models/evaluation/tfma names). Floors and
# ceilings are absolute; drops/rises are against the latest blessed model.
EVAL_GATES = {
    "auc_floor": 0.55,
    "auc_max_drop": 0.01,
    "xauc_floor": 0.52,
    "xauc_max_drop": 0.01,
    "mae_ceiling": 1e4,
    "mae_max_rise": 1.0,  # seconds
}
# Report metrics per value of these features (raw example features).
EVAL_SLICE_FEATURES = ["tab", "user_active_degree", "duration_bucket"]
