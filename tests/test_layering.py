"""Dependencies point down (DESIGN.md §5): models/ and components/ never import
pipeline/ or the root runner scripts, and models/ never imports components/."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _imports(path: pathlib.Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module


@pytest.mark.parametrize("package,forbidden", [
    ("models", ("pipeline", "components", "local_runner", "kubeflow_v2_runner", "serving", "bench")),
    ("components", ("pipeline", "local_runner", "kubeflow_v2_runner", "bench")),
    ("serving", ("pipeline", "components", "local_runner", "bench")),
])
def test_no_import_runs_back_up(package, forbidden):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    bad = [f"{f.relative_to(ROOT)}: {name}" for f in files for name in _imports(f)
           if name.split(".")[0] in forbidden]
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_modules_stay_small():
    """No module over ~400 lines (DESIGN.md §4): one that grows past it does two jobs."""
    big = []
    for package in ("models", "components", "serving", "pipeline", "data", "schemas"):
        for f in (ROOT / package).rglob("*.py"):
            n = len(f.read_text().splitlines())
            if n > 420:
                big.append(f"{f.relative_to(ROOT)}: {n}")
    assert not big, big
