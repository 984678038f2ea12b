"""The Evaluator: blessing gates and report slices."""


# ---------------------------------------------------------------- Evaluator
# Blessing gates on the overall eval slice (models/evaluation/tfma names). Floors and
# ceilings are absolute; drops/rises are against the latest blessed model.
# The change thresholds sit outside run-to-run noise (#34): three trainings of the default
# DIN + CREAD + CQE model on the default simulated data (bench/results/gate_noise.json,
# `make bench-gate-noise`) spread by std 0.0020 / 0.0039 / 0.62 s (AUC / XAUC / MAE), max
# pair |difference| 0.0040 / 0.0078 / 1.21 s (the old 1.0 s MAE gate sat inside it). Rule:
# threshold >= max(1.5 x max pair difference, 3 sqrt(2) std), rounded up. Re-derive them
# for other logs or models with `make bench-gate-noise LOGS=...` (README "Blessing gates").
EVAL_GATES = {
    "auc_floor": 0.55,
    "auc_max_drop": 0.01,  # noise: 1.5 x 0.0040 = 0.006, 3 sqrt(2) x 0.0020 = 0.0085
    "xauc_floor": 0.52,
    "xauc_max_drop": 0.02,  # noise: 1.5 x 0.0078 = 0.012, 3 sqrt(2) x 0.0039 = 0.017
    "mae_ceiling": 1e4,
    "mae_max_rise": 3.0,  # seconds; noise: 1.5 x 1.21 = 1.8, 3 sqrt(2) x 0.62 = 2.6
}
# Report metrics per value of these features (raw example features).
EVAL_SLICE_FEATURES = ["tab", "user_active_degree", "duration_bucket"]
