"""Sandwich intervals: the cluster-robust covariance of one fit agrees with the
scenario bootstrap where the estimate is near normal, counts a scenario's verdicts as
one cluster, and refuses a fit that is not at a proper optimum."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from eigenjury.stats import PeerRanking, make_population, simulate_verdicts
from eigenjury.stats.consensus import SettingError
from eigenjury.stats.sandwich import cluster_covariance
from eigenjury.stats.verdicts import FIRST, SECOND, DataError, VerdictTable


def _battles(n: int, seed: int) -> VerdictTable:
    """One crowd judging 6 models in random battles (Bradley-Terry, no ties)."""
    rng = np.random.default_rng(seed)
    models = np.array([f"m{i}" for i in range(6)])
    strength = np.linspace(1.0, -1.0, 6)
    first = rng.integers(6, size=n)
    second = (first + 1 + rng.integers(5, size=n)) % 6
    wins = rng.random(n) < 1 / (1 + np.exp(strength[second] - strength[first]))
    return VerdictTable.from_columns(
        np.arange(n).astype(str),
        np.full(n, "crowd"),
        models[first],
        models[second],
        np.where(wins, FIRST, SECOND),
    )


def _spread(ranking: PeerRanking) -> np.ndarray:
    return np.asarray(ranking.bootstrap_["elo"].std(axis=0))


def test_sandwich_spread_matches_the_bootstrap_on_battles() -> None:
    table = _battles(3000, 1)
    settings = {"dim": 1, "position_bias": False, "bootstrap": 120, "n_jobs": 1, "seed": 2}
    bootstrap = PeerRanking(**settings).fit(table)  # type: ignore[arg-type]
    sandwich = PeerRanking(interval="sandwich", **settings).fit(table)  # type: ignore[arg-type]
    assert sandwich.interval_method_ == "sandwich" and bootstrap.interval_method_ == "percentile"
    np.testing.assert_allclose(sandwich.elo_, bootstrap.elo_)
    ratio = _spread(sandwich) / _spread(bootstrap)
    assert np.all((ratio > 0.75) & (ratio < 1.33)), ratio
    widths = [np.diff(r.elo_ci_, axis=1).ravel() for r in (sandwich, bootstrap)]
    assert np.all(np.abs(widths[0] / widths[1] - 1) < 0.35)


def _rows_apart(table: VerdictTable) -> VerdictTable:
    n = len(table.judge)
    return dataclasses.replace(table, scenario=np.arange(n), scenarios=tuple(map(str, range(n))))


def _covariance(table: VerdictTable) -> np.ndarray:
    ranking = PeerRanking(1, prior=None, bootstrap=0).fit(table)
    found = cluster_covariance(ranking.btd_, ranking._scenario_counts)
    return np.asarray(found.basis @ found.covariance @ found.basis.T)


def test_a_scenario_is_one_cluster_however_many_verdicts_it_holds() -> None:
    """Every verdict twice in its scenario carries no more information: the clustered
    covariance is the original's (the fit without a prior is the same). The same rows
    each as its own cluster claim twice the information: half the covariance of the
    original with rows as clusters."""
    population = make_population(5, 1, seed=3)
    table = simulate_verdicts(population, n_scenarios=400, seed=4)
    twice = VerdictTable(
        scenario=np.concatenate([table.scenario, table.scenario]),
        judge=np.concatenate([table.judge, table.judge]),
        first=np.concatenate([table.first, table.first]),
        second=np.concatenate([table.second, table.second]),
        verdict=np.concatenate([table.verdict, table.verdict]),
        models=table.models,
        scenarios=table.scenarios,
        weight=np.ones(2 * len(table.judge)),
    )
    once, clustered = _covariance(table), _covariance(twice)
    np.testing.assert_allclose(clustered, once, rtol=1e-6, atol=1e-12)
    rows, apart = _covariance(_rows_apart(table)), _covariance(_rows_apart(twice))
    # n / (n - 1) small-sample factors: 4,800 rows against 9,600
    factor = (9600 / 9599) / (4800 / 4799)
    np.testing.assert_allclose(apart, rows / 2 * factor, rtol=1e-6, atol=1e-12)
    assert not np.allclose(rows, once, rtol=0.01)  # the clusters do matter


def test_a_perfect_record_gets_the_open_interval_the_bootstrap_gives() -> None:
    table = _battles(600, 5)
    names = np.array(table.models)
    first, second = names[table.first], names[table.second]
    verdict = np.where(first == "m0", FIRST, np.where(second == "m0", SECOND, table.verdict))
    perfect = VerdictTable.from_columns(
        np.array(table.scenarios)[table.scenario], names[table.judge], first, second, verdict
    )
    settings = {"dim": 1, "position_bias": False, "bootstrap": 40, "n_jobs": 1}
    fits = [
        PeerRanking(interval=interval, **settings).fit(perfect)  # type: ignore[arg-type]
        for interval in ("sandwich", "percentile")
    ]
    for ranking in fits:
        top = list(ranking.models_).index("m0")
        assert np.isinf(ranking.elo_ci_[top, 1]) and np.isfinite(ranking.elo_ci_[top, 0])


def test_a_flat_fit_is_refused_with_a_way_out() -> None:
    """A direction the Hessian does not bend (here: the L2 term, the only hold on a
    perfect record without a prior, set to 0) leaves no covariance to speak of."""
    table = _battles(300, 6)
    ranking = PeerRanking(1, position_bias=False, prior=None, l2=0.0, bootstrap=0)
    names = np.array(table.models)
    first, second = names[table.first], names[table.second]
    verdict = np.where(first == "m0", FIRST, np.where(second == "m0", SECOND, table.verdict))
    perfect = VerdictTable.from_columns(
        np.array(table.scenarios)[table.scenario], names[table.judge], first, second, verdict
    )
    ranking.fit(perfect)
    with pytest.raises(DataError, match=r"use the bootstrap \(--interval percentile\)"):
        cluster_covariance(ranking.btd_, ranking._scenario_counts)


def test_the_sandwich_is_refused_where_no_verdict_measures_a_peers_self_score() -> None:
    """With exclude_self a peer's score of itself, which its trust uses, rests on the
    low-rank structure alone, and the normal draws overstate its spread: refused with
    the way out. Battles (every judge external) have no self-verdicts to drop."""
    population = make_population(5, 1, seed=3)
    table = simulate_verdicts(population, n_scenarios=100, seed=4)
    settings = {"interval": "sandwich", "exclude_self": True, "bootstrap": 40}
    with pytest.raises(SettingError, match=r"exclude_self.*--interval percentile") as caught:
        PeerRanking(**settings).fit(table)  # type: ignore[arg-type]
    assert caught.value.setting == "interval"
    battles = PeerRanking(dim=1, n_jobs=1, **settings).fit(_battles(600, 7))  # type: ignore[arg-type]
    assert battles.interval_method_ == "sandwich"
