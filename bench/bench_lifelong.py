"""Lifelong user memory (#38): DIN on the last 50 vs three readers of the whole history
-> bench/results/lifelong.json.

    make bench-lifelong                      # or: .venv/bin/python -m bench.bench_lifelong
    .venv/bin/python -m bench.bench_lifelong --users 2000 --seeds 0,1,2 --lengths 500,2000

Data: data/simulator/lifelong.py (opt-in lifelong histories, up to L = 2,000 events; one
request of --candidates (64) candidates per user; ``long_range`` = the candidate's topic is in the
history but not in its last 50 events). Users are split 80/20 (train/eval) by the seed.

A small standalone Keras model per method (not the TFX pipeline). Every method is
DIN-last-50 plus, except din_last50, one feature read from the whole (last L) history:

- ``din_last50``: items e(j) = [video emb, topic emb]; DIN's activation unit
  (models/layers/target_attention.py, PReLU) over the last 50 events; MLP on [t, v_U(t)].
- ``mean_pool``: + the masked mean of e over the last L events (and its product with t).
- ``twin_lite``: + TWIN's two stages with one attention: scaled target-attention logits
  t^T W h_i / sqrt(d) over all L events (item side h_i W^T computable once per user;
  W initialised to the identity: ``TWIN_BENCH``, ``--twin-kwargs``), top 50 kept, then the
  same scaled attention and a DIN activation unit over those 50.
- ``titans``: + MAG: g ⊙ M*(q_t), g = sigmoid(Dense([t, v_U(t)])), with the Titans memory
  (models/layers/titans_memory.py, linear, chunk 64, W_Q = W_K, keys of 128 = 4x the item
  width, RMS-normalised read, forgetting gate's bias −9 (σ(−9) ≈ 1.2e-4 per event keeps 0.78
  of an event 2,000 events back; the layer's −6 keeps 0.007): ``TITANS_BENCH``,
  ``--titans-kwargs``) written from the last L events.

Metrics: eval AUC, AUC on the long-range slice with its standard error (bootstrap over
eval users, 200 resamples), train examples/s (epochs after the first), and the p99
latency of scoring 100 candidates of one user in-process (a tf.function; titans reads a
memory state the writer computed beforehand, the UIC pattern; ``serve_p99_ms_100_with_writer``
replays the L events inside the request instead). titans also records the train/serve
parity of its writer (max |score difference|).

``--via-log-example-gen WORK_DIR``: each seed's simulation is written as KuaiRand-format
logs (lifelong.write_logs) and the histories the models read are those of the pipeline's
LogExampleGen with ``user_events`` on (components/log_example_gen/user_events.py:
long_history at each user's request); the run fails if they differ from the simulator's.
The JSON gains ``via_log_example_gen`` (log rows, LogExampleGen's seconds, bytes).
"""
import argparse
import dataclasses
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from data.simulator.lifelong import LifelongParams, simulate_lifelong  # noqa: E402
from models.evaluation.metrics import auc  # noqa: E402
from models.layers.target_attention import TargetAttention  # noqa: E402
from models.layers.titans_memory import TitansMemory  # noqa: E402

RECENT, TOP_K, SERVE_CANDIDATES = 50, 50, 100
METHODS = ("din_last50", "mean_pool", "twin_lite", "titans")
# Options chosen on validation simulations (seeds 10, 11; bench/README.md, lifelong): titans'
# TitansMemory (--titans-kwargs) and twin_lite's retrieval attention (--twin-kwargs; W = I
# at the start: retrieval by embedding similarity, as titans' W_Q = W_K)
TITANS_BENCH = {"shared_query_key": True, "output_norm": True, "key_dim": 128, "forget_bias": -9.0}
TWIN_BENCH = {"kernel_initializer": "identity"}


class LifelongRanker(keras.Model):
    """Logits [B, N] for histories ``hist`` [B, L] and candidates ``cand`` [B, N] (ids)."""

    def __init__(self, method, video_topic, dim=16, chunk_size=64, titans_kwargs=None, twin_kwargs=None):
        super().__init__()
        self.method = method
        self.video_topic = tf.constant(video_topic, tf.int32)
        self.video_emb = keras.layers.Embedding(len(video_topic), dim, name="video_emb",
                                                embeddings_initializer=keras.initializers.RandomNormal(stddev=0.05))
        self.topic_emb = keras.layers.Embedding(int(video_topic.max()) + 1, dim, name="topic_emb",
                                                embeddings_initializer=keras.initializers.RandomNormal(stddev=0.05))
        self.din = TargetAttention(hidden_units=(64, 32), activation="prelu", name="din_recent")
        if method == "twin_lite":
            self.gsu = TargetAttention(scoring="scaled_dot", name="twin_attention",
                                       **(TWIN_BENCH if twin_kwargs is None else twin_kwargs))
            self.gsu.build(tf.TensorShape([None, 2 * dim]))
            self.esu = TargetAttention(hidden_units=(64, 32), activation="prelu", name="din_long")
        if method == "titans":
            kwargs = dict(key_dim=2 * dim, value_dim=2 * dim, chunk_size=chunk_size)
            kwargs.update(TITANS_BENCH if titans_kwargs is None else titans_kwargs)
            self.memory = TitansMemory(name="memory", **kwargs)
            self.gate = keras.layers.Dense(2 * dim, activation="sigmoid", name="mag_gate")
        self.mlp = [keras.layers.Dense(64, activation="relu"), keras.layers.Dense(32, activation="relu"),
                    keras.layers.Dense(1)]

    def embed(self, ids):
        return tf.concat([self.video_emb(ids), self.topic_emb(tf.gather(self.video_topic, ids))], axis=-1)

    def call(self, inputs, training=None):
        hist, cand = inputs["hist"], inputs["cand"]
        return self.score(self.user_side(hist), hist, cand, training)

    def user_side(self, hist):
        """What a per-user writer computes from the whole history (titans: the memory state)."""
        if self.method == "titans":
            return self.memory.memory_state(self.embed(hist), hist > 0)
        return None

    def score(self, state, hist, cand, training=None):
        """Logits from the writer's ``state`` (titans), ``hist`` (its last 50 events for DIN;
        all of it for mean_pool / twin_lite; titans may get the last 50 only) and ``cand``."""
        recent = hist[:, -RECENT:]
        batch, n = tf.shape(cand)[0], tf.shape(cand)[1]
        t = self.embed(cand)                                        # [B, N, d]
        d = t.shape[-1]
        flat_t = tf.reshape(t, [-1, d])
        h = self.embed(recent)
        one_user = recent.shape[0] == 1 and cand.shape[0] == 1      # serving: keys batch 1
        if one_user:
            din = self.din(flat_t, h, mask=recent > 0, training=training)
        else:
            din = self.din(flat_t, tf.repeat(h, n, axis=0), mask=tf.repeat(recent > 0, n, axis=0),
                           training=training)
        feats = [flat_t, din]
        if self.method == "titans":
            y = tf.reshape(self.memory.read(state, t), [-1, d])
            feats.append(self.gate(tf.concat([flat_t, din], -1)) * y)
        elif self.method in ("mean_pool", "twin_lite"):
            all_h = self.embed(hist)
            mask = tf.cast(hist > 0, t.dtype)
            if self.method == "mean_pool":
                pooled = tf.reduce_sum(all_h * mask[..., None], 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)[:, None]
                pooled = tf.reshape(tf.repeat(pooled[:, None], n, axis=1), [-1, d])
                feats += [pooled, pooled * flat_t]
            else:
                feats += self._twin(t, all_h, hist > 0, batch, n, d, training)
        x = tf.concat(feats, axis=-1)
        for layer in self.mlp:
            x = layer(x)
        return tf.reshape(x, [batch, n])

    def _twin(self, t, all_h, mask, batch, n, d, training):
        # GSU: the twin attention's logits t^T W h_i over all L events (h_i W^T is per-user)
        logits = tf.einsum("bnd,bld->bnl", tf.matmul(t, self.gsu.key_kernel), all_h)
        logits = tf.where(mask[:, None, :], logits, tf.fill(tf.shape(logits), -1e9))
        k = min(TOP_K, all_h.shape[1] or TOP_K)
        top = tf.math.top_k(tf.stop_gradient(logits), k=k)
        keys = tf.reshape(tf.gather(all_h, top.indices, batch_dims=1), [-1, k, d])      # [B·N, K, d]
        kmask = tf.reshape(tf.gather(mask, top.indices, batch_dims=1), [-1, k])
        flat_t = tf.reshape(t, [-1, d])
        return [self.gsu(flat_t, keys, mask=kmask), self.esu(flat_t, keys, mask=kmask, training=training)]

    def forward(self, hist, cand, training=None):
        return self(dict(hist=hist, cand=cand), training=training)


def _serve_latency(model, data, users, length, calls=200):
    """p99 ms of scoring 100 candidates of one user (one tf.function call each)."""
    rng = np.random.default_rng(0)
    cand = tf.constant(rng.integers(1, len(data.video_topic), (1, SERVE_CANDIDATES)), tf.int32)
    hist = tf.constant(data.history[users[:1], -length:])
    recent = hist[:, -RECENT:]
    spec_h, spec_r = tf.TensorSpec([1, length], tf.int32), tf.TensorSpec([1, RECENT], tf.int32)
    spec_c = tf.TensorSpec([1, SERVE_CANDIDATES], tf.int32)
    out = {}
    if model.method == "titans":
        writer = tf.function(lambda h: model.user_side(h), input_signature=[spec_h])
        state = writer(hist)
        state_spec = tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape, s.dtype), state)
        serve = tf.function(lambda s, r, c: model.score(s, r, c, False), input_signature=[state_spec, spec_r, spec_c])
        with_writer = tf.function(lambda h, c: model.score(model.user_side(h), h, c, False),
                                  input_signature=[spec_h, spec_c])
        fns = {"serve_p99_ms_100": lambda: serve(state, recent, cand),
               "serve_p99_ms_100_with_writer": lambda: with_writer(hist, cand)}
    else:
        serve = tf.function(lambda h, c: model.score(None, h, c, False), input_signature=[spec_h, spec_c])
        fns = {"serve_p99_ms_100": lambda: serve(hist, cand)}
    for key, fn in fns.items():
        for _ in range(10):
            fn()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            fn().numpy()
            times.append(1000 * (time.perf_counter() - start))
        out[key] = round(float(np.percentile(times, 99)), 3)
        out[key.replace("p99", "p50")] = round(float(np.percentile(times, 50)), 3)
    return out


def run_one(data, method, length, seed, epochs, users_per_batch, titans_kwargs=None, twin_kwargs=None):
    tf.keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(data.history.shape[0])
    n_train = int(0.8 * len(perm))
    train, test = perm[:n_train], perm[n_train:]
    hist_len = RECENT if method == "din_last50" else length
    model = LifelongRanker(method, data.video_topic, titans_kwargs=titans_kwargs, twin_kwargs=twin_kwargs)
    opt = keras.optimizers.Adam(3e-3, clipnorm=5.0)
    hist_all = data.history[:, -hist_len:]

    @tf.function(input_signature=[tf.TensorSpec([None, hist_len], tf.int32),
                                  tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, None], tf.float32)])
    def train_step(h, c, y):
        with tf.GradientTape() as tape:
            logits = model.forward(h, c, training=True)
            loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(y, logits))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    predict = tf.function(lambda h, c: tf.sigmoid(model.forward(h, c, training=False)),
                          input_signature=[tf.TensorSpec([None, hist_len], tf.int32),
                                           tf.TensorSpec([None, None], tf.int32)])
    steady_examples, steady_seconds = 0, 0.0
    for epoch in range(epochs):
        order = rng.permutation(train)
        start = time.perf_counter()
        for i in range(0, len(order), users_per_batch):
            b = order[i:i + users_per_batch]
            train_step(hist_all[b], data.candidates[b], data.labels[b])
        if epoch:
            steady_seconds += time.perf_counter() - start
            steady_examples += len(order) * data.candidates.shape[1]
    preds = np.concatenate([predict(hist_all[test[i:i + 64]], data.candidates[test[i:i + 64]]).numpy()
                            for i in range(0, len(test), 64)])
    labels, lr = data.labels[test], data.long_range[test]
    record = {
        "name": method, "history_length": hist_len, "seed": seed,
        "auc": round(auc(labels.ravel(), preds.ravel()), 5),
        "auc_long_range": round(auc(labels[lr], preds[lr]), 5),
        "auc_long_range_se": round(_slice_se(labels, preds, lr, np.random.default_rng(seed)), 5),
        "auc_short_range": round(auc(labels[~lr], preds[~lr]), 5),
        "train_examples_per_sec": round(steady_examples / steady_seconds, 1) if steady_seconds else None,
        "eval_impressions": int(labels.size), "eval_long_range_impressions": int(lr.sum()),
    }
    record.update(_serve_latency(model, data, test, hist_len))
    if method == "titans":
        record["train_serve_parity_max_abs_diff"] = _parity(model, hist_all[test[:8]], data.candidates[test[:8]])
    return record


def _slice_se(labels, preds, mask, rng, reps=200):
    """Bootstrap (over eval users) standard error of the AUC on the impressions in ``mask``."""
    users = labels.shape[0]
    values = []
    for _ in range(reps):
        idx = rng.integers(0, users, users)
        m = mask[idx]
        y, p = labels[idx][m], preds[idx][m]
        if 0 < y.sum() < y.size:
            values.append(auc(y, p))
    return float(np.std(values, ddof=1))


def _parity(model, hist, cand):
    """Scores through the writer (memory state per user, then the read) vs the training graph."""
    full = tf.sigmoid(model.forward(tf.constant(hist), tf.constant(cand), training=False)).numpy()
    served = []
    writer = tf.function(lambda h: model.user_side(h))
    for u in range(hist.shape[0]):
        h = tf.constant(hist[u:u + 1])
        state = writer(h)
        served.append(tf.sigmoid(model.score(state, h[:, -RECENT:], tf.constant(cand[u:u + 1]), False)).numpy()[0])
    return float(np.abs(np.stack(served) - full).max())


def _write(args, argv, records, data, started, ingested=()):
    """Summary over seeds per (method, history length) + every run; rewritten after each run."""
    methods = []
    for key in sorted({(r["name"], r["history_length"]) for r in records}, key=lambda k: (METHODS.index(k[0]), k[1])):
        rs = [r for r in records if (r["name"], r["history_length"]) == key]
        entry = {"name": key[0], "history_length": key[1], "seeds": len(rs)}
        for field in ("auc", "auc_long_range", "auc_long_range_se", "auc_short_range", "train_examples_per_sec",
                      "serve_p99_ms_100", "serve_p50_ms_100", "serve_p99_ms_100_with_writer",
                      "train_serve_parity_max_abs_diff"):
            vals = [r[field] for r in rs if r.get(field) is not None]
            if vals:
                entry[field] = round(float(np.mean(vals)), 5)
                if len(vals) > 1 and field in ("auc", "auc_long_range"):
                    entry[field + "_std_over_seeds"] = round(float(np.std(vals, ddof=1)), 5)
        methods.append(entry)
    out = {"command": "python -m bench.bench_lifelong " + " ".join(argv if argv is not None else sys.argv[1:]),
           "users": args.users, "epochs": args.epochs, "titans_kwargs": args.titans_kwargs,
           "twin_kwargs": args.twin_kwargs, "candidates_per_user": int(data.candidates.shape[1]),
           "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "wall_seconds": round(time.time() - started, 1),
           "load_average_after": [round(x, 2) for x in os.getloadavg()],
           "methods": methods, "runs": records}
    if ingested:  # --via-log-example-gen: the histories came through LogExampleGen's user events
        out["via_log_example_gen"] = list(ingested)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


def histories_via_log_example_gen(data, work: str, seed: int):
    """``data`` with its histories read back through the pipeline's ingestion: the
    simulation written as logs (lifelong.write_logs), LogExampleGen (the pipeline's config,
    ``user_events`` on) on them, each user's history = user_events.long_history at its
    request, oldest first. RuntimeError if they differ from the simulator's; returns
    (data, figures of the LogExampleGen run)."""
    import apache_beam as beam
    from tfx.types import standard_artifacts

    from components.log_example_gen import user_events
    from components.log_example_gen.artifacts import DeadLetterRows
    from components.log_example_gen.executor import run_log_example_gen
    from data.simulator.lifelong import write_logs
    from pipeline import configs

    root = os.path.join(work, f"seed_{seed}")
    paths = write_logs(data, os.path.join(root, "input"), seed=seed)
    examples, dead_letter = standard_artifacts.Examples(), DeadLetterRows()
    examples.uri, dead_letter.uri = os.path.join(root, "examples"), os.path.join(root, "dead_letter")
    config = dataclasses.replace(configs.LOG_EXAMPLE_GEN, user_events=True)
    started = time.time()
    counts = run_log_example_gen(beam.Pipeline(argv=configs.BEAM_PIPELINE_ARGS), os.path.join(root, "input"),
                                 config, examples, dead_letter)
    seconds = time.time() - started
    events = user_events.read(examples.uri)
    users, big_l = data.history.shape
    history, lengths = np.zeros_like(data.history), np.zeros_like(data.history_length)
    for u in range(users):
        ids = user_events.long_history(events[u], paths["request_ms"], big_l)["video_id"][::-1]
        history[u, big_l - len(ids):], lengths[u] = ids, len(ids)
    if not (np.array_equal(history, data.history) and np.array_equal(lengths, data.history_length)):
        raise RuntimeError("the histories read through LogExampleGen differ from the simulated ones")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(user_events.events_uri(examples.uri))
               for f in fs)
    return dataclasses.replace(data, history=history, history_length=lengths), {
        "seed": seed, "log_rows": counts["total_rows"], "log_example_gen_seconds": round(seconds, 1),
        "rows_per_s": round(counts["total_rows"] / seconds), "user_events_bytes": size,
        "examples_bytes": sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(examples.uri)
                              for f in fs) - size}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--lengths", default="500,2000")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=64, help="candidates (labels) per user")
    parser.add_argument("--users-per-batch", type=int, default=16)
    parser.add_argument("--titans-kwargs", type=json.loads, default=dict(TITANS_BENCH),
                        help='JSON of TitansMemory arguments for titans, e.g. \'{"shared_query_key": true}\'')
    parser.add_argument("--twin-kwargs", type=json.loads, default=dict(TWIN_BENCH),
                        help='JSON of twin_lite\'s retrieval TargetAttention arguments, e.g. \'{"kernel_initializer": "identity"}\'')
    parser.add_argument("--via-log-example-gen", metavar="WORK_DIR", default="",
                        help="read the histories back through LogExampleGen's user events (logs under WORK_DIR)")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "lifelong.json"))
    args = parser.parse_args(argv)
    lengths = [int(x) for x in args.lengths.split(",")]
    records, ingested, started = [], [], time.time()
    for seed in [int(s) for s in args.seeds.split(",")]:
        data = simulate_lifelong(args.users, seed=seed, params=LifelongParams(
            history_length=max(lengths), candidates=args.candidates))
        if args.via_log_example_gen:
            data, ingestion = histories_via_log_example_gen(data, args.via_log_example_gen, seed)
            print(json.dumps(ingestion), flush=True)
            ingested.append(ingestion)
        for method in args.methods.split(","):
            for length in ([RECENT] if method == "din_last50" else lengths):
                load = os.getloadavg()
                rec = run_one(data, method, length, seed, args.epochs, args.users_per_batch,
                              args.titans_kwargs if method == "titans" else None,
                              args.twin_kwargs if method == "twin_lite" else None)
                rec["load_average_before"] = [round(x, 2) for x in load]
                records.append(rec)
                print(json.dumps(rec), flush=True)
                _write(args, argv, records, data, started, ingested)
    print("bench_lifelong: wrote", os.path.relpath(args.out, ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
