"""components/publisher/sources.py: a blessed model the newest version came from is not
published again (a rerun on unchanged inputs, issue #34)."""
import json

from components.publisher import sources


def test_only_the_newest_versions_source_counts(tmp_path):
    base = tmp_path / "serving" / "watchtime_ranker"
    assert sources.serving_version_of(str(base), "/p/Trainer/model/7") is None  # nothing published yet
    (base / "100").mkdir(parents=True)
    sources.record_source(str(base), 100, "/p/Trainer/model/7")
    assert sources.serving_version_of(str(base), "/p/Trainer/model/7") == 100
    assert sources.serving_version_of(str(base), "/p/Trainer/model/9") is None  # another model: publish
    (base / "101").mkdir()
    sources.record_source(str(base), 101, "/p/Trainer/model/9")
    assert sources.serving_version_of(str(base), "/p/Trainer/model/7") is None  # 7 is no longer the newest
    assert sources.serving_version_of(str(base), "/p/Trainer/model/9") == 101
    # hidden beside the base, never inside it (servers load numeric names only)
    assert sources.sources_path(str(base)) == str(tmp_path / "serving" / ".watchtime_ranker.publisher_sources.json")
    assert sorted(p.name for p in base.iterdir()) == ["100", "101"]


def test_removed_versions_are_forgotten_and_a_bad_file_means_publish(tmp_path):
    base = tmp_path / "watchtime_ranker"
    (base / "1").mkdir(parents=True)
    sources.record_source(str(base), 1, "/m/1")
    (base / "1").rmdir()
    (base / "2").mkdir()
    sources.record_source(str(base), 2, "/m/2")
    assert json.loads(open(sources.sources_path(str(base))).read()) == {"2": "/m/2"}
    open(sources.sources_path(str(base)), "w").write("{not json")
    assert sources.serving_version_of(str(base), "/m/2") is None
    assert sources.serving_version_of("gs://bucket/watchtime_ranker", "/m/2") is None
