"""TransformConfig: the typed settings of `models.preprocessing.preprocessing_fn`.

The values live in pipeline/configs/ (``TRANSFORM``); Transform hands them to
``preprocessing_fn`` as its ``custom_config``, which puts them in Transform's cache key.
Kept apart from preprocessing.py so the pipeline can build one without importing TF.
"""
import dataclasses
from typing import Any, Dict, List

# Transform analyses in a TF1 graph (Transform's ``force_tf_compat_v1``; the tests' and
# benches' own analyses use the same): in TF2 mode TFT traces preprocessing_fn once per
# analysis phase and again for the saved function. The tests' 40-row fixture took 17 CPU-s
# instead of 34 (bench/bench_transform.py), the default pipeline's Transform 34 s instead of
# 50. The Trainer, the Publisher and serving read the graph through
# ``TFTransformOutput.transform_features_layer()``, which loads either kind; the values match
# the TF2 graph's to an ulp (tests/models/test_preprocessing.py compares with numpy).
FORCE_TF_COMPAT_V1 = True


@dataclasses.dataclass(frozen=True)
class TransformConfig:
    """Every knob of `preprocessing_fn` (values: pipeline/configs/ ``TRANSFORM``).

    oov_buckets: OOV indices after each vocabulary (the Trainer's tables match it);
    vocab_frequency_threshold: minimum count of a vocabulary entry (1 keeps all);
    ead_*: the EAD search (CREAD §4): M thresholds, J = A_w + β·A_b, α grid, CDF from
    ``ead_num_quantiles`` quantiles clipped at the ``ead_t_max_quantile`` quantile.
    """

    oov_buckets: int
    vocab_frequency_threshold: int
    ead_num_buckets: int
    ead_beta: float
    ead_alphas: List[float]
    ead_num_quantiles: int
    ead_t_max_quantile: float

    def __post_init__(self):
        if self.oov_buckets < 0 or self.vocab_frequency_threshold < 1:
            raise ValueError(f"TransformConfig: oov_buckets must be >= 0 and vocab_frequency_threshold >= 1, "
                             f"got {self.oov_buckets} and {self.vocab_frequency_threshold}")
        if self.ead_num_buckets < 1 or self.ead_num_quantiles < 2 or not 0 < self.ead_t_max_quantile <= 1:
            raise ValueError(f"TransformConfig: bad EAD settings M={self.ead_num_buckets}, "
                             f"num_quantiles={self.ead_num_quantiles}, t_max_quantile={self.ead_t_max_quantile}")

    def to_custom_config(self) -> Dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_custom_config(cls, custom_config: Dict[str, Any]) -> "TransformConfig":
        names = {f.name for f in dataclasses.fields(cls)}
        missing, unknown = sorted(names - set(custom_config or {})), sorted(set(custom_config or {}) - names)
        if missing or unknown:
            raise ValueError(f"Transform custom_config: missing {missing}, unknown {unknown} "
                             f"(build it with TransformConfig.to_custom_config())")
        return cls(**custom_config)
