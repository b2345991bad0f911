"""The low-rank BTD likelihood, its gradient, and the estimator's invariances."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.stats import kendalltau

from eigenjury.stats import (
    BTDParams,
    DataError,
    LowRankBTD,
    Population,
    ScorePrior,
    VerdictCounts,
    VerdictTable,
    btd_objective,
    canonical_gauge,
    eigentrust,
    make_population,
    simulate_verdicts,
    trust_matrix,
)
from eigenjury.stats.btd import SELF_BOUND_Z, self_bias_upper


def _fitted_trust(model: LowRankBTD) -> np.ndarray:
    matrix = trust_matrix(model.scores(), judge_mask=model.judge_mask_)
    return eigentrust(matrix)


@pytest.mark.parametrize("position_bias", [True, False])
@pytest.mark.parametrize("l2", [0.0, 0.3])
@pytest.mark.parametrize("prior", [None, ScorePrior(1.5, 0.7, 2.0)])
def test_gradient_matches_finite_differences(
    table: VerdictTable, position_bias: bool, l2: float, prior: ScorePrior | None
) -> None:
    counts = VerdictCounts.from_table(table)
    assert (counts.self_side != 0).any()  # the self-preference term is exercised
    m, d = counts.n_models, 2
    rng = np.random.default_rng(0)
    x = rng.normal(0, 0.7, 2 * m * d + 3 * m)
    bias = slice(2 * m * d + m, 2 * m * d + 2 * m)
    if not position_bias:
        x[bias] = 0.0
    args = (counts, d, l2, position_bias, False, prior)
    _, grad = btd_objective(x, *args)
    numeric = approx_fprime(x, lambda z: btd_objective(z, *args)[0], 1e-7)
    if not position_bias:
        numeric[bias] = 0.0
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=2e-7)
    assert np.abs(grad).max() > 1e-3  # the check is not vacuous


def test_probabilities_follow_the_davidson_formula(table: VerdictTable) -> None:
    """With no position bias, P(1) = pi_ij / D, P(0) = lambda sqrt(pi_ij pi_ik) / D."""
    model = LowRankBTD(2, position_bias=False, restarts=1).fit(VerdictCounts.from_table(table))
    judge, first, second = np.array([0, 3, 5]), np.array([1, 2, 7]), np.array([2, 6, 0])
    pi = np.exp(model.scores())
    a, b = pi[judge, first], pi[judge, second]
    lam = model.tie_propensity_[judge]
    denom = a + b + lam * np.sqrt(a * b)
    expected = np.stack([lam * np.sqrt(a * b) / denom, a / denom, b / denom], axis=1)
    np.testing.assert_allclose(model.predict_proba(judge, first, second), expected, rtol=1e-12)


def test_recovers_the_true_trust_ranking(population: Population, table: VerdictTable) -> None:
    model = LowRankBTD(2, seed=0).fit(VerdictCounts.from_table(table))
    assert model.converged_
    tau = kendalltau(_fitted_trust(model), population.trust()).statistic
    assert tau >= 0.9
    np.testing.assert_allclose(model.tie_propensity_, population.tie_propensity, atol=0.15)
    np.testing.assert_allclose(model.position_bias_, population.position_bias, atol=0.2)


def test_recovery_at_moderate_data_over_several_populations() -> None:
    """Kendall tau >= 0.9 between fitted and true trust, 10 models, 2,000 scenarios."""
    taus = []
    for seed in range(4):
        population = make_population(10, 2, seed=seed)
        table = simulate_verdicts(population, n_scenarios=2000, seed=seed + 50)
        model = LowRankBTD(2, seed=seed).fit(VerdictCounts.from_table(table))
        taus.append(kendalltau(_fitted_trust(model), population.trust()).statistic)
    assert min(taus) >= 0.9, taus


def test_without_a_prior_duplicating_every_verdict_leaves_the_fit_unchanged(
    table: VerdictTable,
) -> None:
    """Maximum likelihood depends on verdict proportions only (the prior does not: it
    is worth a fixed number of verdicts, see the prior tests)."""
    doubled = VerdictTable(
        *(
            np.concatenate([c, c])
            for c in (table.scenario, table.judge, table.first, table.second, table.verdict)
        ),
        table.models,
        table.scenarios,
        np.concatenate([table.weight, table.weight]),
    )
    once = LowRankBTD(2, seed=1, prior=None).fit(VerdictCounts.from_table(table))
    twice = LowRankBTD(2, seed=1, prior=None).fit(VerdictCounts.from_table(doubled))
    assert twice.n_verdicts_ == 2 * once.n_verdicts_
    np.testing.assert_allclose(twice.loglik_, 2 * once.loglik_, rtol=1e-9)

    def centred(m: LowRankBTD) -> np.ndarray:  # scores are identified up to a per-judge shift
        return m.scores() - m.scores().mean(axis=1, keepdims=True)

    np.testing.assert_allclose(centred(twice), centred(once), atol=1e-6)
    np.testing.assert_allclose(_fitted_trust(twice), _fitted_trust(once), atol=1e-8)


def test_relabelling_models_permutes_the_output(table: VerdictTable) -> None:
    perm = np.random.default_rng(5).permutation(table.n_models)  # new code of old model i
    relabelled = VerdictTable(
        table.scenario,
        perm[table.judge],
        perm[table.first],
        perm[table.second],
        table.verdict,
        tuple(np.asarray(table.models)[np.argsort(perm)]),
        table.scenarios,
        table.weight,
    )
    original = LowRankBTD(2, seed=2).fit(VerdictCounts.from_table(table))
    permuted = LowRankBTD(2, seed=2).fit(VerdictCounts.from_table(relabelled))
    np.testing.assert_allclose(_fitted_trust(permuted)[perm], _fitted_trust(original), atol=1e-6)
    np.testing.assert_allclose(permuted.tie_propensity_[perm], original.tie_propensity_, rtol=1e-5)
    np.testing.assert_allclose(permuted.loglik_, original.loglik_, rtol=1e-9)


def test_warm_start_from_the_optimum_stays_there(table: VerdictTable) -> None:
    counts = VerdictCounts.from_table(table)
    cold = LowRankBTD(2, seed=0).fit(counts)
    warm = LowRankBTD(2).fit(counts, init=cold.params_)
    assert len(warm.restart_losses_) == 1
    assert warm.objective_ <= cold.objective_ + 1e-12
    assert warm.n_iter_ <= 5


def test_restarts_reach_the_same_optimum(table: VerdictTable) -> None:
    model = LowRankBTD(2, restarts=5, seed=3).fit(VerdictCounts.from_table(table))
    assert model.n_agreeing_starts_ >= 2
    polished = -model.loglik_ / model.n_verdicts_
    assert np.all(model.restart_losses_ >= polished - 1e-9)  # polishing does not lose fit


def test_judges_without_verdicts_are_masked(population: Population) -> None:
    table = simulate_verdicts(population, n_scenarios=800, seed=9)
    mute = table.select(table.judge != 0)
    model = LowRankBTD(2).fit(VerdictCounts.from_table(mute))
    assert not model.judge_mask_[0] and model.judge_mask_[1:].all()


def test_strong_position_bias_is_absorbed_by_its_own_term() -> None:
    """Judges who favour the first slot move gamma, not trust, and the term pays its way."""
    biased = make_population(8, 2, position_bias=1.5, seed=8)
    table = simulate_verdicts(biased, n_scenarios=3000, seed=10)
    counts = VerdictCounts.from_table(table)
    with_term = LowRankBTD(2, seed=0).fit(counts)
    without = LowRankBTD(2, seed=0, position_bias=False).fit(counts)
    # sampling sd of gamma is up to 0.075 here (measured over 10 seeds): allow 4 sd
    np.testing.assert_allclose(with_term.position_bias_, biased.position_bias, atol=0.3)
    true_elo = 400 * np.log10(8 * biased.trust())
    fitted_elo = 400 * np.log10(8 * _fitted_trust(with_term))
    assert np.max(np.abs(fitted_elo - true_elo)) < 15
    assert with_term.loglik_ - without.loglik_ > 100  # far beyond chance for 8 extra params


def test_canonical_gauge_keeps_the_likelihood_and_minimises_the_penalty(
    table: VerdictTable,
) -> None:
    counts = VerdictCounts.from_table(table)
    rng = np.random.default_rng(7)
    m, d = counts.n_models, 2
    raw = BTDParams(
        rng.normal(size=(m, d)),
        rng.normal(size=(m, d)),
        rng.normal(size=m),
        rng.normal(size=m),
        rng.normal(size=m),
    )
    canon = canonical_gauge(raw)

    def loss(p: BTDParams) -> float:  # the prior is on centred scores: gauge-free too
        return btd_objective(p.pack(), counts, d, 0.0, True, False, ScorePrior())[0]

    def penalty(p: BTDParams) -> float:
        return float(np.sum(p.lenses**2) + np.sum(p.dispositions**2))

    assert loss(canon) == pytest.approx(loss(raw), rel=1e-12)
    for _ in range(20):  # any other point of the orbit costs more penalty
        a = rng.normal(size=(d, d)) + 2 * np.eye(d)
        shift = rng.normal(size=d)
        moved = BTDParams(
            canon.lenses @ a,
            (canon.dispositions + shift) @ np.linalg.inv(a).T,
            canon.log_tie,
            canon.position_bias,
            canon.self_bias,
        )
        assert loss(moved) == pytest.approx(loss(canon), rel=1e-10)
        assert penalty(moved) >= penalty(canon) - 1e-9
    again = canonical_gauge(canon)
    np.testing.assert_allclose(again.lenses, canon.lenses, atol=1e-12)
    assert np.all(canon.lenses.sum(axis=0) >= 0)


@pytest.mark.parametrize("dim", [9, 2**70])
def test_a_dimension_above_the_number_of_models_is_a_data_error(
    table: VerdictTable, dim: int
) -> None:
    """Scores of m models have rank at most m: more is refused before anything is
    allocated (2**70 columns would be)."""
    with pytest.raises(DataError, match=f"dim\\) of {dim} exceeds the 8 models"):
        LowRankBTD(dim).fit(VerdictCounts.from_table(table))


def _modest(table: VerdictTable, judge: int, picks_itself: bool) -> VerdictTable:
    """`table` with `judge` always (or never) picking its own reply."""
    verdict = table.verdict.copy()
    first, second = (1, 2) if picks_itself else (2, 1)
    verdict[(table.judge == judge) & (table.first == judge)] = first
    verdict[(table.judge == judge) & (table.second == judge)] = second
    return dataclasses.replace(table, verdict=verdict)


def _self_loglik(model: LowRankBTD, counts: VerdictCounts, delta: np.ndarray) -> float:
    """Log-likelihood plus the self-preference prior with every judge's delta set to
    `delta`, through the model's own likelihood (not the bound's arithmetic)."""
    moved = copy.copy(model)
    moved.params_ = dataclasses.replace(model.params_, self_bias=delta)
    assert model.prior is not None
    return moved.loglik(counts) - 0.5 * float(delta @ delta) / model.prior.self_sd**2


def test_self_preference_bound_is_the_one_sided_profile_likelihood_bound() -> None:
    """At each judge's bound the log-likelihood (the others' parameters held) has
    fallen z^2 / 2 below its peak; a judge that never picks its own reply is bounded
    well below 0 although its estimate is unbounded in information; one that always
    picks itself is bounded above its estimate; a judge never judged itself: +inf."""
    table = simulate_verdicts(make_population(5, 2, seed=2), n_scenarios=400, seed=3)
    table = _modest(_modest(table, 1, False), 2, True)
    counts = VerdictCounts.from_table(table)
    model = LowRankBTD(restarts=1).fit(counts)
    upper, delta = model.self_bias_upper_, model.self_bias_
    assert upper[1] < -1.0 and delta[1] < upper[1]
    assert upper[2] > delta[2] > 2.0
    assert np.all(upper > delta)
    peak = _self_loglik(model, counts, delta)
    for judge in range(5):
        at_bound = delta.copy()
        at_bound[judge] = upper[judge]
        drop = peak - _self_loglik(model, counts, at_bound)
        assert drop == pytest.approx(0.5 * SELF_BOUND_Z**2, abs=1e-6)
    assert self_bias_upper(model.params_, counts, z=2.0)[1] > upper[1]  # wider at 2 sd

    external = table.judge != table.first  # no judge ever judges itself
    external &= table.judge != table.second
    kept = VerdictCounts.from_table(table.select(external))
    assert np.all(np.isinf(LowRankBTD(restarts=1).fit(kept).self_bias_upper_))
    no_term = LowRankBTD(restarts=1, self_preference=False).fit(counts)
    assert np.all(np.isinf(no_term.self_bias_upper_))  # nothing lowers a self-score
