"""Every knob of the pipeline, in one place (TFX template convention).

`create_pipeline(...)` takes these as explicit arguments; the runners
(`local_runner.py`, `kubeflow_v2_runner.py`, `pipeline/run_local.py`, through
`pipeline/runners.py`) read them from here and may override a few from the
environment (documented per knob). Each consumer gets one typed config object whose
class lives beside the consumer and holds no defaults: ``TRANSFORM``
(`models.transform_config.TransformConfig`, Transform's custom_config), ``TRAINER``
(`models.training.config.TrainerConfig`, the Trainer's custom_config) and
``LOG_EXAMPLE_GEN``. Nothing under models/ or components/ imports this module.
"""
import os

from components.log_example_gen.config import LogExampleGenConfig
from models.training.config import TrainerConfig
from models.transform_config import TransformConfig
from schemas import kuairand_format

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PIPELINE_NAME = os.environ.get("PIPELINE_NAME", "watchtime_ranker")
MODEL_NAME = "watchtime_ranker"  # name in the serving path <base>/<MODEL_NAME>/<version>/

# Where runs write. OUTPUT_DIR is overridable so tests and `make run` use their own roots.
OUTPUT_DIR = os.environ.get("OUTPUT_DIR", os.path.join(_ROOT, "outputs"))


def output_paths(output_dir: str) -> dict:
    """Pipeline root, MLMD SQLite file and serving base directory under one output root."""
    return {
        "pipeline_root": os.path.join(output_dir, "tfx_pipeline_output", PIPELINE_NAME),
        "metadata_path": os.path.join(output_dir, "tfx_metadata", PIPELINE_NAME, "metadata.db"),
        "serving_model_dir": os.path.join(output_dir, "serving_model", MODEL_NAME),
    }


PIPELINE_ROOT = output_paths(OUTPUT_DIR)["pipeline_root"]
METADATA_PATH = output_paths(OUTPUT_DIR)["metadata_path"]
SERVING_MODEL_DIR = output_paths(OUTPUT_DIR)["serving_model_dir"]

# Input logs: a folder of KuaiRand-Pure-format files. Default: the simulator's output.
DATA_PATH = os.environ.get("LOGS") or os.path.join(_ROOT, "data", "generated", "sim")
SCHEMA_PATH = os.path.join(_ROOT, "schemas")

# ---------------------------------------------------------------- log simulator
SIM_NUM_USERS = 400
SIM_NUM_VIDEOS = 300
SIM_NUM_DAYS = 6
SIM_IMPRESSIONS_PER_USER_DAY = 8.0
SIM_SEED = 7

# ---------------------------------------------------------------- LogExampleGen
# File name patterns inside DATA_PATH: the KuaiRand-Pure release names (schemas/kuairand_format.py).
LOG_FILE_PATTERN = kuairand_format.LOG_FILE_PATTERN
USER_FEATURES_PATTERN = kuairand_format.USER_FEATURES_PATTERN
VIDEO_FEATURES_PATTERN = kuairand_format.VIDEO_FEATURES_PATTERN
HISTORY_LENGTH = 50  # L: fixed length of every behaviour history (padded)
# Which earlier events enter the history: play time >= this many seconds (0 = every
# earlier impression, whatever its outcome; outcomes are features of the history).
HISTORY_MIN_WATCH_S = 0.0
# Time split by log date (yyyymmdd; comma lists and inclusive ranges such as
# "20220425-20220502"). Empty: the last EVAL_LAST_N_DAYS days are eval, every earlier
# day is train (its last VALIDATION_LAST_N_TRAIN_DAYS: validation). Days in neither
# list feed histories only.
TRAIN_DAYS = os.environ.get("TRAIN_DAYS_LIST", "")
EVAL_DAYS = os.environ.get("EVAL_DAYS_LIST", "")
EVAL_LAST_N_DAYS = 2
# The last N train days form the validation split: the Trainer validates every epoch
# on it and keeps the best epoch (DESIGN.md section 6); Transform analyses the
# remaining train days only, the Evaluator scores the eval days.
VALIDATION_LAST_N_TRAIN_DAYS = 1
MAX_BAD_ROW_FRACTION = 0.01  # the run fails above this share of bad log rows

# --- Ingestion (#12) ---
# Exact duplicate log rows (every column equal): "drop" keeps the first copy and counts
# the others in counts.json dropped_rows_by_rule (not bad rows: the real logs repeat
# 4,390 rows exactly), "dead_letter" makes the copies bad rows, "keep" keeps them all.
DUPLICATE_RULE = "drop"
# Log dates a run accepts (day text, e.g. "20220425-20220504"). Empty: inferred, the run
# of dates at most MAX_DATE_GAP_DAYS apart holding the most rows (a stray 20991231 row
# falls outside). Rows dated outside: OUT_OF_WINDOW_RULE "dead_letter" (reason
# out_of_window:date, counted as bad) or "error" (the run fails naming the dates).
DATE_WINDOW = os.environ.get("DATE_WINDOW", "")
MAX_DATE_GAP_DAYS = 2
OUT_OF_WINDOW_RULE = "dead_letter"
# `date` must be the UTC+8 day of `time_ms` give or take this: the real logs date 0.9% of
# rows up to 2.2 h after their time_ms, so 3 h passes them and refuses a row from another day.
DATE_TIME_TOLERANCE_S = 3 * 3600.0
# Value ranges (row_rules.py): is_click/is_like/long_view in {0, 1}, hour 0..23, ids and
# tab >= 0 are fixed; the bounds below are one day (real maxima: 786 s and 1,178 s).
MAX_PLAY_TIME_MS = 86_400_000
MAX_DURATION_MS = 86_400_000
# Log files are read in byte ranges of this size in parallel (reading.py).
READ_RANGE_BYTES = 4 << 20
# Beam argument sets per runner for the Beam stages (LogExampleGen, StatisticsGen,
# Transform, Evaluator): pipeline.runners.beam_args(runner, **values) fills the {fields}
# and refuses a missing one. DirectRunner: one machine (multi_processing uses
# direct_num_workers processes). Dataflow: managed; workers install this project from
# setup.py. Flink / Spark: the portable job server at job_endpoint runs the SDK harness
# in the project image (Dockerfile) as the worker environment. No Dask entry: Beam
# 2.61's DaskRunner runs none of the Beam stages (no side inputs, no tagged outputs, no
# DoFn.setup, no file sinks; README "Scale", bench/README.md "Ingestion").
BEAM_RUNNER = os.environ.get("BEAM_RUNNER", "DirectRunner")
BEAM_RUNNER_ARGS = {
    "DirectRunner": ["--direct_running_mode=in_memory", "--direct_num_workers=1"],
    "DirectRunnerMultiProcess": ["--direct_running_mode=multi_processing", "--direct_num_workers={num_workers}"],
    "DataflowRunner": ["--runner=DataflowRunner", "--project={project}", "--region={region}",
                       "--temp_location={temp_location}", "--setup_file=./setup.py",
                       "--experiments=use_runner_v2", "--max_num_workers={num_workers}"],
    "FlinkRunner": ["--runner=PortableRunner", "--job_endpoint={job_endpoint}",
                    "--environment_type=DOCKER", "--environment_config={image}",
                    "--parallelism={num_workers}"],
    "SparkRunner": ["--runner=PortableRunner", "--job_endpoint={job_endpoint}",
                    "--environment_type=DOCKER", "--environment_config={image}"],
}

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
LEARNING_RATE = 1e-3
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
    # for a tower only the pinball loss trains); split-conformal offsets fitted by the
    # Trainer on the validation split (models/watch_time/conformal.py).
    # EAD stays the CREAD default (EAD_NUM_BUCKETS = 20): on the tuning day it beats equal
    # frequency on mean calibration by decile (the E[y] error CREAD claims) at M = 10 and 20,
    # loses at M = 50 and on XAUC at every M (bench/README.md, watch-time section).
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
        "cin_layer_sizes": [64, 64],
        "cin_split_half": True,
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
# t·W h / sqrt(d)) and "dual_attention": True (two-stage cross-scene attention; needs
# the history scenes hist_tab, which LogExampleGen does not write yet, so off here).
RANKER_PARAMS["dcn"] = {
    "num_cross_layers": 3,
    "projection_dim": None,  # None: full-rank W_l; an int r: W_l = U_l V_l^T
    "structure": "parallel",
    "deep_hidden_units": [256, 128],
}
RANKER_PARAMS["din"]["attention_scoring"] = "mlp"
RANKER_PARAMS["din"]["dual_attention"] = False

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
    )
    return config.replace(**changes) if changes else config


TRAINER = trainer_config()
LOG_EXAMPLE_GEN = LogExampleGenConfig(
    history_length=HISTORY_LENGTH,
    history_min_watch_s=HISTORY_MIN_WATCH_S,
    train_days=TRAIN_DAYS,
    eval_days=EVAL_DAYS,
    eval_last_n_days=EVAL_LAST_N_DAYS,
    validation_last_n_days=VALIDATION_LAST_N_TRAIN_DAYS,
    max_bad_row_fraction=MAX_BAD_ROW_FRACTION,
    duplicate_rule=DUPLICATE_RULE,
    date_window=DATE_WINDOW,
    max_date_gap_days=MAX_DATE_GAP_DAYS,
    out_of_window_rule=OUT_OF_WINDOW_RULE,
    date_time_tolerance_s=DATE_TIME_TOLERANCE_S,
    max_play_time_ms=MAX_PLAY_TIME_MS,
    max_duration_ms=MAX_DURATION_MS,
    read_range_bytes=READ_RANGE_BYTES,
    log_file_pattern=LOG_FILE_PATTERN,
    user_features_pattern=USER_FEATURES_PATTERN,
    video_features_pattern=VIDEO_FEATURES_PATTERN,
)
TRANSFORM = TransformConfig(
    oov_buckets=VOCAB_OOV_BUCKETS,
    vocab_frequency_threshold=VOCAB_FREQUENCY_THRESHOLD,
    ead_num_buckets=EAD_NUM_BUCKETS,
    ead_beta=EAD_BETA,
    ead_alphas=list(EAD_ALPHAS),
    ead_num_quantiles=EAD_NUM_QUANTILES,
    ead_t_max_quantile=EAD_T_MAX_QUANTILE,
)

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

# --- Publisher (#10) ---
# components/publisher + models/publishing (PublishConfig). Each embedding table keeps
# its most important rows (criterion "opt_state": mean Adam v per row, QuickUpdate's;
# "l2_norm": FBGEMM's), pruned ids go to the table's OOV row, kept rows are int8 with
# fp16 scale/bias. Figures: bench/results/publish.json (`make bench-publish`).
PUBLISH_PRUNE_FRACTION = 0.5  # share of each table's rows dropped (None: no pruning)
# True: prune the largest of PUBLISH_SWEEP_FRACTIONS <= PUBLISH_PRUNE_FRACTION whose in-memory
# check passes the gates below (int8 only if none); the SavedModel's verification still decides.
PUBLISH_PRUNE_AUTO = True
PUBLISH_PRUNE_THRESHOLD = None  # or: drop rows with importance <= this (not with a fraction)
PUBLISH_CRITERION = "opt_state"
PUBLISH_DEFAULT_ROW = "oov"  # "oov" | "zeros"
PUBLISH_QUANTIZE = True
PUBLISH_QUANTIZE_MIN_DIM = 4  # narrower tables (first-order, width 1) stay fp32
# Gates: refuse the publish when the relative NE loss or the AUC / XAUC drop exceed these.
PUBLISH_MAX_NE_LOSS = 0.0005  # 0.05 %
PUBLISH_MAX_AUC_DROP = 0.001
PUBLISH_MAX_XAUC_DROP = 0.001
PUBLISH_VERIFY_MAX_EXAMPLES = None  # eval rows scored by both models (None: the whole eval split)
PUBLISH_GOLDEN_REQUESTS = 500
PUBLISH_WARMUP_RECORDS = 100  # <= 1000 (TF Serving's limit)
PUBLISH_WARMUP_ROWS_PER_REQUEST = 4
PUBLISH_KEEP_VERSIONS = 3
# The report's curve of NE loss against pruned fraction (in memory, on this many eval rows).
PUBLISH_SWEEP_FRACTIONS = [0.0, 0.1, 0.25, 0.5, 0.75]
PUBLISH_SWEEP_CRITERIA = ["opt_state", "l2_norm"]
PUBLISH_SWEEP_MAX_EXAMPLES = 20000

# --- Freshness (#14) ---
# Partial updates (QuickUpdate, NSDI '24): a full version every PUBLISH_FULL_EVERY publishes
# (and whenever the pruning/quantization knobs, the Transform output or the graph change);
# in between a delta (models/publishing/delta.py) of each table's top
# PUBLISH_DELTA_ROW_FRACTION compact rows by PUBLISH_DELTA_PRIORITY
# (models/publishing/priority.py: "opt_state_change" | "row_change" | "touch_count" | "random")
# plus the changed dense weights in PUBLISH_DELTA_DENSE ("fp32" | "fp16"), assembled into
# the next version by serving/patcher.py. bench/results/freshness.json: with Adam, row_change
# recovers the most NE per byte, and fp16 dense costs no NE while halving the delta.
PUBLISH_FULL_EVERY, PUBLISH_DELTA_ROW_FRACTION = 6, 0.05
PUBLISH_DELTA_PRIORITY, PUBLISH_DELTA_DENSE = "row_change", "fp16"
# Continuous runs (pipeline/continuous.py; span.py): span k trains on [origin + k·SPAN_HOURS, +SPAN_HOURS)
# and validates/evaluates on the SPAN_HOLDOUT_HOURS after it; origin: SPAN_ORIGIN_MS or 00:00 UTC+8 of the
# first log date. Transform runs on spans k % PUBLISH_FULL_EVERY == 0, the others reuse its graph.
SPAN_HOURS, SPAN_HOLDOUT_HOURS, SPAN_ORIGIN_MS = 24.0, 2.0, None


def publish_config(**changes):
    """The Publisher's typed config from the knobs above (`changes`: tests and benches)."""
    from models.publishing.config import PublishConfig

    config = PublishConfig(
        prune_fraction=PUBLISH_PRUNE_FRACTION, prune_threshold=PUBLISH_PRUNE_THRESHOLD,
        criterion=PUBLISH_CRITERION, default_row=PUBLISH_DEFAULT_ROW, quantize=PUBLISH_QUANTIZE,
        quantize_min_dim=PUBLISH_QUANTIZE_MIN_DIM, max_ne_loss=PUBLISH_MAX_NE_LOSS,
        max_auc_drop=PUBLISH_MAX_AUC_DROP, max_xauc_drop=PUBLISH_MAX_XAUC_DROP,
        verify_max_examples=PUBLISH_VERIFY_MAX_EXAMPLES, golden_requests=PUBLISH_GOLDEN_REQUESTS,
        warmup_records=PUBLISH_WARMUP_RECORDS, warmup_rows_per_request=PUBLISH_WARMUP_ROWS_PER_REQUEST,
        keep_versions=PUBLISH_KEEP_VERSIONS, sweep_fractions=list(PUBLISH_SWEEP_FRACTIONS),
        sweep_criteria=list(PUBLISH_SWEEP_CRITERIA), sweep_max_examples=PUBLISH_SWEEP_MAX_EXAMPLES,
        prune_auto=PUBLISH_PRUNE_AUTO, full_every=PUBLISH_FULL_EVERY,
        delta_row_fraction=PUBLISH_DELTA_ROW_FRACTION, delta_priority=PUBLISH_DELTA_PRIORITY,
        delta_dense=PUBLISH_DELTA_DENSE)
    return config.replace(**changes) if changes else config


PUBLISHER = publish_config()

# --- Serving (#11) ---
# Embedded server (serving.config.ServingConfig, defaults = TF Serving's flags) and the
# batching file (serving.tf_serving_config): threads = cores, 1-10 ms timeout, max batch
# = the largest serving_rank request (candidates).
SERVING = dict(file_system_poll_wait_seconds=1.0, max_num_load_retries=5,
               load_retry_interval_seconds=5.0, read_timeout_seconds=30.0)
SERVING_BATCHING = dict(max_batch_size=128, batch_timeout_micros=2000, max_enqueued_batches=16,
                        num_batch_threads=os.cpu_count() or 1)


# ---------------------------------------------------------------- Beam
BEAM_PIPELINE_ARGS = [
    "--direct_running_mode=in_memory",
    "--direct_num_workers=1",
]
