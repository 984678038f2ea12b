"""Which rows of which table to prune: one fraction per table, or one budget across tables.

Row saliency (Optimal Brain Damage, LeCun et al. 1990, with the optimizer's second
moment as the diagonal Fisher): replacing row e_r of a table by its default row d
raises the training loss by about

    saliency_r = ½ Σ_j F_rj (e_rj − d_j)²  ≈  ½ · opt_state_r · ‖e_r − d‖²

(opt_state_r: the row's mean Adam v / Adagrad accumulator, models/publishing/
row_importance.py; d: the OOV row, zeros, or the mean of the table's rows for the
"mean" and "centroids" default rows). Unlike opt_state or the L2 norm alone, it is in loss units in
every table, so one threshold compares rows of different tables.

Allocation of a pruned share f of the rows:

    "per_table":  every prunable table drops ⌊f·V_t⌋ rows (pruning.select_rows)
    "global":     rows of all tables ranked together by score per byte,
                  score_r / c_t  (c_t: a published row's bytes, D+4 int8, 4·D fp32),
                  the lowest ⌊f·Σ_t V_t⌋ pruned; then a table whose pruned rows save
                  no more than its remap costs (V_t · 2 or 4 bytes) is not pruned at all.

Tables with few rows (a handful of tabs or hours) hold almost no bytes, and in the
global allocation they keep their rows unless their rows matter less per byte than the
long-tail ids'. The padding row and the OOV rows are always kept.

Tables over one vocabulary (a feature's embedding table and its width-1 first-order
table, xDeepFM) form a group G that shares ONE kept set and ONE remap: a group row r
is kept or pruned in every member, so its score and its bytes are the members' sums,

    score_G,r = Σ_{t∈G} score_t,r        c_G = Σ_{t∈G} c_t        remap bytes counted once,

and the allocations above run over groups (a table outside every group is its own
group). The centroid clusters of a group are those of its members' rows side by side.

Example:

>>> plans = allocate({"emb_video_id": E1, "linear_video_id": W1, "emb_tab": E2}, importance,
...                  fraction=0.6, criterion="saliency", allocation="global", default_row="oov",
...                  oov_rows={"emb_video_id": [V1 - 1], ...}, row_bytes={...},
...                  groups={"video_id": ["emb_video_id", "linear_video_id"]})
>>> plans["emb_video_id"] is plans["linear_video_id"]      # one plan, one remap
"""
from typing import Dict, List, Optional, Sequence

import numpy as np

from models.publishing import pruning

ALLOCATIONS = ("per_table", "global")
CENTROID_MIN_MEMBERS = 16


def default_vector(values: np.ndarray, default_row: str, oov_rows: Sequence[int]) -> np.ndarray:
    """The row pruned ids will read (before selection): the first OOV row, zeros, or the
    mean of all rows (the "mean" default is the mean of the PRUNED rows; the saliency uses
    the table mean as its stand-in, as the pruned set is not known yet)."""
    if default_row == "oov" and len(oov_rows):
        return np.asarray(values[oov_rows[0]], np.float64)
    if default_row in ("mean", "centroids"):
        return np.asarray(values, np.float64).mean(axis=0)
    return np.zeros(values.shape[1])


def row_scores(values: np.ndarray, importance: Optional[dict], criterion: str, default_row: str = "oov",
               oov_rows: Sequence[int] = ()) -> np.ndarray:
    """Per-row importance of one table by `criterion` ("opt_state", "touch_count",
    "l2_norm" = ‖e_r‖, "saliency" = ½ opt_state_r · ‖e_r − d‖², module docstring)."""
    values = np.asarray(values, np.float64)
    if criterion == "l2_norm":
        return np.linalg.norm(values, axis=1)
    name = "opt_state" if criterion == "saliency" else criterion
    s = (importance or {}).get(name)
    if s is None or len(s) != values.shape[0] or np.all(np.isnan(s)):
        raise ValueError(f"no '{name}' row importance for this table: was it written by run_fn "
                         f"(models/publishing/row_importance.py)?")
    s = np.nan_to_num(np.asarray(s, np.float64), nan=0.0)
    if criterion == "saliency":
        d = default_vector(values, default_row, oov_rows)
        return 0.5 * s * np.sum((values - d) ** 2, axis=1)
    return s


def global_keep(scores: Dict[str, np.ndarray], row_bytes: Dict[str, int], remap_bytes: Dict[str, int],
                always_keep: Dict[str, Sequence[int]], fraction: float) -> Dict[str, Optional[np.ndarray]]:
    """{table: sorted kept row ids, or None (table not pruned)} for the "global"
    allocation (module docstring). Ties break by table name then row id (deterministic)."""
    if not 0.0 <= float(fraction) < 1.0:
        raise ValueError(f"global_keep: fraction must be in [0, 1), got {fraction}")
    names = sorted(scores)
    total = sum(len(scores[t]) for t in names)
    n_prune = int(np.floor(float(fraction) * total))
    cand_t, cand_r, cand_s = [], [], []
    for i, t in enumerate(names):
        s = np.asarray(scores[t], np.float64)
        mask = np.ones(len(s), bool)
        mask[np.asarray(list(always_keep.get(t, ())), np.int64)] = False
        rows = np.flatnonzero(mask)
        cand_t.append(np.full(rows.size, i))
        cand_r.append(rows)
        cand_s.append(s[rows] / float(row_bytes[t]))
    cand_t, cand_r, cand_s = (np.concatenate(a) if a else np.zeros(0) for a in (cand_t, cand_r, cand_s))
    order = np.lexsort((cand_r, cand_t, cand_s))  # ascending score per byte: the first ones go
    pruned = order[:min(n_prune, order.size)]
    out: Dict[str, Optional[np.ndarray]] = {}
    for i, t in enumerate(names):
        drop = cand_r[pruned[cand_t[pruned] == i]]
        if drop.size * row_bytes[t] <= remap_bytes[t]:  # pruning would not pay for the remap
            out[t] = None
            continue
        keep = np.ones(len(scores[t]), bool)
        keep[drop.astype(np.int64)] = False
        out[t] = np.flatnonzero(keep)
    return out


def table_groups(names: Sequence[str], groups: Optional[Dict[str, Sequence[str]]] = None) -> Dict[str, List[str]]:
    """{group: its member tables, sorted} covering every table of `names`: the given
    `groups` (restricted to `names`; members of two groups are refused), and every other
    table as its own group (named after the table)."""
    out: Dict[str, List[str]] = {}
    seen = set()
    for g, members in sorted((groups or {}).items()):
        members = sorted(t for t in members if t in names)
        if seen & set(members):
            raise ValueError(f"table_groups: tables {sorted(seen & set(members))} are in two groups")
        seen.update(members)
        if members:
            out[g] = members
    for t in names:
        if t not in seen:
            out[t] = [t]
    return out


def allocate(tables: Dict[str, np.ndarray], importance: Optional[Dict[str, dict]], fraction: float,
             criterion: str, allocation: str, default_row: str, oov_rows: Dict[str, Sequence[int]],
             row_bytes: Dict[str, int], centroids: int = 1,
             groups: Optional[Dict[str, Sequence[str]]] = None) -> Dict[str, pruning.PrunePlan]:
    """{table: PrunePlan} for every table that gets pruned (module docstring); tables not
    in the result keep every row (no remap). `row_bytes[t]`: one published row's bytes;
    `centroids`: C of default_row "centroids" (pruning.tail_clusters of the pruned rows;
    at most one per CENTROID_MIN_MEMBERS pruned rows of the group); `groups`: {group:
    tables over one vocabulary}, whose members get the SAME PrunePlan object (one kept set,
    one remap; the members must have equal row counts and OOV rows)."""
    if allocation not in ALLOCATIONS:
        raise ValueError(f"allocate: allocation must be one of {ALLOCATIONS}, got {allocation!r}")
    members = table_groups(list(tables), groups)
    scores, always, remap_bytes, bytes_of = {}, {}, {}, {}
    for g, ts in members.items():
        rows = {len(tables[t]) for t in ts}
        oovs = {tuple(oov_rows.get(t, ())) for t in ts}
        if len(rows) != 1 or len(oovs) != 1:
            raise ValueError(f"allocate: the tables {ts} of group {g!r} differ in rows {sorted(rows)} or OOV rows")
        oov = list(oovs.pop())
        scores[g] = sum(row_scores(tables[t], (importance or {}).get(t), criterion, default_row, oov) for t in ts)
        always[g] = [0] + oov
        bytes_of[g] = sum(int(row_bytes[t]) for t in ts)
        n = rows.pop()
        remap_bytes[g] = n * np.dtype(pruning.remap_dtype(n + 1)).itemsize
    if allocation == "per_table":
        kept = {g: pruning.select_rows(scores[g], fraction=fraction, always_keep=always[g]) for g in members}
    else:
        kept = global_keep(scores, bytes_of, remap_bytes, always, fraction)
    plans = {}
    for g, k in kept.items():
        ts = members[g]
        num_rows, oov = len(tables[ts[0]]), list(oov_rows.get(ts[0], ()))
        if k is None or len(k) == num_rows:
            continue
        fallback = default_row if default_row != "oov" or oov else "zeros"
        clusters = None
        if fallback == "centroids":
            pruned = np.setdiff1d(np.arange(num_rows), k)
            clusters = np.zeros(num_rows, np.int64)
            # at most one centroid per CENTROID_MIN_MEMBERS pruned rows: they cost ≤ 1/16 of the saving
            k_g = min(int(centroids), max(1, pruned.size // CENTROID_MIN_MEMBERS))
            side_by_side = np.concatenate([np.asarray(tables[t], np.float64)[pruned] for t in ts], axis=1)
            clusters[pruned] = pruning.tail_clusters(side_by_side, k_g)
        plan = pruning.build_remap(k, num_rows, default_row=fallback, oov_rows=oov, clusters=clusters)
        plans.update({t: plan for t in ts})
    return plans
