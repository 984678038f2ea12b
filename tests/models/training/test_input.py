"""In-memory Trainer input (models/training/input.py): materialize + in_memory_dataset."""
import numpy as np
import tensorflow as tf

from models.training.input import SplitTooLarge, in_memory_dataset, materialize


def _arrays(n=10):
    features = {"a": np.arange(n, dtype=np.int64), "h": np.arange(2 * n, dtype=np.float32).reshape(n, 2)}
    labels = {"y": np.arange(n, dtype=np.float32)[:, None] * 10}
    return features, labels


def test_each_epoch_is_a_fresh_permutation_and_rows_stay_aligned():
    features, labels = _arrays(10)
    ds = in_memory_dataset(features, labels, batch_size=4, shuffle=True, seed=1, num_epochs=2)
    batches = list(ds.as_numpy_iterator())
    assert [len(f["a"]) for f, _ in batches] == [4, 4, 2, 4, 4, 2]  # epoch boundary: a partial batch
    epochs = [np.concatenate([f["a"] for f, _ in batches[i:i + 3]]) for i in (0, 3)]
    for rows in epochs:
        assert sorted(rows) == list(range(10))  # every row exactly once per epoch
    assert list(epochs[0]) != list(epochs[1]) and list(epochs[0]) != list(range(10))
    for f, y in batches:  # a row's features and labels travel together
        np.testing.assert_array_equal(f["h"], np.stack([2 * f["a"], 2 * f["a"] + 1], 1))
        np.testing.assert_array_equal(y["y"][:, 0], 10 * f["a"])


def test_no_shuffle_keeps_order_and_materialize_round_trips():
    features, labels = _arrays(7)
    ds = in_memory_dataset(features, labels, batch_size=3, shuffle=False)
    back_features, back_labels = materialize(ds)
    np.testing.assert_array_equal(back_features["a"], features["a"])
    np.testing.assert_array_equal(back_features["h"], features["h"])
    np.testing.assert_array_equal(back_labels["y"], labels["y"])
    repeated = in_memory_dataset(features, labels, batch_size=3, shuffle=False, num_epochs=None)
    assert len(list(repeated.take(10))) == 10  # num_epochs=None repeats forever


def test_materialize_rejects_an_empty_dataset():
    empty = tf.data.Dataset.from_tensor_slices(({"a": np.zeros([0], np.int64)}, {"y": np.zeros([0])})).batch(2)
    try:
        materialize(empty)
    except ValueError as e:
        assert "empty" in str(e)
    else:
        raise AssertionError("materialize accepted an empty dataset")


def test_canonical_order_is_the_same_for_any_row_order_and_keeps_rows_aligned():
    from models.training.input import canonical_order

    rng = np.random.default_rng(0)
    n = 50
    features = {"id": rng.integers(0, 5, n), "h": rng.normal(size=(n, 3)).astype(np.float32),
                "s": np.array([f"k{i % 7}".encode() for i in range(n)], dtype=object),
                "flag": rng.integers(0, 2, n).astype(bool)}
    labels = {"y": np.arange(n, dtype=np.float32)[:, None]}  # the row's identity
    base_f, base_l = canonical_order(features, labels)
    for seed in (1, 2):
        perm = np.random.default_rng(seed).permutation(n)
        f, lab = canonical_order({k: v[perm] for k, v in features.items()}, {"y": labels["y"][perm]})
        for k in features:  # the same arrays, whatever order the rows came in
            np.testing.assert_array_equal(f[k], base_f[k])
        np.testing.assert_array_equal(lab["y"], base_l["y"])
    rows = base_l["y"][:, 0].astype(int)  # features travel with their labels
    assert sorted(rows) == list(range(n)) and list(rows) != list(range(n))
    for k in features:
        np.testing.assert_array_equal(base_f[k], features[k][rows])


def test_canonical_order_ignores_last_bit_differences_of_float_features():
    """Two Transforms of the same rows can z-score a float an ulp apart (Beam's combine
    order): the order must come from the exact columns, not from those floats."""
    from models.training.input import canonical_order

    rng = np.random.default_rng(3)
    n = 40
    features = {"id": rng.integers(0, 1000, n), "z": rng.normal(size=n).astype(np.float32)}
    labels = {"y": rng.integers(0, 2, n).astype(np.float32)}
    nudged = dict(features, z=np.nextafter(features["z"], np.float32(np.inf)))
    a, _ = canonical_order(features, labels)
    b, _ = canonical_order(nudged, labels)
    np.testing.assert_array_equal(a["id"], b["id"])
    np.testing.assert_array_equal(np.nextafter(a["z"], np.float32(np.inf)), b["z"])


def test_materialize_stops_at_the_first_batch_past_the_budget():
    features, labels = _arrays(10)  # a row: 8 B of "a" + 8 B of "h" + 4 B of "y" = 20 B
    ds = in_memory_dataset(features, labels, batch_size=4, shuffle=False)
    whole, _ = materialize(ds, max_bytes=200)  # exactly the split's 200 B: held
    np.testing.assert_array_equal(whole["a"], features["a"])
    try:
        materialize(ds, max_bytes=100)
    except SplitTooLarge as e:
        assert "after 8 rows" in str(e)  # batches of 4 rows = 80 B: the 2nd batch passes 100 B
    else:
        raise AssertionError("materialize held a split larger than its budget")


def test_known_split_rows_decide_after_the_first_batch():
    features, labels = _arrays(10)  # 20 B a row
    ds = in_memory_dataset(features, labels, batch_size=4, shuffle=False)
    try:  # 4 rows read = 80 B, below the budget; 20 B x 10 rows = 200 B > 100 B
        materialize(ds, max_bytes=100, expected_rows=10)
    except SplitTooLarge as e:
        assert "after 4 rows" in str(e) and "10 rows" in str(e)
    else:
        raise AssertionError("materialize read on though the split's rows exceed the budget")
    whole, _ = materialize(ds, max_bytes=200, expected_rows=10)  # 200 B: held, as without the count
    np.testing.assert_array_equal(whole["a"], features["a"])
    whole, _ = materialize(ds, max_bytes=None, expected_rows=10 ** 9)  # no budget: the count is not used
    np.testing.assert_array_equal(whole["a"], features["a"])


def test_the_memory_budget_must_be_positive():
    from pipeline import configs

    assert configs.trainer_config().input_memory_budget_mb == configs.INPUT_MEMORY_BUDGET_MB
    for bad in (0, -1.0):
        try:
            configs.trainer_config(input_memory_budget_mb=bad)
        except ValueError as e:
            assert "input_memory_budget_mb" in str(e)
        else:
            raise AssertionError(f"input_memory_budget_mb={bad} accepted")
