"""CREAD as a head: the wiring of models/watch_time/cread.py (the math lives there)."""
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import CREAD_LOGITS_OUTPUT, WATCH_OUTPUT
from models.watch_time import cread as cread_lib


class CreadWatchHead(Head):
    """CREAD (Sun et al., AAAI 2024): logits -> φ_m = P(y > t_m) -> restored E[y]
    (rule `restoration`, CREAD eq. 4 or the trapezoid rule).

    Outputs "cread_logits" [B, M] (training only; loss `CreadLoss`: λ_ce Σ BCE +
    λ_restore Huber + λ_ord ordinal penalty) and "watch_time_s" [B, 1] (the
    restoration; metric MAE). `thresholds` t_1..t_M are the EAD thresholds of the
    transform graph (models/watch_time/ead_analyzer.py read_ead_result).
    """

    name = WATCH_OUTPUT
    output_names = (CREAD_LOGITS_OUTPUT, WATCH_OUTPUT)

    def __init__(self, thresholds, restoration="trapezoid", phi0=1.0, lambda_ce=1.0,
                 lambda_restore=1.0, lambda_ord=1.0, huber_delta=1.0):
        self.thresholds = cread_lib.validate_thresholds(thresholds).tolist()
        self.restoration, self.phi0 = restoration, float(phi0)
        self.loss_kw = dict(lambda_ce=lambda_ce, lambda_restore=lambda_restore, lambda_ord=lambda_ord,
                            huber_delta=huber_delta, restoration=restoration, phi0=phi0)

    def build(self, representation, linear_logit=None, outputs=None):
        out = cread_lib.CreadHead(self.thresholds, restoration=self.restoration, phi0=self.phi0,
                                  name="cread")(representation)
        return {CREAD_LOGITS_OUTPUT: keras.layers.Activation("linear", name=CREAD_LOGITS_OUTPUT)(out["logits"]),
                WATCH_OUTPUT: keras.layers.Reshape((1,), name=WATCH_OUTPUT)(out["watch_time"])}

    def losses(self):
        return {CREAD_LOGITS_OUTPUT: cread_lib.CreadLoss(self.thresholds, **self.loss_kw)}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}
