"""Trainer input: transformed examples -> (features, {output: label}) batches.

LogExampleGen writes each user's rows together and the file order drifts, so the
shuffle buffer must cover the train split (TrainerConfig.shuffle_buffer_size).
"""
import logging
import weakref

import tensorflow as tf

from models import features as F
from models import heads as heads_lib
from models.heads import CLICK_OUTPUT, WATCH_OUTPUT
from models.training.split_counts import split_rows

LABEL_KEYS = {CLICK_OUTPUT: F.LABEL_CLICK, WATCH_OUTPUT: F.LABEL_WATCH}


def label_keys_for(model) -> dict:
    """{output name: transformed label key} for every output of `model` with a loss."""
    return {o: heads_lib.OUTPUT_LABELS[o] for o in model.output_names if o in heads_lib.OUTPUT_LABELS}


class SplitTooLarge(Exception):
    """materialize stopped: the split's arrays exceed the memory budget."""


def input_fn(file_pattern, data_accessor, tf_transform_output, batch_size, shuffle, num_epochs=1,
             label_keys=None, shuffle_buffer_size=None, raw=False, in_memory=False, seed=0, canonical=False,
             memory_budget_bytes=None):
    """Transformed examples -> (features, {output name: label}) batches.

    ``in_memory=True`` (TrainerConfig ``input_in_memory``): the split is read, parsed and
    (``raw``) transformed once, in large unshuffled batches, into memory
    (`materialize`); every epoch then shuffles row indices and gathers whole batches
    (`in_memory_dataset`): an exact permutation of the split per epoch, no per-example
    work and no shuffle buffer. ``canonical=True`` (TrainerConfig ``deterministic``) sorts
    the rows by content first (`canonical_order`): LogExampleGen's Beam sink assigns rows to
    shards and orders them differently in every run, so the same rows arrive in another order
    and the seeded shuffle would give other batches.

    ``memory_budget_bytes`` (TrainerConfig ``input_memory_budget_mb``): a split whose
    transformed arrays exceed it is not held in memory (memory would grow with the log:
    ~1.9 KB a row, ~3x at peak while read) but streamed as below, through the shuffle
    buffer. When the Examples artifact says how many rows the split has (`split_rows`:
    LogExampleGen's ``num_examples.json``, split_counts.py), the first batch read decides: its bytes per row
    times the split's rows (the transformed arrays have a fixed width per row); otherwise
    reading stops at the first batch past the budget, and that abandoned read costs up to
    the budget's rows.

    ``raw=True``: the files are raw examples (LogExampleGen's); they are parsed with the
    transform graph's raw schema and transformed here by its TFT layer (TrainerConfig
    ``input_examples="raw"``, the pipeline's: Transform only analyses and materializes
    nothing, and a delta run reuses the latest transform graph without any Transform).

    LogExampleGen writes each user's rows together (histories are built per user) and
    the file order drifts (real train split: click rate 0.40 in the first 10k rows,
    0.50 in the last 15k), so a shuffle buffer much smaller than the split trains the
    last steps on a biased slice of users: keep `shuffle_buffer_size` (configs
    SHUFFLE_BUFFER_SIZE) at least the train split's size."""
    from tfx_bsl.public import tfxio  # heavy; imported only where the Trainer needs it

    if in_memory:
        once = input_fn(file_pattern, data_accessor, tf_transform_output, MATERIALIZE_BATCH, False,
                        label_keys=label_keys, raw=raw)
        try:
            features, labels = materialize(once, max_bytes=memory_budget_bytes,
                                           expected_rows=split_rows(file_pattern) if memory_budget_bytes else None)
        except SplitTooLarge as e:
            logging.warning("input_fn: %s: streaming the split through a shuffle buffer of %s rows instead",
                            e, shuffle_buffer_size)
        else:
            if canonical:
                features, labels = canonical_order(features, labels)
            return in_memory_dataset(features, labels, batch_size, shuffle, seed=seed, num_epochs=num_epochs)
    if shuffle and not shuffle_buffer_size:
        raise ValueError("input_fn: shuffling needs shuffle_buffer_size (TrainerConfig.shuffle_buffer_size)")

    dataset = data_accessor.tf_dataset_factory(
        file_pattern,
        tfxio.TensorFlowDatasetOptions(batch_size=batch_size, num_epochs=num_epochs, shuffle=shuffle,
                                       shuffle_buffer_size=int(shuffle_buffer_size or 1), shuffle_seed=0),
        (tf_transform_output.raw_metadata if raw else tf_transform_output.transformed_metadata).schema,
    )
    if raw:
        transform = transform_fn(tf_transform_output)
        return dataset.map(lambda batch: split_labels(transform(batch), label_keys))
    return dataset.map(lambda batch: split_labels(batch, label_keys))


_TRANSFORM_FNS = weakref.WeakKeyDictionary()  # TFTransformOutput -> its transform_fn


def transform_fn(tf_transform_output):
    """The TFT layer of `tf_transform_output` as one ``tf.function`` per TFTransformOutput.

    A dataset's ``map`` traces its function anew, and with it the whole transform graph
    (~1.9 s profiled on the CLI test's fixture; the Trainer reads three splits: train,
    validation, and train again for the row statistics). Called from the map functions,
    this function is traced once per input signature (the raw schema's: the same for every
    split) and each map graph calls its concrete function: tf.function keys its cache on
    the outermost context (eager, under tf.data's map graph), not on the calling graph."""
    fn = _TRANSFORM_FNS.get(tf_transform_output)
    if fn is None:
        layer = tf_transform_output.transform_features_layer()
        fn = _TRANSFORM_FNS[tf_transform_output] = tf.function(lambda batch: layer(batch))
    return fn


MATERIALIZE_BATCH = 4096  # rows per parse/transform call when reading a split into memory


def materialize(dataset, max_bytes=None, expected_rows=None):
    """A finite (features, labels) dataset of dense batches -> ({key: np.ndarray}, {key: np.ndarray});
    raises SplitTooLarge as soon as the batches read hold more than `max_bytes` (None: no limit),
    or, given the dataset's `expected_rows`, as soon as the bytes per row read so far times
    `expected_rows` exceed it (after the first batch: rows have a fixed width)."""
    import numpy as np

    parts, held, rows = [], 0, 0
    for part in dataset.as_numpy_iterator():
        parts.append(part)
        held += sum(np.asarray(v).nbytes for side in part for v in side.values())
        rows += len(next(iter(part[1].values())))
        if max_bytes is not None and held > max_bytes:
            raise SplitTooLarge(f"more than {max_bytes / 2**20:.0f} MiB of transformed arrays after {rows} rows")
        if max_bytes is not None and expected_rows and held / rows * expected_rows > max_bytes:
            raise SplitTooLarge(f"~{held / rows * expected_rows / 2**20:.0f} MiB of transformed arrays expected "
                                f"for the split's {expected_rows} rows (more than {max_bytes / 2**20:.0f} MiB; "
                                f"seen after {rows} rows)")
    if not parts:
        raise ValueError("materialize: the dataset is empty")
    # one key's batches at a time in two copies (joined, then its batches freed), not the split's
    columns = [{k: [p[i][k] for p in parts] for k in parts[0][i]} for i in (0, 1)]
    del parts
    return tuple({k: np.concatenate(side.pop(k)) for k in list(side)} for side in columns)


def canonical_order(features, labels):
    """Rows of ({key: array}, {key: array}) sorted by a 64-bit hash of their exact content.

    h(row) = fold over the sorted keys and each row's elements e_j of
    h <- (h · 0x100000001B3) xor mix(bits(e_j) + j·φ64), mix = splitmix64's finalizer,
    bits = the element's bytes as an unsigned integer (crc32 for strings); the order is
    argsort(h), stable. Any permutation of the same rows gives the same arrays (rows that
    hash alike agree on every hashed value, or collide: ~n²/2^65).

    Hashed: the integer, bool and string features (ids, vocabulary indices) and the labels
    (raw). Not the float features: Transform's numeric analyzers are Beam combines whose
    order changes between runs, so a z-scored float can differ in its last bit between two
    Transforms of the same rows (seen on the default data), which would reorder every row."""
    import zlib

    import numpy as np

    arrays = ([features[k] for k in sorted(features) if np.asarray(features[k]).dtype.kind != "f"]
              + [labels[k] for k in sorted(labels)])
    n = len(arrays[0])
    h = np.zeros(n, np.uint64)
    j = 0
    with np.errstate(over="ignore"):
        for a in arrays:
            cols = np.ascontiguousarray(a).reshape(n, -1)
            if cols.dtype.kind in "OSU":
                bits = np.vectorize(lambda e: zlib.crc32(e if isinstance(e, bytes) else str(e).encode()),
                                    otypes=[np.uint64])(cols) if cols.size else cols.astype(np.uint64)
            else:
                bits = cols.view(f"u{cols.dtype.itemsize}").astype(np.uint64)
            for c in range(cols.shape[1]):
                z = bits[:, c] + np.uint64(j) * np.uint64(0x9E3779B97F4A7C15)
                z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
                z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
                h = (h * np.uint64(0x100000001B3)) ^ (z ^ (z >> np.uint64(31)))
                j += 1
    order = np.argsort(h, kind="stable")
    return {k: v[order] for k, v in features.items()}, {k: v[order] for k, v in labels.items()}


def in_memory_dataset(features, labels, batch_size, shuffle, seed=0, num_epochs=1):
    """(features, labels) arrays in memory -> batches gathered by index.

    Per epoch: idx = a permutation of 0..n-1 (``shuffle``, reshuffled every epoch; else
    0..n-1), batch b = rows idx[b·B : (b+1)·B] of every array (one gather per key and
    batch). ``num_epochs=None`` repeats forever."""
    features = {k: tf.constant(v) for k, v in features.items()}
    labels = {k: tf.constant(v) for k, v in labels.items()}
    n = int(next(iter(labels.values())).shape[0])
    index = tf.data.Dataset.range(n)
    if shuffle:
        index = index.shuffle(n, seed=seed, reshuffle_each_iteration=True)
    index = index.batch(batch_size)
    index = index.repeat(num_epochs) if num_epochs != 1 else index  # batches never straddle epochs
    gather = lambda i: ({k: tf.gather(v, i) for k, v in features.items()},  # noqa: E731
                        {k: tf.gather(v, i) for k, v in labels.items()})
    return index.map(gather, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def split_labels(batch, label_keys=None):
    """(features, labels): labels keyed by output name (`label_keys`, default
    LABEL_KEYS); every label-like key (is_click, watch_time_s, the transformed
    watch_time_bucket) is removed from the features."""
    batch = dict(batch)
    label_keys = LABEL_KEYS if label_keys is None else label_keys
    labels = {out: batch[label] for out, label in label_keys.items()}
    for key in F.LABELS + [F.WATCH_BUCKET_LABEL]:
        batch.pop(key, None)
    return batch, labels


def shuffle_labels(dataset, seed: int):
    """Diagnostic only (custom_config `shuffle_labels_seed`): permutes the labels of each
    (features, labels) batch, one permutation shared by every label, so the features no
    longer predict them while their joint distribution is unchanged. Trains a
    deliberately degraded candidate (tests/e2e/test_e2e_pipeline.py, gating); never set it in production."""
    def permute(features, labels):
        n = tf.shape(next(iter(labels.values())))[0]
        perm = tf.random.shuffle(tf.range(n), seed=seed)
        return features, {out: tf.gather(label, perm) for out, label in labels.items()}

    return dataset.map(permute)


def vocab_sizes(tf_transform_output) -> dict:
    return {key: tf_transform_output.vocabulary_size_by_name(F.vocab_name(key))
            for key in F.ID_FEATURES + F.STRING_FEATURES}
