"""Videos: latent vector, bias, duration and popularity, and the ``video_features_basic`` table.

Latent factors (dimension K, T topics, all draws from the video stream of the seed)::

    c_t ~ N(0, I_K),  t_j ~ Zipf(T)                    topic centroids, video topic
    v_j = c_{t_j} + s_v * N(0, I_K)                    video vector
    b_j = s_bv * N(0,1) + topic_bias_{t_j}             video bias (centred),
                                                       topic_bias_t ~ N(0, s_tb^2)
    D_j = clip(exp(N(ln 71 s, s_D^2)), 5 s, 1200 s),   l_j = ln(D_j / 71 s)
    pop_j ~ LogNormal(0, s_pop^2)                      popularity (exposure in ``feed``)

``D_j`` is rounded to whole ms; the log's ``duration_ms`` equals the table's
``video_duration``.

Side table (``VIDEO_COLUMNS`` of the release): ``tag`` is the topic's tag plus up
to two extra tags (1.3% NaN); authors are Zipf over ~0.86 authors per video; 1%
of videos are ``AD`` (no music); ``upload_dt`` is 14-16 days before the first
simulated day; upload types and frame sizes follow the real frequencies.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd

from data.simulator._random import zipf_probs
from data.simulator.params import (
    FRAME_SIZES, TAG_IDS, UPLOAD_TYPE_PROBS, UPLOAD_TYPES, SimParams,
)
from schemas.kuairand_format import VIDEO_COLUMNS


def make_videos(num_videos, start: dt.date, params: SimParams, rng):
    """Video table + latent vector/bias/duration/popularity."""
    K, T = params.latent_dim, params.num_topics
    centroids = rng.standard_normal((T, K))
    topic_bias = params.topic_bias_scale * rng.standard_normal(T)
    topic = rng.choice(T, size=num_videos, p=zipf_probs(T, 0.8, rng))
    vec = centroids[topic] + params.video_noise * rng.standard_normal((num_videos, K))
    bias = params.video_bias_scale * rng.standard_normal(num_videos) + topic_bias[topic]
    bias -= bias.mean()
    duration_s = np.clip(
        params.duration_median_s * np.exp(params.duration_sigma * rng.standard_normal(num_videos)),
        params.duration_min_s, params.duration_max_s)
    duration_ms = np.round(duration_s * 1000).astype(np.int64)
    popularity = np.exp(params.popularity_sigma * rng.standard_normal(num_videos))

    topic_tag = TAG_IDS[:T] if T <= len(TAG_IDS) else TAG_IDS[np.arange(T) % len(TAG_IDS)]
    n_tags = rng.choice(3, size=num_videos, p=[0.76, 0.236, 0.004]) + 1
    extra = rng.choice(TAG_IDS, size=(num_videos, 2))
    tags = []
    for j in range(num_videos):
        ids = [int(topic_tag[topic[j]])]
        for t in extra[j, : n_tags[j] - 1]:
            if int(t) not in ids:
                ids.append(int(t))
        tags.append(",".join(str(t) for t in ids))
    tags = np.array(tags, dtype=object)
    tags[rng.random(num_videos) < 0.013] = np.nan

    num_authors = max(1, int(0.86 * num_videos))
    authors = rng.choice(np.arange(100_000, 8_733_984), size=num_authors, replace=False)
    author_id = authors[rng.choice(num_authors, size=num_videos,
                                   p=zipf_probs(num_authors, 0.5, rng))]
    is_ad = rng.random(num_videos) < 0.01
    music_id = rng.integers(9_100_000_000, 9_170_219_000, num_videos)
    music_id[is_ad | (rng.random(num_videos) < 0.02)] = 0
    music_type = rng.choice([9.0, 4.0, 8.0, 7.0, 11.0], size=num_videos,
                            p=[0.905, 0.085, 0.006, 0.003, 0.001])
    music_type[is_ad | (rng.random(num_videos) < 0.017)] = np.nan
    upload = [(start - dt.timedelta(days=int(k))).isoformat()
              for k in rng.choice([14, 15, 16], size=num_videos, p=[0.45, 0.37, 0.18])]
    sizes = np.array([(w, h) for w, h, _ in FRAME_SIZES])
    size_p = np.array([share for *_, share in FRAME_SIZES])
    size_idx = rng.choice(len(FRAME_SIZES), size=num_videos, p=size_p / size_p.sum())

    df = pd.DataFrame({
        "video_id": np.arange(num_videos, dtype=np.int64),
        "author_id": author_id.astype(np.int64),
        "video_type": np.where(is_ad, "AD", "NORMAL"),
        "upload_dt": upload,
        "upload_type": rng.choice(UPLOAD_TYPES, size=num_videos,
                                  p=UPLOAD_TYPE_PROBS / UPLOAD_TYPE_PROBS.sum()),
        "visible_status": np.zeros(num_videos),
        "video_duration": duration_ms.astype(np.float64),
        "server_width": sizes[size_idx, 0],
        "server_height": sizes[size_idx, 1],
        "music_id": music_id.astype(np.int64),
        "music_type": music_type,
        "tag": tags,
    })
    return df[VIDEO_COLUMNS], vec, bias, duration_ms, popularity
