"""Titans memory: the chunked closed form against a step-by-step NumPy recurrence."""
import numpy as np
import pytest
import tensorflow as tf

from models.layers.titans_memory import MemoryAsGate, TitansMemory
from tests.models.layers.round_trip import assert_config_round_trip

B, L, D, DQ = 2, 7, 5, 3


def _silu(x):
    return x / (1.0 + np.exp(-x))


def _l2n(x):
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-6)


def _grad(memory, params, k, v):
    """∇ of ||M(k) - v||^2 for one event, by hand (NumPy)."""
    if memory == "linear":
        return [np.outer(k, 2 * (k @ params[0] - v))]
    h = k @ params[0]
    a = _silu(h)
    e2 = 2 * (a @ params[1] - v)
    s = 1 / (1 + np.exp(-h))
    back = (params[1] @ e2) * s * (1 + h * (1 - s))
    return [np.outer(k, back), np.outer(a, e2)]


def _reference(layer, x, mask, q, chunk):
    """Event by event: S_t = η S - θ ∇ℓ(M at the chunk's start), M_t = (1 - α) M + S_t;
    padded events skipped; read M*(q)."""
    wk, wv, wq = (np.asarray(p.kernel) for p in (layer.key_proj, layer.value_proj, layer.query_proj))
    gw, gb = np.asarray(layer.gates.kernel), np.asarray(layer.gates.bias)
    out = []
    for b in range(x.shape[0]):
        params = [np.asarray(w, np.float64).copy() for w in layer.initial_memory]
        mom = [np.zeros_like(p) for p in params]
        start = [p.copy() for p in params]
        for t in range(x.shape[1]):
            if t % chunk == 0:
                start = [p.copy() for p in params]
            if not mask[b, t]:
                continue
            xt = x[b, t]
            k, v = _l2n(_silu(xt @ wk)), _silu(xt @ wv)
            z = xt @ gw + gb
            theta, eta, alpha = layer.max_lr / (1 + np.exp(-z[0])), 1 / (1 + np.exp(-z[1])), 1 / (1 + np.exp(-z[2]))
            grads = _grad(layer.memory, start, k, v)
            mom = [eta * s - theta * g for s, g in zip(mom, grads)]
            params = [(1 - alpha) * p + s for p, s in zip(params, mom)]
        qq = _l2n(_silu(q[b] @ wq))
        if layer.memory == "linear":
            out.append(qq @ params[0])
        else:
            out.append(_silu(qq @ params[0]) @ params[1])
    return np.stack(out)


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(B, L, D)).astype(np.float32)
    q = rng.normal(size=(B, 4, DQ)).astype(np.float32)
    mask = np.ones((B, L), bool)
    mask[1, 5:] = False
    return x, q, mask


def _layer(memory, chunk, seed=1):
    tf.random.set_seed(seed)
    layer = TitansMemory(key_dim=4, value_dim=3, memory=memory, chunk_size=chunk, max_lr=0.8,
                         forget_bias=-1.0, momentum_bias=0.5, lr_bias=0.0)
    x, q, mask = _inputs()
    layer(x, q, mask=mask)
    # non-trivial gates and initial memory, so every term of the recurrence is exercised
    rng = np.random.default_rng(seed)
    layer.gates.kernel.assign(rng.normal(0, 0.5, size=(D, 3)))
    for w in layer.initial_memory:
        w.assign(rng.normal(0, 0.3, size=w.shape))
    return layer


@pytest.mark.parametrize("memory", ["linear", "mlp"])
@pytest.mark.parametrize("chunk", [1, 3, 4])
def test_chunked_closed_form_matches_the_reference(memory, chunk):
    layer = _layer(memory, chunk)
    x, q, mask = _inputs()
    got = layer(x, q, mask=mask).numpy()
    want = _reference(layer, x.astype(np.float64), mask, q.astype(np.float64), chunk)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    if chunk > 1:  # the chunked approximation is not the sequential recurrence
        exact = _reference(layer, x.astype(np.float64), mask, q.astype(np.float64), 1)
        assert np.abs(got - exact).max() > 1e-3


def test_padded_events_are_identity_steps():
    layer = _layer("linear", 3)
    x, q, _ = _inputs()
    short = layer(x[:, :5], q).numpy()
    mask = np.zeros((B, L), bool)
    mask[:, :5] = True
    x_junk = x.copy()
    x_junk[:, 5:] = 100.0  # padded values must not matter
    np.testing.assert_allclose(layer(x_junk, q, mask=mask).numpy(), short, rtol=1e-5, atol=1e-6)
    # an all-padding history reads the initial memory
    empty = layer(x, q, mask=np.zeros((B, L), bool)).numpy()
    wq = np.asarray(layer.query_proj.kernel)
    want = _l2n(_silu(q.astype(np.float64) @ wq)) @ np.asarray(layer.initial_memory[0])
    np.testing.assert_allclose(empty, want, rtol=1e-5, atol=1e-6)


def test_rank2_query_and_gradients_reach_every_weight():
    layer = _layer("mlp", 3)
    x, q, mask = _inputs()
    np.testing.assert_allclose(layer(x, q[:, 0], mask=mask).numpy(), layer(x, q, mask=mask).numpy()[:, 0],
                               rtol=1e-5, atol=1e-6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(layer(x, q, mask=mask)))
    grads = tape.gradient(loss, layer.trainable_variables)
    names = [v.name for v in layer.trainable_variables]
    assert len(grads) == 2 + 3 + 2  # m0 (2), w_k/w_v/w_q, gates kernel + bias
    for name, g in zip(names, grads):
        assert g is not None and float(tf.reduce_max(tf.abs(g))) > 0, name


def test_writer_state_then_read_equals_call_and_config_round_trip():
    layer = _layer("linear", 4)
    x, q, mask = _inputs()
    state = tf.function(layer.memory_state)(tf.constant(x), tf.constant(mask))
    # the state from a tf.function, the call eager: float32 rounding (~3 ulp) apart
    np.testing.assert_allclose(layer.read(state, q).numpy(), layer(x, q, mask=mask).numpy(), rtol=1e-6, atol=1e-6)
    assert state[0][0].shape == (B, 4, 3) and state[1][0].shape == (B, 4, 3)
    assert_config_round_trip(layer, lambda lay: lay(x, q, mask=mask))


@pytest.mark.parametrize("memory", ["linear", "mlp"])
def test_writer_continues_from_a_stored_state_in_whole_chunks(memory):
    """Serving's per-user store: the state after events [0, 4) then [4, 7) (chunk 4)
    equals one replay of [0, 7); a split inside a chunk does not (chunks are counted
    from the first position the writer sees)."""
    layer = _layer(memory, 4)
    x, q, mask = _inputs()
    full = layer.memory_state(x, mask)
    part = layer.memory_state(x[:, 4:], mask[:, 4:], initial_state=layer.memory_state(x[:, :4], mask[:, :4]))
    for a, b in zip(tf.nest.flatten(full), tf.nest.flatten(part)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.read(part, q).numpy(), layer(x, q, mask=mask).numpy(), rtol=1e-5, atol=1e-6)
    off = layer.memory_state(x[:, 3:], mask[:, 3:], initial_state=layer.memory_state(x[:, :3], mask[:, :3]))
    assert np.abs(off[0][0].numpy() - full[0][0].numpy()).max() > 1e-4


@pytest.mark.parametrize("memory", ["linear", "mlp"])
def test_shared_query_key_and_output_norm_match_the_reference(memory):
    """W_Q = W_K (one projection, the query as wide as an event) and the RMS-normalised
    read: the closed form against the step-by-step reference, then y / rms(y)."""
    tf.random.set_seed(3)
    layer = TitansMemory(key_dim=4, value_dim=3, memory=memory, chunk_size=3, max_lr=0.8, forget_bias=-1.0,
                         momentum_bias=0.5, shared_query_key=True, output_norm=True)
    x, _, mask = _inputs()
    q = np.random.default_rng(5).normal(size=(B, 4, D)).astype(np.float32)
    layer(x, q, mask=mask)  # builds
    assert layer.query_proj is layer.key_proj and len(layer.trainable_variables) == len(layer.initial_memory) + 4
    rng = np.random.default_rng(2)
    layer.gates.kernel.assign(rng.normal(0, 0.5, size=(D, 3)))
    for w in layer.initial_memory:
        w.assign(rng.normal(0, 0.3, size=w.shape))
    got = layer(x, q, mask=mask).numpy()
    raw = _reference(layer, x.astype(np.float64), mask, q.astype(np.float64), 3)
    want = raw / np.sqrt(np.mean(raw ** 2, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert_config_round_trip(layer, lambda lay: lay(x, q, mask=mask))


def test_memory_as_gate_writes_the_history_oldest_first():
    """MAG = σ([t, v] W_g + b_g) ⊙ M*(t), the memory written from each row's valid items in
    reverse (most recent first in, oldest first to the memory); padding never matters; a
    one-row history against N targets equals that row repeated."""
    rng = np.random.default_rng(7)
    n, length, dim = 3, 6, 4
    history = rng.normal(size=(n, length, dim)).astype(np.float32)
    lengths = np.array([6, 3, 0])
    mask = (np.arange(length)[None] < lengths[:, None]).astype(np.float32)
    history[mask == 0] = 9.0  # padding values must not matter
    target = rng.normal(size=(n, dim)).astype(np.float32)
    interest = rng.normal(size=(n, 2)).astype(np.float32)
    tf.random.set_seed(0)
    layer = MemoryAsGate({"chunk_size": 2, "max_lr": 0.5, "shared_query_key": True})
    got = layer(target, interest, history, mask).numpy()
    oldest_first = history.copy()
    for r, k in enumerate(lengths):
        oldest_first[r, :k] = history[r, :k][::-1]
    mem = layer.memory
    read = mem.read(mem.memory_state(oldest_first, mask), target).numpy()
    gate = layer.gate(np.concatenate([target, interest], -1)).numpy()
    np.testing.assert_allclose(got, gate * read, rtol=1e-5, atol=1e-6)
    in_order = mem.read(mem.memory_state(history, mask), target).numpy()
    assert np.abs(in_order[0] - read[0]).max() > 1e-4  # the order is really reversed
    one_row = layer(target, interest, history[:1], mask[:1]).numpy()
    repeated = layer(target, interest, np.repeat(history[:1], n, 0), np.repeat(mask[:1], n, 0)).numpy()
    np.testing.assert_allclose(one_row, repeated, rtol=1e-5, atol=1e-6)
    assert_config_round_trip(layer, lambda lay: lay(target, interest, history, mask))


@pytest.mark.parametrize("kwargs", [{"memory": "deep"}, {"key_dim": 0}, {"chunk_size": 0}, {"max_lr": 0.0}])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        TitansMemory(**kwargs)
