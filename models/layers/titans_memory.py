r"""Titans neural long-term memory: a memory trained at test time on the user's events.

Behrouz, Zhong, Mirrokni, "Titans: Learning to Memorize at Test Time", arXiv 2501.00663
(2025), §3.1 eqs. (8)-(16) and §3.2 (parallel training by chunks); an open
implementation is lucidrains/titans-pytorch (``neural_memory.py``).

For each history event x_t (``[D]``) and its mask m_t ∈ {0, 1}:

.. math::

    k_t = \mathrm{l2n}(\mathrm{silu}(x_t W_K)),\quad v_t = \mathrm{silu}(x_t W_V), \qquad
    \ell(M; x_t) = \lVert M(k_t) - v_t \rVert^2

    \theta_t = \theta_{max}\,\sigma(x_t w_\theta + b_\theta),\quad
    \eta_t = \sigma(x_t w_\eta + b_\eta),\quad \alpha_t = \sigma(x_t w_\alpha + b_\alpha)
    \qquad \text{(data-dependent gates)}

    S_t = \eta_t S_{t-1} - \theta_t \nabla \ell(M_{c(t)}; x_t) \quad\text{(momentum, "surprise")}

    M_t = (1 - \alpha_t) M_{t-1} + S_t \quad\text{(forgetting)}

A padded event (m_t = 0) is the identity step (η = 1, θ = α = 0, M unchanged). The read
is ``y = M*(q)`` with ``q = l2n(silu(query W_Q))``, without an update; with
``shared_query_key`` the query uses the keys' projection (W_Q = W_K: a candidate and the
history's items live in one embedding space, so q·k is an item similarity from the
start), and ``output_norm`` RMS-normalises the read, ``y / sqrt(mean(y^2) + 1e-6)``
(titans-pytorch's ``post_rmsnorm``, without a learned scale). M is ``linear``
(``M(k) = k W``, W ``[d_k, d_v]``) or ``mlp`` (``M(k) = silu(k W_1) W_2``).

**Chunks.** The sequence is cut into chunks of ``chunk_size`` events; every gradient of
a chunk is taken at the weights ``M_{c(t)}`` the chunk starts from (with chunk size 1
this is exactly the sequential recurrence above). The gates do not depend on M, so
the recurrence inside a chunk is linear with coefficients computed once for all chunks
(backward products over the chunk, ``_chunk_coefficients``):

.. math::

    M_{end} = p_{MM} M_0 + p_{MS} S_0 - \sum_i c^M_i \nabla\ell_i, \qquad
    S_{end} = p_{SS} S_0 - \sum_i c^S_i \nabla\ell_i

and the weighted sums of per-event gradients are closed-form matmuls (linear memory:
:math:`\sum_i c_i \nabla\ell_i = 2 K^\top \mathrm{diag}(c)(K W - V)`; the MLP's two
layers by hand-written backprop), so no nested GradientTape is needed. The state is
carried across chunks by ``tf.scan`` (momentum as a scan over chunks); the outer
loss backpropagates through it into W_K, W_V, W_Q, the gates and M_0.

Call: ``layer(history, query, mask=None)`` with history ``[B, L, D]``, query ``[B, D_q]``
or ``[B, N, D_q]``, mask ``[B, L]`` → ``[B, d_v]`` or ``[B, N, d_v]``.
``memory_state(history, mask)`` is the writer (the state after all events: memory
weights and momentum); ``read(state, query)`` is the serving-time read.

**Memory as a gate (MAG)**, ``MemoryAsGate``: a ranker's extra feature
``g ⊙ M*(t)``, ``g = σ([t, v_U] W_g + b_g)``, with the memory written from the history
oldest first (``history`` most recent first with its valid items in front, as
LogExampleGen writes it: reversed within each row's length, so the chunks count from the
user's oldest event), t the target item and v_U the ranker's attention output.

Example:

>>> mem = TitansMemory(key_dim=16, chunk_size=32)
>>> y = mem(tf.random.normal([4, 100, 24]), tf.random.normal([4, 7, 24]))   # [4, 7, 16]
"""
import tf_keras as keras
import tensorflow as tf

from models.layers._utils import positive_int

_MEMORIES = ("linear", "mlp")


def _l2n(x):
    return tf.math.l2_normalize(x, axis=-1, epsilon=1e-6)


def _silu_grad(h):
    s = tf.sigmoid(h)
    return s * (1.0 + h * (1.0 - s))


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class TitansMemory(keras.layers.Layer):
    """Neural long-term memory (Titans eqs. 8-16), chunked training with closed-form
    gradients; see the module docstring for the equations.

    Args:
        key_dim: d_k (keys and queries).
        value_dim: d_v (values, the read's size); default ``key_dim``.
        memory: ``"linear"`` or ``"mlp"`` (2 layers, hidden ``expansion * key_dim``).
        chunk_size: events per chunk (gradients at the chunk's start weights).
        max_lr: θ_max. Stability: a chunk sums up to C gradients taken at the same weights,
            so on a direction shared by n events of a chunk the step is ~2 θ n (unit keys);
            it must stay below ~2 (1 + η) or the memory diverges across chunks (measured on
            the lifelong bench with C = 64: θ_max 0.05 reaches |M| ~ 1e6 on the first batch,
            1.0 gives NaN, 0.01 stays bounded). Default 0.01.
        forget_bias, momentum_bias, lr_bias: initial biases of the α, η, θ gates
            (σ(-6) ≈ 0.0025 forgetting per event keeps ~0.6 of a memory after 200 events, but
            0.007 after 2,000: for lifelong histories, e.g. σ(-9) keeps 0.78 after 2,000. The
            gate's gradient is σ'(b) ≈ σ(b), so training barely moves a bias this negative:
            choose it for the history length.)
        expansion: hidden width multiplier of the MLP memory.
        shared_query_key: W_Q = W_K (the query must have the history's width).
        output_norm: RMS-normalise the read.
    """

    def __init__(self, key_dim=16, value_dim=None, memory="linear", chunk_size=32, max_lr=0.01,
                 forget_bias=-6.0, momentum_bias=0.0, lr_bias=0.0, expansion=2,
                 shared_query_key=False, output_norm=False, **kwargs):
        super().__init__(**kwargs)
        if memory not in _MEMORIES:
            raise ValueError(f"TitansMemory: memory must be one of {_MEMORIES}, got {memory!r}.")
        self.key_dim = positive_int("TitansMemory", "key_dim", key_dim)
        self.value_dim = positive_int("TitansMemory", "value_dim", value_dim or key_dim)
        self.chunk_size = positive_int("TitansMemory", "chunk_size", chunk_size)
        self.expansion = positive_int("TitansMemory", "expansion", expansion)
        if not max_lr > 0:
            raise ValueError(f"TitansMemory: max_lr must be > 0, got {max_lr}.")
        self.memory, self.max_lr = memory, float(max_lr)
        self.forget_bias, self.momentum_bias, self.lr_bias = (
            float(forget_bias), float(momentum_bias), float(lr_bias))
        self.shared_query_key, self.output_norm = bool(shared_query_key), bool(output_norm)
        self.key_proj = keras.layers.Dense(self.key_dim, use_bias=False, name="w_k")
        self.value_proj = keras.layers.Dense(self.value_dim, use_bias=False, name="w_v")
        self.query_proj = (self.key_proj if self.shared_query_key
                           else keras.layers.Dense(self.key_dim, use_bias=False, name="w_q"))
        self.gates = keras.layers.Dense(
            3, kernel_initializer=keras.initializers.RandomNormal(stddev=0.01),
            bias_initializer=keras.initializers.Constant([lr_bias, momentum_bias, forget_bias]),
            name="gates")

    def build(self, input_shape):
        dk, dv = self.key_dim, self.value_dim
        if self.memory == "linear":
            shapes = [(dk, dv)]
            inits = ["zeros"]
        else:
            hidden = self.expansion * dk
            shapes = [(dk, hidden), (hidden, dv)]
            inits = ["glorot_uniform", "glorot_uniform"]
        self.initial_memory = [self.add_weight(name=f"m0_{n}", shape=s, initializer=i)
                               for n, (s, i) in enumerate(zip(shapes, inits))]
        super().build(input_shape)

    # --- the memory model and its closed-form gradients ---------------------------------
    def apply_memory(self, params, keys):
        """M(k) for keys ``[B, n, d_k]`` with per-user params (each ``[B, ...]``)."""
        if self.memory == "linear":
            return tf.matmul(keys, params[0])
        return tf.matmul(tf.nn.silu(tf.matmul(keys, params[0])), params[1])

    def _weighted_grads(self, params, keys, values, weights):
        r"""For each ``w`` in ``weights`` ([B, C] each): :math:`\sum_i w_i \nabla_M \ell(M; x_i)`,
        as a list (one per w) of lists of ``[B, ...]`` tensors (the params' shapes)."""
        if self.memory == "linear":
            err2 = 2.0 * (tf.matmul(keys, params[0]) - values)                   # [B, C, dv]
            return [[tf.matmul(keys, w[..., None] * err2, transpose_a=True)] for w in weights]
        hidden = tf.matmul(keys, params[0])
        act = tf.nn.silu(hidden)
        err2 = 2.0 * (tf.matmul(act, params[1]) - values)
        back = tf.matmul(err2, params[1], transpose_b=True) * _silu_grad(hidden)  # dℓ/dh, [B, C, H]
        return [[tf.matmul(keys, w[..., None] * back, transpose_a=True),
                 tf.matmul(act, w[..., None] * err2, transpose_a=True)] for w in weights]

    # --- the chunk recurrence ---------------------------------------------------------
    def _chunk_coefficients(self, theta, eta, alpha, mask):
        """Coefficients of the linear recurrence inside each chunk (``[B, n, C]`` gates and
        mask → ``c_M, c_S`` ``[B, n, C]`` and ``p_MM, p_MS, p_SS`` ``[B, n]``); see the
        module docstring. Backward over the C positions: ``s_i = Π_{j>i} η_j``,
        ``D_i = Π_{j>i} (1 - α_j)``, ``r_i = m_i D_i + η_{i+1} r_{i+1}`` (∂M_end/∂S_i)."""
        size = self.chunk_size
        ones = tf.ones_like(theta[..., 0])
        s, d, r = ones, ones, mask[..., -1]
        s_list, r_list = [s], [r]
        for i in range(size - 2, -1, -1):
            s = eta[..., i + 1] * s
            d = (1.0 - alpha[..., i + 1]) * d
            r = mask[..., i] * d + eta[..., i + 1] * r
            s_list.append(s)
            r_list.append(r)
        s_all = tf.stack(s_list[::-1], axis=-1)
        r_all = tf.stack(r_list[::-1], axis=-1)
        p_mm = (1.0 - alpha[..., 0]) * d
        return theta * r_all, theta * s_all, p_mm, eta[..., 0] * r_all[..., 0], eta[..., 0] * s_all[..., 0]

    def _project(self, history, mask):
        history = tf.convert_to_tensor(history)
        if history.shape.rank != 3:
            raise ValueError(f"TitansMemory: history must be [B, L, D], got {history.shape}.")
        if mask is None:
            mask = tf.ones(tf.shape(history)[:2], history.dtype)
        mask = tf.cast(mask, history.dtype)
        keys = _l2n(tf.nn.silu(self.key_proj(history)))
        values = tf.nn.silu(self.value_proj(history))
        z = self.gates(history)
        theta = self.max_lr * tf.sigmoid(z[..., 0]) * mask      # padded: θ = 0
        eta = tf.sigmoid(z[..., 1]) * mask + (1.0 - mask)       # padded: η = 1
        alpha = tf.sigmoid(z[..., 2]) * mask                    # padded: α = 0
        return keys, values, theta, eta, alpha, mask

    def memory_state(self, history, mask=None, initial_state=None):
        """The writer: ``(params, momentum)`` after all events, each a list of ``[B, ...]``
        tensors. Padded events are identity steps; L is padded to whole chunks (chunks are
        counted from ``history[:, 0]``, so a serving writer must see the events at the
        same positions as training). ``initial_state`` continues from a state written
        before (events appended in whole chunks give the state of one full replay: the
        per-user store of the UIC pattern); default: the learned M_0 and S_0 = 0."""
        if not self.built:
            self.build(history.shape)
        keys, values, theta, eta, alpha, mask = self._project(history, mask)
        batch, length = tf.shape(keys)[0], tf.shape(keys)[1]
        size = self.chunk_size
        pad = (-length) % size
        n = (length + pad) // size

        def chunks(x, fill=0.0):
            x = tf.pad(x, [[0, 0], [0, pad]] + [[0, 0]] * (x.shape.rank - 2), constant_values=fill)
            return tf.reshape(x, tf.concat([[batch, n, size], tf.shape(x)[2:]], 0))

        keys, values = chunks(keys), chunks(values)
        c_m, c_s, p_mm, p_ms, p_ss = self._chunk_coefficients(
            chunks(theta), chunks(eta, 1.0), chunks(alpha), chunks(mask))

        def time_major(x):
            return tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))

        elems = tuple(time_major(x) for x in (keys, values, c_m, c_s, p_mm, p_ms, p_ss))
        if initial_state is None:
            params0 = [tf.tile(tf.convert_to_tensor(w)[None], [batch, 1, 1]) for w in self.initial_memory]
            state0 = (params0, [tf.zeros_like(p) for p in params0])
        else:
            state0 = (list(initial_state[0]), list(initial_state[1]))

        def step(state, chunk):
            params, momentum = state
            k, v, cm, cs, pmm, pms, pss = chunk
            g_m, g_s = self._weighted_grads(params, k, v, [cm, cs])
            new_params = [pmm[:, None, None] * p + pms[:, None, None] * s - g
                          for p, s, g in zip(params, momentum, g_m)]
            new_momentum = [pss[:, None, None] * s - g for s, g in zip(momentum, g_s)]
            return new_params, new_momentum

        params, momentum = tf.scan(step, elems, initializer=state0)
        return [p[-1] for p in params], [s[-1] for s in momentum]

    def read(self, state, query):
        """``M*(q)``: ``query`` ``[B, D_q]`` or ``[B, N, D_q]`` against the state's memory."""
        query = tf.convert_to_tensor(query)
        if query.shape.rank == 2:
            return self.read(state, query[:, None, :])[:, 0, :]
        y = self.apply_memory(state[0], _l2n(tf.nn.silu(self.query_proj(query))))
        if self.output_norm:
            y = y * tf.math.rsqrt(tf.reduce_mean(tf.square(y), axis=-1, keepdims=True) + 1e-6)
        return y

    def call(self, history, query, mask=None):
        return self.read(self.memory_state(history, mask), query)

    def get_config(self):
        config = super().get_config()
        config.update({
            "key_dim": self.key_dim, "value_dim": self.value_dim, "memory": self.memory,
            "chunk_size": self.chunk_size, "max_lr": self.max_lr, "forget_bias": self.forget_bias,
            "momentum_bias": self.momentum_bias, "lr_bias": self.lr_bias, "expansion": self.expansion,
            "shared_query_key": self.shared_query_key, "output_norm": self.output_norm,
        })
        return config


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class MemoryAsGate(keras.layers.Layer):
    """Titans used as a gate (MAG): ``g ⊙ M*(t)`` with ``g = σ([t, v_U] W_g + b_g)`` and the
    memory written from the history, oldest event first (module docstring).

    Call: ``layer(target, interest, history, mask)`` with target ``[N, D]``, interest
    ``[N, D_v]``, history ``[B, L, D]`` most recent first (valid items in front) and its
    mask ``[B, L]``; B = N, or B = 1 against N candidates (one user's request: the memory is
    written once and read by every candidate). Returns ``[N, d_v]``. ``memory_kwargs``
    go to ``TitansMemory`` (key_dim and value_dim default to D).
    """

    def __init__(self, memory_kwargs=None, **kwargs):
        super().__init__(**kwargs)
        self.memory_kwargs = dict(memory_kwargs or {})
        self.memory = None

    def build(self, input_shape):
        dim = int(input_shape[-1])  # the target's width (the first argument)
        kwargs = dict({"key_dim": dim, "value_dim": dim}, **self.memory_kwargs)
        self.memory = TitansMemory(name="memory", **kwargs)
        self.gate = keras.layers.Dense(self.memory.value_dim, activation="sigmoid", name="gate")
        super().build(input_shape)

    def call(self, target, interest, history, mask):
        mask = tf.cast(mask, history.dtype)
        lengths = tf.cast(tf.reduce_sum(mask, axis=1), tf.int64)
        oldest_first = tf.reverse_sequence(history, lengths, seq_axis=1, batch_axis=0)
        read = self.memory.read(self.memory.memory_state(oldest_first, mask), target)
        return self.gate(tf.concat([target, interest], axis=-1)) * read

    def get_config(self):
        config = super().get_config()
        config["memory_kwargs"] = dict(self.memory_kwargs)
        return config
