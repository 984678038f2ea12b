"""Constants of the simulator: the generative model's knobs and the release's vocabularies.

``SimParams`` holds every constant of the generative model; its fields carry the
symbols used in the equations of ``users``, ``videos``, ``feed`` and
``interactions``. The module-level arrays are measured on KuaiRand-Pure (hourly
and weekday traffic, tab / upload-type / frame-size frequencies, one-hot
cardinalities) or copied from it (the ``*_range`` bins of the user table).
"""
from __future__ import annotations

import dataclasses

import numpy as np

# Levels of the truth file's q10_s..q90_s columns.
QUANTILE_LEVELS = (0.10, 0.25, 0.50, 0.75, 0.90)

# long_view = 1 iff play_time_ms >= 18 s or the whole video was played.
LONG_VIEW_MIN_PLAY_MS = 18_000

# Share of impressions per hour of day (UTC+8), measured on KuaiRand-Pure 04-25..04-30.
HOURLY_ACTIVITY = np.array([
    0.0352, 0.0214, 0.0141, 0.0092, 0.0079, 0.0105, 0.0195, 0.0272, 0.0328, 0.0378,
    0.0429, 0.0487, 0.0567, 0.0540, 0.0479, 0.0499, 0.0537, 0.0605, 0.0574, 0.0575,
    0.0623, 0.0683, 0.0659, 0.0587,
])
# Relative traffic by weekday (Mon..Sun); the real window peaks at the weekend.
WEEKDAY_WEIGHT = np.array([1.0, 0.98, 0.97, 0.95, 1.07, 1.43, 1.38])
# Real KuaiRand-Pure tab frequencies.
TAB_VALUES = np.array([1, 0, 4, 6, 2, 8, 5, 12, 3, 11, 9, 7, 13, 10, 14])
TAB_PROBS = np.array([
    0.7386, 0.0945, 0.0637, 0.0602, 0.0285, 0.0047, 0.0031, 0.0022, 0.0015,
    0.0009, 0.0007, 0.0007, 0.0003, 0.0003, 0.0001,
])
UPLOAD_TYPES = np.array([
    "LongImport", "Web", "ShortImport", "Kmovie", "LongPicture", "UNKNOWN",
    "PictureSet", "LongCamera", "ShortCamera", "ShareFromOtherApp", "FollowShoot",
])
UPLOAD_TYPE_PROBS = np.array([
    0.3857, 0.3186, 0.1209, 0.1159, 0.0189, 0.0105, 0.0096, 0.0084, 0.0057,
    0.0038, 0.0020,
])
TAG_IDS = np.array([39, 3, 9, 6, 20, 7, 12, 1, 2, 5, 8, 11, 28, 49, 68, 31])
# (width, height, probability) of the common real frame sizes.
FRAME_SIZES = [(720.0, 1280.0, 0.70), (1280.0, 720.0, 0.18), (960.0, 1280.0, 0.04),
               (1080.0, 1920.0, 0.03), (720.0, 1440.0, 0.03), (540.0, 960.0, 0.02)]
ONEHOT_CARDINALITY = [2, 7, 50, 1471, 15, 34, 3, 118, 454, 7, 5, 5, 2, 2, 2, 2, 2, 2]
ONEHOT_FLOAT = {4, 12, 13, 14, 15, 16, 17}  # written as 1.0/NaN, as in the release

# Value ranges of the release's *_range columns: (label, lower bound inclusive).
FOLLOW_BINS = [("0", 0), ("(0,10]", 1), ("(10,50]", 11), ("(50,100]", 51),
               ("(100,150]", 101), ("(150,250]", 151), ("(250,500]", 251), ("500+", 501)]
FANS_BINS = [("0", 0), ("[1,10)", 1), ("[10,100)", 10), ("[100,1k)", 100),
             ("[1k,5k)", 1000), ("[5k,1w)", 5000), ("[1w,10w)", 10_000),
             ("[10w,100w)", 100_000), ("[100w,1000w)", 1_000_000)]
FRIEND_BINS = [("0", 0), ("[1,5)", 1), ("[5,30)", 5), ("[30,60)", 30), ("[60,120)", 60),
               ("[120,250)", 120), ("250+", 250)]
REGISTER_BINS = [("8-14", 8), ("15-30", 15), ("31-60", 31), ("61-90", 61),
                 ("91-180", 91), ("181-365", 181), ("366-730", 366), ("730+", 731)]


@dataclasses.dataclass(frozen=True)
class SimParams:
    """Constants of the generative model (symbols as in the module docstrings of
    ``users``/``videos`` (latent factors), ``feed`` (exposure) and ``interactions``
    (click and watch time)).

    Defaults are tuned so that the default-size run matches the KuaiRand-Pure
    marginals: click rate 0.44, watch time p30 1.8 s / p50 4.5 s / p80 30 s /
    p99 208 s, duration median 71 s.
    """

    latent_dim: int = 8            # K
    num_topics: int = 12           # T
    user_scale: float = 0.6        # s_u
    video_noise: float = 0.7       # s_v
    user_bias_scale: float = 0.85  # s_bu
    user_feat0_effect: float = 0.4  # beta_f0
    video_bias_scale: float = 0.7  # s_bv
    topic_bias_scale: float = 0.3  # s_tb
    duration_median_s: float = 71.0
    duration_sigma: float = 1.0    # s_D
    duration_min_s: float = 5.0
    duration_max_s: float = 1200.0
    activity_sigma: float = 1.4    # s_act, log-sd of user activity
    popularity_sigma: float = 1.0  # s_pop
    exposure_temperature: float = 0.4  # tau
    # click
    click_bias: float = -0.48      # c0
    click_affinity: float = 0.85   # c_a
    click_log_duration: float = 0.2  # c_l
    # no-click preview play
    preview_s: float = 7.0         # P
    skip_zero_prob: float = 0.18   # z0
    skip_median_s: float = 2.3     # m_s
    skip_sigma: float = 0.9        # s_s
    # click: early exit
    early_bias: float = -3.0       # e0
    early_affinity: float = 0.5    # e_a
    early_median_s: float = 3.5    # m_e
    early_sigma: float = 0.6       # s_e
    # click: completion and tail
    complete_bias: float = -1.7    # f0
    complete_affinity: float = 0.6  # f_a
    complete_log_duration: float = 0.9  # f_l
    overrun_mean: float = 0.12     # r1
    loop_prob: float = 0.12        # rho
    loop_mean: float = 0.8         # r2
    # click: partial view fraction (logit-normal)
    frac_bias: float = -1.4        # g0
    frac_affinity: float = 0.5     # g_a
    frac_log_duration: float = 0.4  # g_l
    frac_scale: float = 1.6        # s_g
