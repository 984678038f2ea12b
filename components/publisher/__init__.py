"""Publisher: pruned, int8-quantized, verified SavedModels published atomically (issue #10)."""
