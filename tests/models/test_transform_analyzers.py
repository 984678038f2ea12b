"""The analyzers that replace TF Transform's own (issue #33) give TF Transform's results:
the fused vocabularies (models/fused_vocabulary.py) write tft.vocabulary's files, and
the one-phase EAD analyzer (models/watch_time/ead_analyzer.py) searches on the very
boundaries tft.quantiles gives, also where its sketch is approximate."""
import numpy as np
import pytest

from models import fused_vocabulary as fv
from models.transform_config import FORCE_TF_COMPAT_V1

N = 2000
NUM_QUANTILES, EPSILON = 10, 0.05  # a sketch this coarse gives approximate boundaries on 2000 values


def test_order_is_count_then_token_bytes_descending():
    counts = {b"9": 2, b"10": 2, b"3": 5, b"7": 1, b"-1": 2}
    # ties by bytes, descending: "9" > "10" > "-1" (as text, not as numbers)
    assert fv.order_vocabulary(counts, 1, is_string=False) == [b"3", b"9", b"10", b"-1", b"7"]
    assert fv.order_vocabulary(counts, 2, is_string=False) == [b"3", b"9", b"10", b"-1"]
    assert fv.order_vocabulary(counts, 6, is_string=False) == [fv.ID_DUMMY]
    assert fv.order_vocabulary({}, 1, is_string=True) == [fv.STRING_DUMMY]


def test_split_counts_strips_the_prefix_at_its_first_separator():
    got = fv.split_counts({b"0:5": 1, b"1:a:b": 2, b"1:": 3, b"0:-1": 4}, 3)
    assert got == [{b"5": 1, b"-1": 4}, {b"a:b": 2, b"": 3}, {}]


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    """One analysis with the fused analyzers and TFT's own side by side."""
    import tensorflow as tf
    import tensorflow_transform as tft
    import tensorflow_transform.beam as tft_beam

    from models.watch_time import ead_analyzer

    rng = np.random.default_rng(3)
    # ties in count (9, 10, 100; -1, 12; a, b, ü) are ordered by their bytes; 55 and "rare"
    # fall below threshold 30
    id_counts = {-1: 200, 3: 400, 9: 300, 10: 300, 12: 200, 100: 300, 7: 290, 55: 10}
    str_counts = {"a": 300, "b": 300, "x y": 200, "": 200, "line\nbreak": 200, "ü": 300, "10": 250, "9": 240,
                  "rare": 10}
    ids = rng.permutation(np.repeat(list(id_counts), list(id_counts.values())))
    strings = rng.permutation(np.repeat(list(str_counts), list(str_counts.values())))
    watch = np.concatenate([np.zeros(300), rng.exponential(10.0, N - 300)]).astype(np.float32)
    raw = [{"i": int(a), "s": s.encode(), "w": float(w)} for a, s, w in zip(ids, strings, watch)]
    meta = tft.DatasetMetadata.from_feature_spec({"i": tf.io.FixedLenFeature([], tf.int64),
                                                  "s": tf.io.FixedLenFeature([], tf.string),
                                                  "w": tf.io.FixedLenFeature([], tf.float32)})

    def preprocessing_fn(inputs):
        i, s, w = inputs["i"], inputs["s"], inputs["w"]
        out = {}
        for threshold in (1, 30):
            paths, sizes = fv.fused_vocabularies([i, s], [f"i{threshold}", f"s{threshold}"], threshold,
                                                 name=f"fused{threshold}")
            t = threshold if threshold > 1 else None
            ref_i = tft.vocabulary(i, vocab_filename=f"ref_i{threshold}", frequency_threshold=t)
            ref_s = tft.vocabulary(s, vocab_filename=f"ref_s{threshold}", frequency_threshold=t)
            out[f"i{threshold}"] = tft.apply_vocabulary(i, paths[0], default_value=-1)
            out[f"ref_i{threshold}"] = tft.apply_vocabulary(i, ref_i, default_value=-1)
            out[f"s{threshold}"] = tft.apply_vocabulary(s, paths[1], default_value=-1)
            out[f"ref_s{threshold}"] = tft.apply_vocabulary(s, ref_s, default_value=-1)
            out[f"sizes{threshold}"] = tf.tile(sizes[tf.newaxis], [tf.shape(i)[0], 1])
        th, _ = ead_analyzer.ead_thresholds_analyzer(w, M=8, beta=10.0, num_quantiles=NUM_QUANTILES,
                                                     epsilon=EPSILON, t_max_quantile=0.99)
        b = tft.quantiles(w, NUM_QUANTILES, EPSILON)
        n = tf.shape(w)[0]
        out["th"] = tf.tile(th[tf.newaxis], [n, 1])
        out["b"] = tf.tile(tf.reshape(b, [1, -1]), [n, 1])
        return out

    tmp = tmp_path_factory.mktemp("analyzers")
    with tft_beam.Context(temp_dir=str(tmp / "tmp"), force_tf_compat_v1=FORCE_TF_COMPAT_V1):
        (data, _), transform_fn = (raw, meta) | tft_beam.AnalyzeAndTransformDataset(preprocessing_fn)
        _ = transform_fn | tft_beam.WriteTransformFn(str(tmp / "tf"))
    return watch, data, tft.TFTransformOutput(str(tmp / "tf"))


@pytest.mark.parametrize("threshold", [1, 30])
def test_fused_vocabularies_are_tft_vocabulary_files(analyzed, threshold):
    _, data, output = analyzed
    for key in ("i", "s"):
        with open(output.vocabulary_file_by_name(f"{key}{threshold}"), "rb") as f:
            fused = f.read()
        with open(output.vocabulary_file_by_name(f"ref_{key}{threshold}"), "rb") as f:
            ref = f.read()
        assert fused == ref, (key, threshold)
        assert len(ref.splitlines()) >= 3  # not a dummy vocabulary
        assert (output.vocabulary_size_by_name(f"{key}{threshold}")
                == output.vocabulary_size_by_name(f"ref_{key}{threshold}") == len(ref.splitlines()))
        assert [r[f"{key}{threshold}"] for r in data] == [r[f"ref_{key}{threshold}"] for r in data]
    sizes = [output.vocabulary_size_by_name(f"{key}{threshold}") for key in ("i", "s")]
    np.testing.assert_array_equal(data[0][f"sizes{threshold}"], sizes)
    # the empty string and the one with a newline are left out, as TFT does; 55 and "rare"
    # (about 10 rows each) only below the threshold
    assert sizes == ([8, 7] if threshold == 1 else [7, 6])


def test_ead_analyzer_searches_on_tft_quantiles_boundaries(analyzed):
    """The analyzer's sketch is tft.quantiles' (same combiner, epsilon and batches), so the
    thresholds are the search on tft.quantiles' boundaries to the bit, though these are
    approximate here (they differ from the exact sample quantiles)."""
    from models.watch_time import ead

    watch, data, _ = analyzed
    b = np.asarray(data[0]["b"], np.float64)
    exact = ead.boundaries_from_samples(watch, NUM_QUANTILES)
    assert b.shape == exact.shape and not np.array_equal(b, exact)
    ref = ead.search_thresholds(b, 8, 10.0, t_max_quantile=0.99)
    np.testing.assert_array_equal(data[0]["th"], np.asarray(ref.thresholds, np.float32))
