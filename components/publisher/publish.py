"""One publish: rewrite the trained model, verify it, warm it up, publish it atomically.

Full or delta (issue #14, components/publisher/freshness.py): with full_every > 1 a
publish between full versions sends a delta of the top rows and assembles the next
version from it: the cheapest rung of the adaptive budget (delta_budget.py: finer dense
codings, then more rows) whose assembled weights pass the gates in memory (`candidate_check`,
`delta_rungs` in the report), then the ASSEMBLED SavedModel passes the same gates; when no
rung or the SavedModel does not, the blessed model is published as a full version
instead, `delta_refused` says why; the report says
`kind` ("full" | "delta"), `kind_reason`, `bytes` (the version dir, or the delta) and,
for a delta, rows sent per table (`delta_tables`).

    trained SavedModel ──load──▶ Keras ranker ──publish_tables──▶ pruned/int8 tables
        ──export_serving_model──▶ <base>/.publishing-<v>-<pid>/ (+ assets.extra warmup)
        ──verify (NE/AUC/XAUC gates, golden requests)──▶ rename to <base>/<v>, keep K

A failing gate raises PublishRefused inside the assembly, so the temp dir is removed
and nothing numeric appears: the previous version keeps serving. `publish()` returns
the publish report (also on refusal, with `decision` "refused" and the reason).
Usable without TFX (the component, the benchmark and the tests call it).
"""
import json
import os
import time
from typing import Dict, List, Optional

import numpy as np
import tensorflow as tf

from components.publisher import delta_budget, freshness, verification, versioning, warmup
from models import features as F
from models.publishing import rewrite
from models.publishing.config import PublishConfig
from models.publishing.row_importance import read_row_importance
from models.training import warm_start
from models.training.export import export_serving_model


class PublishRefused(RuntimeError):
    """A verification gate failed; the message says which, with the figures."""


def build_published_model(trained_model_dir: str, importance, config: PublishConfig, tf_transform_output,
                          out_dir: str, plans=None, fixed_plans: bool = False, model=None) -> dict:
    """Rewrites the trained ranker (models/publishing/rewrite.py) and exports it with the
    trainer's signatures to `out_dir`; returns the per-table report and L. `plans`,
    `fixed_plans`: rewrite.publish_tables's (computed plans out; a delta's fixed plans in).
    `model`: the trained ranker already loaded from `trained_model_dir` and not rewritten
    (the sweep's, its tables restored), used up by this call; default: loaded here."""
    model = model if model is not None else rewrite.load_trained_model(trained_model_dir)
    tables = rewrite.publish_tables(model, importance, config, plans=plans, fixed_plans=fixed_plans)
    length = rewrite.history_length(model)
    export_serving_model(model, tf_transform_output, length, out_dir)
    return {"tables": tables, "history_length": length}


def run_sweep(model, importance, config: PublishConfig, tf_transform_output, serialized: List[bytes]) -> list:
    """NE loss against pruned fraction per criterion (models/publishing/sweep.py) of the
    trained Keras ranker `model` (rewrite.load_trained_model) on the rows `serialized`."""
    from models.publishing import sweep

    x = sweep.transformed_eval(tf_transform_output, serialized, rewrite.history_length(model), model.input_names)
    y = verification.labels(serialized)
    wanted = list(config.sweep_criteria) + ([config.criterion] if config.prune_auto else [])
    criteria = [c for c in dict.fromkeys(wanted) if c == "l2_norm" or importance is not None]
    return sweep.prune_sweep(model, importance, config, x, y[F.LABEL_CLICK], y[F.LABEL_WATCH],
                             config.sweep_fractions, criteria)


def eval_check(model, importance, config: PublishConfig, tf_transform_output, serialized: List[bytes],
               fractions: List[float], trained_pred: Dict[str, np.ndarray]) -> list:
    """The candidates' in-memory rewrites scored on the eval split (the verification rows),
    in order, up to the first that passes the gates: sweep rows for config.criterion, against
    `trained_pred` (the trained SavedModel's scores of those rows, which verification compares
    a SavedModel against; the Keras ranker's are the same up to float rounding: click_prob
    equal, watch_time_s within 3e-5 s on 20k rows of a 1M-row log). A
    candidate refused here would be refused as a SavedModel too (same rewrite, same rows),
    so the Publisher builds no SavedModel for it (each build + load + verify costs ~45 s).
    The rows are transformed batch by batch at each pass (sweep.TransformedRows), not held."""
    from models.publishing import sweep

    x = sweep.TransformedRows(tf_transform_output, serialized, rewrite.history_length(model), model.input_names)
    y = verification.labels(serialized)
    return sweep.prune_sweep(
        model, importance, config, x, y[F.LABEL_CLICK], y[F.LABEL_WATCH], fractions, [config.criterion],
        stop=lambda row: not verification.gate_failures(row, config.max_ne_loss, config.max_auc_drop,
                                                        config.max_xauc_drop), base=trained_pred)


def candidate_fractions(config: PublishConfig, sweep_rows: list) -> List[Optional[float]]:
    """prune_auto's candidates, best first: the swept fractions ≤ config.prune_fraction
    whose in-memory check passes the gates for config.criterion and config.allocation,
    largest first, then None (no pruning: int8 only). The Publisher checks them in memory
    on the eval split (eval_check), verifies the first that passes as a SavedModel and
    falls back to the next when its verification refuses it."""
    ok = {r["fraction"] for r in sweep_rows
          if r["criterion"] == config.criterion and r.get("allocation", config.allocation) == config.allocation
          and 0 < r["fraction"] <= config.prune_fraction
          and not verification.gate_failures(r, config.max_ne_loss, config.max_auc_drop, config.max_xauc_drop)}
    return sorted(ok, reverse=True) + [None]


def choose_fraction(config: PublishConfig, sweep_rows: list) -> PublishConfig:
    """The first of candidate_fractions (no pruning when no swept fraction passes)."""
    return config.replace(prune_fraction=candidate_fractions(config, sweep_rows)[0])


def candidate_check(y: dict, serialized: List[bytes], trained_metrics: dict, trained_pred: dict):
    """check(saved_model_dir, weights) -> NE loss / AUC drop / XAUC drop of `weights` (a
    checkpoint {key: array} of that SavedModel's layout, e.g. an assembled N + delta) against
    the trained model on the verification rows: the SavedModel is loaded once and the
    weights restored into it in memory (no SavedModel is built; delta_budget.py)."""
    loaded = {}

    def check(saved_model_dir: str, weights: dict) -> dict:
        import tempfile

        from serving.patcher import write_checkpoint

        if loaded.get("dir") != saved_model_dir:
            loaded.clear()
            loaded.update(dir=saved_model_dir, model=tf.saved_model.load(saved_model_dir))
        with tempfile.TemporaryDirectory() as tmp:
            prefix = os.path.join(tmp, "variables")
            write_checkpoint(prefix, weights)
            tf.train.Checkpoint(root=loaded["model"]).read(prefix).assert_existing_objects_matched()
        pred = verification.score(loaded["model"].signatures, serialized)
        return verification.compare(trained_metrics, verification.model_metrics(y, pred), y, trained_pred, pred)

    return check


def golden_instances(serialized: List[bytes], n: int) -> List[dict]:
    from models import features as F
    from serving.client import examples_to_instances

    return examples_to_instances(serialized[:n], F.SERVING_RAW_FEATURES)


def publish(trained_model_dir: str, model_artifact_dir: str, transform_graph_dir: str, eval_files: List[str],
            serving_base: str, model_name: str, config: PublishConfig, version: Optional[int] = None,
            before_rename=None, tune_files: Optional[List[str]] = None) -> dict:
    """Publishes one version (module docstring); returns the publish report. `tune_files`
    (the validation split): the sweep and prune_auto's choice run on them (default: the
    eval files, which also verify: then the choice is tuned on the verification rows)."""
    import tensorflow_transform as tft

    started = time.time()
    importance = read_row_importance(model_artifact_dir)
    if config.prunes and config.criterion != "l2_norm" and importance is None:
        raise ValueError(f"no row importance under {model_artifact_dir}: the Trainer's run_fn writes it "
                         f"(models/publishing/row_importance.py); use criterion 'l2_norm' for older models")
    tf_transform_output = tft.TFTransformOutput(transform_graph_dir)
    serialized = verification.read_examples(eval_files, config.verify_max_examples)
    if not serialized:
        raise ValueError(f"no eval examples in {eval_files}: cannot verify the published model")
    y = verification.labels(serialized)
    trained = tf.saved_model.load(trained_model_dir)
    trained_pred = verification.score(trained.signatures, serialized)
    trained_metrics = verification.model_metrics(y, trained_pred)
    report = {"config": config.to_json_dict(), "trained_model": trained_model_dir, "serving_base": serving_base,
              "eval_examples": len(serialized), "trained": trained_metrics,
              "trained_variables_bytes": rewrite.variables_bytes(trained_model_dir)}

    def verify(path: str) -> None:
        """The published (or assembled) model at `path` against the trained one."""
        published = tf.saved_model.load(path)
        published_pred = verification.score(published.signatures, serialized)
        report["published"] = verification.model_metrics(y, published_pred)
        report["deltas"] = verification.compare(trained_metrics, report["published"], y, trained_pred, published_pred)
        report.update(verification.golden_replay(trained.signatures, published.signatures,
                                                 golden_instances(serialized, config.golden_requests)))
        failures = verification.gate_failures(report["deltas"], config.max_ne_loss, config.max_auc_drop,
                                              config.max_xauc_drop, config.auc_drop_z)
        if failures:
            raise PublishRefused("; ".join(failures))

    transform_fp = freshness.transform_fingerprint(transform_graph_dir)
    kind, why, state = freshness.choose(serving_base, config, transform_fp, warm_start.lineage(model_artifact_dir))
    if kind == "delta":
        try:
            report.update(freshness.publish_delta(
                serving_base, state, config, importance, version=version, before_rename=before_rename, verify=verify,
                source_model=model_artifact_dir, check=candidate_check(y, serialized, trained_metrics, trained_pred),
                build=lambda out, plans: build_published_model(trained_model_dir, importance, config,
                                                               tf_transform_output, out, plans=plans,
                                                               fixed_plans=True)))
            report.update(rewrite.tables_summary(report["tables"]) if report.get("tables") else {})
            report.update(kind_reason=why, decision="published", reason="every gate passed (assembled version)")
        except PublishRefused as e:  # the assembled N + delta is too far from the trained model: send it whole
            report["delta_refused"] = str(e)
            kind, why = "full", f"the assembled delta was refused ({e})"
        except delta_budget.NoRungPasses as e:  # no affordable delta carries this training: send it whole
            report.update(delta_refused=str(e), delta_rungs=e.rungs)
            kind, why = "full", str(e)
        except freshness.FallBackToFull as e:
            kind, why = "full", f"delta not possible: {e}"
        if kind == "delta":
            report["served_versions"] = versioning.list_versions(serving_base)
            report["seconds"] = round(time.time() - started, 1)
            return report
    report.update(kind="full", kind_reason=why)
    original_config, plans = config, {}
    candidates = [config]  # prune_auto: one config per candidate fraction, tried in order

    report["prune_fallbacks"] = []
    loaded = {}  # the sweep's Keras ranker, for the first candidate's SavedModel (a fallback loads afresh)
    if config.sweep_fractions:  # NE loss against pruned fraction; with prune_auto it picks the fraction
        tune = (verification.read_examples(tune_files, config.sweep_max_examples or None) if tune_files
                else serialized[:config.sweep_max_examples or None])
        report["sweep_split"] = "tune split" if tune_files else "eval split"
        model = rewrite.load_trained_model(trained_model_dir)  # once, for the sweep and the eval check
        report["sweep"] = run_sweep(model, importance, config, tf_transform_output, tune)
        if config.prune_auto and config.prunes and config.prune_fraction:
            candidates = [config.replace(prune_fraction=f) for f in candidate_fractions(config, report["sweep"])]
            pruned = [c.prune_fraction for c in candidates if c.prune_fraction]
            if pruned:  # skip the candidates the verification rows refuse in memory (eval_check)
                report["eval_check"] = eval_check(model, importance, config, tf_transform_output, serialized, pruned,
                                                  trained_pred)
                for row in report["eval_check"]:
                    failures = verification.gate_failures(row, config.max_ne_loss, config.max_auc_drop,
                                                          config.max_xauc_drop)
                    if failures:
                        report["prune_fallbacks"].append({"fraction": row["fraction"], "check": "in memory",
                                                          "reason": "; ".join(failures)})
                candidates = candidates[len(report["prune_fallbacks"]):]
        loaded["model"] = model  # its tables restored: the first SavedModel is built from it (no second load)
        del model

    def assemble(temp_dir: str) -> None:
        plans.clear()
        built = build_published_model(trained_model_dir, importance, config, tf_transform_output, temp_dir,
                                      plans=plans, model=loaded.pop("model", None))
        report["tables"] = built["tables"]
        report.update(rewrite.tables_summary(built["tables"]))
        report["published_variables_bytes"] = rewrite.variables_bytes(temp_dir)
        verify(temp_dir)
        report["warmup_records"] = warmup.write_warmup(
            temp_dir, serialized, built["history_length"], model_name, config.warmup_records,
            config.warmup_rows_per_request)

    # A refused candidate falls back to the next (a smaller fraction, finally int8 only):
    # the in-memory sweep ran on the tune split, the SavedModel is verified on the eval split
    # (eval_check already skipped the candidates whose in-memory rewrite fails there).
    for i, config in enumerate(candidates):
        if original_config.prune_auto and original_config.prunes:
            report["prune_fraction_chosen"] = config.prune_fraction or 0.0
        try:
            result = versioning.publish_version(serving_base, assemble, keep=config.keep_versions,
                                                version=version, before_rename=before_rename)
        except PublishRefused as e:
            if i + 1 < len(candidates):
                report["prune_fallbacks"].append({"fraction": config.prune_fraction or 0.0, "check": "SavedModel",
                                                  "reason": str(e)})
                continue
            report.update(decision="refused", reason=str(e), version=None, path=None)
            break
        refused = len(report["prune_fallbacks"])
        reason = "every gate passed" + (f" (after {refused} refused larger prune fraction(s): prune_fallbacks)"
                                        if refused else "")
        report.update(decision="published", reason=reason, version=result["version"],
                      path=result["path"], removed_versions=result["removed_versions"],
                      stale_temps_removed=result["stale_temps_removed"], bytes=freshness.tree_bytes(result["path"]))
        report["removed_deltas"] = freshness.prune_deltas(serving_base)
        if original_config.full_every > 1:
            freshness.record_full(serving_base, original_config, importance, plans, result["version"],
                                  result["path"], transform_fp,
                                  {"version": result["version"], "kind": "full", "bytes": report["bytes"]},
                                  source_model=model_artifact_dir)
        break
    report["served_versions"] = versioning.list_versions(serving_base)
    report["seconds"] = round(time.time() - started, 1)
    return report


def write_report(report: dict, path: str) -> None:
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        json.dump(report, f, indent=1, default=float)
