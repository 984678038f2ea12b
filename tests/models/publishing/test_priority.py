"""Row priorities for delta publishes (models/publishing/priority.py) against hand-computed values."""
import numpy as np
import pytest

from models.publishing.priority import PRIORITIES, num_top_rows, row_priority, top_rows

CURRENT = {"opt_state": [1.0, 0.5, 2.0, 0.0],
           "touch_count": [3, 0, 7, 1],
           "rows": [[0.0, 0.0], [3.0, 4.0], [1.0, 1.0], [0.0, -2.0]]}
PUBLISHED = {"opt_state": [0.25, 0.5, 1.0, 1.5],
             "rows": [[0.0, 0.0], [0.0, 0.0], [1.0, 2.0], [0.0, 0.0]]}


def test_priorities_by_hand():
    assert row_priority("opt_state_change", CURRENT, PUBLISHED).tolist() == [0.75, 0.0, 1.0, 1.5]
    assert row_priority("row_change", CURRENT, PUBLISHED).tolist() == [0.0, 5.0, 1.0, 2.0]
    assert row_priority("touch_count", CURRENT, PUBLISHED).tolist() == [3.0, 0.0, 7.0, 1.0]
    p = row_priority("opt_state_change", CURRENT, PUBLISHED)
    assert p.dtype == np.float64
    assert top_rows(p, 0.5).tolist() == [2, 3]
    assert top_rows(row_priority("row_change", CURRENT, PUBLISHED), 0.25).tolist() == [1]


@pytest.mark.parametrize("kind", PRIORITIES)
def test_nothing_published_gives_every_row_inf(kind):
    p = row_priority(kind, CURRENT, None)
    assert p.shape == (4,) and np.all(np.isposinf(p))
    assert top_rows(p, 1.0).tolist() == [0, 1, 2, 3]


def test_random_is_a_seeded_permutation():
    a = row_priority("random", CURRENT, PUBLISHED, seed=3)
    assert sorted(a.tolist()) == [0.0, 1.0, 2.0, 3.0]
    assert np.array_equal(a, row_priority("random", CURRENT, PUBLISHED, seed=3))
    big = {"rows": np.zeros((1000, 2))}
    r1, r2 = row_priority("random", big, big, seed=1), row_priority("random", big, big, seed=2)
    assert sorted(r1.tolist()) == list(range(1000)) and not np.array_equal(r1, r2)


def test_ties_go_to_the_lower_index_and_nan_ranks_last():
    p = np.array([1.0, 2.0, 2.0, 0.5, 2.0, np.nan])
    assert top_rows(p, 2 / 6).tolist() == [1, 2]
    assert top_rows(p, 4 / 6).tolist() == [0, 1, 2, 4]
    assert top_rows(p, 1.0).tolist() == [0, 1, 2, 3, 4, 5]
    assert top_rows(np.zeros(5), 0.4).tolist() == [0, 1]
    assert top_rows(p, 0.5).dtype == np.int64


def test_fraction_rounding():
    assert num_top_rows(100, 0.07) == 7      # 0.07 * 100 = 7.000000000000001 in floating point
    assert num_top_rows(10, 0.05) == 1       # ceil(0.5)
    assert num_top_rows(10, 0.11) == 2       # ceil(1.1)
    assert num_top_rows(3, 1.0) == 3
    assert num_top_rows(1, 1e-6) == 1
    assert len(top_rows(np.arange(1000.0), 0.05)) == 50
    assert top_rows(np.arange(10.0), 0.25).tolist() == [7, 8, 9]
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="fraction"):
            top_rows(np.arange(4.0), bad)


def test_clear_errors():
    with pytest.raises(ValueError, match="unknown kind"):
        row_priority("momentum", CURRENT, PUBLISHED)
    with pytest.raises(ValueError, match="opt_state"):
        row_priority("opt_state_change", {"rows": np.zeros((4, 2))}, PUBLISHED)
    with pytest.raises(ValueError, match="shapes differ"):
        row_priority("row_change", CURRENT, {"rows": np.zeros((3, 2)), "opt_state": np.zeros(3)})
