"""Custom TFMA metrics vs brute force: combiners directly (one pass == split + merge,
also when the hash sample kicks in) and through a real `tfma.run_model_analysis` of a
tiny SavedModel with a `serving_examples` signature, overall and per slice."""
import json
import pickle

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
tfma = pytest.importorskip("tensorflow_model_analysis")

from tensorflow_model_analysis.metrics import metric_specs as tfma_metric_specs  # noqa: E402
from tensorflow_model_analysis.metrics import metric_types  # noqa: E402

from models.evaluation import tfma as TM  # noqa: E402
from models.evaluation.tfma import combiners as C  # noqa: E402
from models.evaluation.tfma import sampling  # noqa: E402
from models.evaluation.tfma import user_table as UT  # noqa: E402

NUM_Q = 4
NDCG_K = 3
ECS_K = 3
QUANTILE_SCALE = np.array([0.25, 0.75, 1.25, 2.0], dtype=np.float32)
QUANTILE_SHIFT = np.array([0.0, 1.0, 2.0, 3.0], dtype=np.float32)
OUTPUTS = ["click_prob", "watch_time_s", "ranking_score", "quantiles"]


# ---------------------------------------------------------------- data and model


def make_data(seed=0):
    """~250 impressions of 15 users, label and prediction ties, special users:
    user 7 clicks everything, user 17 clicks nothing and watches 0 s, user 27 watches
    exactly 5 s every time, users 137/147 have a single impression."""
    rng = np.random.default_rng(seed)
    counts = [40, 35, 30, 30, 25, 20, 20, 15, 12, 10, 8, 5, 3, 1, 1]
    user_id = np.repeat(np.arange(len(counts)) * 10 + 7, counts).astype(np.int64)
    n = user_id.size
    x = np.round(rng.normal(size=n), 1).astype(np.float32)
    duration_s = rng.choice([10.0, 30.0, 60.0, 120.0], n).astype(np.float32)
    is_click = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(np.int64)
    watch = np.where(is_click == 1, np.round(duration_s * rng.beta(1, 2, n)),
                     np.round(rng.uniform(0, 3, n))).astype(np.float32)
    is_click[user_id == 7] = 1
    is_click[user_id == 17] = 0
    watch[user_id == 17] = 0.0
    watch[user_id == 27] = 5.0
    return {"user_id": user_id, "video_id": rng.integers(0, 25, n).astype(np.int64),
            "tab": rng.integers(0, 3, n).astype(np.int64), "x": x, "duration_s": duration_s,
            "time_ms": rng.integers(0, 5, n).astype(np.int64) * 40_000,  # 0..160 s: 3 minutes
            "is_click": is_click, "watch_time_s": watch}


class TinyRanker(tf.Module):
    """Outputs with deliberate ties: click_prob on a 0.1 grid, whole-second watch time."""

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(self, examples):
        f = tf.io.parse_example(examples, {
            "x": tf.io.FixedLenFeature([], tf.float32),
            "duration_s": tf.io.FixedLenFeature([], tf.float32)})
        click = (tf.round(tf.sigmoid(f["x"]) * 8.0) + 1.0) / 10.0
        watch = tf.round(f["duration_s"] * click)
        quantiles = watch[:, None] * QUANTILE_SCALE + QUANTILE_SHIFT
        return {"click_prob": click[:, None], "watch_time_s": watch[:, None],
                "ranking_score": (click * watch)[:, None], "quantiles": quantiles}


def serialize(data):
    out = []
    for i in range(data["user_id"].size):
        feats = {}
        for k, v in data.items():
            if v.dtype.kind == "f":
                feats[k] = tf.train.Feature(float_list=tf.train.FloatList(value=[v[i]]))
            else:
                feats[k] = tf.train.Feature(int64_list=tf.train.Int64List(value=[v[i]]))
        out.append(tf.train.Example(features=tf.train.Features(feature=feats))
                   .SerializeToString())
    return out


def predict(model, serialized):
    out = model.signatures["serving_examples"](examples=tf.constant(serialized))
    return {k: v.numpy().astype(np.float64) for k, v in out.items()}


# ---------------------------------------------------------------- brute force (naive)


def naive_xauc(y, p):
    lt = y[:, None] < y[None, :]
    conc = (p[:, None] < p[None, :]) + 0.5 * (p[:, None] == p[None, :])
    return np.sum(lt * conc) / np.sum(lt) if lt.any() else np.nan


def naive_auc(y, p):
    pos, neg = p[y == 1], p[y == 0]
    return np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))


def naive_group(users, y, p, fn, single):
    num = den = used = skipped = 0
    for u in np.unique(users):
        m = users == u
        if single(y[m]):
            skipped += 1
            continue
        used += 1
        num += m.sum() * fn(y[m], p[m])
        den += m.sum()
    return (num / den if den else np.nan), used, skipped


def naive_expected_discount(scores, k, discount):
    """Per row: mean discount over the ranks its tie group can take (pairwise counts)."""
    d = (lambda r: 1 / np.log2(r + 1) if r <= k else 0.0) if discount == "log2" else (
        lambda r: 1.0 if r <= k else 0.0)
    out = []
    for s in scores:
        above = int(np.sum(scores > s))
        tied = int(np.sum(scores == s))
        out.append(np.mean([d(r) for r in range(above + 1, above + tied + 1)]))
    return np.array(out)


def naive_ndcg(users, gains, scores, k):
    vals, skipped = [], 0
    for u in np.unique(users):
        m = users == u
        g = gains[m]
        ideal = np.sort(g)[::-1][:k]
        idcg = sum(v / np.log2(r + 2) for r, v in enumerate(ideal))
        if idcg == 0:
            skipped += 1
            continue
        vals.append(np.sum(g * naive_expected_discount(scores[m], k, "log2")) / idcg)
    return np.mean(vals), len(vals), skipped


def naive_ecs(items, weights):
    per = {}
    for i, w in zip(items, weights):
        per[i] = per.get(i, 0.0) + w
    p = sorted(np.array(list(per.values())) / sum(per.values()), reverse=True)
    return 2 * sum((i + 1) * v for i, v in enumerate(p)) - 1


def naive_model_ecs(users, items, scores, k):
    exposure = np.zeros(scores.size)
    for u in np.unique(users):
        m = users == u
        exposure[m] = naive_expected_discount(scores[m], k, "log2")
    return naive_ecs(items, exposure)


def expected(d, pr, rows):
    """{(output, metric key): value} by brute force on the rows ``rows``."""
    u, item = d["user_id"][rows], d["video_id"][rows]
    c, w = d["is_click"][rows].astype(float), d["watch_time_s"][rows].astype(float)
    pc, pw = pr["click_prob"][rows, 0], pr["watch_time_s"][rows, 0]
    rs, q = pr["ranking_score"][rows, 0], pr["quantiles"][rows]
    one_class = lambda y: len(set(y)) < 2  # noqa: E731
    out = {}
    g, used, skipped = naive_group(u, c, pc, naive_auc, one_class)
    out.update({("click_prob", "gauc"): g, ("click_prob", "gauc_num_users_used"): used,
                ("click_prob", "gauc_num_users_skipped"): skipped})
    request = np.array([f"{a}/{t // 60_000}" for a, t in zip(u, d["time_ms"][rows])])
    g, used, skipped = naive_group(request, c, pc, naive_auc, one_class)
    out.update({("click_prob", "request_gauc"): g,
                ("click_prob", "request_gauc_num_requests_used"): used,
                ("click_prob", "request_gauc_num_requests_skipped"): skipped})
    g, used, skipped = naive_group(u, w, pw, naive_xauc, one_class)
    out.update({("watch_time_s", "xgauc"): g, ("watch_time_s", "xgauc_num_users_used"): used,
                ("watch_time_s", "xgauc_num_users_skipped"): skipped})
    base = c.mean()
    ll = -np.mean([np.log(p) if y else np.log(1 - p) for y, p in zip(c, pc)])
    out[("click_prob", "normalized_entropy")] = ll / -(
        base * np.log(base) + (1 - base) * np.log(1 - base))
    out[("click_prob", "auc")] = naive_auc(c, pc)
    out[("click_prob", "calibration")] = pc.mean() / c.mean()
    out[("watch_time_s", "xauc")] = naive_xauc(w, pw)
    out[("watch_time_s", "rmse")] = np.sqrt(np.mean([(a - b) ** 2 for a, b in zip(w, pw)]))
    out[("watch_time_s", "mean_absolute_error")] = np.mean(np.abs(w - pw))
    out[("watch_time_s", "ecs_observed")] = naive_ecs(item, w)
    for gain, lab in (("watch", w), ("click", c)):
        v, used, skipped = naive_ndcg(u, lab, rs, NDCG_K)
        name = f"ndcg_{gain}@{NDCG_K}"
        out.update({("ranking_score", name): v, ("ranking_score", name + "_num_users_used"): used,
                    ("ranking_score", name + "_num_users_skipped"): skipped})
    out[("ranking_score", f"ecs_model@{ECS_K}")] = naive_model_ecs(u, item, rs, ECS_K)
    taus = np.arange(1, NUM_Q + 1) / (NUM_Q + 1)
    cov = [np.mean([w[i] <= q[i, j] for i in range(w.size)]) for j in range(NUM_Q)]
    for t, cv in zip(taus, cov):
        out[("quantiles", TM.coverage_key(t))] = cv
    out[("quantiles", "mean_coverage_error")] = np.mean(np.abs(np.array(cov) - taus))
    out[("quantiles", "pinball_loss")] = np.mean([sum(
        (w[i] - q[i, j]) * (taus[j] - (w[i] < q[i, j])) for j in range(NUM_Q))
        for i in range(w.size)])
    for name in ("gauc", "request_gauc", "xgauc", "xauc", f"ndcg_watch@{NDCG_K}",
                 f"ndcg_click@{NDCG_K}", f"ecs_model@{ECS_K}"):
        out_name = ("click_prob" if name in ("gauc", "request_gauc") else "ranking_score"
                    if name.startswith(("ndcg", "ecs")) else "watch_time_s")
        out[(out_name, name + "_rows_sampled_out")] = 0.0
    return out


def specs(**kw):
    return TM.metrics_specs(ranking_output="ranking_score", quantiles_output="quantiles",
                            num_quantiles=NUM_Q, ndcg_k=(NDCG_K,), ecs_k=ECS_K, **kw)


def eval_config(**kw):
    return tfma.EvalConfig(
        model_specs=[tfma.ModelSpec(signature_name="serving_examples", label_keys={
            "click_prob": "is_click", "watch_time_s": "watch_time_s"})],
        slicing_specs=[tfma.SlicingSpec(), tfma.SlicingSpec(feature_keys=["tab"])],
        metrics_specs=specs(**kw))


@pytest.fixture(scope="module")
def model_and_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("tfma_metrics")
    d = make_data()
    serialized = serialize(d)
    model_dir = str(root / "model")
    tf.saved_model.save(TinyRanker(), model_dir,
                        signatures={"serving_examples": TinyRanker().serve})
    pr = predict(tf.saved_model.load(model_dir), serialized)
    data_path = str(root / "eval.tfrecord")
    with tf.io.TFRecordWriter(data_path) as w:
        for s in serialized:
            w.write(s)
    return {"root": root, "data": d, "pred": pr, "model_dir": model_dir,
            "data_path": data_path}


def assert_close(got, want, what):
    missing = sorted(set(want) - set(got))
    assert not missing, f"{what}: missing {missing}"
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=1e-9), f"{what}: {k}"


# ---------------------------------------------------------------- combiners directly


def custom_computations(config, **spec_kw):
    comps = []
    for spec in specs(**spec_kw):
        for mc in spec.metrics:
            if mc.module != TM.MODULE:
                continue
            metric = tfma_metric_specs.metric_instance(mc)
            comps += metric.computations(eval_config=config, model_names=[""],
                                         output_names=list(spec.output_names))
    return comps


def combined(comps):
    """TFMA's view of the computations: duplicates removed (metrics_and_plots_evaluator
    keeps the first of equal computations), combiner-based ones first, then derived."""
    return ([c for c in dict.fromkeys(comps) if isinstance(c, metric_types.MetricComputation)],
            [c for c in dict.fromkeys(comps) if isinstance(c, metric_types.DerivedMetricComputation)])


def evaluate(comps, parts):
    """Every combiner over ``parts`` (run_combiner), then the derived metrics, private
    (``_``) keys dropped: what TFMA reports for one slice."""
    base, derived = combined(comps)
    result = {}
    for c in base:
        result.update(run_combiner(c.combiner, parts))
    for c in derived:
        result.update(c.result(result))
    return {k: v for k, v in result.items() if not k.name.startswith("_")}


def inputs(d, pr, rows):
    return [metric_types.StandardMetricInputs(
        labels={"click_prob": np.array([d["is_click"][i]]),
                "watch_time_s": np.array([d["watch_time_s"][i]])},
        predictions={k: pr[k][i] for k in OUTPUTS},
        features={k: np.array([d[k][i]]) for k in ("user_id", "video_id", "tab", "is_click",
                                                     "watch_time_s", "time_ms")})
        for i in rows]


def run_combiner(comb, parts):
    """Each part accumulated separately (pickled like Beam does; compacted or not, as
    Beam may or may not call compact), then merged."""
    accs = []
    for j, part in enumerate(parts):
        acc = comb.create_accumulator()
        for x in part:
            acc = comb.add_input(acc, x)
        accs.append(pickle.loads(pickle.dumps(comb.compact(acc) if j % 2 else acc)))
    return comb.extract_output(comb.merge_accumulators(accs))


def flat(result):
    return {(k.output_name, k.name): v for k, v in result.items()}


def test_combiners_one_pass_equals_merge_equals_brute_force(model_and_data):
    d, pr = model_and_data["data"], model_and_data["pred"]
    n = d["user_id"].size
    xs = inputs(d, pr, range(n))
    perm = np.random.default_rng(1).permutation(n)
    splits = [[xs[i] for i in perm[:17]], [], [xs[i] for i in perm[17:140]],
              [xs[i] for i in perm[140:]]]
    comps = custom_computations(eval_config())
    one, merged = flat(evaluate(comps, [xs])), flat(evaluate(comps, splits))
    want = {k: v for k, v in expected(d, pr, np.arange(n)).items() if k in one}
    assert set(want) == set(one) and len(one) == 33
    assert_close(one, want, "one pass")
    assert_close(merged, one, "merged")


def test_per_user_metrics_share_one_table():
    """metrics_specs' five per-user metrics (six with the two nDCGs) compute from one
    table of 8 columns per slice; a metric configured alone keeps its own table."""
    base, derived = combined(custom_computations(eval_config()))
    tables = [c for c in base if isinstance(c.combiner, UT.UserTableCombiner)]
    assert len(tables) == 1 and len(derived) == 6
    assert tables[0].combiner.num_columns == 8
    assert not any(isinstance(c.combiner, sampling.RowsCombiner) and c not in tables
                   and not isinstance(c.combiner, C.XAUCCombiner) for c in base)
    alone = TM.GroupAUC().computations(model_names=[""], output_names=["click_prob"])
    assert alone[0].combiner.num_columns == 3 and alone[0].keys[0].name.startswith("_user_table")


def test_hash_sample_is_exact_on_the_kept_users_whatever_the_split(model_and_data):
    d, pr = model_and_data["data"], model_and_data["pred"]
    n = d["user_id"].size
    max_rows = 60  # << n: both add_input (> 2 * max_rows) and merge shrink
    xs = inputs(d, pr, range(n))
    comps = custom_computations(eval_config(), max_rows=max_rows)
    # documented kept set: users with the smallest hashes whose rows fit in max_rows
    users = np.unique(d["user_id"])
    h = TM.stable_hash(users, 0)
    cum = np.cumsum([np.sum(d["user_id"] == u) for u in users[np.argsort(h)]])
    kept_users = users[np.argsort(h)][: np.searchsorted(cum, max_rows, side="right")]
    rows = np.flatnonzero(np.isin(d["user_id"], kept_users))
    assert 0 < rows.size <= max_rows
    per_user = ("gauc", "request_gauc", "xgauc", f"ndcg_watch@{NDCG_K}", f"ndcg_click@{NDCG_K}",
                f"ecs_model@{ECS_K}")
    want = {k: v for k, v in expected(d, pr, rows).items() if k[1].startswith(per_user)}
    for (out, name), v in list(want.items()):
        if name.endswith("_rows_sampled_out"):
            want[(out, name)] = n - rows.size
    assert len(want) == 22
    got_one = flat(evaluate(comps, [xs]))
    assert_close(got_one, want, "per-user metrics, one pass")
    rng = np.random.default_rng(2)
    for trial in range(3):
        perm = rng.permutation(n)
        cut = sorted(rng.integers(0, n, 3))
        parts = [[xs[i] for i in p] for p in np.split(perm, cut)]
        assert_close(flat(evaluate(comps, parts)), got_one, f"split {trial}")
    # XAUC samples rows by (label, prediction) group: merged == one pass, count kept
    parts = [[xs[i] for i in p] for p in np.split(rng.permutation(n), [50, 90, 200])]
    assert_close(flat(evaluate(comps, parts)), got_one, "xauc sampled")
    assert 0 < got_one[("watch_time_s", "xauc_rows_sampled_out")] <= n - max_rows // 2


def test_narrow_pack_are_lossless_and_widen_restores_the_columns():
    from models.evaluation.tfma import sampling as S

    f32 = np.array([0.1, 2.5, -3.0, np.nan, np.inf], np.float32).astype(np.float64)  # float32 values
    cases = [(f32, np.float32), (np.array([0.1, 1.0]), np.float64),  # 0.1 needs float64
             (np.array([0, 1, 1], np.int64), np.int8), (np.array([-40000, 3], np.int64), np.int32),
             (np.array([2 ** 40], np.int64), np.int64), (np.zeros(0, np.int64), np.int8),
             (np.array([True, False]), np.bool_), (np.array([b"u1", b"u22"]), np.dtype("S3"))]
    for a, dtype in cases:
        n = S.narrow(a)
        assert n.dtype == dtype, (a, n.dtype)
        w = S.widen([n])[0]
        assert w.dtype == a.dtype and np.array_equal(w, a, equal_nan=a.dtype.kind == "f")
    # the hash that picks the kept groups sees the same values
    for a, _ in cases[:6]:
        assert np.array_equal(S.stable_hash(S.narrow(a), 3), S.stable_hash(a, 3))
    # pickled accumulators pack each column: the same values, dtype and order back
    for a, _ in cases:
        n = S.narrow(a)
        back = S.unpack(pickle.loads(pickle.dumps(S.pack(n))))
        assert back.dtype == n.dtype and np.array_equal(back, n, equal_nan=n.dtype.kind == "f")
    times = np.sort(np.random.default_rng(0).integers(1.65e12, 1.66e12, 10_000))  # ms, near-constant high bytes
    assert len(pickle.dumps(S.pack(times))) < 0.5 * times.nbytes


def test_row_accumulators_are_kept_narrow(model_and_data):
    """The per-user table keeps its labels and predictions as float32 and its small ids
    in one to four bytes: under 24 bytes a row pickled for its 8 columns (user, item,
    click, watch, time, 3 predictions), not the 64 of float64 / int64 columns (its
    metrics: tests above)."""
    from models.evaluation.tfma import sampling as S

    d, pr = model_and_data["data"], model_and_data["pred"]
    n = d["user_id"].size
    (table,) = [c for c in combined(custom_computations(eval_config()))[0]
                if isinstance(c.combiner, UT.UserTableCombiner)]
    comb = table.combiner
    acc = comb.create_accumulator()
    for x in inputs(d, pr, range(n)):
        acc = comb.add_input(acc, x)
    cols = dict(zip(comb._specs, comb.compact(acc).columns))
    assert cols["feature:user_id"].dtype == S.narrow(d["user_id"]).dtype
    assert {cols[f"prediction:{o}"].dtype for o in OUTPUTS[:3]} == {np.dtype(np.float32)}
    assert len(pickle.dumps(acc)) < 24 * n + 1000


def test_config_errors():
    with pytest.raises(ValueError, match="unknown metrics"):
        TM.metrics_specs(thresholds={"no_such_metric": tfma.MetricThreshold()})
    with pytest.raises(ValueError, match="impression-weighted"):
        TM.XAUC().computations(output_names=["watch_time_s"], example_weighted=True)
    with pytest.raises(ValueError, match="discount"):
        TM.ModelECS(discount="exp").computations(output_names=["ranking_score"])
    # a model without the named output: a clear error naming the outputs it has
    comb = TM.QuantileCoverage(num_quantiles=2, label_key="watch_time_s").computations(
        output_names=["quantiles"])[0].combiner
    x = metric_types.StandardMetricInputs(
        labels={"click_prob": np.array([1])}, predictions={"click_prob": np.array([0.5])},
        features={"watch_time_s": np.array([3.0])})
    with pytest.raises(ValueError, match=r"prediction output 'quantiles'.*click_prob"):
        comb.add_input(comb.create_accumulator(), x)
    # every custom metric round-trips through its JSON config
    for spec in TM.metrics_specs(quantiles_output="quantiles"):
        for mc in spec.metrics:
            if mc.module == TM.MODULE:
                m = tfma_metric_specs.metric_instance(mc)
                assert m.get_config() == {**m.get_config(), **json.loads(mc.config or "{}")}


# ---------------------------------------------------------------- a real TFMA run


def slice_metrics(result):
    """{slice: {(output, metric): value}} from an EvalResult."""
    out = {}
    for slice_key, by_output in result.slicing_metrics:
        vals = {}
        for output_name, by_sub_key in by_output.items():
            for name, v in by_sub_key[""].items():
                vals[(output_name, name)] = v.get("doubleValue", np.nan)
        out[tuple(slice_key)] = vals
    return out


def test_tfma_run_matches_brute_force_per_slice_and_gates(model_and_data):
    d, pr = model_and_data["data"], model_and_data["pred"]
    out_dir = str(model_and_data["root"] / "tfma_out")
    config = eval_config(thresholds={
        "xauc": tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(
            lower_bound={"value": 1.01})),  # impossible: must fail
        "gauc": tfma.MetricThreshold(value_threshold=tfma.GenericValueThreshold(
            lower_bound={"value": 0.0}))})
    shared = tfma.default_eval_shared_model(eval_saved_model_path=model_and_data["model_dir"],
                                            eval_config=config)
    result = tfma.run_model_analysis(eval_shared_model=shared, eval_config=config,
                                     data_location=model_and_data["data_path"],
                                     output_path=out_dir)
    got = slice_metrics(result)
    n = d["user_id"].size
    assert set(got) == {(), (("tab", 0),), (("tab", 1),), (("tab", 2),)}
    assert_close(got[()], expected(d, pr, np.arange(n)), "overall")
    assert got[()][("click_prob", "example_count")] == n
    for spec in config.metrics_specs:  # every configured metric name is a produced key,
        for mc in spec.metrics:  # so metrics_specs(thresholds=...) names are the real keys
            name = tfma_metric_specs.metric_instance(mc).name
            assert (spec.output_names[0], name) in got[()], name
    for tab in (0, 2):
        rows = np.flatnonzero(d["tab"] == tab)
        assert_close(got[(("tab", tab),)], expected(d, pr, rows), f"tab {tab}")
    # sanity of the fixture: the special users are really there
    assert got[()][("click_prob", "gauc_num_users_skipped")] >= 4
    assert got[()][("watch_time_s", "xgauc_num_users_skipped")] >= 3
    validation = tfma.load_validation_result(out_dir)
    assert not validation.validation_ok
    failed = {f.metric_key.name for s in validation.metric_validations_per_slice
              for f in s.failures}
    assert failed == {"xauc"}
