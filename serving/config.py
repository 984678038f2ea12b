"""`ServingConfig`: the embedded server's knobs, named after TF Serving's flags.

The defaults are TF Serving 2.16's own flag defaults (``model_servers/main.cc``), so
``python -m serving`` behaves like ``tensorflow_model_server`` out of the box;
the project's values live in ``pipeline/configs/`` (``SERVING``).
"""
import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ServingConfig:
    # --file_system_poll_wait_seconds (1): rescan of the base paths; <= 0 never rescans
    file_system_poll_wait_seconds: float = 1.0
    # --max_num_load_retries (5) and --load_retry_interval_micros (60 s)
    max_num_load_retries: int = 5
    load_retry_interval_seconds: float = 60.0
    # --enable_model_warmup (true), --num_request_iterations_for_warmup (1)
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 1
    # --model_config_file_poll_wait_seconds (0 = read once)
    model_config_file_poll_wait_seconds: float = 0.0
    # --rest_api_timeout_in_ms (30000): here the socket read timeout of a request
    read_timeout_seconds: float = 30.0
    # not in TF Serving (a proxy's job there): cap on a decoded request body
    max_body_bytes: int = 64 * 1024 * 1024
    # not in TF Serving (a C++ server has no GIL): CPython's switch interval while
    # serving. Python's 5 ms lets a version load's Python work hold the GIL 5 ms at a
    # time, stalling every request thread (bench-serving: p99 during hot swaps 1.9-2.0x
    # steady at 5 ms, 1.6x at 1 ms, 1.4x at 0.5 ms, steady QPS unchanged); <= 0 leaves it
    python_switch_interval_ms: float = 0.5
    # --allow_version_labels_for_unavailable_models (false)
    allow_version_labels_for_unavailable_models: bool = False
    # --tensorflow_intra_op_parallelism / --tensorflow_inter_op_parallelism (0: TensorFlow
    # picks, one thread per core): the thread pools every model runs on
    tensorflow_intra_op_parallelism: int = 0
    tensorflow_inter_op_parallelism: int = 0

    def replace(self, **changes) -> "ServingConfig":
        return dataclasses.replace(self, **changes)
