"""Row allocation across tables (models/publishing/allocation.py) and the centroid / mean
default rows (pruning.py), against brute-force NumPy references."""
import numpy as np
import pytest

from models.publishing import allocation, pruning


def test_saliency_is_half_opt_state_times_squared_distance_to_the_default_row():
    rng = np.random.default_rng(0)
    e = rng.normal(size=(6, 4))
    s = rng.random(6)
    imp = {"opt_state": s}
    for default, d in (("zeros", np.zeros(4)), ("oov", e[5]), ("mean", e.mean(0)), ("centroids", e.mean(0))):
        want = [0.5 * s[r] * sum((e[r, j] - d[j]) ** 2 for j in range(4)) for r in range(6)]
        np.testing.assert_allclose(allocation.row_scores(e, imp, "saliency", default, [5]), want, rtol=1e-12)
    np.testing.assert_allclose(allocation.row_scores(e, imp, "l2_norm"), np.sqrt((e ** 2).sum(1)))
    np.testing.assert_array_equal(allocation.row_scores(e, imp, "opt_state"), s)
    with pytest.raises(ValueError, match="touch_count"):
        allocation.row_scores(e, imp, "touch_count")


def test_global_keep_prunes_the_lowest_score_per_byte_across_tables_and_skips_unpaid_remaps():
    scores = {"big": np.array([9.0, 1.0, 2.0, 3.0, 0.5, 8.0, 7.0, 0.1]),
              "small": np.array([5.0, 0.2, 6.0]),
              "wide": np.array([4.0, 0.3, 0.4, 9.0])}
    row_bytes = {"big": 20, "small": 20, "wide": 40}
    remap = {"big": 16, "small": 6, "wide": 8}
    always = {"big": [0, 7], "small": [0], "wide": [0]}
    got = allocation.global_keep(scores, row_bytes, remap, always, fraction=0.4)  # 6 of 15 rows
    # brute force: candidates by score per byte, lowest first (always-kept rows excluded)
    cands = sorted((scores[t][r] / row_bytes[t], t, r) for t in scores for r in range(len(scores[t]))
                   if r not in always[t])
    pruned = {t: {r for _, tt, r in cands[:6] if tt == t} for t in scores}
    assert pruned == {"big": {1, 2, 4}, "small": {1}, "wide": {1, 2}}
    np.testing.assert_array_equal(got["big"], [0, 3, 5, 6, 7])
    assert got["small"] is not None and list(got["small"]) == [0, 2]  # 20 B saved > 6 B of remap
    np.testing.assert_array_equal(got["wide"], [0, 3])
    # a table whose pruned rows save no more than its remap costs is left whole
    got = allocation.global_keep(scores, row_bytes, dict(remap, small=20), always, fraction=0.4)
    assert got["small"] is None
    assert all(v is None for v in allocation.global_keep(scores, row_bytes, remap, always, 0.0).values())


def test_allocate_per_table_matches_select_rows_and_global_leaves_small_tables_whole():
    rng = np.random.default_rng(1)
    tables = {"emb_video_id": rng.normal(size=(200, 4)).astype(np.float32),
              "emb_tab": rng.normal(size=(5, 4)).astype(np.float32)}
    imp = {t: {"opt_state": rng.random(len(v))} for t, v in tables.items()}
    imp["emb_tab"]["opt_state"] += 10.0  # every tab row matters more than any video row
    oov = {t: [len(v) - 1] for t, v in tables.items()}
    row_bytes = {t: 8 for t in tables}
    per = allocation.allocate(tables, imp, 0.5, "opt_state", "per_table", "oov", oov, row_bytes)
    for t, v in tables.items():
        want = pruning.select_rows(imp[t]["opt_state"], fraction=0.5, always_keep=[0, len(v) - 1])
        np.testing.assert_array_equal(per[t].kept, want)
    glob = allocation.allocate(tables, imp, 0.5, "opt_state", "global", "oov", oov, row_bytes)
    assert set(glob) == {"emb_video_id"}  # the tab table keeps every row, no remap
    assert glob["emb_video_id"].pruned == int(np.floor(0.5 * 205))


def test_centroid_default_rows_are_the_means_of_their_pruned_ids():
    rng = np.random.default_rng(2)
    centers = np.array([[5.0, 0.0], [-5.0, 0.0], [0.0, 5.0]])
    table = np.concatenate([np.zeros((1, 2)), centers[rng.integers(0, 3, 60)] + rng.normal(0, 0.1, (60, 2))])
    kept = np.arange(0, 61, 4)
    pruned = np.setdiff1d(np.arange(61), kept)
    clusters = np.zeros(61, np.int64)
    clusters[pruned] = pruning.tail_clusters(table[pruned], 3, seed=0)
    # k-means separates the three blobs: one cluster per blob
    blob = np.argmin(((table[pruned][:, None] - centers[None]) ** 2).sum(-1), axis=1)
    assert len({(a, b) for a, b in zip(blob, clusters[pruned])}) == 3
    plan = pruning.build_remap(kept, 61, "centroids", clusters=clusters)
    assert plan.centroid_rows == 3 and plan.compact_rows == len(kept) + 3 and not plan.zero_row
    compact = pruning.compact_table(table.astype(np.float32), plan)
    for r in pruned:  # each pruned id reads the mean of its cluster's pruned rows
        members = [q for q in pruned if plan.remap[q] == plan.remap[r]]
        np.testing.assert_allclose(compact[plan.remap[r]], table[members].mean(0), rtol=1e-6)
    np.testing.assert_array_equal(compact[plan.remap[kept]], table[kept].astype(np.float32))
    mean = pruning.build_remap(kept, 61, "mean")
    assert mean.centroid_rows == 1 and set(mean.remap[pruned]) == {len(kept)}
    np.testing.assert_allclose(pruning.compact_table(table, mean)[-1], table[pruned].mean(0))
    zeros = pruning.build_remap(kept, 61, "zeros")
    assert zeros.zero_row and zeros.centroid_rows == 0
    np.testing.assert_array_equal(pruning.compact_table(table, zeros)[-1], 0.0)


@pytest.mark.parametrize("how", ["per_table", "global"])
def test_tables_of_one_vocabulary_share_one_plan_ranked_by_their_summed_scores(how):
    rng = np.random.default_rng(3)
    v = 300
    tables = {"emb_video_id": rng.normal(size=(v, 4)).astype(np.float32),
              "linear_video_id": rng.normal(size=(v, 1)).astype(np.float32),
              "emb_tab": rng.normal(size=(v, 4)).astype(np.float32)}
    imp = {t: {"opt_state": rng.random(v)} for t in tables}
    oov = {t: [v - 1] for t in tables}
    row_bytes = {"emb_video_id": 8, "linear_video_id": 4, "emb_tab": 8}
    groups = {"video_id": ["emb_video_id", "linear_video_id"]}
    plans = allocation.allocate(tables, imp, 0.5, "opt_state", how, "oov", oov, row_bytes, groups=groups)
    assert plans["emb_video_id"] is plans["linear_video_id"]  # one kept set, one remap
    summed = imp["emb_video_id"]["opt_state"] + imp["linear_video_id"]["opt_state"]
    if how == "per_table":
        want = pruning.select_rows(summed, fraction=0.5, always_keep=[0, v - 1])
        np.testing.assert_array_equal(plans["emb_video_id"].kept, want)
        np.testing.assert_array_equal(plans["emb_tab"].kept, pruning.select_rows(
            imp["emb_tab"]["opt_state"], fraction=0.5, always_keep=[0, v - 1]))
    else:  # the group is one "table": summed scores per summed bytes (12), one remap of v uint16
        want = allocation.global_keep({"video_id": summed, "emb_tab": imp["emb_tab"]["opt_state"]},
                                      {"video_id": 12, "emb_tab": 8}, {"video_id": 2 * v, "emb_tab": 2 * v},
                                      {"video_id": [0, v - 1], "emb_tab": [0, v - 1]}, 0.5)
        np.testing.assert_array_equal(plans["emb_video_id"].kept, want["video_id"])
        np.testing.assert_array_equal(plans["emb_tab"].kept, want["emb_tab"])
        # half of the 2 v group rows + v tab rows, i.e. ⌊0.5 · 2v⌋ rows in all
        assert plans["emb_video_id"].pruned + plans["emb_tab"].pruned == v
    with pytest.raises(ValueError, match="differ in rows"):
        allocation.allocate(dict(tables, linear_video_id=tables["linear_video_id"][:-1]), imp, 0.5, "l2_norm",
                            how, "oov", oov, row_bytes, groups=groups)
    with pytest.raises(ValueError, match="two groups"):
        allocation.table_groups(list(tables), {"a": ["emb_tab", "emb_video_id"], "b": ["emb_tab"]})


def test_centroids_of_a_group_cluster_the_members_rows_side_by_side():
    rng = np.random.default_rng(4)
    v = 200
    tables = {"emb_video_id": rng.normal(size=(v, 3)).astype(np.float32),
              "linear_video_id": rng.normal(size=(v, 1)).astype(np.float32)}
    imp = {t: {"opt_state": rng.random(v)} for t in tables}
    plans = allocation.allocate(tables, imp, 0.5, "saliency", "per_table", "centroids",
                                {t: [v - 1] for t in tables}, {t: 4 for t in tables}, centroids=4,
                                groups={"video_id": list(tables)})
    plan = plans["emb_video_id"]
    assert plan is plans["linear_video_id"] and plan.centroid_rows == 4
    pruned = np.setdiff1d(np.arange(v), plan.kept)
    side_by_side = np.concatenate([tables["emb_video_id"][pruned], tables["linear_video_id"][pruned]], axis=1)
    np.testing.assert_array_equal(plan.remap[pruned] - len(plan.kept), pruning.tail_clusters(side_by_side, 4))
