"""D2Q: duration-deconfounded quantile watch-time prediction (Zhan et al., KDD 2022,
"Deconfounding Duration Bias in Watch-time Prediction for Video Recommendation").

Long videos collect long watch times whatever the user's interest (duration bias).
D2Q removes duration from the label and adds it back at prediction time:

1. Split the train impressions into G duration groups of equal frequency: edges
   ``e_k = F_D^{-1}(k/G)``, k = 1..G-1 (inverted-CDF quantiles, so every edge is an
   observed duration); group ``g(d) = #{k : e_k <= d}``.
2. In group g the label is the watch time's percentile in that group (mid-rank
   empirical CDF, ties share the middle of their ranks):
   ``p = F_g(y) = (#{y' < y} + ½ #{y' = y}) / n_g``, over the group's train rows y'.
3. A model regresses p (sigmoid output, MSE) from the features.
4. The estimate is the group's quantile function at the predicted percentile,
   ``ŷ = F_g^{-1}(p̂)``: linear interpolation through the points
   ``((i + ½) / n_g, y_(i))`` of the sorted group sample, clamped at its ends. It
   inverts step 2: ``F_g^{-1}(F_g(y)) = y`` for every train y.

A group without train rows (possible only when durations tie heavily) uses all
train rows. Example::

    d2q = D2Q(train_duration_s, train_watch_s, num_groups=30)
    labels = d2q.percentile(train_duration_s, train_watch_s)      # in (0, 1)
    watch_hat = d2q.watch_time(eval_duration_s, predicted_percentile)
"""
import numpy as np


class D2Q:
    """Duration groups and per-group watch-time distributions of a train sample."""

    def __init__(self, durations, watch_times, num_groups: int = 30):
        durations = np.asarray(durations, np.float64).reshape(-1)
        watch_times = np.asarray(watch_times, np.float64).reshape(-1)
        if durations.shape != watch_times.shape or durations.size == 0:
            raise ValueError(f"D2Q: need equally many durations and watch times (> 0), got "
                             f"{durations.size} and {watch_times.size}")
        if int(num_groups) < 1:
            raise ValueError(f"D2Q: num_groups must be >= 1, got {num_groups}")
        levels = np.arange(1, int(num_groups)) / float(num_groups)
        self.edges = np.unique(np.quantile(durations, levels, method="inverted_cdf")) if levels.size else np.array([])
        groups = self.group(durations)
        everyone = np.sort(watch_times)
        self.sorted_watch = []
        for g in range(self.num_groups):
            sample = np.sort(watch_times[groups == g])
            self.sorted_watch.append(sample if sample.size else everyone)

    @property
    def num_groups(self) -> int:
        return self.edges.size + 1

    def group(self, durations) -> np.ndarray:
        """g(d) = #{k : e_k <= d}."""
        return np.searchsorted(self.edges, np.asarray(durations, np.float64).reshape(-1), side="right")

    def _per_group(self, durations, values, fn) -> np.ndarray:
        """fn(sorted train sample of group g, values of the rows in g) for every group."""
        values = np.asarray(values, np.float64).reshape(-1)
        groups = self.group(durations)
        out = np.empty_like(values)
        for g in np.unique(groups):
            rows = groups == g
            out[rows] = fn(self.sorted_watch[g], values[rows])
        return out

    def percentile(self, durations, watch_times) -> np.ndarray:
        """Mid-rank percentile of each watch time in its duration group (step 2)."""
        def mid_rank(s, y):
            below = np.searchsorted(s, y, side="left")
            return (below + 0.5 * (np.searchsorted(s, y, side="right") - below)) / s.size

        return self._per_group(durations, watch_times, mid_rank)

    def watch_time(self, durations, percentiles) -> np.ndarray:
        """F_g^{-1}(p): the group's interpolated quantile function (step 4)."""
        return self._per_group(durations, percentiles,
                               lambda s, p: np.interp(p, (np.arange(s.size) + 0.5) / s.size, s))
