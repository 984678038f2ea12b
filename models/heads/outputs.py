"""Output names of the ranker heads and the label each lossy output trains on.

The names are part of the served contract (SavedModel signatures, TFMA specs, REST
clients): "click_prob" [B, 1], "watch_time_s" [B, 1], "ranking_score" [B, 1] and,
with CQE, "quantiles" [B, N], "cse", "dqc", "cde" [B, 1]. "cread_logits" [B, M] only
carries CREAD's loss and is dropped from the serving signatures (as "wlr_logit" of
the WLR bench head).
"""
from models import features as F

CLICK_OUTPUT = "click_prob"
WATCH_OUTPUT = "watch_time_s"
CREAD_LOGITS_OUTPUT = "cread_logits"
QUANTILES_OUTPUT = "quantiles"
CSE_OUTPUT, DQC_OUTPUT, CDE_OUTPUT = "cse", "dqc", "cde"
RANKING_OUTPUT = "ranking_score"
# Bench baselines (not a pipeline watch head): WLR's logit, D2Q's percentile (its
# label is computed from the duration groups, not a feature), the watch ratio (label
# from the raw duration).
WLR_LOGIT_OUTPUT = "wlr_logit"
D2Q_PERCENTILE_OUTPUT = "d2q_percentile"
WATCH_RATIO_OUTPUT = "watch_ratio"  # capped watch / duration (label from the raw duration)
# Outputs that only exist to carry a loss: not part of the serving signatures.
TRAINING_ONLY_OUTPUTS = (CREAD_LOGITS_OUTPUT, WLR_LOGIT_OUTPUT)
# Which label every lossy output trains on (labels from models.features).
OUTPUT_LABELS = {CLICK_OUTPUT: F.LABEL_CLICK, WATCH_OUTPUT: F.LABEL_WATCH,
                 CREAD_LOGITS_OUTPUT: F.LABEL_WATCH, QUANTILES_OUTPUT: F.LABEL_WATCH,
                 WLR_LOGIT_OUTPUT: F.LABEL_WATCH}


def training_labels(output_names, click_label, watch_label) -> dict:
    """{output: label tensor} for every output of `output_names` that trains on a label."""
    by_key = {F.LABEL_CLICK: click_label, F.LABEL_WATCH: watch_label}
    return {o: by_key[OUTPUT_LABELS[o]] for o in output_names if o in OUTPUT_LABELS}
