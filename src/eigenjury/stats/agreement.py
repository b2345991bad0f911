"""Agreement between two juries grading the same submissions, with cluster-bootstrap
intervals.

The unit of resampling is the submission (one candidate's answer to one task): the
criteria of one submission are graded from the same text and are not independent.
Every statistic is computed for all bootstrap rounds at once from resampling counts,
so a thousand rounds cost a few matrix products.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from eigenjury.stats.bootstrap import percentile_interval
from eigenjury.stats.verdicts import FloatArray


@dataclass(frozen=True)
class Estimate:
    """A statistic and its percentile interval (NaN where it is undefined)."""

    value: float
    low: float
    high: float

    def record(self, digits: int = 4) -> dict[str, float | list[float] | None]:
        def r(x: float) -> float | None:
            return None if not np.isfinite(x) else round(float(x), digits)

        return {"value": r(self.value), "ci": [r(self.low), r(self.high)]}  # type: ignore[list-item]


_BLOCK = 64  # rounds drawn at once


class ClusterBootstrap:
    """Resampling weights for `n_units` clusters: row 0 is the data itself (all ones),
    rows 1.. are multinomial draws. `estimate(values)` turns a (rounds + 1,) array of a
    statistic into an Estimate."""

    def __init__(self, n_units: int, rounds: int = 1000, ci: float = 0.95, seed: int = 0) -> None:
        if n_units < 1:
            raise ValueError("nothing to resample")
        rng = np.random.default_rng(seed)
        share = np.full(n_units, 1.0 / n_units)
        self.weights: FloatArray = np.empty((rounds + 1, n_units))
        self.weights[0] = 1.0
        # drawn a block of rounds at a time (the same draws as all at once), so no
        # integer copy of the whole matrix is held beside it
        for start in range(1, rounds + 1, _BLOCK):
            stop = min(start + _BLOCK, rounds + 1)
            self.weights[start:stop] = rng.multinomial(n_units, share, size=stop - start)
        self.ci = ci

    def estimate(self, values: FloatArray) -> Estimate:
        """The statistic and its interval; no interval from a single unit (every round
        would resample it alone: an interval of zero width that says nothing)."""
        rounds = values[1:]
        rounds = rounds[np.isfinite(rounds)]
        if not np.isfinite(values[0]) or rounds.size == 0 or self.weights.shape[1] < 2:
            return Estimate(float(values[0]), np.nan, np.nan)
        low, high = percentile_interval(rounds, self.ci)
        return Estimate(float(values[0]), float(low), float(high))

    def unit_sums(self, unit_of_item: ArrayLike, *columns: ArrayLike) -> list[FloatArray]:
        """Per unit, the sum of each column over its items, and last the unit's item
        count: a weighted sum over items is a weighted sum over these, so resampling
        costs rounds x units, however many items (criteria) the units hold."""
        units = np.asarray(unit_of_item, dtype=np.intp)
        n = self.weights.shape[1]
        sums: list[FloatArray] = [
            np.bincount(units, np.asarray(c, dtype=np.float64), minlength=n).astype(np.float64)
            for c in columns
        ]
        return [*sums, np.bincount(units, minlength=n).astype(np.float64)]

    def mean(self, x: ArrayLike, unit_of_item: ArrayLike | None = None) -> FloatArray:
        if unit_of_item is None:
            return weighted_mean(self.weights, np.asarray(x, dtype=np.float64))
        total, count = self.unit_sums(unit_of_item, x)
        return _ratio(self.weights @ total, self.weights @ count)

    def ratio(
        self, num: ArrayLike, den: ArrayLike, unit_of_item: ArrayLike | None = None
    ) -> FloatArray:
        """sum(num) / sum(den) under each round's weights."""
        if unit_of_item is None:
            top = self.weights @ np.asarray(num, dtype=np.float64)
            bottom = self.weights @ np.asarray(den, dtype=np.float64)
        else:
            top_, bottom_, _ = self.unit_sums(unit_of_item, num, den)
            top, bottom = self.weights @ top_, self.weights @ bottom_
        return _ratio(top, bottom)

    def pearson(self, x: ArrayLike, y: ArrayLike) -> FloatArray:
        return weighted_pearson(self.weights, np.asarray(x, float), np.asarray(y, float))


def _ratio(top: FloatArray, bottom: FloatArray) -> FloatArray:
    """top / bottom where bottom > 0, else NaN (a NaN in top stays NaN: unknown cost)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(bottom > 0, top / np.where(bottom > 0, bottom, 1.0), np.nan))


def weighted_mean(w: FloatArray, x: FloatArray) -> FloatArray:
    """Row-wise weighted means of x; NaN entries of x make the mean NaN (unknown cost)."""
    total = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((w @ x) / np.where(total > 0, total, np.nan))


def weighted_pearson(w: FloatArray, x: FloatArray, y: FloatArray) -> FloatArray:
    """Row-wise weighted Pearson correlation; NaN where either side is constant."""
    total = w.sum(axis=1)
    mx, my = (w @ x) / total, (w @ y) / total
    sxx = (w @ (x * x)) / total - mx * mx
    syy = (w @ (y * y)) / total - my * my
    sxy = (w @ (x * y)) / total - mx * my
    scale = np.sqrt(np.clip(sxx, 0, None) * np.clip(syy, 0, None))
    tiny = 1e-12 * (1.0 + np.abs(mx) + np.abs(my)) ** 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(np.where(scale > tiny, sxy / np.where(scale > tiny, scale, 1.0), np.nan))


def fleiss_kappa(counts: ArrayLike) -> float:
    """Fleiss' kappa of items x categories counts, every item rated by the same number
    of raters (at least 2): agreement among the raters beyond what their pooled category
    shares give by chance. NaN where chance agreement is 1 (one category throughout:
    agreement says nothing) or there is no item."""
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2 or table.shape[0] == 0:
        return float("nan")
    raters = table.sum(axis=1)
    if raters.min() < 2 or not np.all(raters == raters[0]):
        raise ValueError("every item needs the same number of ratings, at least 2")
    n = raters[0]
    observed = float(np.mean(((table**2).sum(axis=1) - n) / (n * (n - 1))))
    shares = table.sum(axis=0) / table.sum()
    chance = float(np.sum(shares**2))
    if chance >= 1.0 - 1e-12:
        return float("nan")
    return (observed - chance) / (1.0 - chance)


def fleiss_kappa_rounds(
    boot: ClusterBootstrap, unit_of_item: ArrayLike, counts: ArrayLike
) -> FloatArray:
    """Fleiss' kappa under each bootstrap round of `boot` (items resampled with their
    units) for items x categories `counts`, every item rated by the same number of
    raters (at least 2): `fleiss_kappa` for every round at once. NaN where chance
    agreement is 1."""
    table = np.asarray(counts, dtype=np.float64)
    n = table[0].sum()
    observed_per_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    *sums, count = boot.unit_sums(unit_of_item, observed_per_item, *table.T)
    w = boot.weights
    total = w @ count
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (w @ sums[0]) / total
        shares = np.column_stack([w @ s for s in sums[1:]]) / (total * n)[:, None]
        chance = (shares**2).sum(axis=1)
        return np.asarray(np.where(chance < 1 - 1e-12, (observed - chance) / (1 - chance), np.nan))


def cohen_kappa_rounds(
    boot: ClusterBootstrap, unit_of_item: ArrayLike, a: ArrayLike, b: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Under each bootstrap round of `boot` (items resampled with their units), for two
    raters' binary labels `a` and `b` (one per item): the agreement their own rates give
    by chance, p_a p_b + (1 - p_a)(1 - p_b), and Cohen's kappa, how far the observed
    agreement goes beyond it (NaN where chance is 1: both gave one label throughout)."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    same, on_a, on_b, count = boot.unit_sums(unit_of_item, x == y, x, y)
    w = boot.weights
    total = w @ count
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (w @ same) / total
        pa, pb = (w @ on_a) / total, (w @ on_b) / total
        chance = pa * pb + (1 - pa) * (1 - pb)
        kappa = np.where(chance < 1 - 1e-12, (observed - chance) / (1 - chance), np.nan)
    return np.asarray(chance), np.asarray(kappa)
