"""The feature spec, the committed schema and derived slice features agree."""
from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import schema_pb2

from models import features as F
from pipeline import configs
from schemas.make_schema import HERE, build_schema


def test_committed_schema_matches_the_feature_spec():
    with open(f"{HERE}/schema.pbtxt") as f:
        committed = text_format.Parse(f.read(), schema_pb2.Schema())
    assert committed == build_schema(configs.HISTORY_LENGTH), "run: python -m schemas.make_schema"


def test_duration_bucket_edges():
    assert [F.duration_bucket(x) for x in (0.0, 14.99, 15.0, 29.9, 30.0, 119.0, 120.0, 299.9, 300.0, 1e5)] == [
        "<15s", "<15s", "15-30s", "15-30s", "30-60s", "60-120s", "120-300s", "120-300s", ">=300s", ">=300s"]


def test_serving_features_exclude_labels_and_meta():
    leaked = set(F.SERVING_RAW_FEATURES) & set(F.LABELS + F.EXTRA_OUTCOMES + F.META_FEATURES + F.META_BYTES_FEATURES)
    assert not leaked
