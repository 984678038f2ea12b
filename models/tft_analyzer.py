"""``tft.experimental.ptransform_analyzer`` with asset and non-asset outputs mixed.

TF Transform 1.16 documents ``output_asset_default_values`` as "None for an output that
is not an asset" but wraps every entry, None included, in a ``TemporaryAssetInfo`` and
then fails writing None as a temporary asset (TypeError). This builds the outputs'
``TensorInfo`` as documented and applies the analyzer the same way (the module-private
``_apply_analyzer`` of ``tensorflow_transform.experimental.analyzers``, pinned 1.16).
"""
from typing import Optional, Sequence


def ptransform_analyzer(inputs: Sequence, ptransform, output_dtypes: Sequence, output_shapes: Sequence,
                        output_asset_default_values: Sequence[Optional[bytes]], name: str):
    """As ``tft.experimental.ptransform_analyzer``; an output is an asset (a file path
    TF Transform copies into the graph's ``assets/``) iff its default value is not None."""
    import importlib

    import tensorflow as tf
    from tensorflow_transform import analyzer_nodes

    # by module path: the package attribute `experimental.analyzers` is tft's main analyzers module
    tft_experimental = importlib.import_module("tensorflow_transform.experimental.analyzers")

    if not len(output_dtypes) == len(output_shapes) == len(output_asset_default_values):
        raise ValueError(f"ptransform_analyzer {name}: {len(output_dtypes)} dtypes, {len(output_shapes)} shapes "
                         f"and {len(output_asset_default_values)} asset defaults")
    infos = [analyzer_nodes.TensorInfo(dtype, shape, None if default is None
                                       else analyzer_nodes.TemporaryAssetInfo(default, "text"))
             for dtype, shape, default in zip(output_dtypes, output_shapes, output_asset_default_values)]
    with tf.compat.v1.name_scope(name, "ptransform"):
        return tft_experimental._apply_analyzer(ptransform, *inputs, output_tensor_info_list=infos)
