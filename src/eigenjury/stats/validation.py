"""Held-out log-likelihood with folds made of whole scenarios.

Splitting rows would leak: the other order of the same comparison, on the same
responses, would sit in the training fold. Whole scenarios are held out instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from eigenjury.stats.verdicts import FloatArray, IntArray, ScenarioCounts, VerdictCounts


class PairwiseModel(Protocol):
    def fit(self, counts: VerdictCounts) -> PairwiseModel: ...
    def loglik(self, counts: VerdictCounts) -> float: ...


@dataclass(frozen=True)
class HeldOutScore:
    """Mean held-out log-likelihood per verdict, with its standard error over folds."""

    mean: float
    stderr: float
    per_fold: FloatArray
    verdicts_per_fold: FloatArray


def scenario_folds(n_scenarios: int, n_splits: int, seed: int | None = 0) -> IntArray:
    """A fold label for each scenario, folds as equal in size as possible."""
    if not 2 <= n_splits <= n_scenarios:
        raise ValueError(f"n_splits must lie in [2, {n_scenarios}], got {n_splits}")
    labels = np.arange(n_scenarios) % n_splits
    return np.random.default_rng(seed).permutation(labels)


def heldout_loglik(
    data: ScenarioCounts,
    make_model: Callable[[], PairwiseModel],
    *,
    n_splits: int = 5,
    seed: int | None = 0,
) -> HeldOutScore:
    """K-fold cross-validated log-likelihood per verdict, folds by scenario."""
    folds = scenario_folds(data.n_scenarios, n_splits, seed)
    scores, sizes = [], []
    for k in range(n_splits):
        held = (folds == k).astype(np.float64)
        train, test = data.counts(1.0 - held), data.counts(held)
        model = make_model().fit(train)
        scores.append(model.loglik(test) / test.total)
        sizes.append(test.total)
    per_fold = np.array(scores)
    w = np.array(sizes) / np.sum(sizes)
    mean = float(w @ per_fold)
    stderr = float(np.std(per_fold, ddof=1) / np.sqrt(n_splits))
    return HeldOutScore(mean, stderr, per_fold, np.array(sizes))
