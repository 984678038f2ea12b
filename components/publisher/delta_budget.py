"""The adaptive delta budget (#35): send the cheapest delta whose assembled model passes the gates.

A fixed share of rows fits a short interval (bench-freshness: 2-h intervals, 5 % of rows
recover 99 % of the NE) but not a long one: a 24-h span moves the model further, and the
assembled N + 5 % failed the Publisher's own gates. The span's NE loss came from the dense
part's coding, not from the rows (`make run-continuous`, 24-h span 1: 5 → 40 % rows with
int5_delta dense all lost 0.84–0.94 % NE, 40 % rows with int8_delta dense 0.041 %), so the
Publisher climbs a DENSE-FIRST ladder: at the first row fraction, each finer dense coding,
then the larger row fractions with the finest coding:

    codings = [c_0] + [c ∈ delta_dense_fallbacks, c ≠ c_0]       (only c_0 when no dense is sent)
    rungs   = [(f_0, c) : c ∈ codings] + [(f, codings[-1]) : f ∈ delta_row_fractions, f > f_0]
              f_0 = delta_row_fraction, c_0 = delta_dense

Bytes grow along the ladder when delta_dense_fallbacks is ordered by bytes (the rows fixed,
each coding costs more than the one before: int5_delta < int8_delta < fp16_delta < fp32
deflated dense bytes, measured; then the coding fixed, more rows cost more), so the first
rung that passes is the cheapest of the ladder that does. For each rung, in order:

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
    """The dense-first ladder of (row fraction, dense coding), cheapest first (module docstring)."""
    first = float(config.delta_row_fraction)
    fractions = sorted({float(f) for f in config.delta_row_fractions if float(f) > first})
    codings = [config.delta_dense]
    if send_dense:
        codings += [c for c in dict.fromkeys(config.delta_dense_fallbacks) if c != config.delta_dense]
    return [(first, c) for c in codings] + [(f, codings[-1]) for f in fractions]


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
