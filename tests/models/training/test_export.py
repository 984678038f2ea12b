"""export.py's request sides: the user-context and candidate features partition the
serving features (serving_rank's batch-1 and batch-N inputs). serving_rank's equality
with serving_default on the same rows is checked on every exported ranker in
tests/models/rankers/test_rankers.py (`_check_serving_rank`)."""
from models import features as F


def test_feature_sides_partition_the_serving_features():
    assert set(F.USER_CONTEXT_FEATURES) | set(F.CANDIDATE_FEATURES) == set(F.SERVING_RAW_FEATURES)
    assert not set(F.USER_CONTEXT_FEATURES) & set(F.CANDIDATE_FEATURES)
    assert {"video_id", "author_id", "duration_s"} <= set(F.CANDIDATE_FEATURES)
    assert set(F.HISTORY_FEATURES) <= set(F.USER_CONTEXT_FEATURES)
