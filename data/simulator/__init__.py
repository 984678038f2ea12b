"""Deterministic short-video log simulator writing KuaiRand-Pure-format files.

``simulate(out_dir, ...)`` writes four CSV files whose column names, order and
value kinds follow the public KuaiRand-Pure release (Gao et al., CIKM 2022)::

    log_standard_sim.csv          impressions, sorted by time_ms
    user_features_sim.csv         one row per user id 0..num_users-1
    video_features_basic_sim.csv  one row per video id 0..num_videos-1
    truth_sim.csv                 per log row: true p_click, E[watch], quantiles

The same seed gives byte-identical files; another seed gives other files.

Generative model in one screen (each module's docstring has the full equations)::

    u_i, b_i, lambda_i          user taste, bias, activity            users.py
    v_j, b_j, D_j, pop_j        video vector, bias, duration, pop.    videos.py
    a_ij = u_i . v_j + b_i + b_j                                     affinity
    n_id ~ Poisson(lambda_i w_d), P(j | i) ~ pop_j exp(tau u_i . v_j) feed.py
    p_click = sigmoid(c0 + c_a a_ij - c_l l_j), W ~ skip / early /
      completion / partial mixture, exact E[W] and quantiles        interactions.py
    sessions, time_ms (UTC+8 date/hourmin), tab                      feed.py
    CSV tables in the release format                                 writer.py

Modules: ``params`` (SimParams and measured constants), ``users``, ``videos``,
``feed``, ``interactions``, ``writer``, ``marginals`` (calibration measures),
``simulation`` (``simulate``), ``cli`` (``main``).

Example::

    python -m data.simulator --out data/generated/sim --users 300 --videos 400 \\
        --days 6 --seed 7
"""
from data.simulator.cli import main
from data.simulator.interactions import (
    WatchParams, expected_watch_time, sample_engagement, sample_watch_time, watch_time_cdf,
    watch_time_quantiles,
)
from data.simulator.marginals import measure_marginals
from data.simulator.params import (
    HOURLY_ACTIVITY, LONG_VIEW_MIN_PLAY_MS, QUANTILE_LEVELS, TAB_PROBS, TAB_VALUES,
    WEEKDAY_WEIGHT, SimParams,
)
from data.simulator.simulation import simulate
from data.simulator.writer import LOG_FILE, TRUTH_COLUMNS, TRUTH_FILE, USER_FILE, VIDEO_FILE

__all__ = [
    "HOURLY_ACTIVITY", "LOG_FILE", "LONG_VIEW_MIN_PLAY_MS", "QUANTILE_LEVELS", "SimParams",
    "TAB_PROBS", "TAB_VALUES", "TRUTH_COLUMNS", "TRUTH_FILE", "USER_FILE", "VIDEO_FILE",
    "WEEKDAY_WEIGHT", "WatchParams", "expected_watch_time", "main", "measure_marginals",
    "sample_engagement", "sample_watch_time", "simulate", "watch_time_cdf",
    "watch_time_quantiles",
]
