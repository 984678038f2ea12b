"""Which trained model each published version came from (issue #34).

A rerun with unchanged inputs reuses the Trainer's model from MLMD's cache and the
Evaluator blesses it against itself (the latest blessed model); publishing it again
would only copy the version that already serves (the pruning sweep and verification
cost ~100 s). So the Publisher records, per version, the Model artifact's URI, and
skips a blessed model whose URI the newest version already came from.

Where: `<parent>/.<model>.publisher_sources.json` beside the serving base `<parent>/<model>/`
(hidden and outside the base, like the publisher state: servers never see it), a JSON
object {version: model uri} of the versions still on disk. Local paths only (written
atomically); on object stores nothing is recorded, so every blessed model is published.
"""
import json
import os
from typing import Optional

from components.publisher import versioning
from models.publishing.atomic_files import is_remote, write_file_atomic


def sources_path(serving_base: str) -> str:
    parent, name = os.path.split(os.path.normpath(serving_base))
    return os.path.join(parent, f".{name}.publisher_sources.json")


def read_sources(serving_base: str) -> dict:
    """{version (str): model uri}; {} when missing or unreadable."""
    try:
        with open(sources_path(serving_base)) as f:
            found = json.load(f)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def record_source(serving_base: str, version: int, model_uri: str) -> None:
    """Notes that `version` was published from `model_uri` (entries of removed versions are dropped)."""
    if is_remote(serving_base):
        return
    on_disk = {str(v) for v in versioning.list_versions(serving_base)}
    sources = {v: uri for v, uri in read_sources(serving_base).items() if v in on_disk}
    sources[str(version)] = model_uri
    write_file_atomic(sources_path(serving_base), json.dumps(sources, sort_keys=True).encode("utf-8"))


def serving_version_of(serving_base: str, model_uri: str) -> Optional[int]:
    """The newest version if it was published from `model_uri`, else None."""
    if is_remote(serving_base):
        return None
    versions = versioning.list_versions(serving_base)
    if not versions:
        return None
    newest = max(versions)
    return newest if read_sources(serving_base).get(str(newest)) == model_uri else None
