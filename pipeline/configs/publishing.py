"""The Publisher (#10) and freshness (#14): pruning, int8, gates, versions, deltas, spans."""


# --- Publisher (#10) ---
# components/publisher + models/publishing (PublishConfig). The least important rows are
# pruned ACROSS tables (allocation "global": one ranking of every table's rows by saliency
# per byte, ½·mean Adam v·‖row − default‖², models/publishing/allocation.py; small dense
# tables like tab/hour keep their rows, the long-tail id tables give theirs), pruned ids
# go to one of 256 k-means centroids of their table's pruned rows (the remap holds one
# index per id anyway), kept rows are int8 with fp16 scale/bias. On the real logs (one
# epoch, all train rows) the old setting (each table drops the same share, pruned ids to
# the OOV row) cost 0.6-0.9 % NE at 5.3x; this one is within ±0.02 % of the trained NE at
# 70 % on the eval days: 5.6x (DIN, BST) and 5.2x (xDeepFM) with the small tables below as
# trained (bench/README.md "## Publisher").
PUBLISH_PRUNE_FRACTION = 0.7  # share of all rows dropped (per table with "per_table"; None: no pruning)
# True: prune the largest of PUBLISH_SWEEP_FRACTIONS <= PUBLISH_PRUNE_FRACTION whose in-memory
# check on the VALIDATION split passes the gates below (int8 only if none); the SavedModel's
# verification on the eval split still decides.
PUBLISH_PRUNE_AUTO = True
PUBLISH_PRUNE_THRESHOLD = None  # or: drop rows with importance <= this (not with a fraction)
PUBLISH_ALLOCATION = "global"  # "global" | "per_table"
PUBLISH_CRITERION = "saliency"  # "saliency" | "opt_state" (QuickUpdate) | "l2_norm" (FBGEMM) | "touch_count"
PUBLISH_DEFAULT_ROW = "centroids"  # "centroids" | "mean" | "oov" | "zeros"
PUBLISH_TAIL_CENTROIDS = 256  # k-means centroids per pruned table (default row "centroids")
PUBLISH_QUANTIZE = True
PUBLISH_QUANTIZE_MIN_DIM = 4  # narrower tables (first-order, width 1) stay fp32
# The int8 tables in one table-batched variable and the fp32 ones in another (FBGEMM's
# TBE layout, models/publishing/table_batch.py): a request's 30 fields are two gathers,
# not 7-9 ops per int8 table, so the published model serves as fast as the trained one.
PUBLISH_BATCH_TABLES = True
# Tables with fewer rows than this share of the largest table's stay as trained (fp32,
# every row): a few bytes, and an int8 row costs three gathers (remap, scale/bias, row)
# where an fp32 row costs one. At 0.07 the int8 tables on the real logs are the four id
# tables (user, video, author, music), the first four fields, so the two batches need no
# gather back to field order; at 0.01 two one-hot tables of 1,368 and 441 rows were int8
# between fp32 fields. Published DIN / BST / xDeepFM now serve no slower than fp32 (median
# ratio of back-to-back calls, serving_default 0.993 / 1.000 / 0.989, serving_rank 1.007 /
# 0.994 / 0.986; 95 % intervals at most ±0.7 % wide) where 0.01 cost DIN +0.5 % / +1.3 %;
# embeddings 5.6x smaller instead of 7.1x (bench/README.md "## Publisher").
PUBLISH_MIN_TABLE_SHARE = 0.07
# Gates: refuse the publish when the relative NE loss or the AUC / XAUC drop exceed these.
PUBLISH_MAX_NE_LOSS = 0.0005  # 0.05 %
PUBLISH_MAX_AUC_DROP = 0.001
PUBLISH_MAX_XAUC_DROP = 0.001
# The AUC gate refuses a drop only beyond this many standard errors of the paired AUC difference
# on the verification rows (PublishConfig.auc_drop_z): make run-continuous's 88-row spans refused
# an int8 delta for 3 discordant pairs of 1,900 (AUC drop 0.0016) at NE loss 0.041 %.
PUBLISH_AUC_DROP_Z = 2.0
# Eval rows scored by both models (None: the whole eval split). Capped so the Publisher's memory
# (the rows are held serialized, ~3 KB each: 0.6 GB) and time stop growing with the log (#33); the
# first rows of LogExampleGen's files are whole user shards (users hashed into files), i.e. a random
# sample of users. The default data (~5k eval rows) and the real logs (35-55k) are scored whole.
PUBLISH_VERIFY_MAX_EXAMPLES = 200_000
PUBLISH_GOLDEN_REQUESTS = 500
PUBLISH_WARMUP_RECORDS = 100  # <= 1000 (TF Serving's limit)
PUBLISH_WARMUP_ROWS_PER_REQUEST = 4
PUBLISH_KEEP_VERSIONS = 3
# The report's curve of NE loss against pruned fraction (in memory, on this many validation rows).
PUBLISH_SWEEP_FRACTIONS = [0.0, 0.25, 0.5, 0.6, 0.7]
PUBLISH_SWEEP_CRITERIA = ["saliency", "l2_norm"]
PUBLISH_SWEEP_MAX_EXAMPLES = 20000

# --- Freshness (#14) ---
# Partial updates (QuickUpdate, NSDI '24): a full version every PUBLISH_FULL_EVERY publishes
# (and whenever the pruning/quantization knobs, the Transform output or the graph change);
# in between a delta (models/publishing/delta.py) of each table's top
# PUBLISH_DELTA_ROW_FRACTION compact rows by PUBLISH_DELTA_PRIORITY
# (models/publishing/priority.py: "opt_state_change" | "row_change" | "touch_count" | "random")
# plus the changed dense weights in PUBLISH_DELTA_DENSE on every PUBLISH_DENSE_EVERY-th delta
# (0: only with full versions), assembled into the next version by serving/patcher.py.
# Chosen with bench-freshness on the VALIDATION day (REPLAY_SPLIT=validation, seeds 0 and 1,
# bench/results/freshness_validation*.json), not on the replay days (#35):
# - dense: the dense part is 43 % of a full version and the NE needs it fresh (seed 0: dense on
#   every delta recovers 99 % of the NE, every 2nd 95 %, every 3rd 82 %, every 6th 53 %), so it
#   rides on EVERY delta, but coded: "int4_delta" = the difference from the served weights in 15
#   levels per tensor (models/publishing/dense_delta.py; deflated 52 kB per delta for the 149k
#   dense parameters, 2.8 bits each, vs 122 kB for int8_delta and 298 kB for fp16 values) recovers as much as int8_delta (99.0 vs
#   99.2 %, seed 1 89.9 vs 91.9 %, where fresh beats stale by only 0.12 % NE) at 43 % of its bytes.
#   With the rows delta-coded (below) the budget has room for "int5_delta" (31 levels: 99.1 / 93.4 %
#   vs int4's 99.0 / 89.9 % for +9.8 kB/h; int6_delta's +19 kB/h does not fit 10x;
#   bench/results/freshness_validation_rows.json). Coded against the served version's own checkpoint,
#   its rounding never accumulates.
# - rows: row_change recovers more than random at every budget (seed 0, 5 %: 99.0 vs 95.4 %);
#   5 % over 3 % rows: 99.0 vs 98.6 % for +9 kB/h; 8 % over 5 % (code_delta): no gain (99.0 / 85.1 %
#   vs 99.0 / 89.9 % with int4). PUBLISH_DELTA_ROWS "code_delta" sends them as exact bit differences
#   from the served rows, deflated: 0.57 of their bytes (12.4 vs 21.8 kB/h), the same served model.
# - full_every 36 (publishes): a full version is 1.38 MB, the whole 10x budget of 69 kB/h over
#   20 h; with drift control a full one is needed only for new vocabularies / pruning plans,
#   so every 36th publish (3 days of 2-h publishes: ~19 kB/h amortized). Vocabularies refresh on
#   their own period, CONTINUOUS_TRANSFORM_EVERY below (a new Transform forces a full version).
PUBLISH_FULL_EVERY, PUBLISH_DELTA_ROW_FRACTION = 36, 0.05
# The adaptive delta budget (#35, components/publisher/delta_budget.py). 5 % of the rows fit a 2-h
# interval, not a 24-h span of `make run-continuous`: its assembled N + 5 % failed the gates, and not for
# the rows: 5 -> 40 % rows with int5_delta dense all lost 0.84-0.94 % NE, 40 % rows with int8_delta
# dense 0.041 % (AUC drop 0.0016). So the ladder is DENSE FIRST: when the assembled weights of a rung
# fail the gates in memory (restored into the exported model, scored on the verification rows; no
# SavedModel built), PUBLISH_DELTA_ROW_FRACTION is tried with each finer dense coding below (ordered by
# bytes: int5_delta < int8_delta < fp16_delta, deflated), then the larger row fractions with the last
# one. fp16_delta (the difference in fp16: relative error 2^-11 of each step) is as good as fp32 values
# for the NE at about half their bytes, so it ends the list. A rung costing more than
# PUBLISH_DELTA_MAX_FULL_SHARE of the last full version is skipped; none left: a full version.
PUBLISH_DELTA_ROW_FRACTIONS = [0.05, 0.1, 0.2, 0.4]
PUBLISH_DELTA_DENSE_FALLBACKS = ["int8_delta", "fp16_delta"]
PUBLISH_DELTA_MAX_FULL_SHARE = 0.5
PUBLISH_DELTA_PRIORITY, PUBLISH_DELTA_DENSE = "row_change", "int5_delta"
PUBLISH_DENSE_EVERY = 1
# how a delta's rows travel (models/publishing/row_delta.py): "values" or "code_delta" (exact bit
# differences from the served rows, deflated; see "rows" above)
PUBLISH_DELTA_ROWS = "code_delta"
# Continuous runs (pipeline/continuous.py; span.py): span k trains on [origin + k·SPAN_HOURS, +SPAN_HOURS)
# and validates/evaluates on the SPAN_HOLDOUT_HOURS after it; origin: SPAN_ORIGIN_MS or 00:00 UTC+8 of the
# first log date.
SPAN_HOURS, SPAN_HOLDOUT_HOURS, SPAN_ORIGIN_MS = 24.0, 2.0, None
# Transform (vocabulary refresh) runs on spans k % CONTINUOUS_TRANSFORM_EVERY == 0, the others reuse its
# graph: ids first seen since the last refresh share the OOV hash buckets until the next one. Weekly
# with 24-h spans; each refresh forces a full publish (new vocabulary indices), so this also bounds the
# delta chain. It used to be PUBLISH_FULL_EVERY (36 days with daily spans).
CONTINUOUS_TRANSFORM_EVERY = 7


def publish_config(**changes):
    """The Publisher's typed config from the knobs above (`changes`: tests and benches)."""
    from models.publishing.config import PublishConfig

    config = PublishConfig(
        prune_fraction=PUBLISH_PRUNE_FRACTION, prune_threshold=PUBLISH_PRUNE_THRESHOLD,
        criterion=PUBLISH_CRITERION, default_row=PUBLISH_DEFAULT_ROW, quantize=PUBLISH_QUANTIZE,
        quantize_min_dim=PUBLISH_QUANTIZE_MIN_DIM, max_ne_loss=PUBLISH_MAX_NE_LOSS,
        max_auc_drop=PUBLISH_MAX_AUC_DROP, max_xauc_drop=PUBLISH_MAX_XAUC_DROP, auc_drop_z=PUBLISH_AUC_DROP_Z,
        verify_max_examples=PUBLISH_VERIFY_MAX_EXAMPLES, golden_requests=PUBLISH_GOLDEN_REQUESTS,
        warmup_records=PUBLISH_WARMUP_RECORDS, warmup_rows_per_request=PUBLISH_WARMUP_ROWS_PER_REQUEST,
        keep_versions=PUBLISH_KEEP_VERSIONS, sweep_fractions=list(PUBLISH_SWEEP_FRACTIONS),
        sweep_criteria=list(PUBLISH_SWEEP_CRITERIA), sweep_max_examples=PUBLISH_SWEEP_MAX_EXAMPLES,
        prune_auto=PUBLISH_PRUNE_AUTO, full_every=PUBLISH_FULL_EVERY,
        delta_row_fraction=PUBLISH_DELTA_ROW_FRACTION, delta_priority=PUBLISH_DELTA_PRIORITY,
        delta_dense=PUBLISH_DELTA_DENSE, dense_every=PUBLISH_DENSE_EVERY,
        delta_rows=PUBLISH_DELTA_ROWS, delta_row_fractions=list(PUBLISH_DELTA_ROW_FRACTIONS),
        delta_dense_fallbacks=list(PUBLISH_DELTA_DENSE_FALLBACKS), delta_max_full_share=PUBLISH_DELTA_MAX_FULL_SHARE,
        allocation=PUBLISH_ALLOCATION, tail_centroids=PUBLISH_TAIL_CENTROIDS,
        min_table_share=PUBLISH_MIN_TABLE_SHARE, batch_tables=PUBLISH_BATCH_TABLES)
    return config.replace(**changes) if changes else config


PUBLISHER = publish_config()
