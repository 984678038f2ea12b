"""LogExampleGen (#12): file patterns, history, the time split, row rules, Beam runners."""
import os

from components.log_example_gen.config import LogExampleGenConfig
from pipeline.configs.core import env_flag
from models import features as _features
from schemas import kuairand_format

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
# StatisticsGen reads about this many examples per split at most, a deterministic sample
# drawn before decoding (components/statistics_gen/; 0: every example). The default
# 18k-row run is read whole; the real logs' train split at ~1/5, 1M simulated rows' at
# ~1/29. At 25k rows a value's share has a standard error of at most 0.3 points; at 1M and
# 4M rows every feature's sample mean lay within 2.9 standard errors of the full read's,
# and neither the sample nor the full read found an anomaly (bench/results/
# statistics_gen.json). A value rarer than ~1e-4 of a split may go unseen. ExampleValidator checks the sample's statistics.
# At 1M rows 23 s, TFX's StatisticsGen 121 s (README "Scale"). Environment: STATISTICS_SAMPLE_ROWS.
STATISTICS_SAMPLE_ROWS = int(os.environ.get("STATISTICS_SAMPLE_ROWS", "25000"))
# --- Leakage-free signals (#15, components/log_example_gen/signals.py) ---
# LogExampleGen always writes them (and hist_tab); which ones are model inputs (Transform,
# the feature layer, serving requests) is LOG_SIGNALS, read from the environment by
# models/features.py so Transform, training and serving agree: unset = "standard", the 12
# click signals (default since #37: +0.0052 validation AUC over none, 3 seeds,
# bench/results/rankers_signals.json; README "Leakage-free signals"), "none" (or "") = none,
# "all", "families", a family, or a comma list of groups and sig_* / hist_tab names.
LOG_SIGNALS = _features.ENABLED_SIGNALS
# A click is known this long after its impression: a row at t uses labels of impressions
# at t_j < t - LABEL_DELAY_S only. 5 min: a production click log is joined to its
# impression in minute-scale batches, and a video is watched for seconds to minutes
# (real play-time maximum 786 s, median seconds), so 300 s is a realistic lag.
LABEL_DELAY_S = 300.0
# p0: prior CTR of the running per-tab CTR e_tab (smoothed with 2 pseudo-impressions);
# near the logs' CTR (0.46 on 05-02); it only matters for a tab's first impressions.
SIGNAL_PRIOR_CTR = 0.45
# Optional signal families (#37, components/log_example_gen/signal_families.py: in_tab,
# recent, session, target_match, time_context, watch), written as extra float features of the
# examples when named: "" (default: none, the examples are unchanged), "all", or a comma
# list. Model inputs when LOG_SIGNALS names them (models/features.py: a family, "families"
# or a family signal): then LogExampleGen writes every family (the schema
# schemas/with_families/ declares all of them) and LOG_SIGNAL_FAMILIES may only be "" or "all".
def _signal_families(requested: str, model_families: tuple) -> str:
    if not model_families:
        return requested
    if requested.strip() not in ("", "all"):
        raise ValueError(f"LOG_SIGNALS uses the signal families {list(model_families)} as model inputs, so "
                         f"LogExampleGen writes all of them; LOG_SIGNAL_FAMILIES={requested!r} would drop some "
                         f"(unset it or set it to 'all')")
    return "all"


SIGNAL_FAMILIES = _signal_families(os.environ.get("LOG_SIGNAL_FAMILIES", ""), _features.FAMILY_INPUTS)


# Every user's history events written once beside the splits (#38,
# components/log_example_gen/user_events.py: lifelong histories for models that read
# thousands of events; the examples keep their HISTORY_LENGTH). LOG_USER_EVENTS=1 turns it
# on; off by default (no model of the pipeline reads it yet: bench/bench_lifelong.py).
USER_EVENTS = env_flag("LOG_USER_EVENTS", "0")
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
    label_delay_s=LABEL_DELAY_S,
    signal_prior_ctr=SIGNAL_PRIOR_CTR,
    signal_families=SIGNAL_FAMILIES,
    user_events=USER_EVENTS,
    log_file_pattern=LOG_FILE_PATTERN,
    user_features_pattern=USER_FEATURES_PATTERN,
    video_features_pattern=VIDEO_FEATURES_PATTERN,
)
