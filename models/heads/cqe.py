"""CQE as a head: the wiring of models/watch_time/cqe.py (the math lives there)."""
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import CDE_OUTPUT, CSE_OUTPUT, DQC_OUTPUT, QUANTILES_OUTPUT, WATCH_OUTPUT
from models.watch_time import cqe as cqe_lib


class CqeWatchHead(Head):
    """CQE (Lin et al. 2024): N monotone quantiles of watch time and the CSE / DQC
    (default k) / CDE point estimates.

    Outputs "quantiles" [B, N] (loss: pinball, `PinballLoss` in `loss_space` "seconds"
    or "log1p", `batch_reduction` "mean" or "sum"), "cse", "dqc", "cde" [B, 1] and,
    with `provides_watch_time` (CQE the only watch head), "watch_time_s" = CDE (CQE
    eq. 8; metric MAE). `tower_units` / `stop_gradient`: the head's own MLP on
    stop_gradient(z) (models/watch_time/cqe.py). `conformal`: the Trainer fits the
    layer's split-conformal levels on the validation split after training
    (models/watch_time/conformal.py; read by run_fn, not by the layer).
    """

    name = QUANTILES_OUTPUT

    def __init__(self, num_quantiles=100, tau_low=0.25, tau_high=0.7, default_k=0.5,
                 increment="softplus", tower_units=(), stop_gradient=False, loss_space="seconds",
                 batch_reduction="mean", conformal=False, provides_watch_time=True):
        self.layer_kw = dict(num_quantiles=int(num_quantiles), tau_low=float(tau_low),
                             tau_high=float(tau_high), default_k=float(default_k), increment=increment,
                             tower_units=[int(u) for u in tower_units], stop_gradient=bool(stop_gradient))
        cqe_lib.CqeHead(**self.layer_kw)  # validates the arguments now
        self.loss_kw = dict(space=loss_space, batch_reduction=batch_reduction)
        cqe_lib.PinballLoss(int(num_quantiles), **self.loss_kw)  # validates
        self.conformal = bool(conformal)
        self.provides_watch_time = bool(provides_watch_time)
        self.output_names = ((QUANTILES_OUTPUT, CSE_OUTPUT, DQC_OUTPUT, CDE_OUTPUT)
                             + ((WATCH_OUTPUT,) if self.provides_watch_time else ()))

    def build(self, representation, linear_logit=None, outputs=None):
        out = cqe_lib.CqeHead(**self.layer_kw, name="cqe")(representation)
        res = {QUANTILES_OUTPUT: keras.layers.Activation("linear", name=QUANTILES_OUTPUT)(out["quantiles"])}
        for key in (CSE_OUTPUT, DQC_OUTPUT, CDE_OUTPUT):
            res[key] = keras.layers.Reshape((1,), name=key)(out[key])
        if self.provides_watch_time:
            res[WATCH_OUTPUT] = keras.layers.Activation("linear", name=WATCH_OUTPUT)(res[CDE_OUTPUT])
        return res

    def losses(self):
        return {QUANTILES_OUTPUT: cqe_lib.PinballLoss(self.layer_kw["num_quantiles"], **self.loss_kw)}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]} if self.provides_watch_time else {}
