"""Bradley-Terry (ties as half wins) and Davidson baselines."""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from eigenjury.stats import BradleyTerry, Davidson, VerdictTable, pair_counts
from eigenjury.stats.verdicts import VerdictCounts


def _battles(m: int, n: int, tie: float, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    strength = rng.normal(size=m)
    first = rng.integers(m, size=n)
    second = (first + rng.integers(1, m, size=n)) % m
    a, b = np.exp(strength[first]), np.exp(strength[second])
    p = np.stack([tie * np.sqrt(a * b), a, b], axis=1)
    cum = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = rng.random(n)
    verdict = (u > cum[:, 0]).astype(int) + (u > cum[:, 1])
    return strength, first, second, verdict


def test_bradley_terry_is_the_maximum_likelihood_estimate() -> None:
    _, first, second, verdict = _battles(12, 5000, 0.4, 0)
    wins, ties = pair_counts(first, second, verdict, 12)
    model = BradleyTerry().fit(wins, ties)
    assert model.converged_ and model.n_iter_ < 20
    w = wins + 0.5 * ties

    def nll(beta: np.ndarray) -> float:
        return float(np.sum(w * np.logaddexp(0, -(beta[:, None] - beta[None, :]))))

    ref = minimize(nll, np.zeros(12), method="BFGS", options={"gtol": 1e-8}).x
    np.testing.assert_allclose(model.strength_, ref - ref.mean(), atol=1e-4)
    assert model.loglik_ == -nll(model.strength_)


def test_a_tie_counts_as_half_a_win_each() -> None:
    wins, ties = pair_counts(np.array([0, 1, 0]), np.array([1, 0, 1]), np.array([0, 0, 1]), 2)
    np.testing.assert_array_equal(wins, [[0, 1], [0, 0]])  # 0 beat 1 once
    np.testing.assert_array_equal(ties, [[0, 2], [2, 0]])
    # one win plus two ties each way: 2 - 1 for model 0, so beta_0 - beta_1 = log 2
    model = BradleyTerry().fit(wins, ties)
    np.testing.assert_allclose(model.strength_[0] - model.strength_[1], np.log(2.0), atol=1e-9)


def test_davidson_recovers_strengths_and_the_tie_parameter() -> None:
    strength, first, second, verdict = _battles(10, 40000, 0.6, 1)
    table = VerdictTable.from_columns(
        np.arange(len(first)), np.zeros(len(first), dtype=int), first, second, verdict
    )
    counts = VerdictCounts.from_table(table)
    model = Davidson().fit(counts)
    assert model.converged_
    original = np.array([int(name) for name in counts.models])  # codes follow sorted names
    np.testing.assert_allclose(model.strength_, (strength - strength.mean())[original], atol=0.05)
    assert abs(model.tie_propensity_ - 0.6) < 0.05
