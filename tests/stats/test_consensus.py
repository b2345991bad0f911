"""The full peer ranking: intervals, the scenario bootstrap, calibration, options."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eigenjury.stats import (
    DataError,
    PeerRanking,
    Population,
    VerdictTable,
    make_population,
    simulate_verdicts,
)


def test_ranking_recovers_truth_with_intervals(population: Population, table: VerdictTable) -> None:
    ranking = PeerRanking(bootstrap=60, n_jobs=1).fit(table)
    true_elo = population.elo()
    low, high = ranking.elo_ci_[:, 0], ranking.elo_ci_[:, 1]
    assert np.all(low <= ranking.elo_) and np.all(ranking.elo_ <= high)
    assert np.mean((low <= true_elo) & (true_elo <= high)) >= 0.75
    assert np.all(ranking.rank_ci_[:, 0] <= ranking.rank_)
    assert np.all(ranking.rank_ <= ranking.rank_ci_[:, 1])
    assert ranking.bootstrap_["elo"].shape == (60, table.n_models)
    assert ranking.bootstrap_converged_ == 1.0
    np.testing.assert_allclose(ranking.trust_.sum(), 1.0)


def test_bootstrap_does_not_depend_on_the_number_of_processes(table: VerdictTable) -> None:
    serial = PeerRanking(bootstrap=12, ci=0.8, n_jobs=1, seed=7).fit(table)
    parallel = PeerRanking(bootstrap=12, ci=0.8, n_jobs=2, seed=7).fit(table)
    np.testing.assert_allclose(serial.bootstrap_["elo"], parallel.bootstrap_["elo"], atol=1e-9)


def test_bootstrap_resamples_scenarios_not_rows(table: VerdictTable) -> None:
    """Doubling every verdict inside its own scenario adds no independent evidence.

    A row bootstrap would shrink the intervals by sqrt(2); resampling whole
    scenarios leaves them exactly where they were.
    """
    twice = np.concatenate([np.arange(len(table))] * 2)
    doubled = VerdictTable(
        table.scenario[twice],
        table.judge[twice],
        table.first[twice],
        table.second[twice],
        table.verdict[twice],
        table.models,
        table.scenarios,
        table.weight[twice],
    )
    # without the prior, which is worth a fixed number of verdicts whatever the data,
    # and the self-preference bound of trust, which counts verdicts as independent
    plain = {"prior": None, "self_preference": False}
    once = PeerRanking(bootstrap=30, ci=0.9, n_jobs=1, seed=3, **plain).fit(table)
    both = PeerRanking(bootstrap=30, ci=0.9, n_jobs=1, seed=3, **plain).fit(doubled)
    np.testing.assert_allclose(both.elo_ci_, once.elo_ci_, atol=1e-4)


@pytest.mark.slow
def test_bootstrap_intervals_are_calibrated() -> None:
    """Across repeated simulations, 95% Elo intervals cover the true Elo about 95% of the time.

    30 datasets x 6 models = 180 intervals; the band allows for binomial noise
    (sd ~1.6 points) and a percentile bootstrap's mild miscalibration.
    """
    population = make_population(6, 2, seed=11)
    true_elo = population.elo()
    inside = []
    for k in range(30):
        table = simulate_verdicts(population, n_scenarios=600, seed=100 + k)
        ranking = PeerRanking(bootstrap=100, restarts=2, seed=k, n_jobs=2).fit(table)
        lo, hi = ranking.elo_ci_[:, 0], ranking.elo_ci_[:, 1]
        inside.append((lo <= true_elo) & (true_elo <= hi))
    coverage = float(np.mean(inside))
    print(f"coverage of 95% Elo intervals: {coverage:.3f} over {np.size(inside)} intervals")
    assert 0.88 <= coverage <= 0.995


def test_exclude_self_drops_self_judgments(population: Population) -> None:
    table = simulate_verdicts(population, n_scenarios=800, seed=21)
    ranking = PeerRanking(bootstrap=0, exclude_self=True).fit(table)
    counts = ranking.counts_
    used = counts.n.sum(axis=1) > 0
    assert not np.any((counts.judge == counts.first)[used] | (counts.judge == counts.second)[used])
    np.testing.assert_allclose(ranking.btd_.self_bias_, 0.0)  # nothing left to measure it


def _crowning(table: VerdictTable, vain: int) -> VerdictTable:
    """The same verdicts, but judge `vain` picks itself whenever it is one of the two."""
    verdict = table.verdict.copy()
    verdict[(table.judge == vain) & (table.first == vain)] = 1
    verdict[(table.judge == vain) & (table.second == vain)] = 2
    return dataclasses.replace(table, verdict=verdict)


def test_a_judge_that_crowns_itself_buys_no_trust() -> None:
    """Its verdicts on itself are explained by its self-preference, which is measured
    (large, with an interval), not by its lens or disposition: its Elo stays where
    honest verdicts put it. Without the term (the EigenBench model) it gains."""
    population = make_population(6, 2, seed=5)
    table = simulate_verdicts(population, n_scenarios=1500, seed=6)
    vain = 0
    rigged = _crowning(table, vain)
    honest = PeerRanking(bootstrap=0).fit(table)
    crowned = PeerRanking(bootstrap=40, n_jobs=1).fit(rigged)
    old_model = PeerRanking(bootstrap=0, self_preference=False).fit(rigged)
    assert abs(crowned.elo_[vain] - honest.elo_[vain]) < 15
    assert old_model.elo_[vain] - honest.elo_[vain] > 50
    assert crowned.btd_.self_bias_[vain] > 3.0
    assert crowned.self_bias_ci_[vain, 0] > 2.0
    others = np.arange(6) != vain  # honest judges: no self-preference beyond noise
    assert np.all(np.abs(honest.btd_.self_bias_[others]) < 0.5)


def test_anchor_by_name_and_unknown_anchor(table: VerdictTable) -> None:
    name = table.models[2]
    ranking = PeerRanking(bootstrap=5, ci=0.6, anchor=name, anchor_value=1000.0, n_jobs=1).fit(
        table
    )
    assert ranking.elo_[2] == pytest.approx(1000.0)
    np.testing.assert_allclose(ranking.elo_ci_[2], [1000.0, 1000.0])
    with pytest.raises(DataError, match="anchor model 'nobody'"):
        PeerRanking(bootstrap=0, anchor="nobody").fit(table)


def test_greenbeard_clique_raises_its_members() -> None:
    """Members who favour each other gain Elo over what honest judging would give them."""
    clique = make_population(8, 2, greenbeard=3, greenbeard_bonus=2.0, seed=2)
    table = simulate_verdicts(clique, n_scenarios=2000, seed=3)
    elo = PeerRanking(bootstrap=0).fit(table).elo_
    gain = elo - clique.elo()
    assert gain[clique.greenbeard].min() > gain[~clique.greenbeard].max()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"bootstrap": 1}, "needs at least 40"),
        ({"bootstrap": 39}, "needs at least 40"),
        ({"bootstrap": 100, "ci": 0.99}, "needs at least 200"),
        ({"bootstrap": 0, "cv": 1}, "cv=1"),
    ],
)
def test_settings_that_cannot_give_what_they_promise_are_refused(
    options: dict[str, float], message: str, table: VerdictTable
) -> None:
    with pytest.raises(ValueError, match=message):
        PeerRanking(**options).fit(table)  # type: ignore[arg-type]


def test_recovery_of_a_constant_ranking_has_no_nan() -> None:
    """Kendall tau is undefined when a side is constant: None in the record, never NaN
    (which would make the written JSON invalid)."""
    from eigenjury.stats.simulate import recovery

    flat = np.full(3, 1 / 3)
    result = recovery(np.array([0.5, 0.3, 0.2]), flat, np.zeros(3), np.zeros(3))
    assert result["kendall_tau"] is None
