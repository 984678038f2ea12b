"""LazyAdam: Adam whose sparse (embedding) updates touch only the rows of the batch.

tf-keras' Adam turns a sparse gradient (``tf.IndexedSlices``, what an embedding lookup
gives) into dense work: it decays the first and second moments of *every* row of the
table and moves every row, at each step. A step then costs O(vocabulary), so the
Trainer's time per example grows with the log (more users and videos): 2.8 ms a step at
25k rows of 16 dims, 28 ms at 400k (bench/results/optimizer_vocab.json).

LazyAdam (as TensorFlow Addons' ``LazyAdam`` and PyTorch's ``SparseAdam``) updates only
the rows R of the (de-duplicated) gradient. For r ∈ R, with g_r the row's summed gradient
and t the step (1-based):

    m_r ← β1·m_r + (1 − β1)·g_r
    v_r ← β2·v_r + (1 − β2)·g_r²
    θ_r ← θ_r − α_t · m_r / (√v_r + ε̂),   α_t = η·√(1 − β2^t) / (1 − β1^t)

and rows not in R keep θ, m and v. Dense gradients (every other weight) get tf-keras'
Adam update unchanged. The difference from Adam is the rows that are absent from a batch:
Adam keeps moving them along their decaying momentum, LazyAdam leaves them until they are
seen again, the usual choice for large embedding tables. A step costs O(batch).
"""
import tensorflow as tf
import tf_keras as keras


@keras.utils.register_keras_serializable(package="watchtime_ranker")
class LazyAdam(keras.optimizers.Adam):
    """tf-keras Adam (same slots, names and config) with the sparse update above."""

    def update_step(self, gradient, variable):
        if not isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable)
        if self.amsgrad:
            raise ValueError("LazyAdam: amsgrad is not supported")
        dtype = variable.dtype
        lr = tf.cast(self.learning_rate, dtype)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        alpha = lr * tf.sqrt(1 - tf.pow(beta_2, step)) / (1 - tf.pow(beta_1, step))
        epsilon = self.epsilon * tf.sqrt(1 - tf.pow(beta_2, step)) if self.adaptive_epsilon else self.epsilon
        key = self._var_key(variable)
        m, v = self._momentums[self._index_dict[key]], self._velocities[self._index_dict[key]]
        rows, g = gradient.indices, gradient.values  # de-duplicated by apply_gradients
        m_rows = beta_1 * tf.gather(m, rows) + (1 - beta_1) * g
        v_rows = beta_2 * tf.gather(v, rows) + (1 - beta_2) * tf.square(g)
        m.scatter_update(tf.IndexedSlices(m_rows, rows))
        v.scatter_update(tf.IndexedSlices(v_rows, rows))
        variable.scatter_sub(tf.IndexedSlices(alpha * m_rows / (tf.sqrt(v_rows) + epsilon), rows))


OPTIMIZERS = {"adam": keras.optimizers.Adam, "lazy_adam": LazyAdam}


def make_optimizer(name: str, learning_rate: float):
    """The optimizer ``name`` (a key of OPTIMIZERS) at ``learning_rate``."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; known: {sorted(OPTIMIZERS)}")
    return OPTIMIZERS[name](learning_rate)
