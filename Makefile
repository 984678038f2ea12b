# watchtime-ranker: one entry point for setup, run, test and benchmarks.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOGS ?=
OUT ?= outputs
MODEL_TYPE ?=
WATCH_HEAD ?=

export TF_USE_LEGACY_KERAS := 1
export TF_CPP_MIN_LOG_LEVEL := 2
export PYTHONWARNINGS := ignore

.PHONY: setup bytecode chromium run run-continuous lint test test-fast test-gates bench-rankers bench-watchtime bench-pipeline bench-serving bench-publish kfp bench-ingestion clean

# Python 3.10: python3.10 on PATH if it really runs, else $(pyenv root)/versions/3.10*.
PYTHON310 := $(shell \
  if python3.10 -c 'import sys' >/dev/null 2>&1; then command -v python3.10; \
  elif command -v pyenv >/dev/null 2>&1; then ls -d $$(pyenv root)/versions/3.10*/bin/python3.10 2>/dev/null | sort -V | tail -1; \
  fi)

setup: $(STAMP)

$(STAMP): requirements.lock setup.py
	@if [ -z "$(PYTHON310)" ]; then \
	  echo "ERROR: Python 3.10 not found (looked for a working python3.10 on PATH and \$$(pyenv root)/versions/3.10*). Install Python 3.10 (e.g. 'pyenv install 3.10') and rerun 'make setup'." >&2; exit 1; fi
	@set -e; \
	  if command -v uv >/dev/null 2>&1; then UV=uv; \
	  else python3 -m uv --version >/dev/null 2>&1 || python3 -m pip install --quiet uv; UV="python3 -m uv"; fi; \
	  test -x $(PY) || $$UV venv --seed --python $(PYTHON310) $(VENV); \
	  $$UV pip sync --compile-bytecode --python $(PY) requirements.lock; \
	  $$UV pip install --compile-bytecode --python $(PY) --no-deps -e .
	@touch $(STAMP)

# Quiet: one line per TFX component; the full log goes to $(OUT)/make_run.log.
run: setup
	@$(PY) -m pipeline.run_local $(if $(LOGS),--logs $(LOGS)) --out $(OUT) \
	  $(if $(MODEL_TYPE),--model-type $(MODEL_TYPE)) $(if $(WATCH_HEAD),--watch-head $(WATCH_HEAD))

# Continuous training (#14): the pipeline span after span (SPANS, default 3) with warm starts and
# full/delta publishes, the embedded server serving the serving base (pipeline/continuous.py)
SPANS ?= 3
run-continuous: setup
	@$(PY) -m pipeline.continuous --spans $(SPANS) $(if $(LOGS),--logs $(LOGS)) --out $(OUT)/continuous \
	  $(if $(MODEL_TYPE),--model-type $(MODEL_TYPE)) $(if $(WATCH_HEAD),--watch-head $(WATCH_HEAD))

# Headless Chromium (Debian package) for the report test: installed with apt-get when missing.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium (apt-get) for the report test"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }

# ruff with the rules in pyproject.toml (the ones the whole code base passes): a lint
# failure fails `make test`, as a CI lint job would
lint: setup
	$(PY) -m ruff check .

# Two pytest workers (the machine's two cores); --dist loadfile keeps each file's tests,
# and the e2e runs that share one pipeline root, on one worker in file order;
# --no-loadscope-reorder hands out the files in tests/conftest.py's order (the long e2e
# files first); the 25 slowest tests are listed at the end (the suite's time budget is ~20 min).
test: setup chromium bytecode lint
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25 tests

# Opt-in (#34): two default pipeline runs, Trainer seeds 0 and 1; the second must be blessed
# against the first (tests/e2e/test_gate_seeds.py; ~10 min, skipped by `make test`)
test-gates: setup bytecode
	RUN_GATE_SEEDS=1 $(PY) -m pytest -q -s -p no:cacheprovider tests/e2e/test_gate_seeds.py

test-fast: setup bytecode lint
	$(PY) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder tests -m "not e2e"

# Bytecode of the project's own modules (the venv's is compiled at install). Where
# PYTHONDONTWRITEBYTECODE is set (this machine's shells) Python still reads .pyc files but
# never writes them, so without these every process (each test worker, tfx CLI call,
# strategy worker, server) compiles every module it imports from source: importing
# TensorFlow + Beam + TFT + TFMA + TFX took 36.7 s instead of 14.5 s.
SOURCES := bench components data models pipeline serving tests watchtime_ranker local_runner.py kubeflow_v2_runner.py
bytecode: setup
	@$(PY) -m compileall -q -j 0 $(SOURCES) >/dev/null

# Run-to-run spread of the gated metrics (Trainer seeds on the same data) -> the change
# thresholds of EVAL_GATES: bench/results/gate_noise.json (see bench/bench_gate_noise.py)
SEEDS ?= 0,1,2,3,4
.PHONY: bench-gate-noise
bench-gate-noise: setup
	$(PY) -m bench.bench_gate_noise --seeds $(SEEDS) $(if $(LOGS),--logs $(LOGS))

# Rankers on KuaiRand-Pure-format logs (LOGS, TRAIN_DAYS, EVAL_DAYS; see bench/bench_rankers.py)
bench-rankers: setup
	LOGS="$(LOGS)" $(PY) -m bench.bench_rankers

# Watch-time heads (regression, WLR, CREAD x 3 bucketings, CQE) on LOGS + the simulator
# -> bench/results/watchtime.json (see bench/bench_watchtime.py)
bench-watchtime: setup
	LOGS="$(LOGS)" $(PY) -m bench.bench_watchtime

# Every ranker x watch head through the whole pipeline (Trainer -> Evaluator -> Pusher -> REST)
# on LOGS (default: simulated) -> bench/results/pipeline_matrix_<sim|real>.json
bench-pipeline: setup
	$(PY) -m bench.bench_pipeline_matrix $(if $(LOGS),--logs $(LOGS))

# REST serving latency/QPS (row format and serving_rank, 1/100 candidates, 1/8 clients,
# in-process reference, hot swaps) -> bench/results/serving.json (see bench/bench_serving.py)
bench-serving: setup
	$(PY) -m bench.bench_serving $(BENCH_SERVING_ARGS)

# Publisher (#10): trained fp32 vs pruned / int8 / pruned + int8 (bytes, NE loss, AUC/XAUC,
# latency) and the pruned-fraction sweep on LOGS (default: the shared real logs), DIN by
# default (BENCH_MODELS=din,bst,xdeepfm) -> bench/results/publish.json (see bench/bench_publish.py)
bench-publish: setup
	LOGS="$(LOGS)" $(PY) -m bench.bench_publish

# Freshness (#14): replay of LOGS (default: the shared real logs) in REPLAY_HOURS (2) intervals,
# full vs QuickUpdate-style deltas (priority x fraction x dense fp32/fp16) vs stale
# -> bench/results/freshness.json + .png (see bench/bench_freshness.py)
.PHONY: bench-freshness
bench-freshness: setup
	LOGS="$(LOGS)" $(PY) -m bench.bench_freshness

# Kubeflow Pipelines v2 spec of the configured pipeline (image built from the Dockerfile):
# make kfp IMAGE=<registry>/watchtime-ranker:<tag> [PIPELINE_ROOT=gs://.. DATA=gs://.. SERVING=gs://..]
#   [BEAM_RUNNER=DataflowRunner BEAM_VALUES="project=p region=r temp_location=gs://b/tmp num_workers=8"]
IMAGE ?= watchtime-ranker:latest
PIPELINE_ROOT ?= gs://YOUR_BUCKET/tfx
DATA ?= gs://YOUR_BUCKET/kuairand-pure
SERVING ?= gs://YOUR_BUCKET/serving/watchtime_ranker
BEAM_VALUES ?=
kfp: setup
	@mkdir -p $(OUT)
	$(PY) kubeflow_v2_runner.py --image $(IMAGE) --pipeline_root $(PIPELINE_ROOT) --data_path $(DATA) \
	  --serving_model_dir $(SERVING) --schema_path /app/schemas --output $(OUT)/watchtime_ranker_kfp_v2.json \
	  $(if $(BEAM_RUNNER),--beam_runner $(BEAM_RUNNER)) $(foreach v,$(BEAM_VALUES),--beam_value $(v))

# LogExampleGen rows/s with 1 and 2 DirectRunner worker processes on LOGS (default: the
# real logs in ../shared) -> bench/results/ingestion.json (see bench/bench_ingestion.py)
bench-ingestion: setup
	$(PY) -m bench.bench_ingestion $(if $(LOGS),--logs $(LOGS))

# The whole pipeline at 0.25M / 1M / 4M simulated rows (BENCH_SCALE_ROWS), one component per
# process: per-component time, peak RSS and time exponent -> bench/results/scale.json + .png
# (see bench/bench_scale.py; simulated logs are cached under BENCH_WORK, default outputs/bench_scale)
.PHONY: bench-scale
bench-scale: setup
	$(PY) -m bench.bench_scale

# Scaling law (#36): validation log loss / NE against data, non-embedding parameters,
# embedding width and training FLOPs for DIN and DCN, L(x) = E + A x^-alpha fits with
# bootstrap intervals, extrapolation check and the data-vs-model verdict on LOGS (default:
# the shared real logs) -> bench/results/scaling.json + .png (see bench/bench_scaling.py).
# Default ~60 min of training on 2 cores (1 seed, 3 on the data axis, no LR grid);
# BENCH_SCALING_FULL=1 the whole grid (3 seeds, LR grid, ~3.5 h); BENCH_SCALING_QUICK=1 a look.
# BENCH_WORK (default /tmp/bench_scaling) caches the runs: a rerun trains only what is missing
.PHONY: bench-scaling
bench-scaling: setup
	LOGS="$(LOGS)" TRAIN_DAYS="$(TRAIN_DAYS)" EVAL_DAYS="$(EVAL_DAYS)" BENCH_OUT="$(BENCH_OUT)" \
	  BENCH_WORK="$(BENCH_WORK)" BENCH_SCALING_QUICK="$(BENCH_SCALING_QUICK)" \
	  BENCH_SCALING_FULL="$(BENCH_SCALING_FULL)" $(PY) -m bench.bench_scaling

# Lifelong user memory (#38): din_last50 vs mean_pool / twin_lite / titans on the simulator's
# opt-in lifelong histories (L = 2,000) -> bench/results/lifelong.json (see bench/bench_lifelong.py)
.PHONY: bench-lifelong
bench-lifelong: setup
	$(PY) -m bench.bench_lifelong $(BENCH_LIFELONG_ARGS)

clean:
	rm -rf $(OUT) data/generated tfx_home
