"""Held-out log-likelihood with whole scenarios held out."""

from __future__ import annotations

import numpy as np
import pytest

from eigenjury.stats import (
    LowRankBTD,
    ScenarioCounts,
    heldout_loglik,
    make_population,
    scenario_folds,
    simulate_verdicts,
)


def test_folds_partition_the_scenarios() -> None:
    folds = scenario_folds(103, 5, seed=1)
    sizes = np.bincount(folds)
    assert sizes.sum() == 103 and sizes.max() - sizes.min() <= 1
    np.testing.assert_array_equal(folds, scenario_folds(103, 5, seed=1))
    with pytest.raises(ValueError, match="n_splits"):
        scenario_folds(3, 5)


def test_heldout_loglik_prefers_the_true_dimension() -> None:
    """Judges who disagree along a second axis: d = 2 predicts held-out verdicts better."""
    population = make_population(8, 2, judge_noise=1.5, seed=4)
    data = ScenarioCounts.from_table(simulate_verdicts(population, n_scenarios=1500, seed=5))
    one = heldout_loglik(data, lambda: LowRankBTD(1, restarts=2), n_splits=4)
    two = heldout_loglik(data, lambda: LowRankBTD(2, restarts=2), n_splits=4)
    assert two.mean - one.mean > 3 * np.hypot(one.stderr, two.stderr)
    assert -np.log(3) < two.mean < 0  # better than a uniform guess, and a proper log-lik
    assert two.verdicts_per_fold.sum() == pytest.approx(data.cells.total)
