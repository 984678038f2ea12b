"""The KuaiRand-Pure release format: the one definition of its files and columns.

KuaiRand (Gao et al., CIKM 2022, CC BY-SA 4.0) ships three CSV tables per release;
the simulator (data/simulator/) writes them and LogExampleGen
(components/log_example_gen/) reads them, both from these names:

- log files ``log_*.csv``: one impression per row (``LOG_COLUMNS``), ``date``
  (yyyymmdd) and ``hourmin`` (hhmm) in UTC+8, ``time_ms`` the Unix time in ms;
- user features ``user_features*.csv`` (``USER_COLUMNS``);
- video features ``video_features_basic*.csv`` (``VIDEO_COLUMNS``).
"""

LOG_FILE_PATTERN = "log_*.csv"
USER_FEATURES_PATTERN = "user_features*.csv"
VIDEO_FEATURES_PATTERN = "video_features_basic*.csv"

LOG_COLUMNS = [
    "user_id", "video_id", "date", "hourmin", "time_ms", "is_click", "is_like",
    "is_follow", "is_comment", "is_forward", "is_hate", "long_view", "play_time_ms",
    "duration_ms", "profile_stay_time", "comment_stay_time", "is_profile_enter",
    "is_rand", "tab",
]
USER_ONEHOT_COLUMNS = [f"onehot_feat{k}" for k in range(18)]
USER_COLUMNS = [
    "user_id", "user_active_degree", "is_lowactive_period", "is_live_streamer",
    "is_video_author", "follow_user_num", "follow_user_num_range", "fans_user_num",
    "fans_user_num_range", "friend_user_num", "friend_user_num_range",
    "register_days", "register_days_range",
] + USER_ONEHOT_COLUMNS
VIDEO_COLUMNS = [
    "video_id", "author_id", "video_type", "upload_dt", "upload_type",
    "visible_status", "video_duration", "server_width", "server_height",
    "music_id", "music_type", "tag",
]

UTC_OFFSET_MS = 8 * 3600 * 1000  # dates and hours are UTC+8 (Asia/Shanghai)
DAY_MS = 86_400_000
