"""TrainerConfig: the typed settings of one Trainer run (ranker, heads, optimisation).

The values live in one place, `pipeline/configs/` (``TRAINER``); this class only
names, types and validates them, and carries them through the Trainer's
``custom_config`` (a JSON dict) and back:

    config = TrainerConfig.from_custom_config(fn_args.custom_config)   # in run_fn
    custom_config = config.to_custom_config()                          # in the pipeline

No field of a knob has a default here, so a caller that forgets one gets a clear
error instead of a silently different setting. ``shuffle_labels_seed`` is the only
optional field: a diagnostic that trains a deliberately degraded candidate (tests).
"""
import dataclasses
import json
from typing import Any, Dict, Optional

WATCH_HEADS = ("regression", "cread", "cqe", "cread+cqe")
STRATEGIES = ("mirrored", "multi_worker", "parameter_server")
OPTIMIZERS = ("adam", "lazy_adam")  # models/heads/lazy_adam.py OPTIMIZERS
INPUT_EXAMPLES = ("transformed", "raw")
LEARNING_RATE_DECAYS = ("none", "linear")  # models/training/lr_schedule.py


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
    """Every knob of the Trainer (see pipeline/configs/ for the values and why).

    model_type: ranker name in `models.rankers.RANKERS` ("lr", "baseline", "xdeepfm",
        "din", "bst"); ranker_params: keyword arguments of its builder.
    history_length: L, the padded length of every behaviour history.
    watch_head: "regression" | "cread" | "cqe" | "cread+cqe"; cread / cqe: the head
        settings (`models.heads.heads_from_config`); ranking_score: formula name.
    loss_weight_*: weight of each head's loss in the multi-task sum.
    strategy: tf.distribute strategy name (`models.training.strategies`).
    steps_per_execution, jit_compile, optimizer: Keras compile knobs (`models.heads.compile_ranker`;
    optimizer "adam" or "lazy_adam": models/heads/lazy_adam.py);
    input_in_memory: `models.training.input.input_fn(in_memory=True)`;
    input_memory_budget_mb: the largest split (MiB of transformed arrays) read into memory,
    larger ones stream (`input_fn(memory_budget_bytes=...)`; None: no limit). They default
    to the behaviour before #15 so older custom_configs still load.
    """

    model_type: str
    ranker_params: Dict[str, Any]
    history_length: int
    embedding_dim: int
    oov_buckets: int
    learning_rate: float
    batch_size: int
    shuffle_buffer_size: int
    epochs: int
    seed: int
    loss_weight_click: float
    loss_weight_watch: float
    loss_weight_cread: float
    loss_weight_cqe: float
    watch_head: str
    cread: Dict[str, Any]
    cqe: Dict[str, Any]
    ranking_score: str
    strategy: str
    ps_min_shard_bytes: int
    ps_max_shards: Optional[int]
    shuffle_labels_seed: Optional[int] = None  # diagnostic only (run_fn.shuffle_labels)
    # "transformed": Transform's materialized examples; "raw": LogExampleGen's examples with
    # the transform graph applied in input_fn (a delta run reusing the latest graph, #14)
    input_examples: str = "transformed"
    # the learning rate of a warm-started run (one pass over a new span, #14); None: learning_rate
    warm_start_learning_rate: Optional[float] = None
    # training speed (#15; bench/README.md, rankers section): batches per tf.function call,
    # XLA for the Keras train/test/predict functions (never the exported signatures), and
    # the split read + transformed once into memory, batches gathered by shuffled index
    steps_per_execution: int = 1
    jit_compile: bool = False
    input_in_memory: bool = False
    input_memory_budget_mb: Optional[float] = None
    # DETERMINISTIC=1 (#34; models/training/determinism.py): deterministic ops, fixed thread
    # pools: the same seed and data give bit-identical weights, at a speed cost
    deterministic: bool = False
    # Platt calibration of the click logit fitted on the validation split after training (#37,
    # models/heads/calibration.py); False: the calibration layer stays the identity
    calibrate_click: bool = False
    # "adam" (tf-keras) or "lazy_adam": embedding rows absent from a batch keep their
    # weights and moments, so a step costs O(batch), not O(vocabulary) (#33)
    optimizer: str = "adam"
    # "none": the rate stays learning_rate; "linear": a full run starts at learning_rate and
    # decays linearly to 0 over its steps (models/training/lr_schedule.py, #37); a warm-started
    # run with warm_start_learning_rate keeps that constant rate
    learning_rate_decay: str = "none"

    def __post_init__(self):
        for name in ("history_length", "embedding_dim", "batch_size", "shuffle_buffer_size", "epochs",
                     "steps_per_execution"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"TrainerConfig.{name} must be a positive int, got {value!r}")
        if not isinstance(self.oov_buckets, int) or self.oov_buckets < 0:
            raise ValueError(f"TrainerConfig.oov_buckets must be an int >= 0, got {self.oov_buckets!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"TrainerConfig.learning_rate must be > 0, got {self.learning_rate!r}")
        for name in ("loss_weight_click", "loss_weight_watch", "loss_weight_cread", "loss_weight_cqe"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"TrainerConfig.{name} must be >= 0, got {getattr(self, name)!r}")
        if self.watch_head not in WATCH_HEADS:
            raise ValueError(f"TrainerConfig: unknown watch_head {self.watch_head!r}; known: {WATCH_HEADS}")
        if self.warm_start_learning_rate is not None and not self.warm_start_learning_rate > 0:
            raise ValueError(f"TrainerConfig.warm_start_learning_rate must be > 0 or None, "
                             f"got {self.warm_start_learning_rate!r}")
        if self.input_memory_budget_mb is not None and not self.input_memory_budget_mb > 0:
            raise ValueError(f"TrainerConfig.input_memory_budget_mb must be > 0 or None, "
                             f"got {self.input_memory_budget_mb!r}")
        for name in ("jit_compile", "input_in_memory", "deterministic", "calibrate_click"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"TrainerConfig.{name} must be a bool, got {getattr(self, name)!r}")
        if self.input_examples not in INPUT_EXAMPLES:
            raise ValueError(f"TrainerConfig: unknown input_examples {self.input_examples!r}; known: {INPUT_EXAMPLES}")
        if self.learning_rate_decay not in LEARNING_RATE_DECAYS:
            raise ValueError(f"TrainerConfig: unknown learning_rate_decay {self.learning_rate_decay!r}; "
                             f"known: {LEARNING_RATE_DECAYS}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"TrainerConfig: unknown optimizer {self.optimizer!r}; known: {OPTIMIZERS}")
        if self.strategy not in STRATEGIES:
            raise ValueError(f"TrainerConfig: unknown strategy {self.strategy!r}; known: {STRATEGIES}")
        for name in ("ranker_params", "cread", "cqe"):
            if not isinstance(getattr(self, name), dict):
                raise ValueError(f"TrainerConfig.{name} must be a dict, got {type(getattr(self, name)).__name__}")

    def replace(self, **changes) -> "TrainerConfig":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_custom_config(self) -> Dict[str, Any]:
        """A JSON-serialisable dict for the Trainer's ``custom_config``."""
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_custom_config(cls, custom_config: Dict[str, Any]) -> "TrainerConfig":
        """The config back from a ``custom_config`` dict; missing or unknown keys are errors."""
        custom_config = dict(custom_config or {})
        fields = {f.name: f for f in dataclasses.fields(cls)}
        required = [n for n, f in fields.items() if f.default is dataclasses.MISSING]
        missing = [n for n in required if n not in custom_config]
        unknown = sorted(set(custom_config) - set(fields))
        if missing or unknown:
            raise ValueError(f"Trainer custom_config: missing {missing}, unknown {unknown} "
                             f"(build it with TrainerConfig.to_custom_config())")
        return cls(**custom_config)
