"""The adaptive delta budget (#35): send the cheapest delta whose assembled model passes the gates.

A fixed share of rows fits a short interval (bench-freshness: 2-h intervals, 5 % of rows
recover 99 % of the NE) but not a long one: a 24-h span moves the model further, and the
assembled N + 5 % failed the Publisher's own gates. So the Publisher climbs a ladder:

    rungs = [(f_0, c_0)] + [(f, c_0) : f ∈ delta_row_fractions, f > f_0]
                         + [(f_max, c) : c ∈ delta_dense_fallbacks]   (only when the dense part is sent)
            f_0 = delta_row_fraction, c_0 = delta_dense, f_max = the largest fraction

and for each rung, in order:

    1. the delta (models/publishing/delta.py compute_delta) written to scratch: its bytes
       B are exact; a rung with B > delta_max_full_share · B_full (the last full version's
       bytes) is skipped;
    2. the assembled weights N + delta in memory: delta.apply_delta on version N's exact
       checkpoint, the code the patcher runs;
    3. `check(new_dir, weights)`: the Publisher restores the weights into the exported new
       model and scores the verification rows (components/publisher/publish.py
       candidate_check; no SavedModel is built), giving NE loss / AUC drop / XAUC drop
       against the trained model;

and stops at the first rung that passes the gates. The first rung is the bench-chosen
default, so when it passes the delta is what a fixed budget would send. None passing:
NoRungPasses (the Publisher publishes a full version; the report keeps every rung).
Without `check` the first rung is sent unchecked (the SavedModel verification decides).
"""
import os
from typing import Callable, List, Optional, Tuple

from components.publisher import verification
from models.publishing import delta as delta_lib


class NoRungPasses(Exception):
    """No rung of the ladder passes the gates within the byte cap; `rungs` holds each one's figures."""

    def __init__(self, message: str, rungs: List[dict]):
        super().__init__(message)
        self.rungs = rungs


def rungs(config, send_dense: bool = True) -> List[Tuple[float, str]]:
    """The ladder of (row fraction, dense coding), cheapest first (module docstring)."""
    first = float(config.delta_row_fraction)
    fractions = [first] + sorted({float(f) for f in config.delta_row_fractions if float(f) > first})
    out = [(f, config.delta_dense) for f in fractions]
    if send_dense:
        out += [(fractions[-1], c) for c in config.delta_dense_fallbacks if c != config.delta_dense]
    return out


def last_full_bytes(history: List[dict]) -> Optional[int]:
    """The bytes of the newest full version in the publisher state's history (None: unknown)."""
    fulls = [h for h in history if h.get("kind") == "full" and h.get("bytes")]
    return int(fulls[-1]["bytes"]) if fulls else None


def choose(config, base_vars: dict, make: Callable[[float, str, str], tuple], scratch: str,
           check: Optional[Callable[[dict], dict]] = None, full_bytes: Optional[int] = None,
           send_dense: bool = True) -> Tuple[object, dict, str, List[dict]]:
    """(delta, manifest, delta dir, rung reports) of the first rung that passes (module docstring).
    `make(fraction, dense, out_dir)` -> (delta, manifest) writes one rung's delta;
    `check(weights)` -> {"ne_loss", "auc_drop", "xauc_drop"} of the assembled weights."""
    reports = []
    cap = None if full_bytes is None else float(config.delta_max_full_share) * full_bytes
    for i, (fraction, dense) in enumerate(rungs(config, send_dense)):
        out = os.path.join(scratch, f"delta-{i}")
        d, manifest = make(fraction, dense, out)
        row = {"fraction": fraction, "dense": dense, "bytes": int(manifest["total_bytes"]),
               "full_share": None if not full_bytes else manifest["total_bytes"] / full_bytes}
        reports.append(row)
        if cap is not None and manifest["total_bytes"] > cap:
            row.update(passed=False, reason=f"{manifest['total_bytes']:,} B > {config.delta_max_full_share:g} of "
                                            f"the last full version ({full_bytes:,} B)")
            continue
        if check is None:
            row.update(passed=None, reason="not checked in memory (the SavedModel verification decides)")
            return d, manifest, out, reports
        _, tables, dense_arrays = delta_lib.read_delta(out)
        row.update({k: float(v) for k, v in check(delta_lib.apply_delta(base_vars, manifest, tables,
                                                                        dense_arrays)).items()})
        failures = verification.gate_failures(row, config.max_ne_loss, config.max_auc_drop, config.max_xauc_drop,
                                              config.auc_drop_z)
        row.update(passed=not failures, reason="; ".join(failures) or "every gate passed in memory")
        if not failures:
            return d, manifest, out, reports
    summary = "; ".join(f"{r['fraction']:g} rows + {r['dense']}: {r['reason']}" for r in reports)
    raise NoRungPasses(f"no delta rung passes the gates ({summary})", reports)
