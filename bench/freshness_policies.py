"""The publish policies of the freshness replay (bench/bench_freshness.py): the model's
table/dense layout and byte formula, each policy's served state (full, stale, delta with a
priority and a dense schedule), scoring and the summary table.

Dense spec "<fp32|fp16|int8_delta|int6_delta|int5_delta|int4_delta|fp16_delta>[@M][/F]": values in fp32 / fp16, or the
difference from the policy's served dense weights coded as models/publishing/dense_delta.py
codes it (bytes: deflate of the codes, level 6, as the delta's dense.npz is written, + a
4-byte step per tensor for int8 / int4); "@M" on every M-th delta since the last full version
(PublishConfig.dense_every; "@0": only with full versions), "/F" only the top F of the dense
elements by |current − held| (plain values only). Row coding (PublishConfig.delta_rows):
"values" (k·(i + row bytes)) or "code_delta" (models/publishing/row_delta.py: the bit
differences of the sent rows from the held ones, bytes = row_delta.deflated_bytes of what
row_delta.encode returns). `policy_from_config` builds the policy the Publisher's own
PublishConfig schedules (the bench's `default`)."""
import zlib

import numpy as np

from models.publishing import dense_delta, row_delta

DENSE_INDEX_BYTES = 4  # int32 index of a dense element (more than 65,536 of them)
DENSE_KINDS = ("fp32", "fp16") + dense_delta.CODINGS


class Layout:
    """Which of model.get_weights() are embedding tables (and how they publish) and which are dense."""

    def __init__(self, model, publish):
        from models.publishing import pruning
        from models.publishing.row_importance import embedding_tables, feature_layer

        by_ref = {v.ref(): name for name, v in embedding_tables(feature_layer(model)).items()}
        largest = max(int(v.shape[0]) for v in embedding_tables(feature_layer(model)).values())
        self.tables, self.dense = {}, []
        for i, w in enumerate(model.weights):
            name = by_ref.get(w.ref())
            if name is None:
                self.dense.append(i)
            else:  # int8 as rewrite.publish_tables decides: wide enough, and not a small table (min_table_share)
                dim, rows = int(w.shape[1]), int(w.shape[0])
                quantized = publish.quantize and dim >= publish.quantize_min_dim and \
                    rows >= publish.min_table_share * largest
                self.tables[name] = {"index": i, "rows": rows, "dim": dim, "quantized": bool(quantized)}
        for t in self.tables.values():
            t["row_bytes"] = t["dim"] + 4 if t["quantized"] else 4 * t["dim"]
            t["index_bytes"] = int(np.dtype(pruning.remap_dtype(t["rows"])).itemsize)  # as delta.py sends
        self.dense_params = int(sum(int(np.prod(model.weights[i].shape)) for i in self.dense))
        self.table_bytes = int(sum(t["rows"] * t["row_bytes"] for t in self.tables.values()))
        self.full_bytes = self.table_bytes + 4 * self.dense_params


def snapshot(model, layout):
    """What a publish of the trainer now would send: per table the rows as served (int8 ->
    dequantized, as the serving graph computes them), the int8 tables' codes (q, fp16 scale
    and bias as bytes) and the mean optimizer state; the dense weights."""
    from models.publishing import quantization, row_importance

    weights = model.get_weights()
    opt = row_importance.compute_row_importance(model)["tables"]
    rows, codes = {}, {}
    for name, t in layout.tables.items():
        values = np.asarray(weights[t["index"]], np.float32)
        if t["quantized"]:
            q, scale, bias = quantization.quantize_rows(values)
            rows[name] = quantization.dequantize_rows(q, scale, bias)
            codes[name] = np.concatenate([q, np.stack([scale, bias], 1).view(np.uint8)], axis=1)  # [K, D + 4]
        else:
            rows[name] = values
    return {"rows": rows, "codes": codes, "opt_state": {n: opt[n]["opt_state"] for n in layout.tables},
            "dense": [np.asarray(weights[i], np.float32) for i in layout.dense]}


class Policy:
    """The server state one publish policy leads to (module docstring)."""

    def __init__(self, name, layout, kind, priority=None, fraction=None, dense="fp32", full_every=0, seed=0,
                 rows="values"):
        if rows not in row_delta.CODINGS:
            raise ValueError(f"row coding {rows!r}: expected one of {row_delta.CODINGS}")
        self.name, self.layout, self.kind, self.rows_coding = name, layout, kind, rows
        self.dense_spec = dense  # "<fp32|fp16>[@every][/fraction]" (module docstring)
        spec, _, frac = dense.partition("/")
        self.dense_dtype, _, every = spec.partition("@")
        if self.dense_dtype not in DENSE_KINDS or (frac and self.dense_dtype.endswith("_delta")):
            raise ValueError(f"dense variant {dense!r}: expected <{'|'.join(DENSE_KINDS)}>[@every][/fraction] "
                             "(/fraction with fp32|fp16 only)")
        self.dense_every, self.dense_fraction = int(every) if every else 1, float(frac) if frac else None
        self.priority, self.fraction = priority, fraction
        self.full_every, self.seed = full_every, seed
        self.bytes, self.kinds, self.scores, self.dense_bytes = [], [], [], []
        self.row_payload = {"raw": 0, "deflate": 0, "diff_deflate": 0}  # the sent rows' codes (measure only)
        self.preds = {"click": [], "watch": []}

    def config(self):
        return {"kind": self.kind, "priority": self.priority, "fraction": self.fraction, "dense": self.dense_spec,
                "rows": self.rows_coding,
                "dense_every": self.dense_every, "dense_fraction": self.dense_fraction, "full_every": self.full_every}

    def full(self, snap, touches):
        self.rows = {n: r.copy() for n, r in snap["rows"].items()}
        self.opt = {n: s.copy() for n, s in snap["opt_state"].items()}
        self.touch = {n: np.zeros_like(c, dtype=np.float64) for n, c in touches.items()}
        self.dense = [d.copy() for d in snap["dense"]]
        self.codes = {n: c.copy() for n, c in snap.get("codes", {}).items()}
        self.deltas = 0
        return self.layout.full_bytes

    def publish(self, j, snap, touches):
        """Interval j (1-based) ends: publish per the policy; returns the bytes sent."""
        from models.publishing.priority import row_priority, top_rows

        for n, c in touches.items():
            self.touch[n] += c
        if self.kind == "stale":
            kind, sent = "none", 0
        elif self.kind == "full" or (self.full_every and j % self.full_every == 0):
            kind, sent = "full", self.full(snap, touches)
        else:
            kind, sent = "delta", 0
            self.deltas += 1
            for n, t in self.layout.tables.items():
                current = {"opt_state": snap["opt_state"][n], "touch_count": self.touch[n], "rows": snap["rows"][n]}
                held = {"opt_state": self.opt[n], "rows": self.rows[n]}
                idx = top_rows(row_priority(self.priority, current, held, seed=self.seed * 1_000_003 + j), self.fraction)
                if self.rows_coding == "code_delta":
                    sent += self.code_delta_bytes(n, t, snap, idx)
                else:
                    sent += len(idx) * (t["row_bytes"] + t["index_bytes"])
                self.rows[n][idx] = snap["rows"][n][idx]
                self.opt[n][idx] = snap["opt_state"][n][idx]
                self.touch[n][idx] = 0
                self.measure_rows(n, snap, idx)
            if self.dense_every and self.deltas % self.dense_every == 0:
                dense_sent = self.send_dense(snap["dense"])
                sent += dense_sent
                self.dense_bytes.append(int(dense_sent))
        self.bytes.append(int(sent))
        self.kinds.append(kind)
        return sent

    def code_delta_bytes(self, n, t, snap, idx):
        """Bytes of table n's rows idx coded against the held ones (row_delta; before they are replaced)."""
        def parts(codes, rows):
            if codes is None:
                return {"values": rows}
            return {"values": codes[:, :t["dim"]], "scale_bias": np.ascontiguousarray(codes[:, t["dim"]:]).view(np.float16)}

        held = parts(self.codes.get(n), self.rows[n])
        new = parts(snap["codes"].get(n), snap["rows"][n])
        index = np.uint16 if t["index_bytes"] == 2 else np.int32
        return row_delta.deflated_bytes(row_delta.encode(held, new, idx, index))

    def measure_rows(self, n, snap, idx):
        """Would deflate pay on the sent int8 rows (codes + fp16 scale/bias), or on their codes'
        difference from the held ones (mod 256)? Measured only; the bytes stay the formula's."""
        if n not in self.codes or "codes" not in snap:
            return
        new = snap["codes"][n][idx]
        diff = (new[:, :-4].astype(np.int16) - self.codes[n][idx][:, :-4]).astype(np.uint8)
        self.row_payload["raw"] += new.nbytes
        self.row_payload["deflate"] += len(zlib.compress(new.tobytes(), 6))
        self.row_payload["diff_deflate"] += len(zlib.compress(diff.tobytes() + new[:, -4:].tobytes(), 6))
        self.codes[n][idx] = new

    def send_dense(self, current):
        """Dense weights into the delta: all of them, or the top `dense_fraction` elements by
        |current − held| (each with a 4-byte index); fp16 values are served as sent; coded
        ones (int8_delta, int4_delta, fp16_delta) are the held weights + the decoded difference."""
        from models.publishing.priority import top_rows

        if self.dense_dtype in dense_delta.CODINGS:
            sent, held = 0, []
            for h, c in zip(self.dense, current):
                coded = dense_delta.encode(h, c, self.dense_dtype)
                held.append(dense_delta.apply(h, coded))
                sent += len(zlib.compress(coded.q.tobytes(), 6)) + (4 if coded.scale is not None else 0)
            self.dense = held
            return sent

        cast = (lambda a: a.astype(np.float16).astype(np.float32)) if self.dense_dtype == "fp16" else np.copy
        value_bytes = 2 if self.dense_dtype == "fp16" else 4
        if not self.dense_fraction:
            self.dense = [cast(d) for d in current]
            return value_bytes * self.layout.dense_params
        cur = np.concatenate([d.ravel() for d in current])
        held = np.concatenate([d.ravel() for d in self.dense])
        idx = top_rows(np.abs(cur - held), self.dense_fraction)
        held[idx] = cast(cur[idx])
        ends = np.cumsum([d.size for d in current])[:-1]
        self.dense = [h.reshape(d.shape) for h, d in zip(np.split(held, ends), current)]
        return len(idx) * (value_bytes + DENSE_INDEX_BYTES)

    def weights(self, template):
        w = list(template)
        for n, t in self.layout.tables.items():
            w[t["index"]] = self.rows[n]
        for i, d in zip(self.layout.dense, self.dense):
            w[i] = d
        return w


def policy_from_config(name, layout, publish, seed=0):
    """The delta policy PublishConfig `publish` schedules (the Publisher's own choices)."""
    dense = f"{publish.delta_dense}@{publish.dense_every}"
    return Policy(name, layout, "delta", publish.delta_priority, publish.delta_row_fraction, dense,
                  publish.full_every, seed=seed, rows=publish.delta_rows)


def score(click, watch, p):
    from models.evaluation import metrics

    if click.size == 0 or click.min() == click.max():
        return {"ne": float("nan"), "auc": float("nan"), "xauc": float("nan"), "rows": int(click.size)}
    return {"ne": metrics.ne(click, p["click_prob"]), "auc": metrics.auc(click, p["click_prob"]),
            "xauc": metrics.xauc(watch, p["watch_time_s"]), "rows": int(click.size),
            "calibration": metrics.calibration(click, p["click_prob"])}


def make_policies(layout, priorities, fractions, dense_variants, full_every, default=None, seed=0,
                  row_codings=("values",)):
    """full, stale, `default` (policy_from_config(default), when given), then every
    priority × fraction × dense variant × row coding with a full version every full_every
    intervals (the name gets "_<coding>" for a row coding other than "values")."""
    policies = [Policy("full", layout, "full"), Policy("stale", layout, "stale")]
    if default is not None:
        policies.append(policy_from_config("default", layout, default, seed=seed))
    for pr in priorities:
        for f in fractions:
            for d in dense_variants:
                for rc in row_codings:
                    suffix = "" if rc == "values" else f"_{rc}"
                    policies.append(Policy(f"{pr}_{f * 100:g}%_{d}{suffix}", layout, "delta", pr, f, d, full_every,
                                           seed=seed, rows=rc))
    return policies


def summarize(policies, hours, fresh="full", stale="stale"):
    def pooled(p):
        return np.concatenate(p.preds["click"]), np.concatenate(p.preds["watch"])

    ref = {p.name: p for p in policies}
    labels = ref[fresh].labels
    out = {}
    for p in policies:
        c, w = pooled(p)
        out[p.name] = score(labels[0], labels[1], {"click_prob": c, "watch_time_s": w})
    ne_f, ne_s = out[fresh]["ne"], out.get(stale, {}).get("ne", float("nan"))
    rows = []
    for p in policies:
        per = [(s["ne"] - f["ne"]) / f["ne"] for s, f in zip(p.scores, ref[fresh].scores)
               if np.isfinite(s["ne"]) and np.isfinite(f["ne"])]
        pooled_loss = (out[p.name]["ne"] - ne_f) / ne_f
        recovery = (ne_s - out[p.name]["ne"]) / (ne_s - ne_f) if ne_s != ne_f else float("nan")
        raw = p.row_payload["raw"]
        rows.append({"policy": p.name, **p.config(), "bytes_per_hour": sum(p.bytes) / hours,
                     "dense_bytes_per_hour": sum(p.dense_bytes) / hours, "dense_sends": len(p.dense_bytes),
                     "row_codes_deflate_ratio": p.row_payload["deflate"] / raw if raw else None,
                     "row_codes_diff_deflate_ratio": p.row_payload["diff_deflate"] / raw if raw else None,
                     "bytes_total": int(sum(p.bytes)), "fulls": p.kinds.count("full"), "deltas": p.kinds.count("delta"),
                     "delta_bytes_mean": float(np.mean([b for b, k in zip(p.bytes, p.kinds) if k == "delta"]))
                     if "delta" in p.kinds else None,
                     "ne_loss_vs_fresh_mean_pct": 100 * float(np.mean(per)) if per else float("nan"),
                     "ne_loss_vs_fresh_pooled_pct": 100 * pooled_loss, "ne_recovery": recovery,
                     "ne": out[p.name]["ne"], "auc": out[p.name]["auc"], "xauc": out[p.name]["xauc"],
                     "click_calibration": out[p.name]["calibration"], "ne_recovery_defined": bool(ne_s > ne_f)})
    full_rate = rows[0]["bytes_per_hour"]
    for r in rows:
        r["bytes_ratio_vs_full"] = full_rate / r["bytes_per_hour"] if r["bytes_per_hour"] else None
    return rows
