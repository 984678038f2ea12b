"""Version lifecycle of one model: discover, load + warm up, swap, unload, retry, status.

Follows TF Serving's ``AspiredVersionsManager`` with the availability-preserving policy
(``core/availability_preserving_policy.cc``, ``core/aspired_versions_manager.cc``):

1. every ``file_system_poll_wait_seconds`` the aspired versions are the integer-named
   dirs under the base path picked by the version policy (``latest {num_versions}``,
   ``all``, ``specific {versions}``; ``config/model_server_config.proto``);
2. an aspired version not loaded is loaded **and warmed up** (`serving.servable`) in
   the poller thread while the old one keeps serving, then swapped in atomically under
   a lock (requests in flight keep the object they started with);
3. a version that is no longer aspired is unloaded once an aspired version is
   AVAILABLE, or at once when no version is aspired any more (every dir removed: the
   model becomes unavailable instead of serving from memory);
4. a failed load is retried ``max_num_load_retries`` times ``load_retry_interval``
   apart (``core/loader_harness.cc`` RetryWithBackoff; e.g. ``saved_model.pb`` copied
   before ``variables/``), then the version is END with its error and not retried until
   its dir is removed and re-added; a version rewritten in place is never reloaded.

States in `version_status` are TF Serving's (``get_model_status_impl.cc``): LOADING
while a load is pending or being retried, AVAILABLE, END (unloaded: OK; failed: the
error), newest first. Nothing here knows about HTTP: lookups that cannot be served
raise `ServableNotFoundError` / `ServableUnavailableError` / `LabelError`.
"""
import gc
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from serving.config import ServingConfig
from serving.servable import ServedVersion, list_versions

log = logging.getLogger(__name__)


class ServableError(Exception):
    """A model or version lookup that cannot be served; `message` says why."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ServableNotFoundError(ServableError):
    """No such model / version: TF Serving's NOT_FOUND (404)."""


class ServableUnavailableError(ServableError):
    """The model has no AVAILABLE version (yet, or any more). Over REST this is TF Serving's
    404 "Servable not found for request: Latest(<model>)" (serving/rest_api.py says why);
    the client retries it."""


class LabelError(ServableError):
    """An unknown version label: TF Serving's INVALID_ARGUMENT (400)."""


@dataclass(frozen=True)
class VersionPolicy:
    """``latest {num_versions}`` | ``all {}`` | ``specific {versions}``."""
    kind: str = "latest"
    num_versions: int = 1
    versions: Tuple[int, ...] = ()

    def aspired(self, on_disk: List[int]) -> List[int]:
        if self.kind == "all":
            return list(on_disk)
        if self.kind == "specific":
            return [v for v in on_disk if v in self.versions]
        return list(on_disk[-max(1, self.num_versions):]) if on_disk else []


@dataclass
class _Failure:
    attempts: int
    next_try: float
    error: str
    final: bool = False


@dataclass
class ModelSpec:
    """One ``model_config_list`` entry."""
    name: str
    base_path: str
    policy: VersionPolicy = field(default_factory=VersionPolicy)
    labels: Dict[str, int] = field(default_factory=dict)


def _assemble_pending_deltas(base: str) -> None:
    """Versions from pending deltas under `base`/deltas/ (serving/patcher.py, issue #14)."""
    try:
        from serving.patcher import apply_pending

        apply_pending(base)
    except Exception:  # a bad delta must not stop the scan: it is logged and skipped
        log.exception("applying deltas under %s failed", base)


def _collect_after_swap() -> None:
    """One full garbage collection after a load or a freed version, then the heap frozen.

    A version's load allocates millions of Python objects (its revived functions and
    graphs), which triggers CPython's full (generation-2) collections in the middle of
    it; each scans every object of the process with the GIL held: 170-210 ms on this
    machine, a stall of every request in flight (bench-serving's p99 during hot swaps).
    So the poller freezes the heap (``gc.freeze``: no collection scans those objects)
    before a load, and afterwards unfreezes it and collects once, which also frees the
    unloaded version's reference cycles, then freezes the survivors again: one full
    collection per swap, after the new version serves, instead of two or three during
    the load, and none while serving in steady state (objects allocated later are
    collected as usual).
    """
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class ModelManager:
    """Serves the aspired versions of one model and polls its base path for changes."""

    def __init__(self, model_name: str, model_base_path: str,
                 poll_wait_seconds: Optional[float] = None,
                 config: Optional[ServingConfig] = None,
                 policy: Optional[VersionPolicy] = None,
                 labels: Optional[Dict[str, int]] = None, metrics=None):
        self.config = config or ServingConfig()
        if poll_wait_seconds is not None:
            self.config = self.config.replace(file_system_poll_wait_seconds=poll_wait_seconds)
        self.model_name = model_name
        self.model_base_path = os.path.abspath(model_base_path)
        self.policy = policy or VersionPolicy()
        self.labels: Dict[str, int] = dict(labels or {})
        self.metrics = metrics
        self._lock = threading.Lock()        # guards _available, _ended, _failed
        self._load_lock = threading.Lock()   # one poll (load/unload) at a time
        self._available: Dict[int, ServedVersion] = {}
        self._ended: Dict[int, str] = {}     # version -> "" (unloaded) or load error
        self._failed: Dict[int, _Failure] = {}
        self._retired: List[ServedVersion] = []  # unloaded, maybe still used by a request
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def poll_wait_seconds(self) -> float:
        return self.config.file_system_poll_wait_seconds

    @property
    def current(self) -> Optional[ServedVersion]:
        """The newest AVAILABLE version (what a request without version gets)."""
        with self._lock:
            return self._available[max(self._available)] if self._available else None

    def available_versions(self) -> List[int]:
        with self._lock:
            return sorted(self._available)

    # ------------------------------------------------------------------ lifecycle
    def poll(self) -> bool:
        """One pass of load / unload towards the aspired versions. True if anything
        was swapped in or out."""
        with self._load_lock:
            _assemble_pending_deltas(self.model_base_path)
            on_disk = list_versions(self.model_base_path)
            aspired = self.policy.aspired(on_disk)
            with self._lock:
                for v in list(self._failed):  # a removed dir clears its failure
                    if v not in on_disk:
                        del self._failed[v]
                loaded = set(self._available)
            changed = False
            # newest first; a failed version only when its retry is due (a final failure
            # never again), so a broken dir costs no freeze and collection per poll
            to_load = [v for v in sorted(set(aspired) - loaded, reverse=True) if self._load_due(v)]
            if to_load:
                gc.freeze()  # see _collect_after_swap
            for v in to_load:
                changed |= self._try_load(v)
            with self._lock:
                ready = [v for v in aspired if v in self._available]
                gone = [v for v in self._available
                        if v not in aspired and (ready or not aspired)]
                for v in gone:
                    self._retired.append(self._available.pop(v))
                    self._ended[v] = ""
            for v in gone:
                log.info("unloaded model %r version %d", self.model_name, v)
                changed = True
            if self._release_retired() or to_load:
                _collect_after_swap()
            return changed

    def _release_retired(self) -> bool:
        """Frees the unloaded versions that no request holds any more, here in the poller.

        Tearing a version down (its revived functions and graphs) takes ~2-3 s of CPU on
        this machine. Left to reference counting, the request that dropped the last
        reference paid for it (one request of 2.9 s at every hot swap in bench-serving);
        the poller keeps unloaded versions until only it holds them (a request in
        flight holds its version in a local) and frees them itself. True if it freed any.
        """
        freed, still = False, []
        while self._retired:
            served = self._retired.pop()
            if sys.getrefcount(served) > 2:  # more than `served` and getrefcount's argument
                still.append(served)
            else:
                freed = True
            del served  # the last reference, if freed: torn down here (cycles: the next collection)
        self._retired = still
        return freed

    def _load_due(self, version: int) -> bool:
        """False for a version whose load failed for good, or whose retry is not due yet."""
        with self._lock:
            failure = self._failed.get(version)
        return failure is None or not (failure.final or time.monotonic() < failure.next_try)

    def _try_load(self, version: int) -> bool:
        with self._lock:
            failure = self._failed.get(version)
        path = os.path.join(self.model_base_path, str(version))
        log.info("loading model %r version %d from %s", self.model_name, version, path)
        start = time.perf_counter()
        try:
            loaded = ServedVersion(version, path, self.config.num_request_iterations_for_warmup,
                                   self.config.enable_model_warmup)
        except Exception as e:  # keep serving what we have; retry later
            attempts = 1 + (failure.attempts if failure else 0)
            final = attempts > self.config.max_num_load_retries
            error = f"{type(e).__name__}: {e}".strip()
            with self._lock:
                self._failed[version] = _Failure(
                    attempts, time.monotonic() + self.config.load_retry_interval_seconds,
                    error, final)
                if final:
                    self._ended[version] = error
            log.error("failed to load model %r version %d (attempt %d%s): %s",
                      self.model_name, version, attempts, ", giving up" if final else "", e)
            if self.metrics is not None:
                self.metrics.observe_load(self.model_name, ok=False)
            return False
        with self._lock:
            self._available[version] = loaded
            self._failed.pop(version, None)
            self._ended.pop(version, None)
        if self.metrics is not None:
            self.metrics.observe_load(self.model_name, ok=True,
                                      seconds=time.perf_counter() - start)
        log.info("serving model %r version %d (%d warmup records)", self.model_name,
                 version, loaded.warmup_records)
        return True

    def start_polling(self) -> None:
        if self.poll_wait_seconds <= 0 or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._poll_loop, daemon=True,
                                        name=f"poll-{self.model_name}")
        self._thread.start()

    def _poll_loop(self) -> None:
        # No lower OS priority for this thread: it holds the GIL while loading, and a
        # descheduled GIL holder would stall every request thread (priority inversion).
        while not self._stop.wait(self.poll_wait_seconds):
            try:
                self.poll()
            except Exception:  # a poller must survive a flaky file system
                log.exception("polling %s failed", self.model_base_path)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)

    # ------------------------------------------------------------------ lookups
    def version_status(self, version: Optional[int] = None) -> dict:
        """TF Serving's GetModelStatus reply, newest version first."""
        with self._lock:
            rows = {v: ("AVAILABLE", "") for v in self._available}
            for v, f in self._failed.items():
                if not f.final:
                    rows.setdefault(v, ("LOADING", f.error))
            for v, err in self._ended.items():
                rows.setdefault(v, ("END", err))
        out = [{"version": str(v), "state": state,
                "status": {"error_code": "UNKNOWN" if err and state == "END" else "OK",
                           "error_message": err}}
               for v, (state, err) in sorted(rows.items(), reverse=True)]
        if version is not None:
            out = [r for r in out if r["version"] == str(version)]
            if not out:
                raise ServableNotFoundError(
                    f"Could not find version {version} of model {self.model_name}")
        if not out:
            raise ServableNotFoundError(
                f"Could not find any versions of model {self.model_name}")
        return {"model_version_status": out}

    def resolve_label(self, label: str) -> int:
        if label not in self.labels:
            raise LabelError(f"Unrecognized servable version label: {label}")
        return self.labels[label]

    def get(self, version: Optional[int] = None, label: Optional[str] = None) -> ServedVersion:
        """The newest AVAILABLE version, or the one `version` / `label` names."""
        if label is not None:
            version = self.resolve_label(label)
        with self._lock:
            available = dict(self._available)
        if version is None:
            if not available:
                raise ServableUnavailableError(
                    f"Servable not found for request: Latest({self.model_name}): model "
                    f"'{self.model_name}' has no AVAILABLE version under "
                    f"{self.model_base_path}")
            return available[max(available)]
        if version not in available:
            raise ServableNotFoundError(
                f"Servable not found for request: Specific({self.model_name}, {version})")
        return available[version]
