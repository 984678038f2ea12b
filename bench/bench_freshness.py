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
   after warm-up), and delta policies <priority>_<X %>_<dense>: a full version every
   FULL_EVERY intervals, else the top X % rows of every table by `priority`
   (models/publishing/priority.py) plus the dense weights, spec "<fp32|fp16>[@M][/F]": in fp32
   or fp16, "@M" only every M-th delta ("@0": only with the full versions), "/F" only the top F
   of the dense elements by |current − held| (each with a 4-byte index; priority.top_rows).

The served model of a policy = per table the int8 rows (models/publishing/quantization.py;
tables narrower than PUBLISH_QUANTIZE_MIN_DIM stay fp32, as models/publishing/rewrite.py
publishes them) as last published per row + its dense weights, loaded into a copy of the
Keras model. Once, the fresh model is also rewritten with rewrite.publish_tables (the real
published tables) and its predictions compared with this path (`parity_max_abs_diff_click`).

Bytes (the payload formula of models/publishing/delta.py, without npz framing): full =
Σ_tables V·(D + 4) (int8 rows, fp16 scale + bias; V·4D for fp32 tables) + dense fp32 bytes;
delta = Σ_tables k·(i + row bytes) (i = 2-byte uint16 row index when V ≤ 65,536, else 4)
+ dense bytes (fp32 or fp16; 0 when not sent; k_d·(2|4 + 4) for the top-F dense elements).
Per policy: bytes per hour, NE loss vs fresh (NE_p − NE_fresh)/NE_fresh (mean over
intervals and pooled over all scored rows),
NE recovery = (NE_stale − NE_p)/(NE_stale − NE_fresh) (pooled; meaningful only when
NE_stale > NE_fresh: `ne_recovery_defined`), AUC, XAUC, click calibration (Σp / Σy).

Env: LOGS (default ../shared/data/kuairand-pure), WARMUP_DAYS (20220425-20220501),
REPLAY_DAYS (20220502-20220504), REPLAY_HOURS (2), FULL_EVERY (12), BENCH_MODEL (din),
BENCH_PRIORITIES (opt_state_change,row_change,touch_count,random), BENCH_FRACTIONS (0.05),
BENCH_DENSE (fp32,fp16,fp16@3,fp16@0,fp16/0.1,fp16/0.02), BENCH_MAX_INTERVALS (all),
BENCH_MAX_WARMUP_ROWS (all), REPLAY_SPLIT ("eval"; "validation": warm up on the train split and
replay the validation day, for choosing knobs without the replay days), REPLAY_LEARNING_RATE (the
continuous phase's rate, default WARM_START_LEARNING_RATE = 1e-4, chosen with REPLAY_SPLIT=validation:
bench/results/freshness_tuning.json), BENCH_WORK (/tmp/bench_freshness), BENCH_OUT
(bench/results/freshness.json). `python -m bench.bench_freshness --plot [json]` redraws the PNG.
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
                                     score, snapshot, summarize)


def plot(record, path):
    """NE loss vs fresh per scored interval (symlog y), from the record's timeline: (a) each
    priority with fp16 dense in every delta (QuickUpdate's shape) + stale; (b) the dense variants."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = {r["policy"]: r for r in record["results"]}
    t = [e["hours"] for e in record["timeline"]]  # the publish time = the start of the scored interval
    fresh = [e["ne"]["full"] for e in record["timeline"]]
    deltas = [r for r in record["results"] if r["kind"] == "delta"]
    first = deltas[0]["priority"] if deltas else None
    panels = [("priorities, dense fp16 in every delta", [r for r in deltas if r["dense"] == "fp16"]),
              (f"{first}: dense variants", [r for r in deltas if r["priority"] == first])]
    colours = dict(zip(("opt_state_change", "row_change", "touch_count", "random"), ("C0", "C2", "C1", "C3")))
    fig, axes = plt.subplots(2, 1, figsize=(11, 9), sharex=True)
    for ax, (title, chosen) in zip(axes, panels):
        for i, r in enumerate(chosen + [rows["stale"]]):
            loss = [100 * (e["ne"][r["policy"]] - f) / f for e, f in zip(record["timeline"], fresh)]
            stale = r["policy"] == "stale"
            colour = "k" if stale else (colours.get(r["priority"]) if "priorities" in title else f"C{i}")
            ax.plot(t, loss, color=colour, lw=2 if stale else 1.1, marker="." if stale else None,
                    label=f"{r['policy']}: {r['bytes_per_hour'] / 1e3:.0f} kB/h, "
                          f"pooled {r['ne_loss_vs_fresh_pooled_pct']:+.2f} %")
        ax.axhline(0, color="grey", lw=0.6)
        ax.set_yscale("symlog", linthresh=0.1)
        ax.set_ylabel("NE loss vs full every interval (%)")
        ax.set_title(f"{title} (full every interval: {rows['full']['bytes_per_hour'] / 1e3:.0f} kB/h)", fontsize=10)
        ax.legend(fontsize=7, loc="lower left")
    axes[-1].set_xlabel(f"hours into the replay ({record['replay_days']}); the served model of the end of "
                        f"each {record['replay_hours']:g} h interval scored on the next")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> int:
    import tensorflow as tf
    import tensorflow_transform as tft

    from models.heads import training_labels
    from models.publishing import rewrite, row_importance, sweep
    from models.rankers.registry import build_ranker
    from models.training.input import vocab_sizes
    from models.training.run_fn import ead_thresholds_from_transform_output, fit_ranker
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
    full_every = int(env("FULL_EVERY") or 12)
    model_type = env("BENCH_MODEL") or "din"
    priorities = [p for p in (env("BENCH_PRIORITIES") or "opt_state_change,row_change,touch_count,random").split(",") if p]
    fractions = [float(f) for f in (env("BENCH_FRACTIONS") or "0.05").split(",") if f]
    dense_variants = [d for d in (env("BENCH_DENSE") or "fp32,fp16,fp16@3,fp16@0,fp16/0.1,fp16/0.02").split(",") if d]
    max_intervals = int(env("BENCH_MAX_INTERVALS") or 0)
    max_warmup = int(env("BENCH_MAX_WARMUP_ROWS") or 0)
    # tuning mode (REPLAY_SPLIT=validation): warm up on the train split only and replay the
    # validation day (the last warm-up day), so knobs are chosen without the replay days
    replay_split = env("REPLAY_SPLIT") or "eval"
    if replay_split not in ("eval", "validation"):
        raise ValueError(f"REPLAY_SPLIT must be 'eval' or 'validation', got {replay_split!r}")
    replay_lr = float(env("REPLAY_LEARNING_RATE") or configs.WARM_START_LEARNING_RATE)  # continuous phase
    work = env("BENCH_WORK") or "/tmp/bench_freshness"
    out = env("BENCH_OUT") or os.path.join(ROOT, "bench", "results", "freshness.json")
    started, load_start = time.time(), os.getloadavg()

    examples, transform_graph = br.run_example_gen_and_transform(logs, work, warmup_days, replay_days)
    tft_output = tft.TFTransformOutput(transform_graph)
    splits, _, info = br.load_splits(examples, tft_output, configs.HISTORY_LENGTH)
    t_prep = time.time() - started
    print(f"bench-freshness: examples + transform + load {t_prep:.0f} s; {info}", flush=True)

    config = configs.trainer_config(model_type)
    tf.keras.utils.set_random_seed(config.seed)
    thresholds = ead_thresholds_from_transform_output(tft_output) if "cread" in config.watch_head else None
    sizes = vocab_sizes(tft_output)
    trainer = build_ranker(config, sizes, ead_thresholds=thresholds)
    served = build_ranker(config, sizes, ead_thresholds=thresholds)
    keys = trainer.input_names

    def labels(y):
        return training_labels(trainer.output_names, y["click_prob"], y["watch_time_s"])

    def train(x, y, seed):
        data = tf.data.Dataset.from_tensor_slices(({k: x[k] for k in keys}, labels(y)))
        fit_ranker(trainer, data.shuffle(len(y["click_prob"]), seed=seed).batch(config.batch_size), 1, verbose=0)

    # warm-up: every warm-up day (train + validation splits), one epoch
    (x_tr, y_tr, _), (x_va, y_va, _) = splits["train"], splits["validation"]
    if replay_split == "validation":
        x_w, y_w = x_tr, y_tr
    else:
        x_w = {k: np.concatenate([x_tr[k], x_va[k]]) for k in x_tr}
        y_w = {k: np.concatenate([y_tr[k], y_va[k]]) for k in y_tr}
    if max_warmup:
        x_w, y_w = {k: v[-max_warmup:] for k, v in x_w.items()}, {k: v[-max_warmup:] for k, v in y_w.items()}
    t0 = time.time()
    train(x_w, y_w, config.seed)
    t_warm = time.time() - t0
    print(f"bench-freshness: warm-up on {len(y_w['click_prob'])} rows in {t_warm:.0f} s", flush=True)
    trainer.optimizer.learning_rate = replay_lr  # the continuous phase's own rate (Adam state kept)
    publish_cfg = configs.PUBLISHER.replace(prune_fraction=None, prune_threshold=None, prune_auto=False)
    layout = Layout(trainer, publish_cfg)
    table_rows = {n: t["rows"] for n, t in layout.tables.items()}
    served(_take({k: x_w[k] for k in keys}, slice(0, 2)))  # build its weights
    if [w.shape for w in served.get_weights()] != [w.shape for w in trainer.get_weights()]:
        raise RuntimeError("the scoring copy's weights do not line up with the trainer's")

    # replay intervals of log time
    x_r, y_r, m_r = splits[replay_split]
    t_ms = m_r["time_ms"].astype(np.int64)
    span_ms = int(hours * 3600 * 1000)
    start_ms = (int(t_ms.min()) // 3_600_000) * 3_600_000
    interval = (t_ms - start_ms) // span_ms
    n_int = int(interval.max()) + 1
    if max_intervals:
        n_int = min(n_int, max_intervals)
    order = np.argsort(t_ms, kind="stable")
    groups = [order[interval[order] == j] for j in range(n_int)]

    policies = make_policies(layout, priorities, fractions, dense_variants, full_every)
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
            train(x_j, y_j, config.seed + j + 1)
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
        print(json.dumps({"interval": j + 1, "rows": int(len(rows_next)),
                          "ne_full": entry["ne"]["full"], "ne_stale": entry["ne"]["stale"],
                          "elapsed_s": round(time.time() - started)}), flush=True)
    scored = np.concatenate(groups[1:n_int])
    for p in policies + [trainer_ref]:
        p.labels = (y_r["click_prob"][scored].astype(np.float64), y_r["watch_time_s"][scored].astype(np.float64))
    replay_hours = (n_int - 1) * hours
    table = summarize(policies + [trainer_ref], replay_hours)

    # parity: the real published tables (rewrite.publish_tables, int8, no pruning) vs this path
    served.set_weights(trainer.get_weights())
    x_last = {k: x_r[k][groups[n_int - 1]] for k in keys}
    fresh_pred = policies[0].preds["click"][-1]
    rewrite.publish_tables(served, None, publish_cfg)
    parity = float(np.max(np.abs(sweep.predict(served, x_last)["click_prob"] - fresh_pred))) if len(fresh_pred) else None

    png = os.path.splitext(out)[0] + ".png"
    os.makedirs(os.path.dirname(out), exist_ok=True)
    record = {
        "logs": _rel(logs), "warmup_days": warmup_days, "replay_days": replay_days, "replay_hours": hours,
        "full_every": full_every, "replay_split": replay_split,
        "replay_learning_rate": replay_lr, "model": model_type,
        "watch_head": config.watch_head,
        "optimizer": row_importance.optimizer_kind(trainer.optimizer), "info": info,
        "warmup_rows": int(len(y_w["click_prob"])), "intervals": n_int, "scored_intervals": n_int - 1,
        "scored_rows": int(scored.size), "replay_hours_scored": replay_hours,
        "model_bytes": {"tables_published": layout.table_bytes, "dense_fp32": 4 * layout.dense_params,
                        "full_publish": layout.full_bytes,
                        "dense_share_of_full": 4 * layout.dense_params / layout.full_bytes,
                        "tables": {n: {k: t[k] for k in ("rows", "dim", "quantized", "row_bytes", "index_bytes")}
                                   for n, t in layout.tables.items()}},
        "parity_max_abs_diff_click": parity, "results": table, "timeline": timeline,
        "plot": _rel(png), "work": "<tmp>/" + os.path.basename(work),
        "seconds": {"total": round(time.time() - started, 1), "example_gen_transform_load": round(t_prep, 1),
                    "warmup_train": round(t_warm, 1), "replay_train": round(t_train, 1),
                    "publish_and_score": round(t_score, 1)},
        "load_average_start": load_start, "load_average_end": os.getloadavg(),
        "note": "2-core machine shared with other jobs: wall times are rough",
    }
    with open(out, "w") as f:
        json.dump(record, f, indent=1, default=float)
    plot(json.loads(json.dumps(record, default=float)), png)
    for r in table:
        print(f"{r['policy']:32s} {r['bytes_per_hour'] / 1e3:10.1f} kB/h  x{(r['bytes_ratio_vs_full'] or 0):6.2f}  "
              f"NE loss {r['ne_loss_vs_fresh_pooled_pct']:+.3f} %  recovery {r['ne_recovery']:.3f}  "
              f"AUC {r['auc']:.4f}  XAUC {r['xauc']:.4f}")
    print(f"bench-freshness: wrote {_rel(out)} and {_rel(png)} in {record['seconds']['total']} s")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--plot"]:  # redraw the PNG from an existing results JSON
        src = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "bench", "results", "freshness.json")
        plot(json.load(open(src)), os.path.splitext(src)[0] + ".png")
        sys.exit(0)
    sys.exit(main())
