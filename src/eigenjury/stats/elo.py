"""Elo ratings from trust vectors, ranks, and from bootstrap draws of Elo: marginal rank
intervals and simultaneous intervals on the differences between models."""

from __future__ import annotations

import numpy as np

from eigenjury.stats.verdicts import FloatArray, IntArray

ELO_BASE = 1500.0
ELO_SCALE = 400.0
# Elo values closer than this are equal. Fits of models the verdicts cannot tell apart
# still differ by up to ~1e-4 points (the optimiser's tolerance); that noise must not
# order them. 0.01 is also the precision of the written record.
ELO_TOLERANCE = 0.01
# The interquartile range of a normal distribution in standard deviations.
_IQR_PER_SD = 1.3489795003921634


def to_elo(
    trust: FloatArray, *, anchor: str | int = "uniform", value: float = ELO_BASE
) -> FloatArray:
    """Elo_j = value + 400 log10(t_j / reference), over the last axis.

    anchor "uniform": reference 1/N, so a uniform trust vector maps to `value` (the
    EigenBench convention); "mean": ratings shifted to average `value`; an integer:
    that model is fixed at `value`.
    """
    log_t = np.log10(trust)
    n = trust.shape[-1]
    if anchor == "uniform":
        ref = np.full((*log_t.shape[:-1], 1), -np.log10(n))
    elif anchor == "mean":
        ref = log_t.mean(axis=-1, keepdims=True)
    elif isinstance(anchor, int | np.integer) and 0 <= anchor < n:
        ref = log_t[..., [anchor]]
    else:
        raise ValueError(f"anchor must be 'uniform', 'mean' or a model index, got {anchor!r}")
    return np.asarray(value + ELO_SCALE * (log_t - ref))


def ranks(values: FloatArray, tolerance: float = ELO_TOLERANCE) -> IntArray:
    """Rank 1 for the largest value; values within `tolerance` share the better rank
    (1, 1, 3: one more than the number of values clearly above)."""
    above = values[None, :] > values[:, None] + tolerance
    return np.asarray(1 + above.sum(axis=1), dtype=np.int64)


def rank_intervals(
    draws: FloatArray, ci: float = 0.95, tolerance: float = ELO_TOLERANCE
) -> IntArray:
    """[best, worst] rank per model: the equal-tailed `ci` percentiles of its ranks over
    the bootstrap draws (rows of Elo, one column per model), rounded outward to ranks
    drawn.

    In a draw, models within `tolerance` are tied and could stand in either order, so a
    tied model holds the ranks from its best (as `ranks` gives it) to its worst; the
    interval's low end comes from the best ranks, its high end from the worst. Models no
    draw tells apart thus get 1-N, never an order made of rounding noise. Marginal: each
    interval holds its model's rank with about `ci`, not all of them at once (for
    statements about several models, see `elo_difference_intervals`).
    """
    tail = _tail(ci)
    n = draws.shape[1]
    best = np.empty(draws.shape, dtype=np.int64)
    worst = np.empty(draws.shape, dtype=np.int64)
    for row, elo in enumerate(draws):
        ordered = np.sort(elo)
        best[row] = 1 + n - np.searchsorted(ordered, elo + tolerance, side="right")
        worst[row] = n - np.searchsorted(ordered, elo - tolerance, side="left")
    low = np.percentile(best, tail, axis=0, method="lower")
    high = np.percentile(worst, 100.0 - tail, axis=0, method="higher")
    return np.stack([low, high], axis=1).astype(np.int64)


def elo_difference_intervals(
    draws: FloatArray, estimate: FloatArray, ci: float = 0.95
) -> FloatArray:
    """Simultaneous `ci` intervals on every difference Elo_i - Elo_j (models x models x 2,
    [low, high] on the last axis).

    Max-t over all pairs: each difference is studentised by its bootstrap spread, and
    the critical value is the `ci` quantile of the largest |t| in a draw, so all
    intervals hold at once with about `ci` (family-wise) and "i is above j" may be read
    off every interval wholly above 0. It uses the correlation between models' Elo
    (Holm or Bonferroni would ignore it and be wider).

    The spread is robust: the interquartile range of the difference over the draws,
    / 1.349 (the standard deviation for normal draws). A few rounds in which the refit
    broke down (BENCHMARKS.md 19) are extreme draws: a quantile-based critical value
    counts them as exceedances, as it should, but a standard deviation would let them
    inflate every interval by orders of magnitude and make the intervals say nothing.
    Where the middle half of the draws does not vary, the standard deviation is used,
    and a difference that no draw varies gets the point interval.
    """
    level = 100.0 - 2.0 * _tail(ci)
    difference = estimate[:, None] - estimate[None, :]
    n = draws.shape[1]
    spread = np.empty((n, n))
    for i in range(n):  # a row at a time: draws x models, never draws x models^2
        gaps = draws[:, [i]] - draws
        q1, q3 = np.percentile(gaps, [25.0, 75.0], axis=0)
        spread[i] = np.where(q3 > q1, (q3 - q1) / _IQR_PER_SD, gaps.std(axis=0))
    varies = spread > 0.0
    largest = np.zeros(len(draws))
    for row, elo in enumerate(draws):
        deviation = np.abs(elo[:, None] - elo[None, :] - difference)
        largest[row] = np.max(np.divide(deviation, spread, out=np.zeros_like(spread), where=varies))
    critical = float(np.percentile(largest, level, method="higher"))
    return np.stack([difference - critical * spread, difference + critical * spread], axis=-1)


def _tail(ci: float) -> float:
    """The percentage of draws outside an equal-tailed `ci` interval at each end, rounded
    so that a ci of 0.8 gives 10, not 9.999999999999998 (which would move the percentile
    to the draw below)."""
    if not 0.0 < ci < 1.0:
        raise ValueError(f"ci must lie in (0, 1), got {ci}")
    return round(50.0 * (1.0 - ci), 9)


def decisive_share(elo: FloatArray, reference: FloatArray) -> FloatArray:
    """The share of decisive verdicts against `reference` that Elo ratings predict
    (Bradley-Terry's logistic curve on the difference, ELO_SCALE points a factor of 10;
    under Davidson's ties too, P(win) / (P(win) + P(loss))): Arena-Hard's score against
    a baseline from a fitted model."""
    return np.asarray(1.0 / (1.0 + 10.0 ** ((reference - elo) / ELO_SCALE)), dtype=np.float64)
