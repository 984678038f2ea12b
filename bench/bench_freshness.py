"""Replay benchmark of publish policies (#14) on KuaiRand-Pure-format logs -> bench/results/freshness.json + .png.

    make bench-freshness                   # or: .venv/bin/python -m bench.bench_freshness
    LOGS=/path REPLAY_HOURS=2 BENCH_MAX_INTERVALS=3 make bench-freshness     # a quick look

1. LogExampleGen + Transform once (bench/bench_rankers.py run_example_gen_and_transform) with
   train = the warm-up days and eval = the replay days: vocabularies come from the warm-up
   days only (new ids of the replay days fall into the OOV buckets).
2. One trainer (the pipeline's ranker and heads, pipeline/configs/ trainer_config(); DIN by
   default) trains one epoch on the warm-up days; every policy then publishes a full version.
3. The replay days are cut into intervals of REPLAY_HOURS of log time. Per interval j: the
   trainer trains one pass on interval j's rows (the same model, continuously); every policy
   publishes; each policy's SERVED model is scored on interval j + 1 (NE of the click head,
   click AUC, watch-time XAUC).
4. Policies: "full" (a full version every interval: the fresh reference), "stale" (nothing
   after warm-up), "default" (the Publisher's own schedule, pipeline/configs/ PUBLISHER: its
   full_every, delta_row_fraction, delta_priority, delta_dense and dense_every), and delta
   policies <priority>_<X %>_<dense>: a full version every FULL_EVERY intervals, else the top
   X % rows of every table by `priority` (models/publishing/priority.py) plus the dense
   weights, spec "<fp32|fp16|int8_delta|fp16_delta>[@M][/F]" (bench/freshness_policies.py):
   values in fp32 or fp16, or the difference from the policy's served dense weights coded by
   models/publishing/dense_delta.py; "@M" only every M-th delta since the last full version
   ("@0": only with the full versions), "/F" only the top F of the dense elements by
   |current − held| (each with a 4-byte index; priority.top_rows); each also with the rows
   coded as BENCH_ROWS lists ("values", "code_delta": models/publishing/row_delta.py, the
   name then ends in "_code_delta").
5. Steps 2-4 run once per trainer seed in BENCH_SEEDS (initial weights and shuffles).

The served model of a policy = per table the int8 rows (models/publishing/quantization.py;
tables narrower than PUBLISH_QUANTIZE_MIN_DIM or with fewer rows than PUBLISH_MIN_TABLE_SHARE
× the largest table's stay fp32, as models/publishing/rewrite.py publishes them) as last published per row + its dense weights, loaded into a copy of the
Keras model. Once, the fresh model is also rewritten with rewrite.publish_tables (the real
published tables) and its predictions compared with this path (`parity_max_abs_diff_click`).

Bytes (the payload formula of models/publishing/delta.py, without npz framing): full =
Σ_tables V·(D + 4) (int8 rows, fp16 scale + bias; V·4D for fp32 tables) + dense fp32 bytes;
delta = Σ_tables k·(i + row bytes) (i = 2-byte uint16 row index when V ≤ 65,536, else 4)
+ dense bytes (fp32 or fp16; 0 when not sent; k_d·(2|4 + 4) for the top-F dense elements;
coded: deflate (zlib level 6) of the codes + 4 bytes per tensor, as delta.py writes dense.npz).
Measured only (`row_codes_*deflate_ratio`): deflate of the sent int8 rows' codes, and of their
difference from the held codes (would delta-coding or compressing the rows pay?).
Per policy: bytes per hour, NE loss vs fresh (NE_p − NE_fresh)/NE_fresh (mean over
intervals and pooled over all scored rows),
NE recovery = (NE_stale − NE_p)/(NE_stale − NE_fresh) (pooled; meaningful only when
NE_stale > NE_fresh: `ne_recovery_defined`), AUC, XAUC, click calibration (Σp / Σy).

Env: LOGS (default ../shared/data/kuairand-pure), WARMUP_DAYS (20220425-20220501),
REPLAY_DAYS (20220502-20220504), REPLAY_HOURS (2), FULL_EVERY (PUBLISHER.full_every), BENCH_MODEL
(din), BENCH_SEEDS (0,1), BENCH_PRIORITIES (row_change,random), BENCH_FRACTIONS (0.05),
BENCH_DENSE (fp16,fp16@3,int8_delta@1,int8_delta@3,fp16_delta@3), BENCH_ROWS (values,code_delta),
BENCH_MAX_INTERVALS (all),
BENCH_MAX_WARMUP_ROWS (all), REPLAY_SPLIT ("eval"; "validation": warm up on the train split and
replay the validation day, for choosing knobs without the replay days), REPLAY_LEARNING_RATE (the
continuous phase's rate, default WARM_START_LEARNING_RATE = 1e-4, chosen with REPLAY_SPLIT=validation:
bench/results/freshness_tuning.json), BENCH_WORK (/tmp/bench_freshness), BENCH_OUT
(bench/results/freshness.json). `python -m bench.bench_freshness --plot [json]` redraws the PNG.
The record's `results` / `timeline` are the first seed's (the other seeds' in `runs`), `default`
lists every seed's default-policy figures (bytes/h, × fewer bytes, NE recovery, and every
priority's recovery at the same budget).
"""
import os
import json
import sys
import time

import numpy as np

from bench import bench_rankers as br

ROOT = br.ROOT


def _rel(path: str) -> str:
    rel = os.path.relpath(path, ROOT)
    return rel if not rel.startswith("../..") else "<tmp>/" + os.path.basename(path)


def _take(x, idx):
    return {k: v[idx] for k, v in x.items()}


def _batches(x, n=4096):
    size = len(next(iter(x.values())))
    for i in range(0, size, n):
        yield {k: v[i:i + n] for k, v in x.items()}

from bench.freshness_policies import (DENSE_INDEX_BYTES, Layout, Policy, make_policies,  # noqa: E402,F401
                                     policy_from_config, score, snapshot, summarize)


def plot(record, path):
    """NE loss vs fresh per scored interval (symlog y), from each seed's timeline: per seed, the
    Publisher's `default` + every priority at the default's row fraction and dense spec + stale;
    for the first seed also the default priority's dense variants."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = [{"seed": (record.get("seeds") or [0])[0], "results": record["results"], "timeline": record["timeline"]}]
    runs += record.get("runs", [])
    panels = []
    for i, run in enumerate(runs):
        rows = {r["policy"]: r for r in run["results"]}
        d = rows.get("default")
        deltas = [r for r in run["results"] if r["kind"] == "delta" and r["policy"] != "default"]
        if d is None:  # a record from before the `default` policy
            d = deltas[0] if deltas else rows["full"]
        same = [r for r in deltas if (r["fraction"], r["dense"], r.get("rows")) == (d["fraction"], d["dense"], d.get("rows"))]
        panels.append((run, f"seed {run['seed']}: default ({d['dense']}, {100 * (d['fraction'] or 0):g} % rows "
                            f"as {d.get('rows', 'values')}, "
                            f"full every {d['full_every']}) and the priorities at its budget", [d] + same))
        if i == 0:
            variants = [r for r in deltas if r["priority"] == d["priority"]]
            panels.append((run, f"seed {run['seed']}: {d['priority']}, dense variants", variants))
    colours = dict(zip(("opt_state_change", "row_change", "touch_count", "random"), ("C0", "C2", "C1", "C3")))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 4.5 * len(panels)), sharex=True)
    for ax, (run, title, chosen) in zip(np.atleast_1d(axes), panels):
        rows = {r["policy"]: r for r in run["results"]}
        t = [e["hours"] for e in run["timeline"]]  # the publish time = the start of the scored interval
        fresh = [e["ne"]["full"] for e in run["timeline"]]
        for i, r in enumerate(chosen + [rows["stale"]]):
            loss = [100 * (e["ne"][r["policy"]] - f) / f for e, f in zip(run["timeline"], fresh)]
            stale, default = r["policy"] == "stale", r["policy"] == "default"
            colour = "k" if stale else "C4" if default else (colours.get(r["priority"]) if "priorities" in title
                                                               else f"C{i}")
            ax.plot(t, loss, color=colour, lw=2 if stale or default else 1.1, marker="." if stale else None,
                    label=f"{r['policy']}: {r['bytes_per_hour'] / 1e3:.0f} kB/h "
                          f"(x{r['bytes_ratio_vs_full'] or 0:.1f}), recovery {100 * r['ne_recovery']:.1f} %")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_ylabel("NE loss vs full every interval (%)")
        ax.set_title(f"{title} (full every interval: {rows['full']['bytes_per_hour'] / 1e3:.0f} kB/h)", fontsize=10)
        ax.legend(fontsize=7, loc="lower left")
    np.atleast_1d(axes)[-1].set_xlabel(f"hours into the replay ({record['replay_days']}); the served model of the "
                                       f"end of each {record['replay_hours']:g} h interval scored on the next")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def replay(seed, ctx):
    """Warm-up + replay of one trainer seed (module docstring, steps 2-4): its results, timeline,
    parity and timings. ctx: the shared splits, Transform output and env knobs."""
    import tensorflow as tf

    from models.heads import training_labels
    from models.publishing import rewrite, row_importance, sweep
    from models.rankers.registry import build_ranker
    from models.training.input import vocab_sizes
    from models.training.lr_schedule import decay_callbacks
    from models.training.run_fn import ead_thresholds_from_transform_output, fit_ranker
    from pipeline import configs

    c = ctx
    config = configs.trainer_config(c["model_type"])
    base_seed = config.seed + seed
    tf.keras.utils.set_random_seed(base_seed)
    thresholds = ead_thresholds_from_transform_output(c["tft_output"]) if "cread" in config.watch_head else None
    sizes = vocab_sizes(c["tft_output"])
    trainer = build_ranker(config, sizes, ead_thresholds=thresholds)
    served = build_ranker(config, sizes, ead_thresholds=thresholds)
    keys = trainer.input_names

    def labels(y):
        return training_labels(trainer.output_names, y["click_prob"], y["watch_time_s"])

    def train(x, y, shuffle_seed, callbacks=()):
        data = tf.data.Dataset.from_tensor_slices(({k: x[k] for k in keys}, labels(y)))
        fit_ranker(trainer, data.shuffle(len(y["click_prob"]), seed=shuffle_seed).batch(config.batch_size), 1,
                   callbacks=callbacks, verbose=0)

    x_w, y_w = c["warmup"]
    t0 = time.time()
    train(x_w, y_w, base_seed, decay_callbacks(config, len(y_w["click_prob"]), 1))  # a full run, as run_fn
    t_warm = time.time() - t0
    print(f"bench-freshness: seed {seed}: warm-up on {len(y_w['click_prob'])} rows in {t_warm:.0f} s", flush=True)
    trainer.optimizer.learning_rate = c["replay_lr"]  # the continuous phase's own rate (Adam state kept)
    publish_cfg = configs.PUBLISHER.replace(prune_fraction=None, prune_threshold=None, prune_auto=False)
    layout = Layout(trainer, publish_cfg)
    table_rows = {n: t["rows"] for n, t in layout.tables.items()}
    served(_take({k: x_w[k] for k in keys}, slice(0, 2)))  # build its weights
    if [w.shape for w in served.get_weights()] != [w.shape for w in trainer.get_weights()]:
        raise RuntimeError("the scoring copy's weights do not line up with the trainer's")

    x_r, y_r, groups, hours = c["x_r"], c["y_r"], c["groups"], c["hours"]
    n_int = len(groups)
    policies = make_policies(layout, c["priorities"], c["fractions"], c["dense_variants"], c["full_every"],
                             default=configs.PUBLISHER, seed=seed, row_codings=c["row_codings"])
    trainer_ref = Policy("trainer_fp32 (not a policy)", layout, "reference")  # the unpublished trainer itself
    snap = snapshot(trainer, layout)
    for p in policies + [trainer_ref]:
        p.full(snap, {n: np.zeros(v) for n, v in table_rows.items()})
    timeline, t_train, t_score = [], 0.0, 0.0
    for j in range(n_int - 1):  # interval j trains; interval j + 1 scores
        rows_j, rows_next = groups[j], groups[j + 1]
        t0 = time.time()
        if len(rows_j):
            x_j, y_j = _take(x_r, rows_j), _take(y_r, rows_j)
            train(x_j, y_j, base_seed + j + 1)
            touches = row_importance.touch_counts(_batches(x_j), table_rows)
        else:
            touches = {n: np.zeros(v) for n, v in table_rows.items()}
        t_train += time.time() - t0
        t0 = time.time()
        snap = snapshot(trainer, layout)
        for p in policies:
            p.publish(j + 1, snap, touches)
        x_n = {k: x_r[k][rows_next] for k in keys}
        click, watch = y_r["click_prob"][rows_next].astype(np.float64), y_r["watch_time_s"][rows_next].astype(np.float64)
        template = trainer.get_weights()
        entry = {"interval": j + 1, "hours": (j + 1) * hours, "train_rows": int(len(rows_j)),
                 "score_rows": int(len(rows_next)), "ne": {}}
        for p in policies + [trainer_ref]:
            if not len(rows_next):
                pred = {"click_prob": np.zeros(0), "watch_time_s": np.zeros(0)}
            elif p is trainer_ref:
                pred = sweep.predict(trainer, x_n)
            else:
                served.set_weights(p.weights(template))
                pred = sweep.predict(served, x_n)
            p.scores.append(score(click, watch, pred))
            p.preds["click"].append(pred["click_prob"])
            p.preds["watch"].append(pred["watch_time_s"])
            entry["ne"][p.name] = p.scores[-1]["ne"]
        t_score += time.time() - t0
        timeline.append(entry)
        print(json.dumps({"seed": seed, "interval": j + 1, "rows": int(len(rows_next)),
                          "ne_full": entry["ne"]["full"], "ne_stale": entry["ne"]["stale"],
                          "ne_default": entry["ne"]["default"], "elapsed_s": round(time.time() - c["started"])}),
              flush=True)
    scored = np.concatenate(groups[1:n_int])
    for p in policies + [trainer_ref]:
        p.labels = (y_r["click_prob"][scored].astype(np.float64), y_r["watch_time_s"][scored].astype(np.float64))
    table = summarize(policies + [trainer_ref], (n_int - 1) * hours)

    # parity: the real published tables (rewrite.publish_tables, int8, no pruning) vs this path
    served.set_weights(trainer.get_weights())
    x_last = {k: x_r[k][groups[n_int - 1]] for k in keys}
    fresh_pred = policies[0].preds["click"][-1]
    rewrite.publish_tables(served, None, publish_cfg)
    parity = float(np.max(np.abs(sweep.predict(served, x_last)["click_prob"] - fresh_pred))) if len(fresh_pred) else None
    return {"seed": seed, "trainer_seed": base_seed, "results": table, "timeline": timeline, "layout": layout,
            "parity_max_abs_diff_click": parity, "optimizer": row_importance.optimizer_kind(trainer.optimizer),
            "watch_head": config.watch_head,
            "seconds": {"warmup_train": round(t_warm, 1), "replay_train": round(t_train, 1),
                        "publish_and_score": round(t_score, 1)}}


def default_summary(run):
    """The `default` policy's figures of one seed's run, and priority vs random at its budget."""
    rows = {r["policy"]: r for r in run["results"]}
    d = rows["default"]
    same = [r for r in run["results"] if r["kind"] == "delta" and r["policy"] != "default"
            and [r.get(k, "values") for k in ("fraction", "dense", "full_every", "rows")]
            == [d.get(k, "values") for k in ("fraction", "dense", "full_every", "rows")]]
    return {"seed": run["seed"], "bytes_per_hour": d["bytes_per_hour"], "bytes_ratio_vs_full": d["bytes_ratio_vs_full"],
            "ne_recovery": d["ne_recovery"], "ne_loss_vs_fresh_pooled_pct": d["ne_loss_vs_fresh_pooled_pct"],
            "dense_bytes_per_hour": d["dense_bytes_per_hour"], "fulls": d["fulls"], "deltas": d["deltas"],
            "same_budget_ne_recovery": {r["priority"]: r["ne_recovery"] for r in same}}


def main() -> int:
    import tensorflow_transform as tft

    from pipeline import configs

    env = os.environ.get
    logs = env("LOGS") or br.DEFAULT_LOGS
    if not os.path.isabs(logs):
        logs = os.path.join(ROOT, logs)
    if not os.path.isdir(logs):
        print(f"bench-freshness: no logs at {logs} (set LOGS)", file=sys.stderr)
        return 1
    warmup_days, replay_days = env("WARMUP_DAYS", "20220425-20220501"), env("REPLAY_DAYS", "20220502-20220504")
    hours = float(env("REPLAY_HOURS") or 2)
    seeds = [int(x) for x in (env("BENCH_SEEDS") or "0,1").split(",") if x]
    max_intervals = int(env("BENCH_MAX_INTERVALS") or 0)
    max_warmup = int(env("BENCH_MAX_WARMUP_ROWS") or 0)
    # tuning mode (REPLAY_SPLIT=validation): warm up on the train split only and replay the
    # validation day (the last warm-up day), so knobs are chosen without the replay days
    replay_split = env("REPLAY_SPLIT") or "eval"
    if replay_split not in ("eval", "validation"):
        raise ValueError(f"REPLAY_SPLIT must be 'eval' or 'validation', got {replay_split!r}")
    work = env("BENCH_WORK") or "/tmp/bench_freshness"
    out = env("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "freshness.json")
    started, load_start = time.time(), os.getloadavg()
    ctx = {"model_type": env("BENCH_MODEL") or "din", "hours": hours, "started": started,
           "full_every": int(env("FULL_EVERY") or configs.PUBLISHER.full_every),
           "priorities": [p for p in (env("BENCH_PRIORITIES") or "row_change,random").split(",") if p],
           "fractions": [float(f) for f in (env("BENCH_FRACTIONS") or "0.05").split(",") if f],
           "dense_variants": [d for d in (env("BENCH_DENSE") or "fp16,fp16@3,int8_delta@1,int8_delta@3,fp16_delta@3"
                                          ).split(",") if d],
           "row_codings": [r for r in (env("BENCH_ROWS") or "values,code_delta").split(",") if r],
           "replay_lr": float(env("REPLAY_LEARNING_RATE") or configs.WARM_START_LEARNING_RATE)}

    examples, transform_graph = br.run_example_gen_and_transform(logs, work, warmup_days, replay_days)
    ctx["tft_output"] = tft.TFTransformOutput(transform_graph)
    splits, _, info = br.load_splits(examples, ctx["tft_output"], configs.HISTORY_LENGTH)
    t_prep = time.time() - started
    print(f"bench-freshness: examples + transform + load {t_prep:.0f} s; {info}", flush=True)

    # warm-up: every warm-up day (train + validation splits), one epoch
    (x_tr, y_tr, _), (x_va, y_va, _) = splits["train"], splits["validation"]
    if replay_split == "validation":
        x_w, y_w = x_tr, y_tr
    else:
        x_w = {k: np.concatenate([x_tr[k], x_va[k]]) for k in x_tr}
        y_w = {k: np.concatenate([y_tr[k], y_va[k]]) for k in y_tr}
    if max_warmup:
        x_w, y_w = {k: v[-max_warmup:] for k, v in x_w.items()}, {k: v[-max_warmup:] for k, v in y_w.items()}
    ctx["warmup"] = (x_w, y_w)

    # replay intervals of log time
    x_r, y_r, m_r = splits[replay_split]
    t_ms = m_r["time_ms"].astype(np.int64)
    start_ms = (int(t_ms.min()) // 3_600_000) * 3_600_000
    interval = (t_ms - start_ms) // int(hours * 3600 * 1000)
    n_int = int(interval.max()) + 1
    if max_intervals:
        n_int = min(n_int, max_intervals)
    order = np.argsort(t_ms, kind="stable")
    ctx.update(x_r=x_r, y_r=y_r, groups=[order[interval[order] == j] for j in range(n_int)])

    runs = [replay(seed, ctx) for seed in seeds]
    layout, first = runs[0].pop("layout"), runs[0]
    for run in runs[1:]:
        run.pop("layout")
    scored_rows = int(sum(len(g) for g in ctx["groups"][1:]))
    png = os.path.splitext(out)[0] + ".png"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    publisher = configs.PUBLISHER
    record = {
        "logs": _rel(logs), "warmup_days": warmup_days, "replay_days": replay_days, "replay_hours": hours,
        "full_every": ctx["full_every"], "replay_split": replay_split,
        "replay_learning_rate": ctx["replay_lr"], "model": ctx["model_type"],
        "watch_head": first["watch_head"], "optimizer": first["optimizer"], "info": info,
        "default_policy": {k: getattr(publisher, k) for k in ("full_every", "delta_row_fraction", "delta_priority",
                                                              "delta_dense", "dense_every", "delta_rows")},
        "default": [default_summary(r) for r in runs],
        "seeds": seeds, "warmup_rows": int(len(y_w["click_prob"])), "intervals": n_int, "scored_intervals": n_int - 1,
        "scored_rows": scored_rows, "replay_hours_scored": (n_int - 1) * hours,
        "model_bytes": {"tables_published": layout.table_bytes, "dense_fp32": 4 * layout.dense_params,
                        "full_publish": layout.full_bytes,
                        "dense_share_of_full": 4 * layout.dense_params / layout.full_bytes,
                        "tables": {n: {k: t[k] for k in ("rows", "dim", "quantized", "row_bytes", "index_bytes")}
                                   for n, t in layout.tables.items()}},
        "parity_max_abs_diff_click": first["parity_max_abs_diff_click"],
        "results": first["results"], "timeline": first["timeline"],
        "runs": [{k: v for k, v in r.items() if k not in ("watch_head", "optimizer")} for r in runs[1:]],
        "plot": _rel(png), "work": "<tmp>/" + os.path.basename(work),
        "seconds": {"total": round(time.time() - started, 1), "example_gen_transform_load": round(t_prep, 1),
                    **{f"seed_{r['seed']}": r["seconds"] for r in runs}},
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "note": "2-core machine shared with other jobs: wall times are rough; `results` / `timeline` are the "
                "first seed's, `runs` the other seeds' in the same form, `default` every seed's default policy",
    }
    with open(out, "w") as f:
        json.dump(record, f, indent=1, default=float)
    plot(json.loads(json.dumps(record, default=float)), png)
    for run in runs:
        for r in run["results"]:
            print(f"seed {run['seed']} {r['policy']:32s} {r['bytes_per_hour'] / 1e3:8.1f} kB/h  "
                  f"x{(r['bytes_ratio_vs_full'] or 0):6.2f}  NE loss {r['ne_loss_vs_fresh_pooled_pct']:+.3f} %  "
                  f"recovery {r['ne_recovery']:.3f}  AUC {r['auc']:.4f}  XAUC {r['xauc']:.4f}")
    print(f"bench-freshness: wrote {_rel(out)} and {_rel(png)} in {record['seconds']['total']} s")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--plot"]:  # redraw the PNG from an existing results JSON
        src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "bench", "results", "freshness.json")
        plot(json.load(open(src)), os.path.splitext(src)[0] + ".png")
        sys.exit(0)
    sys.exit(main())
