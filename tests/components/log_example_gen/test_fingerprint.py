"""Span and input fingerprint (inputs.py, driver.py): what identifies a run's input
files, and that caching reuses examples only while the files are unchanged."""
import os
import shutil

import pytest

from components.log_example_gen import inputs as I
from tests.components.log_example_gen.fixture_logs import BEAM_ARGS, make_config, read_examples, write_inputs


def _touch(path, mtime_s):
    os.utime(path, (mtime_s, mtime_s))


def _resolve(folder, **knobs):
    return I.resolve_inputs(str(folder), make_config(**knobs))


@pytest.fixture
def logs(tmp_path):
    folder = tmp_path / "logs"
    write_inputs(str(folder), with_bad=False)
    for name in os.listdir(folder):
        _touch(folder / name, 1_650_000_000)
    return folder


def test_property_names_are_tfx_example_gens():
    from tfx.components.example_gen import utils as example_gen_utils

    assert (I.SPAN_PROPERTY_NAME, I.VERSION_PROPERTY_NAME, I.FINGERPRINT_PROPERTY_NAME) == (
        example_gen_utils.SPAN_PROPERTY_NAME, example_gen_utils.VERSION_PROPERTY_NAME,
        example_gen_utils.FINGERPRINT_PROPERTY_NAME)


def test_fingerprint_names_every_table_and_is_stable(logs):
    first = _resolve(logs)
    assert first.span == 0 and first.version is None  # no {SPAN} spec: span 0, as in TFX
    assert first.paths(I.LOG) == [str(logs / "log_part1.csv"), str(logs / "log_part2.csv")]
    lines = first.fingerprint.split("\n")
    sizes = {t: sum(os.path.getsize(p) for p in first.paths(t)) for t in (I.LOG, I.USER, I.VIDEO)}
    assert [line.split(",sha256:")[0] for line in lines] == [
        f"log:num_files:2,total_bytes:{sizes[I.LOG]}",
        f"user_features:num_files:1,total_bytes:{sizes[I.USER]}",
        f"video_features:num_files:1,total_bytes:{sizes[I.VIDEO]}"]
    assert _resolve(logs) == first
    assert first.exec_properties() == {"span": 0, "version": None, "input_fingerprint": first.fingerprint}
    # a file no pattern matches (the simulator's truth table) is not an input
    (logs / "truth_sim.csv").write_text("x\n1\n")
    assert _resolve(logs).fingerprint == first.fingerprint


@pytest.mark.parametrize("change", ["touch", "same_size_edit", "append", "new_file", "rename",
                                    "remove", "side_table"])
def test_fingerprint_changes_with_any_input_file(logs, change):
    before = _resolve(logs)
    log1, table = logs / "log_part1.csv", I.LOG
    if change == "touch":  # same bytes, new mtime
        _touch(log1, 1_650_000_001)
    elif change == "same_size_edit":  # same size, sub-second mtime change
        text = log1.read_text()
        log1.write_text(text.replace("20220425", "20220426", 1))
        _touch(log1, 1_650_000_000.5)
    elif change == "append":
        with open(log1, "a") as f:
            f.write("\n")
        _touch(log1, 1_650_000_000)
    elif change == "new_file":
        shutil.copy(log1, logs / "log_part3.csv")
    elif change == "rename":
        os.rename(log1, logs / "log_part0.csv")
    elif change == "remove":
        os.remove(log1)
    else:
        table = I.USER
        _touch(logs / "user_features_pure.csv", 1_650_000_002)
    after = _resolve(logs)
    assert after.fingerprint != before.fingerprint
    changed = [a.split(":")[0] for a, b in zip(after.fingerprint.split("\n"), before.fingerprint.split("\n"))
               if a != b]
    assert changed == [table]


def test_span_and_version_specs_pick_the_latest_like_tfx(logs):
    for span, version in ((1, 1), (2, 1), (2, 3)):
        shutil.copy(logs / "log_part1.csv", logs / f"log-span{span:02d}-v{version}.csv")
    resolved = _resolve(logs, log_file_pattern="log-span{SPAN:2}-v{VERSION}.csv")
    assert (resolved.span, resolved.version) == (2, 3)
    assert resolved.paths(I.LOG) == [str(logs / "log-span02-v3.csv")]
    # a side table with a span spec must resolve to the logs' span
    shutil.copy(logs / "user_features_pure.csv", logs / "user_features-span01.csv")
    with pytest.raises(ValueError, match=r"user_features span/version \(1, None\) .* differs from the log"):
        _resolve(logs, log_file_pattern="log-span{SPAN:2}-v{VERSION}.csv",
                 user_features_pattern="user_features-span{SPAN:2}.csv")
    # date specs: span = days since 1970-01-01, as TFX's date_to_span_number
    shutil.copy(logs / "log_part1.csv", logs / "log-2022-04-26.csv")
    shutil.copy(logs / "log_part1.csv", logs / "log-2022-04-27.csv")
    by_date = _resolve(logs, log_file_pattern="log-{YYYY}-{MM}-{DD}.csv")
    assert by_date.span == 19109 and by_date.paths(I.LOG) == [str(logs / "log-2022-04-27.csv")]


def test_missing_files_and_changed_inputs_are_refused(logs):
    with pytest.raises(ValueError, match=r"no video features file matches '.*/videos_\*.csv'"):
        _resolve(logs, video_features_pattern="videos_*.csv")
    resolved = _resolve(logs)
    I.check_unchanged(resolved, {})  # no driver ran: nothing to compare
    I.check_unchanged(resolved, resolved.exec_properties())
    with pytest.raises(I.InputsChangedError, match="input files changed after the driver"):
        I.check_unchanged(resolved, dict(resolved.exec_properties(), input_fingerprint="log:num_files:1"))


def test_driver_adds_span_and_fingerprint_to_exec_properties_and_examples(logs):
    from tfx.orchestration.portable import data_types
    from tfx.types import standard_artifacts

    from components.log_example_gen.driver import Driver

    exec_properties = dict(make_config().to_component_args(), input_base=str(logs))
    info = data_types.ExecutionInfo(exec_properties=dict(exec_properties),
                                    output_dict={"examples": [standard_artifacts.Examples()]})
    out = Driver(None).run(info)
    fingerprint = _resolve(logs).fingerprint
    assert out.exec_properties["input_fingerprint"].string_value == fingerprint
    assert out.exec_properties["span"].int_value == 0 and "version" not in out.exec_properties
    assert out.exec_properties["history_length"].int_value == 50  # the knobs stay
    [examples] = out.output_artifacts["examples"].artifacts
    assert examples.custom_properties["input_fingerprint"].string_value == fingerprint
    assert examples.custom_properties["span"].int_value == 0
    # the legacy launcher's hook gives the same execution properties
    legacy = Driver(None).resolve_exec_properties(dict(exec_properties), None, None)
    assert legacy == dict(exec_properties, span=0, version=None, input_fingerprint=fingerprint)


# ---------------------------------------------------------------- cached pipeline runs

def _run_pipeline(input_base, root, db):
    from tfx.orchestration.local.local_dag_runner import LocalDagRunner
    from tfx.orchestration.pipeline import Pipeline
    from tfx.orchestration.metadata import sqlite_metadata_connection_config

    from components.log_example_gen.component import LogExampleGen

    gen = LogExampleGen(input_base=input_base, config=make_config(
        history_length=5, history_min_watch_s=0.0, train_days=(), eval_days=(), eval_last_n_days=1,
        validation_last_n_days=1, max_bad_row_fraction=0.0))
    LocalDagRunner().run(Pipeline(
        pipeline_name="leg_cache_test", pipeline_root=root, components=[gen], enable_cache=True,
        metadata_connection_config=sqlite_metadata_connection_config(db),
        beam_pipeline_args=BEAM_ARGS))


def _executions(db):
    """[(state name, exec properties, {output key: [(artifact id, uri, custom props)]})] by id."""
    from ml_metadata.proto import metadata_store_pb2
    from tfx.orchestration.metadata import sqlite_metadata_connection_config
    from tfx.orchestration import metadata

    out = []
    with metadata.Metadata(sqlite_metadata_connection_config(db)) as m:
        for ex in sorted(m.store.get_executions(), key=lambda e: e.id):
            events = [e for e in m.store.get_events_by_execution_ids([ex.id])
                      if e.type == metadata_store_pb2.Event.OUTPUT]
            arts = {a.id: a for a in m.store.get_artifacts_by_id([e.artifact_id for e in events])}
            outputs = {}
            for e in events:
                a = arts[e.artifact_id]
                outputs.setdefault(e.path.steps[0].key, []).append(
                    (a.id, a.uri, {k: getattr(v, v.WhichOneof("value")) for k, v in a.custom_properties.items()}))
            state = metadata_store_pb2.Execution.State.Name(ex.last_known_state)
            props = {k: getattr(v, v.WhichOneof("value")) for k, v in ex.custom_properties.items()}
            out.append((state, props, outputs))
    return out


@pytest.mark.e2e
def test_cached_rerun_reuses_examples_until_a_log_file_changes(tmp_path):
    from data.simulator import simulate

    input_base, root, db = str(tmp_path / "logs"), str(tmp_path / "root"), str(tmp_path / "metadata.db")
    paths = simulate(input_base, num_users=30, num_videos=20, num_days=4, seed=3)

    _run_pipeline(input_base, root, db)
    _run_pipeline(input_base, root, db)  # unchanged files: the cached execution
    first, cached = _executions(db)
    assert (first[0], cached[0]) == ("COMPLETE", "CACHED")
    [(art_id, uri, props)] = first[2]["examples"]
    assert cached[2]["examples"] == first[2]["examples"]  # the same artifact, not a copy
    fingerprint = first[1]["input_fingerprint"]
    assert fingerprint == props["input_fingerprint"] and fingerprint.startswith("log:num_files:1,")
    assert first[1]["span"] == props["span"] == 0
    old_eval = {(e["user_id"], e["video_id"], e["time_ms"]) for e in read_examples(
        os.path.join(uri, "Split-eval"), 5)}
    assert len(old_eval) == props["num_eval_examples"] > 0

    # edit the log: drop its last row (the latest impression, an eval day) -> new content and mtime
    with open(paths["log"]) as f:
        lines = f.read().splitlines()
    header = lines[0].split(",")
    dropped = dict(zip(header, lines[-1].split(",")))
    with open(paths["log"], "w") as f:
        f.write("\n".join(lines[:-1]) + "\n")
    st = os.stat(paths["log"])
    os.utime(paths["log"], (st.st_atime, st.st_mtime + 10))

    _run_pipeline(input_base, root, db)
    *_, rerun = _executions(db)
    assert rerun[0] == "COMPLETE"
    [(new_id, new_uri, new_props)] = rerun[2]["examples"]
    assert new_id != art_id and new_uri != uri
    assert rerun[1]["input_fingerprint"] == new_props["input_fingerprint"] != fingerprint
    new_eval = {(e["user_id"], e["video_id"], e["time_ms"]) for e in read_examples(
        os.path.join(new_uri, "Split-eval"), 5)}
    dropped_key = (int(dropped["user_id"]), int(dropped["video_id"]), int(dropped["time_ms"]))
    assert dropped_key in old_eval and new_eval == old_eval - {dropped_key}
    assert new_props["num_eval_examples"] == props["num_eval_examples"] - 1
