"""bench_ingestion's scaling entry: efficiency from the medians of alternating runs, and the
ceiling from N 1-worker copies run at once, against hand-computed values."""
import bench.bench_ingestion as bench


def test_efficiency_and_ceiling_from_medians(monkeypatch):
    calls = []

    def fake_measure(logs, workers, range_bytes, copies):
        calls.append((workers, copies))
        return [{"workers": 1, "wall_s": w, "counts": {}} for w in (10.0, 11.0)]

    monkeypatch.setattr(bench, "_measure", fake_measure)
    runs = [{"workers": 1, "rows_per_s": 100.0, "wall_s": 10.0}, {"workers": 2, "rows_per_s": 150.0, "wall_s": 6.0},
            {"workers": 1, "rows_per_s": 120.0, "wall_s": 8.0}, {"workers": 2, "rows_per_s": 170.0, "wall_s": 5.0}]
    out = bench._side_by_side("logs", 1 << 22, runs)
    assert calls == [(1, 2)]  # two 1-worker copies at once
    assert out["efficiency"] == {"2": round(160 / (2 * 110), 3)}  # medians 160 and 110 rows/s
    assert out["ceiling_2_copies"] == round(9.0 / 11.0, 3)  # median wall alone / slowest copy
    assert out["efficiency_of_ceiling"] == {"2": round(round(160 / 220, 3) / (9.0 / 11.0), 3)}


def test_no_scaling_entry_without_one_worker_or_more_than_one(monkeypatch):
    monkeypatch.setattr(bench, "_measure", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert bench._side_by_side("logs", 1, [{"workers": 1, "rows_per_s": 1.0, "wall_s": 1.0}]) == {}
    assert bench._side_by_side("logs", 1, [{"workers": 2, "rows_per_s": 1.0, "wall_s": 1.0}]) == {}
