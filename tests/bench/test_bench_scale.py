"""bench-scale's arithmetic: the time exponent, the RSS growth, the projection and the simulator sizes."""
import math

import pytest

from bench import bench_scale


def test_exponent_is_taken_between_the_two_largest_sizes():
    # t = r between the first two sizes, t ∝ r^2 between the last two: only the last pair counts
    assert bench_scale.exponent([4_000, 1_000, 2_000], [64.0, 1.0, 16.0]) == pytest.approx(2.0)
    assert bench_scale.exponent([10, 100], [3.0, 30.0]) == pytest.approx(1.0)


def _size(rows, seconds, rss, cpu=None):
    return {"rows": rows, "nodes": [
        {"name": "LogExampleGen", "seconds": seconds, "peak_rss_mb": rss, "peak_rss_children_mb": 0.0,
         "cpu_seconds": cpu},
        {"name": "latest_blessed_model_resolver", "seconds": 1.0, "peak_rss_mb": 100.0, "peak_rss_children_mb": 0.0}]}


def test_summarize_fits_each_component():
    sizes = [_size(250_000, 10.0, 1000.0, 9.0), _size(1_000_000, 30.0, 1200.0, 20.0),
             _size(4_000_000, 120.0, 1400.0, 160.0)]
    gen, resolver = bench_scale.summarize(sizes)
    assert gen["name"] == "LogExampleGen" and gen["rows"] == [250_000, 1_000_000, 4_000_000]
    assert gen["exponent_time"] == pytest.approx(1.0)  # 30 -> 120 s for 4x the rows
    assert gen["exponent_cpu_time"] == pytest.approx(1.5)  # 20 -> 160 CPU-s: 8x for 4x the rows
    assert gen["rss_growth"] == pytest.approx(1.4)
    assert gen["rows_per_s"] == [25_000.0, 33_333.3, 33_333.3]
    # linear extrapolation of 120 s at 4M rows to 1e8 rows: 3000 s
    assert gen["projected_worker_hours_1e8"] == pytest.approx(3000 / 3600, abs=0.01)
    assert resolver["bookkeeping"] and not gen["bookkeeping"]


def test_projection_never_assumes_sublinear_growth():
    sizes = [_size(1_000_000, 100.0, 1.0), _size(4_000_000, 200.0, 1.0)]  # k = 0.5 (fixed costs)
    gen = bench_scale.summarize(sizes)[0]
    assert gen["exponent_time"] == pytest.approx(0.5)
    assert gen["projected_worker_hours_1e8"] == pytest.approx(200 * 25 / 3600, abs=0.01)


def test_simulator_args_give_about_the_asked_rows():
    args = bench_scale.simulator_args(1_000_000)
    assert args["num_users"] == 20_000 and args["num_videos"] == 5_000  # the 1M-row run
    expected = args["num_users"] * args["num_days"] * args["impressions_per_user_day"]
    assert math.isclose(expected, 1_000_000)


def test_a_component_missing_at_a_size_is_fitted_on_the_sizes_it_ran():
    big = _size(4_000_000, 120.0, 1400.0)
    big["nodes"] = big["nodes"][:1]  # a partial run: only LogExampleGen at 4M
    gen, resolver = bench_scale.summarize([_size(250_000, 10.0, 1000.0), _size(1_000_000, 30.0, 1200.0), big])
    assert gen["rows"] == [250_000, 1_000_000, 4_000_000] and gen["exponent_time"] == pytest.approx(1.0)
    assert resolver["rows"] == [250_000, 1_000_000] and resolver["exponent_time"] == pytest.approx(0.0)
    assert resolver["rss_growth"] == pytest.approx(1.0)
