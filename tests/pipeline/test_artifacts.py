"""pipeline/artifacts.py: why the Evaluator did not bless, as `make run` prints it."""
from google.protobuf import text_format
from tensorflow_model_analysis.proto import validation_result_pb2

from pipeline.artifacts import validation_failures

FAILED = """
validation_ok: false
metric_validations_per_slice {
  slice_key {}
  failures {
    metric_key { name: "mean_absolute_error" output_name: "watch_time_s" is_diff: true }
    metric_threshold { change_threshold { absolute { value: 1.0 } direction: LOWER_IS_BETTER } }
    metric_value { double_value { value: 5.410624 } }
  }
}
metric_validations_per_slice {
  slice_key { single_slice_keys { column: "tab" int64_value: 1 } }
  failures {
    metric_key { name: "auc" output_name: "click_prob" }
    metric_threshold { value_threshold { lower_bound { value: 0.55 } } }
    metric_value { double_value { value: 0.5 } }
  }
}
"""


def test_each_failed_threshold_is_one_line_naming_metric_value_threshold_and_slice():
    result = text_format.Parse(FAILED, validation_result_pb2.ValidationResult())
    lines = validation_failures(result)
    assert len(lines) == 2
    assert lines[0].startswith("watch_time_s/mean_absolute_error, candidate - baseline = 5.411 (")
    assert "absolute { value: 1.0 }" in lines[0] and "LOWER_IS_BETTER" in lines[0] and lines[0].endswith("slice overall)")
    assert lines[1].startswith("click_prob/auc = 0.5 (") and "lower_bound" in lines[1] and 'column: "tab"' in lines[1]


def test_a_passing_result_has_no_lines():
    assert validation_failures(validation_result_pb2.ValidationResult(validation_ok=True)) == []
