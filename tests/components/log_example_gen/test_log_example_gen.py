"""LogExampleGen runs: dead letters, examples and histories (Beam, in-process), the
component under LocalDagRunner, and a smoke run on real KuaiRand-Pure rows."""
import glob
import json
import os

import pytest
from apache_beam.metrics.metric import MetricsFilter

from components.log_example_gen import beam_pipeline as bp
from models import features as F
from tests.components.log_example_gen.fixture_logs import (BAD, BEAM_ARGS, D1, D2, D3, DAY_S, GOOD, at, by_key,
                                                           key_of,
                                                           make_config, read_examples, run_component,
                                                           write_inputs)
from tests.conftest import KUAIRAND_DIR


# ---------------------------------------------------------------- Beam run on fixtures

@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("leg"))
    where = write_inputs(os.path.join(tmp, "input"))
    examples, dead_letter, pipeline = run_component(
        tmp, os.path.join(tmp, "input"), history_length=3, history_min_watch_s=0.0, train_days=f"{D2}",
        eval_days=f"{D3}", validation_last_n_days=0, max_bad_row_fraction=1.0)
    return dict(tmp=tmp, where=where, examples=examples, dead_letter=dead_letter,
                pipeline=pipeline, counts=bp.read_counts(dead_letter.uri))


def test_dead_letter_counts_and_counters_agree(fixture_run):
    counts, dl_uri = fixture_run["counts"], fixture_run["dead_letter"].uri
    rows = []
    for path in glob.glob(os.path.join(dl_uri, "bad_rows-*.jsonl")):
        rows += [json.loads(line) for line in open(path) if line.strip()]
    log_rows = [r for r in rows if r["table"] == "log"]
    assert sorted((r["reason"], r["raw"]) for r in log_rows) == sorted(BAD)
    for r in log_rows:  # source file and line number point at the raw line
        assert (r["source"], r["line"]) == fixture_run["where"][r["raw"]]
    side = [r for r in rows if r["table"] != "log"]
    assert [(r["table"], r["reason"], r["line"]) for r in side] == [("video", "non_numeric:video_id", 5)]

    expected_by_reason = {}
    for reason, _ in BAD:
        expected_by_reason[reason] = expected_by_reason.get(reason, 0) + 1
    assert counts["bad_rows_by_reason"] == expected_by_reason
    assert counts["bad_rows_by_kind"] == {"malformed_row": 2, "missing_field": 1, "non_numeric": 1,
                                          "negative": 3, "unknown_user_id": 1,
                                          "unknown_video_id": 1, "invalid_date": 1}
    assert counts["good_rows"] == len(GOOD) and counts["bad_rows"] == len(BAD)
    assert counts["total_rows"] == counts["good_rows"] + counts["bad_rows"] == 17
    assert counts["bad_row_fraction"] == pytest.approx(10 / 17)
    assert counts["splits"] == {"train": 3, "validation": 0, "eval": 3} and counts["history_only_rows"] == 1
    assert counts["split_dates"] == {"train": [D2], "validation": [], "eval": [D3], "history_only": [D1]}
    assert counts["bad_side_table_rows"] == {"video:non_numeric:video_id": 1}

    result = fixture_run["pipeline"].result
    counters = {m.key.metric.name: m.committed for m in result.metrics().query(
        MetricsFilter().with_namespace(bp.METRICS_NAMESPACE))["counters"]}
    assert counters["good_rows"] == 7 and counters["bad_rows"] == 10
    for kind, n in counts["bad_rows_by_kind"].items():
        assert counters[f"bad_rows_{kind}"] == n
    assert counters["examples_train"] == 3 and counters["examples_eval"] == 3
    assert counters["history_only_rows"] == 1 and counters["bad_video_rows"] == 1

    dl = fixture_run["dead_letter"]
    assert dl.get_int_custom_property("bad_rows") == 10
    assert dl.get_int_custom_property("good_rows") == 7


def test_examples_written_with_features_and_leakage_free_histories(fixture_run):
    from tfx.types import artifact_utils

    examples = fixture_run["examples"]
    assert artifact_utils.decode_split_names(examples.split_names) == ["train", "validation", "eval"]
    train = by_key(read_examples(bp.split_uri(examples.uri, "train"), 3))
    evals = by_key(read_examples(bp.split_uri(examples.uri, "eval"), 3))
    # nothing lost: every good row is train, eval or history-only (a)
    assert set(train) == {key_of(n) for n in "bce"}
    assert set(evals) == {key_of(n) for n in "dfg"}

    b, c, d = train[key_of("b")], train[key_of("c")], evals[key_of("d")]
    # b and c share a timestamp: each sees only a (a history-only day still feeds
    # histories; the bad rows at t=1500/1800 never do).
    for ex in (b, c):
        assert ex["hist_video_id"] == [10, -1, -1] and ex["hist_author_id"] == [100, -1, -1]
        assert ex["hist_is_click"] == [1, 0, 0] and ex["hist_len"] == 1
        assert ex["hist_watch_time_s"] == pytest.approx([8.0, 0, 0])
        assert ex["hist_time_gap_s"] == pytest.approx([DAY_S + 1.0, 0, 0])
    # d: most recent first (c after b in the file), gaps from d's own time
    assert d["hist_video_id"] == [12, 11, 10] and d["hist_author_id"] == [102, 101, 100]
    assert d["hist_is_click"] == [1, 0, 1] and d["hist_len"] == 3
    assert d["hist_watch_time_s"] == pytest.approx([3.0, 0.5, 8.0])
    assert d["hist_time_gap_s"] == pytest.approx([DAY_S + 3.0, DAY_S + 3.0, 2 * DAY_S + 4.0])
    # user 2's and 3's first impressions: empty histories
    assert train[key_of("e")]["hist_len"] == 0 and evals[key_of("g")]["hist_len"] == 0
    assert evals[key_of("f")]["hist_video_id"] == [10, -1, -1]

    # derived and joined features
    assert d["hour"] == 23 and d["duration_s"] == pytest.approx(87.433)  # log 0 -> video table
    assert d["video_age_days"] == 17.0 and d["watch_time_s"] == pytest.approx(12.0)
    assert d["is_like"] == 1 and d["date"] == D3 and d["time_ms"] == at(D3, 5000)
    assert d["tag_id"] == 20 and d["music_id"] == 555 and d["author_id"] == 100
    assert d["user_active_degree"] == b"full_active" and d["onehot_feat4"] == 1
    assert d["is_live_streamer"] == -124.0 and d["fans_user_num"] == 150.0
    assert b["duration_s"] == 0.0 and b["tag_id"] == -1 and b["video_type"] == b"AD"
    assert b["video_age_days"] == 0.0  # uploaded after the log date: clipped
    assert c["video_age_days"] == 0.0 and c["duration_s"] == 10.0  # no upload date
    assert train[key_of("e")]["onehot_feat4"] == F.MISSING_ID and b["is_click"] == 0
    assert evals[key_of("g")]["long_view"] == 1


def test_bad_fraction_above_bound_fails_with_clear_message(tmp_path):
    write_inputs(str(tmp_path / "input"))
    with pytest.raises(bp.BadRowFractionError) as err:
        run_component(str(tmp_path), str(tmp_path / "input"), history_length=3,
                      train_days=f"{D2}", eval_days=f"{D3}", validation_last_n_days=0,
                      max_bad_row_fraction=0.5)
    msg = str(err.value)
    assert "10 of 17" in msg and "0.5882" in msg and "max_bad_row_fraction 0.5" in msg
    assert str(tmp_path / "dead_letter") in msg


def test_empty_split_fails_naming_the_dates(tmp_path):
    write_inputs(str(tmp_path / "input"), with_bad=False)
    with pytest.raises(ValueError, match=r"split\(s\) \['eval'\] are empty.*eval_days=\[20220430\]"):
        run_component(str(tmp_path), str(tmp_path / "input"), history_length=3, train_days=f"{D2}",
                      eval_days="20220430", validation_last_n_days=0)


# ---------------------------------------------------------------- TFX LocalDagRunner

@pytest.mark.e2e
def test_component_under_local_dag_runner(tmp_path):
    from ml_metadata.proto import metadata_store_pb2  # noqa: F401
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.pipeline import Pipeline
    from tfx.orchestration.metadata import sqlite_metadata_connection_config
    from tfx.orchestration import metadata
    from tfx.types import artifact_utils

    from components.log_example_gen.component import LogExampleGen

    input_base = str(tmp_path / "input")
    write_inputs(input_base, with_bad=False)
    db = str(tmp_path / "metadata.db")
    # no days configured: eval = the last day, validation = the last train day
    gen = LogExampleGen(input_base=input_base, config=make_config(
        history_length=4, history_min_watch_s=1.0, train_days=(), eval_days=(), eval_last_n_days=1,
        validation_last_n_days=1))
    pipe = Pipeline(
        pipeline_name="leg_test", pipeline_root=str(tmp_path / "root"), components=[gen],
        metadata_connection_config=sqlite_metadata_connection_config(db),
        beam_pipeline_args=BEAM_ARGS)
    LocalDagRunner().run(pipe)

    from components.log_example_gen.artifacts import DeadLetterRows

    with metadata.Metadata(sqlite_metadata_connection_config(db)) as m:
        [art] = m.store.get_artifacts_by_type("Examples")
        [dl] = m.store.get_artifacts_by_type(DeadLetterRows.TYPE_NAME)
    assert artifact_utils.decode_split_names(art.properties["split_names"].string_value) == [
        "train", "validation", "eval"]
    assert dl.custom_properties["bad_rows"].int_value == 0
    # the driver's span (no {SPAN} spec: 0, as in TFX) and fingerprint of the 4 input files
    assert art.custom_properties["span"].int_value == 0 and art.properties["span"].int_value == 0
    fingerprint = art.custom_properties["input_fingerprint"].string_value
    assert fingerprint.startswith("log:num_files:2,") and "user_features:num_files:1," in fingerprint
    train = by_key(read_examples(os.path.join(art.uri, "Split-train"), 4))
    validation = by_key(read_examples(os.path.join(art.uri, "Split-validation"), 4))
    evals = by_key(read_examples(os.path.join(art.uri, "Split-eval"), 4))
    assert set(train) == {key_of("a")} and set(validation) == {key_of(n) for n in "bce"}
    assert set(evals) == {key_of(n) for n in "dfg"}
    # the split counts as a file in the artifact, equal to its properties and to the files (the Trainer's)
    from models.training.split_counts import split_rows

    for split, rows in (("train", train), ("validation", validation), ("eval", evals)):
        assert art.custom_properties[f"num_{split}_examples"].int_value == len(rows)
        assert split_rows([os.path.join(art.uri, f"Split-{split}", "*")]) == len(rows)
    # min watch 1 s: b (0.5 s) is left out of d's history
    d = evals[key_of("d")]
    assert d["hist_video_id"] == [12, 10, -1, -1] and d["hist_len"] == 2
    assert d["hist_time_gap_s"] == pytest.approx([DAY_S + 3.0, 2 * DAY_S + 4.0, 0, 0])


# ---------------------------------------------------------------- real data smoke

@pytest.mark.skipif(not os.path.isdir(KUAIRAND_DIR),
                    reason=f"KuaiRand-Pure data not found at {KUAIRAND_DIR}")
def test_real_kuairand_subset(tmp_path):
    input_base = tmp_path / "input"
    input_base.mkdir()
    n_rows = 0
    for path in glob.glob(os.path.join(KUAIRAND_DIR, "log_*.csv")):
        with open(path) as src, open(input_base / os.path.basename(path), "w") as dst:
            for i, line in enumerate(src):
                if i >= 3000:
                    break
                dst.write(line)
                n_rows += i > 0
    for pattern in ("user_features*.csv", "video_features_basic*.csv"):
        for path in glob.glob(os.path.join(KUAIRAND_DIR, pattern)):
            os.symlink(path, input_base / os.path.basename(path))

    # the first 3000 lines of each file cover two dates 6 days apart (20220425, 20220501):
    # train and eval, no validation day; the inferred date window must span the gap
    L = 50
    examples, dead_letter, _ = run_component(str(tmp_path), str(input_base), history_length=L,
                                             train_days=(), eval_days=(), eval_last_n_days=1,
                                             validation_last_n_days=0, max_date_gap_days=6)
    counts = bp.read_counts(dead_letter.uri)
    assert counts["bad_rows"] == 0 and counts["total_rows"] == counts["rows_read"] == n_rows
    # the release repeats rows exactly: dropped and counted by the duplicate rule
    assert counts["dropped_rows_by_rule"] == {"duplicate_row": n_rows - counts["good_rows"]}
    assert 0 < counts["dropped_rows"] < 0.05 * n_rows
    assert counts["splits"]["train"] + counts["splits"]["eval"] == counts["good_rows"]
    exs = (read_examples(bp.split_uri(examples.uri, "train"), L)
           + read_examples(bp.split_uri(examples.uri, "eval"), L))
    assert len(exs) == counts["good_rows"]
    assert any(e["hist_len"] > 0 for e in exs)
    for e in exs:
        k = e["hist_len"]
        assert all(g > 0 for g in e["hist_time_gap_s"][:k])
        assert e["hist_video_id"][k:] == [F.HISTORY_PAD_ID] * (L - k)
        assert e["duration_s"] >= 0 and e["watch_time_s"] >= 0
