"""WLR as a head (bench baseline): the wiring of models/watch_time/wlr.py."""
import tf_keras as keras

from models.heads.base import Head
from models.heads.outputs import WATCH_OUTPUT, WLR_LOGIT_OUTPUT
from models.watch_time import wlr as wlr_lib


class WlrWatchHead(Head):
    """YouTube WLR (Covington et al. 2016): "wlr_logit" [B, 1] (training only; loss
    `WlrLoss`, the weighted BCE / `scale`) and "watch_time_s" = exp(logit) [B, 1]
    (metric MAE). `scale`: e.g. the mean train watch time."""

    name = WATCH_OUTPUT
    output_names = (WLR_LOGIT_OUTPUT, WATCH_OUTPUT)

    def __init__(self, scale=1.0):
        self.scale = float(scale)
        wlr_lib.WlrLoss(self.scale)  # validates

    def build(self, representation, linear_logit=None, outputs=None):
        logit = keras.layers.Dense(1, name=WLR_LOGIT_OUTPUT)(representation)
        watch = keras.layers.Lambda(wlr_lib.wlr_watch_time, name=WATCH_OUTPUT)(logit)
        return {WLR_LOGIT_OUTPUT: logit, WATCH_OUTPUT: watch}

    def losses(self):
        return {WLR_LOGIT_OUTPUT: wlr_lib.WlrLoss(self.scale)}

    def metrics(self):
        return {WATCH_OUTPUT: [keras.metrics.MeanAbsoluteError(name="mae")]}
