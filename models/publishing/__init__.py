"""Publishing a trained ranker for TF Serving: row importance from optimizer state,
inference pruning allocated across tables with k-means tail centroids behind an
in-graph remap, int8 row-wise quantization (FBGEMM's
FusedNBitRowwiseQuantizedSBHalf layout) dequantized with standard TF ops, and the
rewrite of a trained Keras ranker into the published one (issue #10); deltas and
durable atomic writes (#14)."""
