"""The data axis of the scaling benchmark (bench/bench_scaling.py, #36): which data a
fraction f of the training data means.

    logs      (default, BENCH_SCALING_DATA_AXIS=logs) the pipeline sees only a share f of
              the logs: a log row r of a thinned day is kept iff

                  u(r) = splitmix64(splitmix64(splitmix64(user_id) ^ video_id) ^ time_ms) / 2^64 < f

              (a row whose key does not parse: u = blake2b-64 of its text / 2^64), so the
              subsets are nested (f < f' keeps a subset of f''s rows) and deterministic.
              Thinned days: every day but the validation and eval days, whose rows are all
              kept (the impressions scored are the same at every f; their features come
              from the thinned earlier logs, as they would with fewer logs). Side tables
              (user / video features) are linked whole. LogExampleGen + Transform then run
              on BENCH_WORK/logs_f<f>/ (work dir BENCH_WORK/pipeline_f<f>/), so histories,
              running signals and vocabularies see only the kept logs; f = 1 is the
              original logs.
    examples  nested random subsets (prefixes of one permutation) of the train split that
              LogExampleGen + Transform built from ALL the logs: the histories and running
              signals of the kept examples still aggregate the dropped impressions.

A full-data run (f = 1) is the same computation in both modes (the original logs, the
same work dir), so the run cache shares it (cache_axis).
"""
import csv
import glob
import hashlib
import json
import os
import shutil

import numpy as np

from models.evaluation.tfma.sampling import splitmix64
from schemas import kuairand_format

DATA_AXES = {
    "logs": "each data fraction f is a share f of the train-period logs (rows kept by a stable hash of "
            "user_id, video_id, time_ms; nested), LogExampleGen + Transform rerun on them, so the histories "
            "and running signals see only the kept logs; the validation and eval days are kept whole",
    "examples": "each data fraction f is a nested random subset of the train examples LogExampleGen built "
                "from all the logs: their histories and running signals still aggregate every impression",
}
DEFAULT_AXIS = "logs"
HASH_RULE = "splitmix64(splitmix64(splitmix64(user_id) ^ video_id) ^ time_ms) < f * 2^64, v1"
KEY_COLUMNS = ("user_id", "video_id", "time_ms", "date")
_CHUNK = 65536
_BOM = b"\xef\xbb\xbf"


def data_axis_from_env(env) -> str:
    axis = (env.get("BENCH_SCALING_DATA_AXIS") or DEFAULT_AXIS).strip()
    if axis not in DATA_AXES:
        raise ValueError(f"bench-scaling: BENCH_SCALING_DATA_AXIS={axis!r}; one of {sorted(DATA_AXES)}")
    return axis


def cache_axis(record) -> str:
    """The data axis of a run for the run cache: runs cached before the field existed are
    'examples'; at f = 1 both modes train on the same data ('full')."""
    return "full" if record["fraction"] >= 1.0 else record.get("data_axis", "examples")


def fraction_name(f) -> str:
    return f"{f:.6g}"


def row_hash(user_id, video_id, time_ms) -> np.ndarray:
    """u(r) in [0, 1) of the module docstring (non-negative int arrays)."""
    u, v, t = (np.asarray(a, np.int64).astype(np.uint64) for a in (user_id, video_id, time_ms))
    h = splitmix64(splitmix64(splitmix64(u) ^ v) ^ t)
    return (h >> np.uint64(11)).astype(np.float64) / 2.0 ** 53


def _text_hash(text: bytes) -> float:
    return (int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 11) / 2.0 ** 53


def _records(f):
    """The CSV records of a binary file with their line ends (RFC 4180: a record ends at a
    newline outside quotes, as components/log_example_gen/reading.py reads them)."""
    buf, quotes = [], 0
    for line in f:
        buf.append(line)
        quotes += line.count(b'"')
        if quotes % 2 == 0:
            yield b"".join(buf)
            buf, quotes = [], 0
    if buf:
        yield b"".join(buf)


def _fields(text: bytes):
    if b'"' in text:
        return [s.encode("utf-8") for s in next(csv.reader([text.decode("utf-8", "replace")]))]
    return text.split(b",")


def _keys(records, cols):
    """(u, date) of the records: u of the module docstring, date -1 where it does not parse."""
    n = len(records)
    key = np.zeros((n, 3), np.int64)
    date = np.full(n, -1, np.int64)
    parsed = np.zeros(n, bool)
    for i, rec in enumerate(records):
        text = rec.rstrip(b"\r\n")
        try:
            fields = _fields(text)
            values = [int(fields[c]) for c in cols]
        except (ValueError, IndexError, UnicodeDecodeError, StopIteration):
            continue
        if all(0 <= x < 2 ** 63 for x in values[:3]):
            key[i], date[i], parsed[i] = values[:3], values[3], True
    u = np.empty(n)
    u[parsed] = row_hash(key[parsed, 0], key[parsed, 1], key[parsed, 2])
    u[~parsed] = [_text_hash(records[i].rstrip(b"\r\n")) for i in np.flatnonzero(~parsed)]
    return u, date


def _source(logs, pattern):
    return sorted(glob.glob(os.path.join(logs, pattern)))


def _stamp(logs, fraction, keep_days, log_pattern):
    return {"source": os.path.abspath(logs), "fraction": float(fraction), "rule": HASH_RULE,
            "keep_whole_days": sorted(int(d) for d in keep_days),
            "log_files": {os.path.basename(p): [os.path.getsize(p), os.stat(p).st_mtime_ns]
                          for p in _source(logs, log_pattern)}}


def subsample_logs(logs, out_dirs, keep_days, log_pattern=kuairand_format.LOG_FILE_PATTERN,
                   side_patterns=(kuairand_format.USER_FEATURES_PATTERN, kuairand_format.VIDEO_FEATURES_PATTERN)):
    """Writes the logs thinned to each fraction, {fraction: out_dir}, in one pass over the log
    files (module docstring: rows dated in `keep_days` are all kept, the others iff u < f;
    headers and line ends kept byte for byte; side tables linked, or copied where links fail).
    A dir whose stamp (subsample.json: source, fraction, days, rule, file sizes and times) matches is
    left as it is. Returns ({fraction: row counts}, [fractions rewritten])."""
    todo = {}
    stats = {}
    for f, out in out_dirs.items():
        if not 0.0 < f <= 1.0:
            raise ValueError(f"a log fraction is in (0, 1], got {f}")
        stamp = _stamp(logs, f, keep_days, log_pattern)
        path = os.path.join(out, "subsample.json")
        if os.path.exists(path):
            saved = json.load(open(path))
            if {k: saved.get(k) for k in stamp} == stamp:
                stats[f] = saved["rows"]
                continue
        todo[f] = (out, stamp)
    if not todo:
        return stats, []
    files = _source(logs, log_pattern)
    if not files:
        raise ValueError(f"no logs matching {log_pattern} in {logs}")
    keep = np.array(sorted(int(d) for d in keep_days), np.int64)
    counts = {f: {"log_rows": 0, "whole_day_rows": 0, "thinned_day_rows": 0, "thinned_day_rows_kept": 0}
              for f in todo}
    for out, _ in todo.values():
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
    for path in files:
        name = os.path.basename(path)
        outs = {f: open(os.path.join(out, name + ".tmp"), "wb") for f, (out, _) in todo.items()}
        try:
            with open(path, "rb") as src:
                records = _records(src)
                header = next(records, b"")
                text = (header[len(_BOM):] if header.startswith(_BOM) else header).rstrip(b"\r\n")
                names = [c.strip().strip('"') for c in text.decode("utf-8").split(",")]
                missing = [c for c in KEY_COLUMNS if c not in names]
                if header and missing:
                    raise ValueError(f"{path}: the header lacks the columns {missing}")
                cols = [names.index(c) for c in KEY_COLUMNS] if header else []
                for o in outs.values():
                    o.write(header)
                chunk = []
                for rec in records:
                    chunk.append(rec)
                    if len(chunk) == _CHUNK:
                        _write_chunk(chunk, cols, keep, outs, counts)
                        chunk = []
                if chunk:
                    _write_chunk(chunk, cols, keep, outs, counts)
        finally:
            for o in outs.values():
                o.close()
        for f, (out, _) in todo.items():
            os.replace(os.path.join(out, name + ".tmp"), os.path.join(out, name))
    for f, (out, stamp) in todo.items():
        for pattern in side_patterns:
            for side in _source(logs, pattern):
                target = os.path.join(out, os.path.basename(side))
                try:
                    os.symlink(os.path.abspath(side), target)
                except OSError:
                    shutil.copy2(side, target)
        with open(os.path.join(out, "subsample.json.tmp"), "w") as fh:
            json.dump(dict(stamp, rows=counts[f]), fh, indent=1)
        os.replace(os.path.join(out, "subsample.json.tmp"), os.path.join(out, "subsample.json"))
        stats[f] = counts[f]
    return stats, sorted(todo)


def _write_chunk(chunk, cols, keep_days, outs, counts):
    rows = [r for r in chunk if r.strip()]  # blank records are not rows (reading.py): not written
    u, date = _keys(rows, cols)
    whole = np.isin(date, keep_days)
    for f, o in outs.items():
        kept = whole | (u < f)
        o.write(b"".join(r for r, k in zip(rows, kept) if k))
        c = counts[f]
        c["log_rows"] += len(rows)
        c["whole_day_rows"] += int(whole.sum())
        c["thinned_day_rows"] += int((~whole).sum())
        c["thinned_day_rows_kept"] += int((kept & ~whole).sum())


def validation_order(reference, keys):
    """Row indices of a fraction's validation split in the reference (full-logs) order:
    keys / reference = {"user", "video", "time_ms", "click", "watch"} arrays; ValueError if
    the two splits do not hold the same impressions."""
    cols = ("watch", "click", "time_ms", "video", "user")
    ref_order = np.lexsort([np.asarray(reference[c]).reshape(-1) for c in cols])
    order = np.lexsort([np.asarray(keys[c]).reshape(-1) for c in cols])
    same = ref_order.size == order.size and all(
        np.array_equal(np.asarray(reference[c]).reshape(-1)[ref_order], np.asarray(keys[c]).reshape(-1)[order])
        for c in cols)
    if not same:
        raise ValueError(f"bench-scaling: the validation split of the thinned logs ({order.size} impressions) is "
                         f"not the full logs' ({ref_order.size}): the validation day must be kept whole")
    index = np.empty_like(order)
    index[ref_order] = order
    return index


def load_data(logs, work, train_days, eval_days):
    """Transformed train / validation splits (bench/ranker_data.py) of the logs, the impression
    order of the examples axis, the vocabulary sizes, info and the validation keys."""
    import tensorflow_transform as tft

    from bench.bench_rankers import ROOT
    from bench.ranker_data import load_split, make_transform, run_example_gen_and_transform
    from models.training.input import vocab_sizes
    from pipeline import configs

    examples_dir, transform_dir = run_example_gen_and_transform(logs, work, train_days, eval_days)
    tft_output = tft.TFTransformOutput(transform_dir)
    transform = make_transform(tft_output)
    (tx, ty, tmeta, _), (vx, vy, vmeta, _) = (load_split(examples_dir, s, transform, configs.HISTORY_LENGTH)
                                              for s in ("train", "validation"))
    perm = np.random.default_rng(0).permutation(ty["click_prob"].size)  # nested subsets: prefixes of one order
    info = {"train_days": sorted({int(d) for d in tmeta["date"]}), "validation_days": sorted({int(d) for d in vmeta["date"]}),
            "eval_days": eval_days, "train_examples": int(perm.size), "validation_examples": int(vy["click_prob"].size),
            "logs": os.path.relpath(os.path.abspath(logs), ROOT)}
    keys = {"user": vmeta["user"], "video": vmeta["video_id"], "time_ms": vmeta["time_ms"],
            "click": vy["click_prob"], "watch": vy["watch_time_s"]}
    return ((tx, ty), (vx, vy), perm), vocab_sizes(tft_output), info, keys


class FractionData:
    """The training data of each data fraction, one fraction's splits in memory at a time:
    ``data(f)`` -> (((train_x, train_y), (val_x, val_y)), training rows, vocabulary sizes).
    The validation split is the full logs' at every f (logs axis: reordered to it)."""

    def __init__(self, axis, logs, work, train_days, eval_days, fractions):
        self.axis, self.logs, self.work, self.days = axis, logs, work, (train_days, eval_days)
        self.fractions = sorted(f for f in fractions if f < 1.0)
        self.fraction_info = {}
        full = load_data(logs, work, train_days, eval_days)
        self.info, self.keys = full[2], full[3]
        self.val_labels = full[0][1][1]["click_prob"].reshape(-1).astype(np.float64)
        self.current = (1.0, full)
        if axis == "logs" and self.fractions:  # the thinned logs of every fraction (one pass, ~0.5 s here)
            self._thin(self.fractions)

    def _dir(self, f, kind):
        return os.path.join(self.work, f"{kind}_f{fraction_name(f)}")

    def _thin(self, fractions):
        keep_days = set(self.info["validation_days"]) | set(self.days[1])
        stats, rewritten = subsample_logs(self.logs, {f: self._dir(f, "logs") for f in fractions}, keep_days)
        for f in rewritten:  # new logs under the same path: the pipeline outputs of the old ones are stale
            stale = os.path.join(self._dir(f, "pipeline"), "bench_days.json")
            if os.path.exists(stale):
                os.remove(stale)
        for f in fractions:
            self.fraction_info.setdefault(fraction_name(f), {}).update(
                stats[f], logs=f"BENCH_WORK/logs_f{fraction_name(f)}")

    def _load(self, f):
        if f >= 1.0:
            return load_data(self.logs, self.work, *self.days)
        self._thin([f])  # rewrites nothing unless the logs changed since __init__
        (train, (vx, vy), perm), sizes, info, keys = load_data(self._dir(f, "logs"), self._dir(f, "pipeline"),
                                                              *self.days)
        index = validation_order(self.keys, keys)
        val = ({k: v[index] for k, v in vx.items()}, {k: v[index] for k, v in vy.items()})
        self.fraction_info[fraction_name(f)]["train_examples"] = info["train_examples"]
        return (train, val, perm), sizes, info, keys

    def __call__(self, f):
        want = f if self.axis == "logs" else 1.0
        if self.current is None or self.current[0] != want:
            self.current = None  # one fraction in memory: free the last before loading
            self.current = (want, self._load(want))
        (train, val, perm), sizes, _, _ = self.current[1]
        n = train[1]["click_prob"].shape[0]
        rows = np.arange(n) if self.axis == "logs" else np.sort(perm[:max(1, int(round(f * n)))])
        return (train, val), rows, sizes
