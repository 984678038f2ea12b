"""LogExampleGenConfig: the typed knobs of LogExampleGen (pure Python, no TFX/Beam).

The values live in pipeline/configs/; this class only names, types and checks them.
The file patterns default to the KuaiRand-Pure release names of
schemas/kuairand_format.py (the one definition of the format); every other knob is
required. ``to_component_args()`` gives the ``LogExampleGen(...)`` keyword arguments
(its execution properties, hence its cache key); ``to_custom_config()`` /
``from_custom_config()`` round-trip through plain JSON values::

    cfg = LogExampleGenConfig(history_length=50, history_min_watch_s=0.0,
                              train_days="20220425-20220502", eval_days=(20220503, 20220504),
                              eval_last_n_days=2, validation_last_n_days=1,
                              max_bad_row_fraction=0.01, duplicate_rule="drop", date_window="",
                              max_date_gap_days=2, out_of_window_rule="dead_letter",
                              date_time_tolerance_s=10800.0, max_play_time_ms=86_400_000,
                              max_duration_ms=86_400_000, read_range_bytes=4 << 20,
                              label_delay_s=300.0, signal_prior_ctr=0.3)
    cfg.train_days  # (20220425, ..., 20220502): day lists are sorted tuples of yyyymmdd ints
    assert LogExampleGenConfig.from_custom_config(cfg.to_custom_config()) == cfg
    assert LogExampleGenConfig.from_custom_config(cfg.to_component_args()) == cfg
"""
import dataclasses
import os
from typing import Any, Dict, Optional, Sequence, Tuple, Union

from components.log_example_gen import signal_families, time_split
from components.log_example_gen.row_rules import DUPLICATE_RULES, OUT_OF_WINDOW_RULES, RowRules
from components.log_example_gen.span import SpanWindow
from schemas import kuairand_format

Days = Union[str, Sequence[int]]

PATTERN_FIELDS = ("log_file_pattern", "user_features_pattern", "video_features_pattern")
# The span window (span.py); span_index -1 (default): no span, the day splits of time_split.py.
SPAN_FIELDS = ("span_index", "span_start_ms", "span_end_ms", "span_holdout_ms")


def _int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"LogExampleGenConfig.{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"LogExampleGenConfig.{name} must be >= {minimum}, got {value}")
    return value


def _float(name: str, value: Any, low: float, high: float = float("inf")) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"LogExampleGenConfig.{name} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"LogExampleGenConfig.{name} must be in [{low}, {high}], got {value}")
    return float(value)


def _days(name: str, value: Days) -> Tuple[int, ...]:
    """Text (time_split.parse_days) or ints -> sorted tuple of checked yyyymmdd days."""
    try:
        if isinstance(value, str):
            days = time_split.parse_days(value)
        elif isinstance(value, (list, tuple)):
            days = [time_split.check_day(d) for d in value]
        else:
            raise ValueError(f"expected a day list text or a sequence of yyyymmdd ints, got {value!r}")
    except ValueError as e:
        raise ValueError(f"LogExampleGenConfig.{name}: {e}") from None
    if len(set(days)) != len(days):
        raise ValueError(f"LogExampleGenConfig.{name} lists a day twice: {list(value)}")
    return tuple(sorted(days))


def _choice(name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise ValueError(f"LogExampleGenConfig.{name} must be one of {list(allowed)}, got {value!r}")
    return value


def _families(value: Union[str, Sequence[str]]) -> Tuple[str, ...]:
    """signal_families: a comma list or a sequence of signal_families.FAMILIES names, or "all"."""
    if isinstance(value, str) and value.strip() == "all":
        return tuple(signal_families.FAMILIES)
    names = value.split(",") if isinstance(value, str) else list(value)
    try:
        return signal_families.check_families([n.strip() for n in names if n.strip()])
    except ValueError as e:
        raise ValueError(f"LogExampleGenConfig.signal_families: {e}") from None


def _pattern(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"LogExampleGenConfig.{name} must be a non-empty file pattern, got {value!r}")
    if os.path.isabs(value) or "://" in value:
        raise ValueError(f"LogExampleGenConfig.{name} is relative to input_base, got the absolute {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class LogExampleGenConfig:
    """Every knob of LogExampleGen (values: pipeline/configs/).

    history_length: L, the fixed (padded) length of every behaviour history (>= 1);
    history_min_watch_s: earlier events enter a history if watched >= this (>= 0);
    train_days / eval_days: yyyymmdd days (text like ``"20220425-20220502,20220504"``
      or ints); empty: see time_split.py for the rules, with ``eval_last_n_days``;
    validation_last_n_days: the last N train days present become the validation split;
    max_bad_row_fraction: the run fails above this share of bad log rows ([0, 1]);
    duplicate_rule: exact duplicate log rows (every column equal): 'drop' (keep the
      first, count the others as dropped), 'dead_letter' (the copies are bad rows) or 'keep';
    date_window: the log dates a run accepts (day text or ints); empty: inferred, the
      run of dates with gaps <= ``max_date_gap_days`` days holding the most rows
      (date_window.py); rows dated outside follow ``out_of_window_rule``:
      'dead_letter' (reason ``out_of_window:date``) or 'error' (the run fails);
    date_time_tolerance_s: ``date`` must be the UTC+8 day of ``time_ms`` give or take
      this (the real logs date rows up to 2.2 h after their ``time_ms``);
    max_play_time_ms / max_duration_ms: upper bounds of the watch time and the duration;
    read_range_bytes: log files are read in byte ranges of about this size (reading.py);
    label_delay_s: a label is known this long after its impression: the signals
      (signals.py) of a row at t use the labels of impressions at t_j < t - delay (>= 0);
    signal_prior_ctr: p0, the prior of the running tab CTR e_tab (signals.py, [0, 1]);
    signal_families: the optional signal families written as extra float features
      (signal_families.py, #37; a comma list, names or "all"); () (default): none, the examples
      and the execution properties are those of a config without the field;
    user_events: also write every user's history events once, under the Examples
      artifact (user_events.py, #38: lifelong histories); False (default): not written,
      the examples and the execution properties are those of a config without the field;
    *_pattern: file globs under input_base; may hold TFX's ``{SPAN}`` / ``{VERSION}``
      or ``{YYYY}{MM}{DD}`` specs (then the latest span is ingested, see inputs.py);
    span_*: a span window (span.py: train ``[span_start_ms, span_end_ms)``, validation /
      eval the next ``span_holdout_ms``; every earlier row still feeds histories);
      ``span_index`` -1 = none; left out of the component args when unset.
    """

    history_length: int
    history_min_watch_s: float
    train_days: Tuple[int, ...]
    eval_days: Tuple[int, ...]
    eval_last_n_days: int
    validation_last_n_days: int
    max_bad_row_fraction: float
    duplicate_rule: str
    date_window: Tuple[int, ...]
    max_date_gap_days: int
    out_of_window_rule: str
    date_time_tolerance_s: float
    max_play_time_ms: int
    max_duration_ms: int
    read_range_bytes: int
    label_delay_s: float
    signal_prior_ctr: float
    log_file_pattern: str = kuairand_format.LOG_FILE_PATTERN
    user_features_pattern: str = kuairand_format.USER_FEATURES_PATTERN
    video_features_pattern: str = kuairand_format.VIDEO_FEATURES_PATTERN
    span_index: int = -1
    span_start_ms: int = 0
    span_end_ms: int = 0
    span_holdout_ms: int = 0
    signal_families: Tuple[str, ...] = ()
    user_events: bool = False

    def __post_init__(self):
        checked = {
            "history_length": _int("history_length", self.history_length, 1),
            "history_min_watch_s": _float("history_min_watch_s", self.history_min_watch_s, 0.0),
            "train_days": _days("train_days", self.train_days),
            "eval_days": _days("eval_days", self.eval_days),
            "eval_last_n_days": _int("eval_last_n_days", self.eval_last_n_days, 0),
            "validation_last_n_days": _int("validation_last_n_days", self.validation_last_n_days, 0),
            "max_bad_row_fraction": _float("max_bad_row_fraction", self.max_bad_row_fraction, 0.0, 1.0),
            "duplicate_rule": _choice("duplicate_rule", self.duplicate_rule, DUPLICATE_RULES),
            "date_window": _days("date_window", self.date_window),
            "max_date_gap_days": _int("max_date_gap_days", self.max_date_gap_days, 0),
            "out_of_window_rule": _choice("out_of_window_rule", self.out_of_window_rule, OUT_OF_WINDOW_RULES),
            "date_time_tolerance_s": _float("date_time_tolerance_s", self.date_time_tolerance_s, 0.0),
            "max_play_time_ms": _int("max_play_time_ms", self.max_play_time_ms, 1),
            "max_duration_ms": _int("max_duration_ms", self.max_duration_ms, 1),
            "read_range_bytes": _int("read_range_bytes", self.read_range_bytes, 1),
            "label_delay_s": _float("label_delay_s", self.label_delay_s, 0.0),
            "signal_prior_ctr": _float("signal_prior_ctr", self.signal_prior_ctr, 0.0, 1.0),
        }
        checked["signal_families"] = _families(self.signal_families)
        if self.user_events not in (True, False):  # 0 / 1 from an execution property
            raise ValueError(f"LogExampleGenConfig.user_events must be a bool, got {self.user_events!r}")
        checked["user_events"] = bool(self.user_events)
        checked.update({name: _pattern(name, getattr(self, name)) for name in PATTERN_FIELDS})
        checked.update({name: _int(name, getattr(self, name), -1 if name == "span_index" else 0)
                        for name in SPAN_FIELDS})
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: normalise in place once
        try:
            time_split.validate_split_config(self.train_days, self.eval_days, self.eval_last_n_days,
                                             self.validation_last_n_days)
        except ValueError as e:
            raise ValueError(f"LogExampleGenConfig: {e}") from None
        outside = sorted(set(self.train_days + self.eval_days) - set(self.date_window))
        if self.date_window and outside:
            raise ValueError(f"LogExampleGenConfig: train/eval days {outside} are outside date_window")
        if self.span_index >= 0:
            try:
                self.span_window()
            except ValueError as e:
                raise ValueError(f"LogExampleGenConfig: {e}") from None

    def span_window(self) -> Optional[SpanWindow]:
        """The span window (span.py), or None when ``span_index`` is -1 (day splits)."""
        if self.span_index < 0:
            return None
        return SpanWindow(self.span_index, self.span_start_ms, self.span_end_ms, self.span_holdout_ms).check()

    def row_rules(self) -> "RowRules":
        """The per-row value rules (row_rules.py) of this config."""
        return RowRules(max_play_time_ms=self.max_play_time_ms, max_duration_ms=self.max_duration_ms,
                        date_time_tolerance_ms=int(round(self.date_time_tolerance_s * 1000)))

    @classmethod
    def field_names(cls) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def required_field_names(cls) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING)

    def to_component_args(self) -> Dict[str, Any]:
        """``LogExampleGen(input_base=..., **cfg.to_component_args())`` keyword arguments:
        scalars and strings only (TFX execution properties); days as comma lists."""
        args = self.to_custom_config()
        args["train_days"] = time_split.format_days(self.train_days)
        args["eval_days"] = time_split.format_days(self.eval_days)
        args["date_window"] = time_split.format_days(self.date_window)
        if self.signal_families:
            args["signal_families"] = ",".join(self.signal_families)
        if self.user_events:
            args["user_events"] = 1
        return args

    def to_custom_config(self) -> Dict[str, Any]:
        """Plain JSON values (day lists as lists of ints)."""
        out = {name: getattr(self, name) for name in self.field_names()
               if (name not in SPAN_FIELDS or self.span_index >= 0)
               and name not in ("signal_families", "user_events")}
        if self.signal_families:  # left out when off: the default's cache key is unchanged
            out["signal_families"] = list(self.signal_families)
        if self.user_events:  # likewise
            out["user_events"] = True
        out["train_days"] = list(self.train_days)
        out["eval_days"] = list(self.eval_days)
        out["date_window"] = list(self.date_window)
        return out

    @classmethod
    def from_custom_config(cls, custom_config: Dict[str, Any]) -> "LogExampleGenConfig":
        """Inverse of ``to_custom_config()`` (also reads ``to_component_args()``);
        ValueError naming missing or unknown keys."""
        given = set(custom_config or {})
        missing = sorted(set(cls.required_field_names()) - given)
        unknown = sorted(given - set(cls.field_names()))
        if missing or unknown:
            raise ValueError(f"LogExampleGenConfig: missing {missing}, unknown {unknown} "
                             f"(build it with LogExampleGenConfig.to_custom_config())")
        return cls(**custom_config)

    @classmethod
    def from_exec_properties(cls, exec_properties: Dict[str, Any]) -> "LogExampleGenConfig":
        """The config inside LogExampleGen's execution properties (which also hold
        input_base, span, version and input_fingerprint)."""
        return cls.from_custom_config({k: v for k, v in exec_properties.items()
                                       if k in cls.field_names() and v is not None})
