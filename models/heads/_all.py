"""Pluggable output heads: any ranker body -> named outputs, losses and metrics.

A ranker computes a representation z [B, K] (and optionally a first-order click
logit, e.g. xDeepFM's linear part); heads turn it into outputs:

    ClickHead:            p_click = σ(w_c·z + b_c [+ linear_logit])       "click_prob"
                          loss: binary cross-entropy; metric AUC
    WatchTimeRegressionHead:
                          ŵ = expm1(softplus(w_w·z + b_w))                "watch_time_s"
                          loss: (log1p(y) - log1p(ŵ))²; metric MAE (seconds)

    CreadWatchHead:       CREAD (models/cread.py): M survival logits "cread_logits"
                          (training only, loss CreadLoss) and the restored
                          E[watch] "watch_time_s"
    CqeWatchHead:         CQE (models/cqe.py): "quantiles" [B, N] (pinball loss),
                          "cse", "dqc", "cde" [B, 1]; "watch_time_s" = CDE when it
                          is the only watch head
    RankingScoreHead:     "ranking_score" [B, 1] = a named formula of the other
                          outputs (RANKING_FORMULAS; no eval)

`compile_ranker(inputs, z, heads, ...)` builds and compiles the keras.Model whose
outputs are the union of the heads' outputs. `heads_from_config(hp, thresholds)`
turns the trainer config (pipeline/configs.py WATCH_HEAD, RANKING_SCORE, loss
weights) into the head list; `training_labels` gives the label of every output that
has a loss.
"""
import tf_keras as keras
import tensorflow as tf

from models.watch_time import cqe as cqe_lib
from models.watch_time import cread as cread_lib

CLICK_OUTPUT = "click_prob"
WATCH_OUTPUT = "watch_time_s"
CREAD_LOGITS_OUTPUT = "cread_logits"
QUANTILES_OUTPUT = "quantiles"
CSE_OUTPUT, DQC_OUTPUT, CDE_OUTPUT = "cse", "dqc", "cde"
RANKING_OUTPUT = "ranking_score"
# Outputs that only exist to carry a loss: not part of the serving signatures.
TRAINING_ONLY_OUTPUTS = (CREAD_LOGITS_OUTPUT,)
# Which label every lossy output trains on (labels from models.features).
OUTPUT_LABELS = {CLICK_OUTPUT: "is_click", WATCH_OUTPUT: "watch_time_s",
                 CREAD_LOGITS_OUTPUT: "watch_time_s", QUANTILES_OUTPUT: "watch_time_s"}
WATCH_HEADS = ("regression", "cread", "cqe", "cread+cqe")

# ranking_score formulas, by name (a config value; never eval'd).
RANKING_FORMULAS = {
    "click_prob * watch_time_s": lambda o: o[CLICK_OUTPUT] * o[WATCH_OUTPUT],
    "watch_time_s": lambda o: o[WATCH_OUTPUT],
    "click_prob": lambda o: o[CLICK_OUTPUT],
    "click_prob * log1p(watch_time_s)": lambda o: o[CLICK_OUTPUT] * tf.math.log1p(o[WATCH_OUTPUT]),
    "click_prob * dqc": lambda o: o[CLICK_OUTPUT] * o[DQC_OUTPUT],
    "dqc": lambda o: o[DQC_OUTPUT],
    "click_prob * cse": lambda o: o[CLICK_OUTPUT] * o[CSE_OUTPUT],
}


def ranking_score(outputs: dict, formula: str):
    """The named `formula` (RANKING_FORMULAS) of the `outputs` dict, [B, 1]."""
    if formula not in RANKING_FORMULAS:
        raise ValueError(f"unknown ranking score formula {formula!r}; known: {sorted(RANKING_FORMULAS)}")
    return RANKING_FORMULAS[formula](outputs)


def training_labels(output_names, click_label, watch_label) -> dict:
    """{output: label tensor} for every output of `output_names` that trains on a label."""
    by_key = {"is_click": click_label, "watch_time_s": watch_label}
    return {o: by_key[OUTPUT_LABELS[o]] for o in output_names if o in OUTPUT_LABELS}


def log1p_mse(y_true, y_pred):
    """Squared error in log1p space: (log1p(y) - log1p(ŷ))²."""
    y_true = tf.cast(y_true, tf.float32)
    return tf.reduce_mean(tf.square(tf.math.log1p(y_true) - tf.math.log1p(tf.maximum(y_pred, 0.0))), axis=-1)


class ClickHead:
    """Click probability from z (plus an optional first-order logit, eq. 15 of xDeepFM)."""

    output_name = CLICK_OUTPUT

    def outputs(self, z, linear_logit=None):
        logit = keras.layers.Dense(1, name="click_logit")(z)
        if linear_logit is not None:
            logit = keras.layers.Add(name="click_logit_plus_linear")([logit, linear_logit])
        return {CLICK_OUTPUT: keras.layers.Activation("sigmoid", name=CLICK_OUTPUT)(logit)}

    def losses(self):
        return {CLICK_OUTPUT: keras.losses.BinaryCrossentropy()}

    def metrics(self):
        return {CLICK_OUTPUT: [keras.metrics.AUC(name="auc")]}


class WatchTimeRegressionHead:
    """Watch time in seconds, trained as a regression on log1p(seconds)."""

    output_name = WATCH_OUTPUT

    def outputs(self, z, linear_logit=None):
        log_watch = keras.layers.Dense(1, activation="softplus", name="log1p_watch")(z)
        watch = keras.layers.Lambda(lambda t: tf.math.expm1(t), name=WATCH_OUTPUT)(log_watch)
        return {WATCH_OUTPUT: watch}

    def losses(self):
        return {WATCH_OUTPUT: log1p_mse}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}


class CreadWatchHead:
    """CREAD (models/cread.py) as a pluggable head: logits -> φ_m = P(y > t_m) ->
    restored E[y] (rule `restoration`). Loss: CreadLoss on "cread_logits" (λ_ce Σ BCE +
    λ_restore Huber + λ_ord ordinal penalty); "watch_time_s" carries the MAE metric."""

    output_name = WATCH_OUTPUT

    def __init__(self, thresholds, restoration="trapezoid", phi0=1.0, lambda_ce=1.0,
                 lambda_restore=1.0, lambda_ord=1.0, huber_delta=1.0):
        self.thresholds = cread_lib.validate_thresholds(thresholds).tolist()
        self.restoration, self.phi0 = restoration, float(phi0)
        self.loss_kw = dict(lambda_ce=lambda_ce, lambda_restore=lambda_restore, lambda_ord=lambda_ord,
                            huber_delta=huber_delta, restoration=restoration, phi0=phi0)

    def outputs(self, z, linear_logit=None):
        out = cread_lib.CreadHead(self.thresholds, restoration=self.restoration, phi0=self.phi0,
                                  name="cread")(z)
        return {CREAD_LOGITS_OUTPUT: keras.layers.Activation("linear", name=CREAD_LOGITS_OUTPUT)(out["logits"]),
                WATCH_OUTPUT: keras.layers.Reshape((1,), name=WATCH_OUTPUT)(out["watch_time"])}

    def losses(self):
        return {CREAD_LOGITS_OUTPUT: cread_lib.CreadLoss(self.thresholds, **self.loss_kw)}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}


class CqeWatchHead:
    """CQE (models/cqe.py) as a pluggable head: N monotone quantiles (pinball loss) and
    the CSE / DQC (default k) / CDE point estimates, each [B, 1]. With
    `provides_watch_time` "watch_time_s" = CDE (eq. 8)."""

    output_name = QUANTILES_OUTPUT

    def __init__(self, num_quantiles=100, tau_low=0.25, tau_high=0.7, default_k=0.5,
                 increment="softplus", provides_watch_time=True):
        self.layer_kw = dict(num_quantiles=int(num_quantiles), tau_low=float(tau_low),
                             tau_high=float(tau_high), default_k=float(default_k), increment=increment)
        cqe_lib.CqeHead(**self.layer_kw)  # validates the arguments now
        self.provides_watch_time = bool(provides_watch_time)

    def outputs(self, z, linear_logit=None):
        out = cqe_lib.CqeHead(**self.layer_kw, name="cqe")(z)
        res = {QUANTILES_OUTPUT: keras.layers.Activation("linear", name=QUANTILES_OUTPUT)(out["quantiles"])}
        for key in (CSE_OUTPUT, DQC_OUTPUT, CDE_OUTPUT):
            res[key] = keras.layers.Reshape((1,), name=key)(out[key])
        if self.provides_watch_time:
            res[WATCH_OUTPUT] = keras.layers.Activation("linear", name=WATCH_OUTPUT)(res[CDE_OUTPUT])
        return res

    def losses(self):
        return {QUANTILES_OUTPUT: cqe_lib.PinballLoss(self.layer_kw["num_quantiles"])}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]} if self.provides_watch_time else {}


@keras.saving.register_keras_serializable(package="watchtime_ranker")
class RankingScore(keras.layers.Layer):
    """ranking_score = RANKING_FORMULAS[formula](outputs), e.g. p_click · E[watch]."""

    def __init__(self, formula="click_prob * watch_time_s", **kwargs):
        super().__init__(**kwargs)
        if formula not in RANKING_FORMULAS:
            raise ValueError(f"unknown ranking score formula {formula!r}; known: {sorted(RANKING_FORMULAS)}")
        self.formula = formula

    def call(self, outputs):
        return ranking_score(outputs, self.formula)

    def get_config(self):
        return {**super().get_config(), "formula": self.formula}


class RankingScoreHead:
    """Combines the other heads' outputs into "ranking_score" [B, 1] (no loss)."""

    output_name = RANKING_OUTPUT
    combines_outputs = True

    def __init__(self, formula="click_prob * watch_time_s"):
        RankingScore(formula)  # validates
        self.formula = formula

    def combine(self, outputs):
        missing = [o for o in (CLICK_OUTPUT, WATCH_OUTPUT, DQC_OUTPUT, CSE_OUTPUT)
                   if o in self.formula.replace("(", " ").replace(")", " ").split() and o not in outputs]
        if missing:
            raise ValueError(f"ranking score {self.formula!r} needs outputs {missing} "
                             f"(dqc/cse need the CQE head); have {sorted(outputs)}")
        return {RANKING_OUTPUT: RankingScore(self.formula, name=RANKING_OUTPUT)(dict(outputs))}

    def losses(self):
        return {}

    def metrics(self):
        return {}


def default_heads():
    return [ClickHead(), WatchTimeRegressionHead()]


def heads_from_config(hp: dict, thresholds=None) -> list:
    """Heads of the trainer config `hp`: click head, the watch head(s) named by
    `watch_head` (WATCH_HEADS) and the ranking score `ranking_score` (formula name).
    `thresholds` (EAD, from the transform graph) is required for CREAD."""
    watch = hp.get("watch_head", "regression")
    if watch not in WATCH_HEADS:
        raise ValueError(f"unknown watch_head {watch!r}; known: {WATCH_HEADS}")
    heads = [ClickHead()]
    if watch == "regression":
        heads.append(WatchTimeRegressionHead())
    if "cread" in watch:
        if thresholds is None:
            raise ValueError(f"watch_head {watch!r} needs the EAD thresholds of the transform graph")
        c = dict(hp.get("cread") or {})
        heads.append(CreadWatchHead(thresholds, restoration=c.get("restoration", "trapezoid"),
                                    phi0=c.get("phi0", 1.0), lambda_ce=c.get("lambda_ce", 1.0),
                                    lambda_restore=c.get("lambda_restore", 1.0),
                                    lambda_ord=c.get("lambda_ord", 1.0),
                                    huber_delta=c.get("huber_delta", 1.0)))
    if "cqe" in watch:
        q = dict(hp.get("cqe") or {})
        heads.append(CqeWatchHead(num_quantiles=q.get("num_quantiles", 100), tau_low=q.get("tau_low", 0.25),
                                  tau_high=q.get("tau_high", 0.7), default_k=q.get("default_k", 0.5),
                                  increment=q.get("increment", "softplus"),
                                  provides_watch_time=watch == "cqe"))
    heads.append(RankingScoreHead(hp.get("ranking_score", "click_prob * watch_time_s")))
    return heads


def loss_weights_from_config(hp: dict) -> dict:
    """{output: weight} of the multi-task loss: click, regression watch, CREAD, CQE."""
    return {CLICK_OUTPUT: float(hp.get("loss_weight_click", 1.0)),
            WATCH_OUTPUT: float(hp.get("loss_weight_watch", 1.0)),
            CREAD_LOGITS_OUTPUT: float(hp.get("loss_weight_cread", 1.0)),
            QUANTILES_OUTPUT: float(hp.get("loss_weight_cqe", 1.0))}


def compile_ranker(inputs, representation, heads=None, linear_logit=None, learning_rate=1e-3,
                   loss_weights=None, name="ranker") -> keras.Model:
    """keras.Model(inputs -> {output: tensor}) with every head's loss and metrics, compiled.

    `linear_logit` (optional, [B, 1]) is added to the click logit only.
    """
    heads = list(heads) if heads is not None else default_heads()
    names = [h.output_name for h in heads]
    if len(set(names)) != len(names):
        raise ValueError(f"compile_ranker: duplicate head outputs {names}")
    outputs, losses, metrics = {}, {}, {}
    for head in heads:
        if getattr(head, "combines_outputs", False):
            new = head.combine(outputs)
        else:
            new = head.outputs(representation, linear_logit=linear_logit)
        clash = sorted(set(new) & set(outputs))
        if clash:
            raise ValueError(f"compile_ranker: duplicate head outputs {clash}")
        outputs.update(new)
        losses.update(head.losses())
        metrics.update(head.metrics())
    loss_weights = {k: float(v) for k, v in (loss_weights or {}).items() if k in losses}
    model = keras.Model(inputs=inputs, outputs=outputs, name=name)
    model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=losses,
                  loss_weights={k: loss_weights.get(k, 1.0) for k in losses}, metrics=metrics)
    return model
