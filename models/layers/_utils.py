"""Helpers shared by the layers (keras-rs keeps its equivalents in utils/keras_utils.py).

- :func:`clone_initializer`: a fresh copy of an initializer for every weight.
- :func:`masked_softmax`: softmax over the valid entries of the last axis; a row
  without any valid entry gets all-zero weights (finite values and gradients).
- :func:`masked_mean`: mean over the valid items of axis 1 (0 for an empty row).
- :func:`positive_int`: argument check with a clear ``ValueError``.
"""
import numpy as np
import tensorflow as tf


def clone_initializer(initializer):
    """A fresh copy of ``initializer``: tf-keras returns identical values from a reused
    unseeded instance, so two weights built from one instance would start equal."""
    return initializer.__class__.from_config(initializer.get_config())


def masked_softmax(logits, mask):
    r"""Softmax of ``logits`` over the last axis, restricted to ``mask``:

    .. math::

        w_j = \frac{m_j \exp(e_j - \max_{k: m_k} e_k)}{\sum_k m_k \exp(e_k - \max_{k: m_k} e_k)}

    Masked entries get weight exactly 0; a row with no valid entry gets all-zero
    weights (not NaN), with finite gradients.

    Args:
        logits: ``[..., N]`` float.
        mask: bool (or 0/1), broadcastable to ``logits``; True = valid.

    Returns:
        ``[..., N]`` weights summing to 1 over the valid entries of each row (0 when
        the row has none).
    """
    logits = tf.convert_to_tensor(logits)
    valid = tf.cast(tf.cast(mask, tf.bool), logits.dtype)  # 0/1 in the mask's own (broadcast) shape
    lowest = logits.dtype.min
    # Masked entries are pushed to ~lowest by one broadcast add of a mask-shaped bias and
    # zeroed by one broadcast multiply: on the big [..., N] tensor that is 7 elementwise /
    # reduce passes, where three broadcasting tf.where (SelectV2) made 10 and cost ~15 % of
    # BST's transformer block (one user × 100 rows, 1 thread). Valid entries see exactly
    # the arithmetic they saw before (logits + 0 - row_max).
    shifted = logits + (1.0 - valid) * lowest
    row_max = tf.reduce_max(shifted, axis=-1, keepdims=True)
    # fully masked row (or N = 0): row_max ≈ lowest / -inf; shift by 0 instead
    row_max = tf.stop_gradient(tf.where(row_max > 0.5 * lowest, row_max, tf.zeros_like(row_max)))
    exp = tf.exp(shifted - row_max) * valid
    return tf.math.divide_no_nan(exp, tf.reduce_sum(exp, axis=-1, keepdims=True))


def masked_mean(values, mask):
    r"""Mean over the valid items of axis 1: :math:`\sum_i m_i v_i / \max(\sum_i m_i, 1)`.

    Args:
        values: ``[B, L, ...]``.
        mask: ``[B, L]`` 0/1 (or bool); 1 = real item.

    Returns:
        ``[B, ...]``; all zeros for a row without valid items.
    """
    values = tf.convert_to_tensor(values)
    m = tf.cast(mask, values.dtype)
    for _ in range(values.shape.rank - m.shape.rank):
        m = m[..., tf.newaxis]
    return tf.reduce_sum(values * m, axis=1) / tf.maximum(tf.reduce_sum(m, axis=1), 1.0)


def trim_padding(values, mask):
    r"""Drops the trailing positions of axis 1 that are padding in every row:

    .. math::

        n = \max\{\, i + 1 : m_{b,i} = 1 \text{ for some row } b \,\} \quad (0 \text{ if none}),
        \qquad \text{returns } (v_{:, :n},\; m_{:, :n})

    A layer that masks padded items computes the same on the trimmed tensors, on fewer
    positions: KuaiRand-Pure's histories fill 9 % (train split) to 22 % (eval days) of
    L = 50 on average (median 7-8 items after the first day), and one ranking request is
    one user's history.

    Args:
        values: ``[B, L, ...]``.
        mask: ``[B, L]`` 0/1 (or bool); 1 = real item.
    """
    valid = tf.reduce_any(tf.cast(mask, tf.bool), axis=0)                          # [L]
    n = tf.reduce_max(tf.where(valid, tf.range(1, tf.shape(valid)[0] + 1), 0))
    return values[:, :n], mask[:, :n]


def positive_int(owner: str, name: str, value, allow_none: bool = False):
    """``int(value)`` when ``value`` is an int >= 1 (``None`` passes with ``allow_none``);
    otherwise ``ValueError("<owner>: <name> must be a positive int, got ...")``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}.")
    return int(value)


def positive_ints(owner: str, name: str, values, allow_empty: bool = True) -> tuple:
    """A tuple of positive ints from a sequence, else a clear ``ValueError``."""
    try:
        values = tuple(values)
    except TypeError:
        raise ValueError(f"{owner}: {name} must be a sequence of positive ints, got {values!r}.") from None
    if not values and not allow_empty:
        raise ValueError(f"{owner}: {name} must not be empty.")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{owner}: {name} must be positive ints, got {values!r}.")
    return tuple(int(v) for v in values)
