"""Click head: p_click = σ(a·(w_c·z + b_c [+ linear_logit]) + b), binary cross-entropy, AUC.

(a, b) is the Platt calibration (models/heads/calibration.py): the identity while training,
fitted on the validation split after it.
"""
import tf_keras as keras

from models.heads.base import Head
from models.heads.calibration import LAYER_NAME, PlattCalibration
from models.heads.outputs import CLICK_OUTPUT


class ClickHead(Head):
    """Click probability from z (plus an optional first-order logit, eq. 15 of xDeepFM),
    through the calibration layer "click_calibration".

    Output "click_prob" [B, 1]; loss binary cross-entropy on `is_click`; metric AUC.
    """

    name = CLICK_OUTPUT
    output_names = (CLICK_OUTPUT,)

    def build(self, representation, linear_logit=None, outputs=None):
        logit = keras.layers.Dense(1, name="click_logit")(representation)
        if linear_logit is not None:
            logit = keras.layers.Add(name="click_logit_plus_linear")([logit, linear_logit])
        logit = PlattCalibration(name=LAYER_NAME)(logit)
        return {CLICK_OUTPUT: keras.layers.Activation("sigmoid", name=CLICK_OUTPUT)(logit)}

    def losses(self):
        return {CLICK_OUTPUT: keras.losses.BinaryCrossentropy()}

    def metrics(self):
        return {CLICK_OUTPUT: [keras.metrics.AUC(name="auc")]}
