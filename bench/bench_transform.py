"""TF Transform's fixed cost: the analysis of the tests' 40-row fixture (issue #33).

    .venv/bin/python -m bench.bench_transform            # 3 analyses in one process

Times ``tests/helpers/ranker_utils.build_transform_output`` on the rows of the shared
``small_transform_output`` fixture (tests/conftest.py: ``raw_rows(40, SMALL_L, seed=1)``),
the pipeline's ``preprocessing_fn`` and TransformConfig. The first analysis includes the
imports of tensorflow_transform.beam (as the first test to build the fixture pays them);
the later ones are the warm cost. Wall and CPU seconds of the process (the DirectRunner
runs in it) and the load average, since the machine is shared: CPU seconds are the
figure that load inflates least.

Writes ``bench/results/transform_fixture.json`` (``BENCH_OUT``): ``runs`` (``seconds``,
``cpu_seconds``, ``loadavg``), ``rows``, ``history_length``.
"""
import json
import os
import sys
import tempfile
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.environ.get("BENCH_OUT", os.path.join(_ROOT, "bench", "results", "transform_fixture.json"))


def main(reps: int = 3) -> dict:
    from tests.conftest import SMALL_L
    from tests.helpers.ranker_utils import build_transform_output, raw_rows

    rows = raw_rows(40, SMALL_L, seed=1)
    runs = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as tmp:
            t0, c0 = time.time(), time.process_time()
            build_transform_output(rows, SMALL_L, os.path.join(tmp, "tmp"), os.path.join(tmp, "out"))
            runs.append({"seconds": round(time.time() - t0, 1), "cpu_seconds": round(time.process_time() - c0, 1),
                         "loadavg": [float(v) for v in open("/proc/loadavg").read().split()[:3]]})
        print(json.dumps(runs[-1]), flush=True)
    result = {"rows": len(rows), "history_length": SMALL_L, "runs": runs}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    if _ROOT not in sys.path:
        sys.path.insert(0, _ROOT)
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
