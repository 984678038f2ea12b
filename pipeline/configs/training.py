"""Transform (vocabularies, EAD buckets) and the Trainer (rankers, heads, strategy)."""
import math
import os

from models import features as _features
from models.training.config import TrainerConfig
from models.transform_config import TransformConfig
from pipeline.configs.core import env_flag
from pipeline.configs.ingestion import HISTORY_LENGTH

# ---------------------------------------------------------------- Transform
VOCAB_OOV_BUCKETS = 1  # shared by Transform (vocabularies) and the Trainer (table rows)
VOCAB_FREQUENCY_THRESHOLD = 1

# EAD watch-time buckets (CREAD §4; models/watch_time/ead.py), learned by Transform on the train
# split: M thresholds, objective J = A_w + beta·A_b, alpha grid (equal width is always
# a candidate too), CDF from EAD_NUM_QUANTILES quantiles clipped at T_max.
EAD_NUM_BUCKETS = 20
EAD_BETA = 100.0
EAD_ALPHAS = [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0]
EAD_NUM_QUANTILES = 1000
EAD_T_MAX_QUANTILE = 0.99

# ---------------------------------------------------------------- Trainer
# Ranker (models/rankers RANKERS): "baseline" | "lr" | "xdeepfm" | "din" | "bst".
# The default is one of the mission's sequence rankers with both watch-time heads.
MODEL_TYPE = os.environ.get("MODEL_TYPE", "din")
EMBEDDING_DIM = 16
HIDDEN_UNITS = [128, 64]
# Adam's rate at BATCH_SIZE; another batch size B gets LEARNING_RATE · sqrt(B / BATCH_SIZE)
# (learning_rate_at). A full run starts there and decays linearly to 0 over its steps
# (LEARNING_RATE_DECAY "linear", models/training/lr_schedule.py; "none": constant): DIN with the
# 12 signals, 3 seeds, validation AUC 0.7379 at a constant 1e-3 -> 0.7391 at 3e-3 decaying
# (batch 64; at batch 256 6e-3 decaying was the best of 2e-3..8e-3, bench/README.md "A
# decaying learning rate", #37).
LEARNING_RATE = float(os.environ.get("LEARNING_RATE", 3e-3))
LEARNING_RATE_DECAY = os.environ.get("LEARNING_RATE_DECAY", "linear")
# a warm-started run's rate (#14): 1e-3 left the model worse than stale (bench/results/freshness_tuning.json)
WARM_START_LEARNING_RATE = 1e-4
BATCH_SIZE = 64
# Trainer shuffle buffer (examples): at least the train split. LogExampleGen writes each
# user's rows together and the order drifts (real logs: click rate 0.40 -> 0.50 along
# the train file); with tfx-bsl's default 10k buffer the last steps saw only
# high-click users and the click head over-predicted by 12-25 % on the eval days.
# Memory: a transformed example is 2.2 KB serialized (L = 50; measured on the real
# train split, 115,574 rows = 251 MB), so a full buffer is ~0.45 GB.
SHUFFLE_BUFFER_SIZE = 200_000
SEED = 0
TRAIN_EPOCHS = 1  # one-epoch phenomenon of id-heavy CTR models (DESIGN.md section 6)
TRAIN_STEPS = None  # None: one pass of TRAIN_EPOCHS over the train split
EVAL_STEPS = None
LOSS_WEIGHT_CLICK = 1.0
LOSS_WEIGHT_WATCH = 1.0  # regression watch head (log1p MSE)
# The CREAD loss sums M BCEs (+ Huber in seconds) and the CQE pinball loss sums N
# quantile losses in seconds: at weight 1 they swamp the click loss in the shared
# layers (simulated run: click AUC 0.47 with CREAD+CQE at 1/1 vs 0.69 with the
# regression head). These weights keep click AUC within ~0.01 of the regression head.
LOSS_WEIGHT_CREAD = 0.2
LOSS_WEIGHT_CQE = 0.01  # ~1/N: the mean pinball loss over the quantiles

# Watch-time head (models/heads WATCH_HEADS), on top of any ranker:
#   "regression" (log1p MSE) | "cread" (EAD buckets from Transform) | "cqe" (quantiles)
#   | "cread+cqe" (both; watch_time_s is then CREAD's restoration).
# Env WATCH_HEAD overrides. "watch_time_s" is the regression prediction, the CREAD
# restoration or CQE's CDE accordingly.
WATCH_HEAD = os.environ.get("WATCH_HEAD", "cread+cqe")
# CREAD loss λ_ce·ΣBCE + λ_restore·Huber_δ(ŷ − y) + λ_ord·Σ max(φ_{m+1} − φ_m, 0) and the
# restoration rule: "trapezoid" is the default because it is less biased than CREAD
# eq. 4's Riemann sum when both get the simulator's TRUE survival at the EAD thresholds
# (bench/bench_watchtime.py restoration_bias_true_survival, 20k impressions): mean
# bias vs E[y] -0.84 s (trapezoid) vs -2.80 s (riemann); vs E[min(y, T_max)], the pure
# discretization error, +0.16 s vs -1.80 s.
CREAD = {
    "lambda_ce": 1.0,
    "lambda_restore": 0.1,
    "lambda_ord": 1.0,
    "huber_delta": 1.0,  # seconds
    "restoration": "trapezoid",
    "phi0": 1.0,  # P(y > 0) used by the trapezoid rule's first bucket
}
# CQE: N levels tau_i = i/(N+1); CSE at tau_low; DQC = k·t_low + (1−k)·t_high with k =
# default_k in serving_default (per request via the `serving_dqc` signature's dqc_k).
CQE = {
    "num_quantiles": 100,
    "tau_low": 0.25,
    "tau_high": 0.7,
    "default_k": 0.5,
    "increment": "softplus",
    # --- Watch time (#13): calibrated quantiles (bench/README.md, watch-time section) ---
    # the quantile tower: its own MLP on stop_gradient(z), so the pinball loss cannot
    # cost click AUC; pinball scored on log1p (same quantiles, a learnable scale);
    # "mean" over the batch ("sum": the CQE authors' snippet; Adam makes them equivalent
    # for a tower only the pinball loss trains); split-conformal levels fitted by the
    # Trainer on the validation split (models/watch_time/conformal.py).
    # EAD stays the CREAD default (EAD_NUM_BUCKETS = 20): on the validation day it beats
    # equal frequency on mean calibration by decile (the E[y] error CREAD claims) at M = 20
    # and 50 in each of 3 seeds, ties at M = 10, and loses on MAE and XAUC at every M
    # (bench/README.md, watch-time section).
    "tower_units": [64],
    "stop_gradient": True,
    "loss_space": "log1p",
    "batch_reduction": "mean",
    "conformal": True,
}
# ranking_score output: a named formula of the outputs (models/heads/
# RANKING_FORMULAS): "click_prob * watch_time_s" | "watch_time_s" | "click_prob" |
# "click_prob * log1p(watch_time_s)" | "click_prob * dqc" | "dqc" | "click_prob * cse".
RANKING_SCORE = os.environ.get("RANKING_SCORE", "click_prob * watch_time_s")

# Per-ranker hyperparameters (keyword arguments of the builders in models/; the one
# for MODEL_TYPE is passed to run_fn as `ranker_params`). Sizes are modest: on
# KuaiRand-Pure the deep models peak after one epoch (DESIGN.md section 6).
RANKER_PARAMS = {
    "baseline": {"hidden_units": HIDDEN_UNITS},
    "lr": {"learning_rate": 5e-3},  # a linear model converges slowly at 1e-3
    "xdeepfm": {  # Lian et al. 2018: CIN + DNN + linear (eq. 15)
        # 32 maps per layer: the same AUC as 64 at 1.7x the training speed (3 seeds, #15)
        "cin_layer_sizes": [32, 32],
        "cin_split_half": True,
        # Rank-1 maps W^{k,h} = u v^T (models/layers/cin.py; None = the paper's full
        # [H_{k-1}, m] weights): the same AUC at 2.75x the training speed and half the
        # serving time (3 seeds, batch 1024, bench/README.md "A low-rank CIN", #15)
        "cin_rank": 1,
        "dnn_hidden_units": [128, 64],
    },
    "din": {  # Zhou et al. 2018: attention MLP 80-40, Dice; MLP 200-80 with Dice
        "attention_hidden_units": [80, 40],
        "attention_activation": "dice",
        # The paper drops the softmax; with up to 50 unnormalised items v_U scales with the
        # history length and DIN training diverged on small simulated runs, so normalise.
        "attention_softmax": True,
        "mlp_hidden_units": [200, 80],
        "mlp_activation": "dice",
        "dice_momentum": 0.99,  # moving averages Dice uses at inference
    },
    "bst": {  # Chen et al. 2019: one transformer block, time-gap bucket positions
        "num_blocks": 1,
        "num_heads": 2,
        "ffn_units": None,  # None: 4 x item width
        "dropout_rate": 0.1,
        "relative_positions": False,  # True: Shaw et al. 2018 relative positions
        "max_relative_position": 8,
        "time_gap_buckets": 16,
        "mlp_hidden_units": [128, 64],
    },
}
# --- Rankers (#15) ---
# DCN-v2 (Wang et al. 2021) on TF Recommenders' Cross layer: 3 full-rank cross layers
# in parallel with a 256-128 ReLU MLP (the paper's default structure). DIN options
# (bench/README.md, rankers section): "attention_scoring": "scaled_dot" (softmax of
# t·W h / sqrt(d)) and "dual_attention" (two-stage cross-scene attention): on with
# DIN_DUAL_ATTENTION=1, which needs the scene of every history item as a model input,
# i.e. hist_tab in LOG_SIGNALS (LogExampleGen always writes it). Off by default: it
# did not help DIN on the real logs (bench/README.md, bounded run for #15).
RANKER_PARAMS["dcn"] = {
    "num_cross_layers": 3,
    "projection_dim": None,  # None: full-rank W_l; an int r: W_l = U_l V_l^T
    "structure": "parallel",
    "deep_hidden_units": [256, 128],
}
RANKER_PARAMS["din"]["attention_scoring"] = "mlp"
DIN_DUAL_ATTENTION = os.environ.get("DIN_DUAL_ATTENTION", "0")
if DIN_DUAL_ATTENTION not in ("0", "1"):
    raise ValueError(f"DIN_DUAL_ATTENTION must be 0 or 1, got {DIN_DUAL_ATTENTION!r}")
if DIN_DUAL_ATTENTION == "1" and not _features.HISTORY_TAB_ENABLED:
    raise ValueError("DIN_DUAL_ATTENTION=1 needs the history scenes as a model input: add hist_tab "
                     f"to LOG_SIGNALS (now {os.environ.get(_features.SIGNALS_ENV, _features.STANDARD_TOKEN)!r}), "
                     "e.g. LOG_SIGNALS=standard,hist_tab (the default signals and the scenes)")
RANKER_PARAMS["din"]["dual_attention"] = DIN_DUAL_ATTENTION == "1"
# DIN_LONG_MEMORY=titans (#38): a Titans neural memory written from the history, read by
# the target item, as a gate (models/layers/titans_memory.py MemoryAsGate). Off by default:
# on KuaiRand-Pure's <= 50-event histories it is a no-regression check, not a gain
# (bench/README.md, lifelong section).
DIN_LONG_MEMORY = os.environ.get("DIN_LONG_MEMORY", "none")
if DIN_LONG_MEMORY not in ("none", "titans"):
    raise ValueError(f"DIN_LONG_MEMORY must be none or titans, got {DIN_LONG_MEMORY!r}")
RANKER_PARAMS["din"]["long_memory"] = DIN_LONG_MEMORY

# --- Training speed (#15; bench/README.md, rankers section) ---
# Read the split once (parse + transform), keep it in memory and gather each batch by
# shuffled row index (models/training/input.py in_memory_dataset): an exact per-epoch
# permutation instead of SHUFFLE_BUFFER_SIZE per-example shuffling.
INPUT_IN_MEMORY = True
# ... up to this many MiB of transformed arrays per split (~1.9 KB a row: the real logs' train
# split, 115k rows, is ~0.2 GB); a larger split streams through SHUFFLE_BUFFER_SIZE instead, so
# the Trainer's memory stops growing with the log (#33; README "Scale"). Held in memory a split
# costs ~3x its arrays at peak (batches, their concatenation, the tensors): 5.9 GB at 1M rows.
INPUT_MEMORY_BUDGET_MB = float(os.environ.get("INPUT_MEMORY_BUDGET_MB", 512))
# The Trainer reads LogExampleGen's raw examples and applies the transform graph while it
# reads each split; Transform materializes nothing (pipeline/pipeline.py module doc, #33).
INPUT_EXAMPLES = "raw"
STEPS_PER_EXECUTION = 1  # batches per tf.function call (Keras compile)
JIT_COMPILE = False  # XLA for Keras' train/test/predict functions; never the exported signatures
# The optimizer (#33, models/heads/lazy_adam.py): "lazy_adam" (default) moves only the
# embedding rows of the batch (and their moments), so a step costs O(batch) instead of
# O(vocabulary); "adam" is tf-keras' Adam, which moves every row at every step. The rankers
# trained with either are level (3 seeds each, bench/results/optimizer_lazy_adam.json).
OPTIMIZER = os.environ.get("OPTIMIZER", "lazy_adam")

# Reproducible runs (#34; models/training/determinism.py): DETERMINISTIC=1 trains with
# deterministic ops and one-thread pools, so the same SEED and data give bit-identical
# predictions (`make run` fixes the pools before TensorFlow starts). Off by default: it is
# slower (README "Reproducible runs" has the measured cost).
DETERMINISTIC = env_flag("DETERMINISTIC", "0")

# Click calibration (#37, models/heads/calibration.py): p_click = σ(a·logit + b), (a, b) fitted
# on the validation split after training and stored in the model (the SavedModel, the
# Publisher and serving carry it). Without it the eval days' mean predicted / observed CTR
# was 1.03-1.06 (DIN, 3 seeds, bench/results/rankers_signals.json); with it see
# bench/results/calibration.json. CALIBRATE_CLICK=0 leaves the layer the identity.
CALIBRATE_CLICK = env_flag("CALIBRATE_CLICK", "1")

# Distribution strategy (models/training/strategies.py): "mirrored" (default; all local
# devices), "multi_worker" (TF_CONFIG) or "parameter_server" (TF_CONFIG; embedding
# tables bigger than PS_MIN_SHARD_BYTES are split over at most PS_MAX_SHARDS ps tasks;
# needs TRAIN_STEPS).
STRATEGY = os.environ.get("STRATEGY", "mirrored")
PS_MIN_SHARD_BYTES = 256 << 10
PS_MAX_SHARDS = None  # None: one shard per parameter server at most


def trainer_config(model_type: str = None, **changes) -> TrainerConfig:
    """The Trainer's typed config from the knobs above; `model_type` also picks its
    RANKER_PARAMS; `changes` replace any other field (tests and benches)."""
    model_type = model_type or MODEL_TYPE
    config = TrainerConfig(
        model_type=model_type,
        ranker_params=dict(RANKER_PARAMS.get(model_type, {})),
        history_length=HISTORY_LENGTH,
        embedding_dim=EMBEDDING_DIM,
        oov_buckets=VOCAB_OOV_BUCKETS,
        learning_rate=LEARNING_RATE,
        batch_size=BATCH_SIZE,
        shuffle_buffer_size=SHUFFLE_BUFFER_SIZE,
        epochs=TRAIN_EPOCHS,
        seed=SEED,
        loss_weight_click=LOSS_WEIGHT_CLICK,
        loss_weight_watch=LOSS_WEIGHT_WATCH,
        loss_weight_cread=LOSS_WEIGHT_CREAD,
        loss_weight_cqe=LOSS_WEIGHT_CQE,
        watch_head=WATCH_HEAD,
        cread=dict(CREAD),
        cqe=dict(CQE),
        ranking_score=RANKING_SCORE,
        strategy=STRATEGY,
        ps_min_shard_bytes=PS_MIN_SHARD_BYTES,
        ps_max_shards=PS_MAX_SHARDS, warm_start_learning_rate=WARM_START_LEARNING_RATE,
        steps_per_execution=STEPS_PER_EXECUTION, jit_compile=JIT_COMPILE, input_in_memory=INPUT_IN_MEMORY,
        input_memory_budget_mb=INPUT_MEMORY_BUDGET_MB,
        input_examples=INPUT_EXAMPLES, deterministic=DETERMINISTIC, calibrate_click=CALIBRATE_CLICK,
        optimizer=OPTIMIZER, learning_rate_decay=LEARNING_RATE_DECAY,
    )
    return config.replace(**changes) if changes else config


def learning_rate_at(batch_size: int) -> float:
    """LEARNING_RATE scaled to another batch size: η(B) = LEARNING_RATE · sqrt(B / BATCH_SIZE)."""
    return LEARNING_RATE * math.sqrt(batch_size / BATCH_SIZE)


TRAINER = trainer_config()
TRANSFORM = TransformConfig(
    oov_buckets=VOCAB_OOV_BUCKETS,
    vocab_frequency_threshold=VOCAB_FREQUENCY_THRESHOLD,
    ead_num_buckets=EAD_NUM_BUCKETS,
    ead_beta=EAD_BETA,
    ead_alphas=list(EAD_ALPHAS),
    ead_num_quantiles=EAD_NUM_QUANTILES,
    ead_t_max_quantile=EAD_T_MAX_QUANTILE,
)
