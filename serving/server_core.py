"""`ServerCore`: the models a server serves, from flags or TF Serving's model config file.

Like TF Serving's ``model_servers/server_core.cc``: one `ModelManager` per
``model_config_list`` entry (name, base path, version policy, version labels), loaded
before the listeners start; with ``model_config_file_poll_wait_seconds`` > 0 the file is
re-read and models are added, removed or re-configured; a file that does not parse, or
labels that point at a version that is not AVAILABLE (unless
``allow_version_labels_for_unavailable_models``), leave the running config unchanged.
"""
import logging
import sys
import threading
from typing import Dict, List, Optional, Tuple

from serving.config import ServingConfig
from serving.metrics import Metrics
from serving.model_config import read_model_specs
from serving.model_manager import ModelManager, ModelSpec, ServableNotFoundError

log = logging.getLogger(__name__)


def configure_tensorflow_threads(config: ServingConfig) -> Tuple[int, int]:
    """Sizes TensorFlow's intra-op and inter-op thread pools from the config (TF Serving
    puts ``--tensorflow_intra_op_parallelism`` / ``--tensorflow_inter_op_parallelism``
    into the SessionOptions of every model it loads, ``model_servers/main.cc``); 0 leaves
    a pool as it is. The pools are process-wide and fixed once TensorFlow's runtime has
    started, so an embedded server started after other TensorFlow work (``make run``
    serves in the pipeline's process) keeps the pools it finds, with a warning.
    Returns the (intra, inter) sizes in effect (0 = TensorFlow's default)."""
    import tensorflow as tf

    threading_ = tf.config.threading
    for want, get, set_, flag in (
            (config.tensorflow_intra_op_parallelism, threading_.get_intra_op_parallelism_threads,
             threading_.set_intra_op_parallelism_threads, "tensorflow_intra_op_parallelism"),
            (config.tensorflow_inter_op_parallelism, threading_.get_inter_op_parallelism_threads,
             threading_.set_inter_op_parallelism_threads, "tensorflow_inter_op_parallelism")):
        if want < 0:
            raise ValueError(f"--{flag} must be >= 0, got {want}")
        if want and want != get():
            try:
                set_(want)
            except RuntimeError:  # TensorFlow's runtime already runs in this process
                log.warning("--%s=%d not applied: TensorFlow already runs in this process with "
                            "%d (0 = one per core); start the server in its own process "
                            "(python -m serving) to size the pool", flag, want, get())
    return threading_.get_intra_op_parallelism_threads(), threading_.get_inter_op_parallelism_threads()


def configure_switch_interval(config: ServingConfig) -> float:
    """Sets CPython's GIL switch interval (``sys.setswitchinterval``, process-wide) from
    ``python_switch_interval_ms`` (<= 0: left as it is). Returns the interval in seconds."""
    if config.python_switch_interval_ms > 0:
        sys.setswitchinterval(config.python_switch_interval_ms / 1000.0)
    return sys.getswitchinterval()


class ServerCore:
    def __init__(self, config: Optional[ServingConfig] = None):
        self.config = config or ServingConfig()
        self.tensorflow_threads = configure_tensorflow_threads(self.config)
        configure_switch_interval(self.config)
        self.metrics = Metrics()
        self.managers: Dict[str, ModelManager] = {}
        self._config_file: Optional[str] = None
        self._config_text: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._started = False

    def manager(self, name: str) -> ModelManager:
        managers = self.managers
        if name not in managers:
            raise ServableNotFoundError(f"Servable not found for request: Latest({name})")
        return managers[name]

    # ------------------------------------------------------------------ config
    def set_models(self, models: Dict[str, str]) -> None:
        self.apply([ModelSpec(name, base) for name, base in models.items()])

    def load_config_file(self, path: str) -> None:
        self._config_file = path
        with open(path) as f:
            self._config_text = f.read()
        self.apply(read_model_specs(path))

    def apply(self, specs: List[ModelSpec]) -> None:
        """Brings the served models in line with `specs` (loads new ones now)."""
        managers = dict(self.managers)
        for spec in specs:
            m = managers.get(spec.name)
            if m is None or m.model_base_path != spec.base_path:
                if m is not None:
                    m.stop()
                m = ModelManager(spec.name, spec.base_path, config=self.config,
                                 policy=spec.policy, metrics=self.metrics)
                managers[spec.name] = m
            else:
                m.policy = spec.policy
            m.poll()
            if m.current is None:
                log.warning("no servable version of model %r under %s yet",
                            spec.name, m.model_base_path)
            self._set_labels(m, spec.labels)
            if self._started:
                m.start_polling()
        for name in set(managers) - {s.name for s in specs}:
            managers.pop(name).stop()
            log.info("model %r removed from the config", name)
        self.managers = managers  # one reference swap: readers never see a partial dict

    def _set_labels(self, m: ModelManager, labels: Dict[str, int]) -> None:
        if not self.config.allow_version_labels_for_unavailable_models:
            available = set(m.available_versions())
            bad = {k: v for k, v in labels.items() if v not in available
                   and m.labels.get(k) != v}
            if bad:
                label, v = next(iter(bad.items()))
                log.error("model %r: refusing labels %s: Request to assign label to version "
                          "%d of model %s, which is not currently available for inference",
                          m.model_name, sorted(bad), v, m.model_name)
                return
        m.labels = dict(labels)

    def _reload_config(self) -> None:
        try:
            with open(self._config_file) as f:
                text = f.read()
            if text == self._config_text:
                return
            specs = read_model_specs(self._config_file)
        except Exception as e:  # TF Serving keeps the old config on a bad file
            log.error("keeping the current model config; cannot read %s: %s",
                      self._config_file, e)
            return
        self._config_text = text
        self.apply(specs)

    # ------------------------------------------------------------------ threads
    def start(self) -> None:
        self._started = True
        for m in self.managers.values():
            m.start_polling()
        wait = self.config.model_config_file_poll_wait_seconds
        if self._config_file and wait > 0:
            self._thread = threading.Thread(target=self._config_loop, args=(wait,),
                                            daemon=True, name="model-config-poll")
            self._thread.start()

    def _config_loop(self, wait: float) -> None:
        while not self._stop.wait(wait):
            try:
                self._reload_config()
            except Exception:
                log.exception("reloading %s failed", self._config_file)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for m in self.managers.values():
            m.stop()
