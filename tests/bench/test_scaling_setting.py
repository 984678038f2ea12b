"""bench/bench_scaling.py's setting selection and run plan (no training)."""
import pytest

from bench.bench_scaling import DEFAULT, FULL, QUICK, choose_setting, plan


def _count(setting, models=("din", "dcn")):
    """{seed: runs} over the seeds the setting trains."""
    return {s: len(plan(list(models), setting, 16, s)) for s in setting["data_seeds"]}


def test_default_is_the_sixty_minute_grid_and_full_the_whole_one():
    name, s = choose_setting({})
    assert name == "default" and s == DEFAULT and s["data_seeds"] == [0, 1, 2] and s["lr_grid"] == [1.0]
    # per ranker: 6 fractions + 4 other sizes + 3 other widths at seed 0 (13), the 6 data points at seeds 1, 2
    assert _count(s) == {0: 26, 1: 12, 2: 12}
    name, s = choose_setting({"BENCH_SCALING_FULL": "1"})
    assert name == "full" and s["lr_grid"] == [0.5, 1.0, 2.0] and s == FULL and s["seeds"] == [0, 1, 2]
    assert _count(s) == {0: 26, 1: 26, 2: 26}
    name, s = choose_setting({"BENCH_SCALING_QUICK": "1", "BENCH_SCALING_FULL": ""})
    assert name == "quick" and s["fractions"] == QUICK["fractions"]
    assert _count(s) == {0: 2 * (4 + 3)}  # 4 fractions + sizes 0.25, 0.5, 2 (1.0 is the full-data point)
    with pytest.raises(ValueError, match="exclusive"):
        choose_setting({"BENCH_SCALING_QUICK": "1", "BENCH_SCALING_FULL": "1"})


def test_seed_overrides_and_axis_tags():
    _, s = choose_setting({"BENCH_SEEDS": "0,2"})  # BENCH_SEEDS alone: every point at both seeds
    assert s["seeds"] == [0, 2] and s["data_seeds"] == [0, 2]
    _, s = choose_setting({"BENCH_DATA_SEEDS": "1,2", "BENCH_SCALING_EMBEDDINGS": "", "BENCH_SCALING_SIZES": "1/2"})
    assert s["seeds"] == [0] and s["data_seeds"] == [0, 1, 2] and s["embedding_dims"] == [] and s["sizes"] == [0.5]
    seed0, seed2 = plan(["din"], s, 16, 0), plan(["din"], s, 16, 2)
    assert len(seed0) == 7 and len(seed2) == 6 and all("data" in r["axes"] for r in seed2)
    # the default point keeps its tags at every seed; full data first (the LR choice)
    full = [r for r in seed2 if r["fraction"] == 1.0]
    assert seed2[0] is full[0] and full[0]["axes"] == ["data"]
    assert [r for r in seed0 if r["size"] == 0.5][0]["axes"] == ["params"]
    _, d = choose_setting({})
    assert [r for r in plan(["din"], d, 16, 1) if r["fraction"] == 1.0][0]["axes"] == ["data", "embedding", "params"]


def test_embedding_reading_by_hand():
    from bench.scaling_report import embedding_reading

    pts = lambda ys: {"points": [{"x": x, "loss": y} for x, y in zip((4, 8, 16, 32), ys)]}  # noqa: E731
    up = embedding_reading(pts([0.62, 0.60, 0.601, 0.61]), 0.002)
    assert up["best_width"] == 8 and up["widest_minus_best_over_noise_floor"] == 5.0 and "collapse" in up["shape"]
    sat = embedding_reading(pts([0.62, 0.60, 0.601, 0.603]), 0.002)
    assert sat["narrowest_minus_best_over_noise_floor"] == 10.0 and sat["shape"].startswith("saturated")
    assert embedding_reading(pts([0.62, 0.61, 0.60, 0.59]), 0.002)["shape"] == "still falling at the widest"
    flat = embedding_reading(pts([0.6015, 0.5998, 0.6004, 0.5986]), 0.00276)  # DIN on KuaiRand-Pure
    assert flat["best_width"] == 32 and flat["narrowest_minus_best_over_noise_floor"] == 1.05
    assert flat["shape"].startswith("flat")
    assert embedding_reading(None, 0.002) is None
