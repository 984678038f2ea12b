"""The embedded server (#11) and the batching file for TF Serving."""
import os

# --- Serving (#11) ---
# Embedded server (serving.config.ServingConfig, defaults = TF Serving's flags) and the
# batching file (serving.tf_serving_config): threads = cores, 1-10 ms timeout, max batch
# = the largest serving_rank request (candidates).
# One intra-op and one inter-op thread: on this 2-core machine a ranking request
# (1 user x 100 candidates) is ~1,200 small ops, and handing them between pools costs more
# than it parallelises (bench-serving, serving_rank x 100, 1 client: in-process p99
# 4.3 vs 7.6 ms with TensorFlow's one-thread-per-core pools; 8 clients: -6 % QPS).
SERVING = dict(file_system_poll_wait_seconds=1.0, max_num_load_retries=5,
               load_retry_interval_seconds=5.0, read_timeout_seconds=30.0,
               tensorflow_intra_op_parallelism=1, tensorflow_inter_op_parallelism=1)
SERVING_BATCHING = dict(max_batch_size=128, batch_timeout_micros=2000, max_enqueued_batches=16,
                        num_batch_threads=os.cpu_count() or 1)
