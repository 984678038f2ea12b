"""Full or delta, per publish (issue #14), and the delta publish itself.

    choose():  FULL when full_every is 1, there is no publisher state
               (components/publisher/state.py), the state's base is not the newest served
               version, this is the full_every-th publish since the last full one, the
               pruning/quantization config or the Transform output changed, or the trained
               model does not continue the served one: the base's source model is not in its
               warm-start lineage (models/training/warm_start.py; a cold-trained model sent
               as a delta would serve a mix of two unrelated models); else DELTA.

A DELTA publish (`publish_delta`):

    1. rewrites the new model with the base's pruning plans and exports it to a scratch
       dir (the same code as a full publish: every int8 row is what a full one would hold);
       a different graph, table set or checkpoint layout falls back to FULL (FallBackToFull);
    2. ranks each table's compact rows by config.delta_priority (current: this training's
       mean optimizer state and touches since each row's last publish; published: the
       state's per-row opt_state and the rows version N holds) and writes the top
       delta_row_fraction rows (the first rung of the adaptive budget, delta_budget.py: finer
       dense codings, then larger fractions, until the assembled weights pass the gates in
       memory) + the changed dense weights (models/publishing/delta.py)
       when this delta is on the dense schedule (`sends_dense`: every dense_every-th delta
       since the last full version); coded dense weights (int8_delta / int4_delta / fp16_delta) are the
       difference from version N's own checkpoint, the exact served weights, so their
       rounding never compounds over deltas (models/publishing/dense_delta.py);
    3. assembles N + delta with serving/patcher.py in the scratch dir and verifies the
       ASSEMBLED model against the trained one (`verify`: NE/AUC/XAUC gates, golden
       requests); a refusal raises PublishRefused and nothing is published;
    4. renames the assembled version to `<base>/<version>` (versioning.py), then the delta
       to `<base>/deltas/<version>/` (what sidecars beside other servers apply), and
       updates the state: sent rows take their current opt_state and touch count 0.

`record_full` writes the state after a full publish (plans, checkpoint keys, opt_state).
"""
import os
import shutil
from typing import Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from components.publisher import delta_budget, versioning
from components.publisher import state as state_lib
from models.publishing import delta as delta_lib
from models.publishing.atomic_files import atomic_rename
from serving import patcher


class FallBackToFull(Exception):
    """The new model cannot be sent as a delta of the base (the message says why)."""


def transform_fingerprint(transform_graph_dir: str) -> str:
    fn = os.path.join(transform_graph_dir, "transform_fn")
    return state_lib.file_fingerprint(fn if os.path.isdir(fn) else transform_graph_dir)


def choose(serving_base: str, config, transform_fp: str,
           lineage: Sequence[str]) -> Tuple[str, str, Optional[state_lib.PublisherState]]:
    """("full" | "delta", why, the state) (module docstring). `lineage`: the trained model's
    Model artifact URI and the ones it was warm-started from (warm_start.lineage)."""
    if config.full_every <= 1:
        return "full", "full_every is 1", None
    st = state_lib.load(serving_base)
    if st is None:
        return "full", "no publisher state (first publish)", None
    served = versioning.list_versions(serving_base)
    if not served or served[-1] != st.base_version:
        return "full", f"the newest served version {served[-1] if served else None} is not the state's " \
                       f"base {st.base_version}", None
    if st.runs_since_full + 1 >= config.full_every:
        return "full", f"a full version every {config.full_every} publishes", None
    if st.fingerprints.get("config") != state_lib.config_fingerprint(config):
        return "full", "the pruning / quantization config changed", None
    if st.fingerprints.get("transform") != transform_fp:
        return "full", "the Transform output (vocabularies) changed", None
    if st.source_model is None or os.path.normpath(st.source_model) not in [os.path.normpath(p) for p in lineage]:
        return "full", (f"the trained model does not continue the served version {st.base_version}'s model "
                        f"({st.source_model}): it was trained cold or from another model"), None
    return "delta", f"publish {st.runs_since_full + 1} of {config.full_every} since the last full version", st


def sends_dense(config, delta_number: int) -> bool:
    """Whether the delta_number-th delta since the last full version (1, 2, …) carries the
    dense weights: every config.dense_every-th one; never with dense_every 0."""
    every = int(config.dense_every)
    return every > 0 and delta_number % every == 0


def _table_vectors(importance, name: str, plan, rows: int) -> Dict[str, np.ndarray]:
    cols = (importance or {}).get(name) or {}
    out = {}
    for key in ("opt_state", "touch_count"):
        v = cols.get(key)
        if v is not None and not np.all(np.isnan(v)):
            v = state_lib.compact(np.nan_to_num(np.asarray(v, np.float64), nan=0.0), plan)
            if len(v) == rows:
                out[key] = v
    return out


def record_full(serving_base: str, config, importance, plans: dict, version: int, path: str,
                transform_fp: str, history_entry: dict, source_model: str) -> None:
    """The state after a full publish of `path` (plans: the ones publish_tables used) from
    the Model artifact `source_model`."""
    variables = delta_lib.read_checkpoint(path)
    keys = delta_lib.table_keys(variables[delta_lib.OBJECT_GRAPH_KEY])
    opt, touches = {}, {}
    for name, parts in keys.items():
        rows = delta_lib.table_row_count(variables, parts)
        vec = _table_vectors(importance, name, plans.get(name), rows)
        opt[name] = vec.get("opt_state", np.zeros(rows))
        touches[name] = np.zeros(rows)
    old = state_lib.load(serving_base)
    st = state_lib.PublisherState(
        base_version=int(version), runs_since_full=0,
        fingerprints={"config": state_lib.config_fingerprint(config), "transform": transform_fp,
                      "graph": state_lib.graph_fingerprint(path)},
        keys=keys, plans={n: p for n, p in plans.items() if n in keys}, opt_state=opt, touches=touches,
        history=(old.history if old else []) + [history_entry], source_model=os.path.normpath(source_model))
    state_lib.save(serving_base, st)


def _move(src: str, dst: str) -> None:
    try:
        os.rename(src, dst)
    except OSError:  # another file system
        shutil.copytree(src, dst)


def publish_delta(serving_base: str, st: state_lib.PublisherState, config, importance,
                  build: Callable[[str, dict], dict], verify: Callable[[str], None],
                  version: Optional[int] = None, before_rename=None, source_model: Optional[str] = None,
                  check: Optional[Callable[[str, dict], dict]] = None) -> dict:
    """One delta publish (module docstring); returns the report fields. Raises
    FallBackToFull (nothing written), delta_budget.NoRungPasses or the verification's
    refusal (nothing published). `source_model`: the trained Model artifact, the new
    version's source in the state. `check(new_dir, weights)`: the in-memory gate figures of
    assembled weights (delta_budget.py; None: the first rung, unchecked)."""
    base_dir = os.path.join(serving_base, str(st.base_version))
    scratch = os.path.join(state_lib.state_dir(serving_base), f"scratch-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    try:
        new_dir = os.path.join(scratch, "new")
        plans = dict(st.plans)
        built = build(new_dir, plans)
        if set(plans) != set(st.plans):
            raise FallBackToFull(f"pruned tables {sorted(plans)} differ from the base's {sorted(st.plans)}")
        if state_lib.graph_fingerprint(new_dir) != st.fingerprints.get("graph"):
            raise FallBackToFull("the published graph (ops or signatures) differs from the base's")
        base_vars, new_vars = delta_lib.read_checkpoint(base_dir), delta_lib.read_checkpoint(new_dir)
        keys = delta_lib.table_keys(new_vars[delta_lib.OBJECT_GRAPH_KEY])
        if keys != st.keys:
            raise FallBackToFull("the tables' checkpoint keys differ from the base's")
        current, published = {}, {}
        for name, parts in keys.items():
            rows = delta_lib.table_row_count(new_vars, parts)
            cur = _table_vectors(importance, name, st.plans.get(name), rows)
            cur["touch_count"] = st.touches[name] + cur.get("touch_count", 0.0)
            current[name], published[name] = cur, {"opt_state": st.opt_state[name]}
        priority = config.delta_priority
        if priority == "opt_state_change" and any("opt_state" not in c for c in current.values()):
            priority = "row_change"  # no optimizer state in the row importance: the row change instead
        version = int(version if version is not None else versioning.next_version(serving_base))
        with_dense = sends_dense(config, st.runs_since_full + 1)

        def make(fraction: float, dense: str, out: str):
            d = delta_lib.compute_delta(base_vars, new_vars, keys, fraction, priority, current, published, dense,
                                        seed=version, send_dense=with_dense, rows_coding=config.delta_rows)
            return d, delta_lib.write_delta(d, out, st.base_version, version)

        try:  # the cheapest rung of the delta budget whose assembled weights pass the gates in memory
            d, manifest, delta_tmp, rungs = delta_budget.choose(
                config, base_vars, make, scratch, check=(lambda w: check(new_dir, w)) if check else None,
                full_bytes=delta_budget.last_full_bytes(st.history), send_dense=with_dense)
        except delta_lib.DeltaMismatchError as e:
            raise FallBackToFull(str(e)) from None
        assembled = os.path.join(scratch, "assembled")
        patcher.assemble(base_dir, delta_tmp, assembled, before_rename=verify)
        # the version first, then the delta: a server polling the base (patcher.apply_pending)
        # never races the Publisher to assemble the same version
        result = versioning.publish_version(serving_base, lambda temp: _move(assembled, temp), keep=config.keep_versions,
                                            version=version, before_rename=before_rename)
        final_delta = os.path.join(serving_base, delta_lib.DELTAS_DIR, str(version))
        os.makedirs(os.path.dirname(final_delta), exist_ok=True)
        atomic_rename(delta_tmp, final_delta)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    removed_deltas = prune_deltas(serving_base)
    for name, arrays in d.tables.items():
        sent = np.asarray(arrays["rows"]).astype(np.int64)
        if "opt_state" in current[name]:
            st.opt_state[name][sent] = current[name]["opt_state"][sent]
        touches = np.asarray(current[name]["touch_count"], np.float64).copy()
        touches[sent] = 0.0
        st.touches[name] = touches
    tables = {n: {"rows_sent": t["rows_sent"], "rows_total": t["rows_total"], "bytes": t["bytes"]}
              for n, t in manifest["tables"].items()}
    entry = {"version": version, "kind": "delta", "bytes": manifest["total_bytes"], "base_version": st.base_version}
    st.base_version, st.runs_since_full = version, st.runs_since_full + 1
    st.source_model = os.path.normpath(source_model) if source_model else None
    st.history = st.history + [entry]
    state_lib.save(serving_base, st)
    return {"kind": "delta", "bytes": int(manifest["total_bytes"]), "base_version": manifest["base_version"],
            "delta_path": final_delta, "delta_priority": priority, "delta_row_fraction": rungs[-1]["fraction"],
            "delta_dense": rungs[-1]["dense"], "delta_dense_sent": with_dense, "delta_rungs": rungs,
            "delta_full_share": rungs[-1]["full_share"], "delta_tables": tables,
            "delta_dense_bytes": manifest["dense"]["bytes"], "delta_dense_variables": len(d.dense),
            "rows_sent": manifest["rows_sent"], "tables": built["tables"], "version": result["version"],
            "path": result["path"], "removed_versions": result["removed_versions"],
            "removed_deltas": removed_deltas, "stale_temps_removed": result["stale_temps_removed"]}


def prune_deltas(serving_base: str) -> list:
    """Deletes deltas older than the oldest served version (they can never apply)."""
    served = versioning.list_versions(serving_base)
    root = os.path.join(serving_base, delta_lib.DELTAS_DIR)
    if not served or not os.path.isdir(root):
        return []
    old = [int(n) for n in os.listdir(root) if n.isdigit() and int(n) < served[0]]
    for v in old:
        shutil.rmtree(os.path.join(root, str(v)), ignore_errors=True)
    return sorted(old)


def tree_bytes(path: str) -> int:
    return int(sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs))
