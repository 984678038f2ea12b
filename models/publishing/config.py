"""PublishConfig: the typed settings of one publish (values in pipeline/configs/ PUBLISHER)."""
import dataclasses
from typing import Any, Dict, List, Optional

from models.publishing.allocation import ALLOCATIONS
from models.publishing.dense_delta import CODINGS as DENSE_CODINGS
from models.publishing.priority import PRIORITIES as DELTA_PRIORITIES
from models.publishing.pruning import DEFAULT_ROWS
from models.publishing.row_delta import CODINGS as ROW_CODINGS

CRITERIA = ("opt_state", "l2_norm", "touch_count", "saliency")
DELTA_DENSE = ("fp32", "fp16") + DENSE_CODINGS
DELTA_ROWS = ROW_CODINGS


@dataclasses.dataclass(frozen=True)
class PublishConfig:
    """Every knob of the Publisher (pipeline/configs/ PUBLISHER has the values and why).

    prune_fraction / prune_threshold: drop this share of each table's rows, or the rows
        whose importance is ≤ the threshold (exactly one of them, or neither: no pruning).
    criterion: row importance used to rank rows ("opt_state", "l2_norm", "touch_count",
        "saliency" = ½·opt_state·‖row − default row‖², models/publishing/allocation.py).
    allocation: "per_table" (each table drops prune_fraction of its rows) or "global"
        (prune_fraction of all rows, the least important per byte across tables; a table
        whose pruning would not pay for its remap is left whole).
    default_row: where pruned ids go: "oov" (the table's OOV row), "zeros", "mean" (an
        extra row: the mean of the pruned rows) or "centroids" (tail_centroids extra rows,
        the k-means centroids of the pruned rows; each pruned id to its cluster's row).
    quantize: int8 row-wise rows; tables narrower than quantize_min_dim stay fp32
        (a width-1 row costs 5 bytes quantized vs 4 in fp32).
    batch_tables: the embedding tables of one width in table-batched variables, one for
        the int8 tables and one for the fp32 ones (models/publishing/table_batch.py): a
        request's fields are one gather per batch instead of one lookup per table (7–9
        ops for an int8 one).
    min_table_share: tables with fewer rows than this share of the largest table's rows
        are published as trained (fp32, every row): they hold few bytes, and dequantizing
        their rows costs more than gathering fp32 ones (bench/README.md, Publisher).
    max_ne_loss: refuse when (NE_pub − NE_trained)/NE_trained exceeds it (0.0005 = 0.05 %).
    max_auc_drop / max_xauc_drop: refuse when click AUC / watch XAUC drop by more.
    auc_drop_z: where the two models' scores of the same rows are at hand (the verification
        of a SavedModel and the delta budget's in-memory check), a click AUC drop above
        max_auc_drop is refused only when it is also above auc_drop_z standard errors of the
        paired difference (metrics.auc_difference_se): on few verification rows one
        discordant pair moves AUC by 1/(n_pos·n_neg), e.g. 0.00053 on 88 rows, so a 0.001
        bound alone refuses rounding noise. 0: the absolute bound only.
    verify_max_examples: eval rows scored by both models (None: all).
    golden_requests: raw JSON instances replayed through both models.
    warmup_records / warmup_rows_per_request: the TF Serving warmup file.
    keep_versions: versions kept in the serving base after a publish.
    sweep_fractions / sweep_criteria / sweep_max_examples: the report's NE-loss-against-
        pruned-fraction curve (models/publishing/sweep.py) on that many eval rows
        (0: all; empty fractions: no sweep).
    prune_auto: prune the largest fraction among sweep_fractions ≤ prune_fraction whose
        in-memory check (the sweep, criterion `criterion`) passes the gates (0 if none);
        the SavedModel's verification still decides.
    full_every: a full version every this many publishes (1: always full); in between, a
        delta (models/publishing/delta.py) of each table's top delta_row_fraction rows by
        delta_priority plus the dense weights in delta_dense ("fp32" | "fp16" values, or
        "int8_delta" | "int6_delta" | "int5_delta" | "int4_delta" | "fp16_delta": the difference
        from the served weights, quantized, models/publishing/dense_delta.py); a full version
        also whenever the config, the Transform output or the graph changes.
    delta_rows: how a delta's rows are sent: "values" (the published rows as they are) or
        "code_delta" (the difference of their bit patterns from the served rows, exact and
        deflated: models/publishing/row_delta.py).
    dense_every: the dense weights ride on every dense_every-th delta since the last full
        version (1: every delta; 0: only with full versions); the other deltas carry rows only.
    delta_row_fractions / delta_dense_fallbacks / delta_max_full_share: the adaptive delta
        budget (components/publisher/delta_budget.py, dense first): when the assembled N +
        delta of delta_row_fraction rows fails the gates in memory, that fraction is tried with
        each dense coding of delta_dense_fallbacks in order (cheapest first: finer codings cost
        more bytes), then the larger fractions of delta_row_fractions with the last coding; the
        first that passes is sent. A rung costing more than delta_max_full_share of the last
        full version is skipped; none left: a full version.
    """

    prune_fraction: Optional[float]
    prune_threshold: Optional[float]
    criterion: str
    default_row: str
    quantize: bool
    quantize_min_dim: int
    max_ne_loss: float
    max_auc_drop: float
    max_xauc_drop: float
    verify_max_examples: Optional[int]
    golden_requests: int
    warmup_records: int
    warmup_rows_per_request: int
    keep_versions: int
    sweep_fractions: List[float] = dataclasses.field(default_factory=list)
    sweep_criteria: List[str] = dataclasses.field(default_factory=list)
    sweep_max_examples: int = 0
    prune_auto: bool = False
    full_every: int = 1
    delta_row_fraction: float = 0.05
    delta_priority: str = "opt_state_change"
    delta_dense: str = "fp32"
    dense_every: int = 1
    delta_rows: str = "values"
    delta_row_fractions: List[float] = dataclasses.field(default_factory=list)
    delta_dense_fallbacks: List[str] = dataclasses.field(default_factory=list)
    delta_max_full_share: float = 0.5
    allocation: str = "per_table"
    tail_centroids: int = 1
    min_table_share: float = 0.07
    batch_tables: bool = True
    auc_drop_z: float = 2.0

    def __post_init__(self):
        if self.prune_fraction is not None and self.prune_threshold is not None:
            raise ValueError("PublishConfig: give prune_fraction or prune_threshold, not both")
        if self.prune_fraction is not None and not 0.0 <= self.prune_fraction < 1.0:
            raise ValueError(f"PublishConfig.prune_fraction must be in [0, 1), got {self.prune_fraction}")
        if self.criterion not in CRITERIA:
            raise ValueError(f"PublishConfig.criterion must be one of {CRITERIA}, got {self.criterion!r}")
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"PublishConfig.allocation must be one of {ALLOCATIONS}, got {self.allocation!r}")
        if self.default_row not in DEFAULT_ROWS:
            raise ValueError(f"PublishConfig.default_row must be one of {DEFAULT_ROWS}, got {self.default_row!r}")
        for name in ("quantize_min_dim", "keep_versions", "warmup_rows_per_request", "tail_centroids"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"PublishConfig.{name} must be >= 1, got {getattr(self, name)}")
        for name in ("golden_requests", "warmup_records"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"PublishConfig.{name} must be >= 0, got {getattr(self, name)}")
        if self.warmup_records > 1000:
            raise ValueError("PublishConfig.warmup_records: TF Serving reads at most 1000 warmup records")
        bad = [c for c in self.sweep_criteria if c not in CRITERIA]
        if bad or any(not 0 <= f < 1 for f in self.sweep_fractions):
            raise ValueError(f"PublishConfig: bad sweep {self.sweep_fractions} / {self.sweep_criteria}")
        if int(self.full_every) < 1:
            raise ValueError(f"PublishConfig.full_every must be >= 1, got {self.full_every}")
        if not 0.0 < float(self.delta_row_fraction) <= 1.0:
            raise ValueError(f"PublishConfig.delta_row_fraction must be in (0, 1], got {self.delta_row_fraction}")
        if self.delta_priority not in DELTA_PRIORITIES:
            raise ValueError(f"PublishConfig.delta_priority must be one of {DELTA_PRIORITIES}, "
                             f"got {self.delta_priority!r}")
        if self.delta_dense not in DELTA_DENSE:
            raise ValueError(f"PublishConfig.delta_dense must be one of {DELTA_DENSE}, got {self.delta_dense!r}")
        if self.delta_rows not in DELTA_ROWS:
            raise ValueError(f"PublishConfig.delta_rows must be one of {DELTA_ROWS}, got {self.delta_rows!r}")
        if any(not 0.0 < float(f) <= 1.0 for f in self.delta_row_fractions):
            raise ValueError(f"PublishConfig.delta_row_fractions must be in (0, 1], got {self.delta_row_fractions}")
        bad = [c for c in self.delta_dense_fallbacks if c not in DELTA_DENSE]
        if bad:
            raise ValueError(f"PublishConfig.delta_dense_fallbacks must be in {DELTA_DENSE}, got {bad}")
        if not float(self.delta_max_full_share) > 0:
            raise ValueError(f"PublishConfig.delta_max_full_share must be > 0, got {self.delta_max_full_share}")
        if int(self.dense_every) < 0:
            raise ValueError(f"PublishConfig.dense_every must be >= 0, got {self.dense_every}")
        if not 0.0 <= float(self.min_table_share) < 1.0:
            raise ValueError(f"PublishConfig.min_table_share must be in [0, 1), got {self.min_table_share}")
        for name in ("max_ne_loss", "max_auc_drop", "max_xauc_drop", "auc_drop_z"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"PublishConfig.{name} must be >= 0, got {getattr(self, name)}")

    @property
    def prunes(self) -> bool:
        return bool(self.prune_fraction) or self.prune_threshold is not None

    def replace(self, **changes) -> "PublishConfig":
        return dataclasses.replace(self, **changes)

    def to_json_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json_dict(cls, d: Dict[str, Any]) -> "PublishConfig":
        return cls(**d)
