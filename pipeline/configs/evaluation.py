"""The Evaluator: blessing gates and report slices."""


# ---------------------------------------------------------------- Evaluator
# Blessing gates on the overall eval slice (models/evaluation/tfma names). Floors and
# ceilings are absolute; drops/rises are against the latest blessed model.
# The change thresholds sit outside run-to-run noise (#34): five trainings (seeds 0-4) of
# the default DIN + CREAD + CQE model on the default simulated data
# (bench/results/gate_noise.json, `make bench-gate-noise`) spread by std 0.0071 / 0.0032 /
# 2.70 s (AUC / XAUC / MAE), max pair |difference| 0.0159 / 0.0081 / 6.38 s. Three seeds
# (session 17) had shown 0.0040 / 0.0078 / 1.21 s, and the gates set from them (0.01 /
# 0.02 / 3.0 s) sat inside the five-seed spread. Rule: threshold >= max(1.5 x max pair
# difference, 3 sqrt(2) std), rounded up. Wide on these small logs (7k eval rows, one
# epoch of 134 steps); re-derive them for other logs or models with
# `make bench-gate-noise LOGS=...` (README "Blessing gates").
EVAL_GATES = {
    "auc_floor": 0.55,
    "auc_max_drop": 0.03,  # noise: 1.5 x 0.0159 = 0.024, 3 sqrt(2) x 0.0071 = 0.0299
    "xauc_floor": 0.52,
    "xauc_max_drop": 0.02,  # noise: 1.5 x 0.0081 = 0.012, 3 sqrt(2) x 0.0032 = 0.0136
    "mae_ceiling": 1e4,
    "mae_max_rise": 12.0,  # seconds; noise: 1.5 x 6.38 = 9.6, 3 sqrt(2) x 2.70 = 11.4
}
# Report metrics per value of these features (raw example features).
EVAL_SLICE_FEATURES = ["tab", "user_active_degree", "duration_bucket"]
