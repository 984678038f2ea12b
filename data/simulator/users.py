"""Users: latent taste, bias and activity, and the ``user_features`` table.

Latent factors (dimension K, all draws from the user stream of the seed)::

    u_i ~ N(0, s_u^2 / K * I_K)                              user taste
    b_i = s_bu * N(0,1) + beta_f0 * (onehot_feat0_i - 1/2)   user bias (centred)
    lambda_i ~ LogNormal(0, s_act^2)                         activity (heavy tailed;
                                                             rescaled in ``feed``)

``b_i`` is centred over users, which keeps the click rate stable across seeds.

Side table (``USER_COLUMNS`` of the release): ``onehot_feat0..17`` are Zipf draws
over the release's cardinalities (``onehot_feat5`` is 0 for 99% of users; the
columns in ``ONEHOT_FLOAT`` are written as floats with NaNs, as in the release);
``user_active_degree`` follows the activity rank (the heaviest 66% are
``full_active``, then ``high_active``, ``middle_active``, rare labels); follow,
fans and friend counts are floored lognormals with a point mass at 0, and each
``*_range`` column is the release's bin label of its count.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from data.simulator._random import zipf_probs
from data.simulator.params import (
    FANS_BINS, FOLLOW_BINS, FRIEND_BINS, ONEHOT_CARDINALITY, ONEHOT_FLOAT, REGISTER_BINS,
    SimParams,
)
from schemas.kuairand_format import USER_COLUMNS


def bin_labels(values, bins):
    """Label of the bin ``(label, lower bound inclusive)`` each value falls into."""
    lows = np.array([b[1] for b in bins])
    labels = np.array([b[0] for b in bins], dtype=object)
    return labels[np.searchsorted(lows, values, side="right") - 1]


def make_users(num_users, params: SimParams, rng):
    """User table + latent taste/bias/activity."""
    K = params.latent_dim
    taste = rng.normal(0, params.user_scale / np.sqrt(K), (num_users, K))
    activity = np.exp(params.activity_sigma * rng.standard_normal(num_users))

    onehot = {}
    for k, card in enumerate(ONEHOT_CARDINALITY):
        if k == 5:  # mostly 0 in the release
            vals = np.where(rng.random(num_users) < 0.99, 0, rng.integers(0, card, num_users))
        else:
            vals = rng.choice(card, size=num_users, p=zipf_probs(card, 1.1, rng))
        onehot[k] = vals
    bias = (params.user_bias_scale * rng.standard_normal(num_users)
            + params.user_feat0_effect * (onehot[0] - 0.5))
    bias -= bias.mean()  # keeps the click rate stable across seeds

    # Activity rank decides the degree label (heaviest users are full_active).
    order = np.argsort(-activity, kind="stable")
    rank_share = np.empty(num_users)
    rank_share[order] = (np.arange(num_users) + 0.5) / num_users
    rare = np.array(["low_active", "2_14_day_new", "single_low_active"], dtype=object)
    degree = np.where(rank_share < 0.66, "full_active",
                      np.where(rank_share < 0.89, "high_active",
                               np.where(rank_share < 0.97, "middle_active",
                                        rare[rng.integers(0, 3, num_users)])))

    def count(median, sigma, zero_prob, cap):
        x = np.floor(median * np.exp(sigma * rng.standard_normal(num_users)))
        x = np.where(rng.random(num_users) < zero_prob, 0, np.clip(x, 0, cap))
        return x.astype(np.int64)

    follow = count(155, 1.5, 0.007, 5003)
    fans = count(48, 1.8, 0.04, 1_986_249)
    friend = count(16, 1.6, 0.12, 4995)
    register = np.where(rng.random(num_users) < 0.73,
                        rng.integers(731, 3625, num_users),
                        np.exp(rng.uniform(np.log(15), np.log(731), num_users)).astype(np.int64))
    register = np.minimum(register, 3624)

    df = pd.DataFrame({
        "user_id": np.arange(num_users, dtype=np.int64),
        "user_active_degree": degree,
        "is_lowactive_period": np.zeros(num_users, dtype=np.int64),
        "is_live_streamer": np.where(rng.random(num_users) < 0.23, 1, -124).astype(np.int64),
        "is_video_author": (rng.random(num_users) < 0.82).astype(np.int64),
        "follow_user_num": follow,
        "follow_user_num_range": bin_labels(follow, FOLLOW_BINS),
        "fans_user_num": fans,
        "fans_user_num_range": bin_labels(fans, FANS_BINS),
        "friend_user_num": friend,
        "friend_user_num_range": bin_labels(friend, FRIEND_BINS),
        "register_days": register,
        "register_days_range": bin_labels(register, REGISTER_BINS),
    })
    feat4_nan = rng.random(num_users) < 0.03
    group_nan = rng.random(num_users) < 0.026
    for k in range(18):
        vals = onehot[k]
        if k in ONEHOT_FLOAT:
            vals = vals.astype(np.float64)
            vals[feat4_nan if k == 4 else group_nan] = np.nan
        df[f"onehot_feat{k}"] = vals
    return df[USER_COLUMNS], taste, bias, activity
