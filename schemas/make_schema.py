"""Regenerates schemas/schema.pbtxt (and schemas/with_families/schema.pbtxt, which also
declares the signal-family features, #37) from models.features (run after changing the spec).

    python -m schemas.make_schema [history_length]

The curated parts are added here, in code, so the file never drifts from the spec:
label domains (is_click in {0, 1}, watch_time_s >= 0), non-negative durations and
history gaps, and the fixed history length L.
"""
import os
import sys

from tensorflow_metadata.proto.v0 import schema_pb2
from tensorflow_transform.tf_metadata import schema_utils
from google.protobuf import text_format

from models import features as F

HERE = os.path.dirname(os.path.abspath(__file__))
FAMILIES_DIR = "with_families"  # the schema with the signal families (#37; pipeline/configs/core.py)


def build_schema(history_length: int, families: bool = None) -> schema_pb2.Schema:
    """The curated schema; with every signal-family feature if ``families`` (None: when
    LOG_SIGNALS makes one a model input, models.features.FAMILY_INPUTS)."""
    schema = schema_utils.schema_from_feature_spec(F.raw_feature_spec(history_length, families))
    by_name = {f.name: f for f in schema.feature}
    for key in [F.LABEL_CLICK, "is_like", "long_view"]:
        by_name[key].int_domain.min = 0
        by_name[key].int_domain.max = 1
    for key in [F.LABEL_WATCH, "duration_s"]:
        by_name[key].float_domain.min = 0.0
    by_name["hour"].int_domain.min = 0
    by_name["hour"].int_domain.max = 23
    by_name[F.HISTORY_LEN_FEATURE].int_domain.min = 0
    by_name[F.HISTORY_LEN_FEATURE].int_domain.max = history_length
    for key in ["hist_watch_time_s", "hist_time_gap_s"]:
        by_name[key].float_domain.min = 0.0
    return schema


if __name__ == "__main__":
    length = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    for families, folder in ((False, HERE), (True, os.path.join(HERE, FAMILIES_DIR))):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "schema.pbtxt"), "w") as f:
            f.write(text_format.MessageToString(build_schema(length, families)))
