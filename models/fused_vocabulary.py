"""Every vocabulary of the transform graph from one TF Transform analyzer (issue #33).

``tft.vocabulary`` is not packed with other analyzers (transform#259): each call is its
own ~10 Beam stages (count, filter, encode, batch, sort, write, two sizes), and with ~28
categorical features they were most of Transform's fixed cost. Here one
``tft.experimental.ptransform_analyzer`` computes them all from keys prefixed with the
feature's position (the fusion of transform#180):

    key = "<i>:" + token,   token = as_string(x) for ids, x for strings

Per batch the graph emits the unique keys and their counts; Beam sums the counts in one
global combine and a single step splits them by prefix and writes one file per feature.
Each file is exactly what ``tft.vocabulary(x, vocab_filename=name,
frequency_threshold=θ)`` writes (beam/analyzer_impls.py of TFT 1.16):

- entries with count ≥ θ, ordered by (count, token) descending, token compared as bytes
  (ids are encoded to their decimal text before that sort, as TFT does);
- strings that are empty or hold a newline are left out (TFT's filter for text files);
- an empty vocabulary holds TFT's dummy entry (``b"-1"`` for ids, TFT's UUID for strings);
- the file is the entries joined by "\\n", with a final "\\n"; its asset key and file name
  are ``name``, with its size annotated (``TFTransformOutput.vocabulary_size_by_name``).

So the ids ``apply_vocabulary`` gives are the ones the separate vocabularies gave
(tests/models/test_fused_vocabulary.py checks the files against ``tft.vocabulary``'s).
"""
from __future__ import annotations

import collections
import os
import uuid
from typing import Dict, List, Sequence, Tuple

from models import tft_analyzer

import numpy as np

# TFT's regex of string tokens a text vocabulary leaves out (analyzers.py 1.16)
EMPTY_OR_NEWLINE_REGEX = r"^$|\C*[\n\r]\C*"
STRING_DUMMY = b"49d0cd50-04bb-48c0-bc6f-5b575dce351a"  # TFT's entry of an empty string vocabulary
ID_DUMMY = b"-1"  # ... and of an empty numeric one
SEPARATOR = b":"


def order_vocabulary(counts: Dict[bytes, int], frequency_threshold: int, is_string: bool) -> List[bytes]:
    """A feature's vocabulary entries in tft.vocabulary's order (module docstring)."""
    kept = [(c, t) for t, c in counts.items() if c >= frequency_threshold]
    kept.sort(reverse=True)
    if not kept:
        return [STRING_DUMMY if is_string else ID_DUMMY]
    return [t for _, t in kept]


def split_counts(keyed_counts: Dict[bytes, int], n_features: int) -> List[Dict[bytes, int]]:
    """{b"<i>:token": count} -> per feature i {token: count}."""
    out = [dict() for _ in range(n_features)]
    for key, count in keyed_counts.items():
        i, token = key.split(SEPARATOR, 1)
        out[int(i)][token] = count
    return out


def _make_ptransform(names: Sequence[str], is_string: Sequence[bool], frequency_threshold: int):
    """Beam PTransform: batches of (unique keys, counts) -> one path and one size per vocabulary."""
    import apache_beam as beam
    import tensorflow as tf
    import tensorflow_transform.beam as tft_beam

    names, is_string = list(names), list(is_string)

    class _SumCounts(beam.CombineFn):
        def create_accumulator(self):
            return collections.Counter()

        def add_input(self, acc, batch):
            keys, counts = batch
            acc.update(dict(zip(keys.tolist(), counts.tolist())))
            return acc

        def merge_accumulators(self, accs):
            accs = iter(accs)
            out = next(accs)
            for a in accs:
                out.update(a)
            return out

        def extract_output(self, acc):
            return acc

    class _FusedVocabularies(tft_beam.experimental.PTransformAnalyzer):
        def expand(self, pcoll):
            base_dir = self.base_temp_dir

            def _write(keyed_counts):
                out_dir = os.path.join(base_dir, "fused_vocabulary", uuid.uuid4().hex)
                tf.io.gfile.makedirs(out_dir)
                sizes = []
                for i, counts in enumerate(split_counts(keyed_counts, len(names))):
                    entries = order_vocabulary(counts, frequency_threshold, is_string[i])
                    path = os.path.join(out_dir, names[i])
                    with tf.io.gfile.GFile(path, "wb") as f:
                        f.write(b"\n".join(entries) + b"\n")
                    sizes.append(len(entries))
                    yield beam.pvalue.TaggedOutput(str(i), np.array(path.encode("utf-8"), dtype=object))
                yield beam.pvalue.TaggedOutput("sizes", np.asarray(sizes, np.int64))

            tags = [str(i) for i in range(len(names))]
            outs = (pcoll
                    | "SumCounts" >> beam.CombineGlobally(_SumCounts())
                    | "Write" >> beam.FlatMap(_write).with_outputs(*tags, "sizes"))
            return tuple(outs[t] for t in tags) + (outs.sizes,)

    return _FusedVocabularies()


def fused_vocabularies(values: Sequence, names: Sequence[str], frequency_threshold: int = 1,
                       name: str = "fused_vocabulary") -> Tuple[list, "object"]:
    """One analyzer for every vocabulary: ``values[i]`` (a 1-D int64 or string tensor of
    the batch's tokens of vocabulary ``names[i]``) -> (asset path tensors, int64 sizes [n]).

    Each path is annotated as the asset ``names[i]`` with its size, like
    ``tft.vocabulary(values[i], vocab_filename=names[i], frequency_threshold=...)``."""
    import tensorflow as tf
    from tensorflow_transform import analyzers as tft_analyzers

    if len(values) != len(names) or len(set(names)) != len(names):
        raise ValueError(f"fused_vocabularies: need one distinct name per tensor, got {list(names)}")
    is_string = [v.dtype == tf.string for v in values]
    with tf.compat.v1.name_scope(name):
        keys = []
        for i, v in enumerate(values):
            v = tf.reshape(v, [-1])
            if v.dtype == tf.string:
                v = tf.boolean_mask(v, tf.logical_not(tf.strings.regex_full_match(v, EMPTY_OR_NEWLINE_REGEX)))
            else:
                v = tf.strings.as_string(v)
            keys.append(tf.strings.join([tf.constant(f"{i}:"), v]))
        unique, _, counts = tf.unique_with_counts(tf.concat(keys, axis=0), out_idx=tf.int64)
        outputs = tft_analyzer.ptransform_analyzer(
            inputs=[unique, counts],
            ptransform=_make_ptransform(names, is_string, frequency_threshold),
            output_dtypes=[tf.string] * len(names) + [tf.int64],
            output_shapes=[[]] * len(names) + [[len(names)]],
            output_asset_default_values=[STRING_DUMMY if s else ID_DUMMY for s in is_string] + [None],
            name="analyzer")
    paths, sizes = list(outputs[:-1]), outputs[-1]
    for i, vocab in enumerate(names):
        tft_analyzers.register_vocab(vocab, vocabulary_size=sizes[i])
    return paths, sizes
