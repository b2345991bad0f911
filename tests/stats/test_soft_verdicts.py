"""Soft verdicts (label probabilities as fractional counts): simulated by calibrated
judges, equal to the replicated hard data they stand for, and worth more per judge
call than one draw from them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import kendalltau

from eigenjury.stats import (
    LowRankBTD,
    PeerRanking,
    Population,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    make_population,
    simulate_verdicts,
)

REPLICAS = 10  # soft verdicts in tenths stand for this many hard verdicts of weight 1/10


@pytest.fixture(scope="module")
def soft_population() -> Population:
    return make_population(5, 2, tie=0.5, position_bias=0.6, seed=7)


@pytest.fixture(scope="module")
def tenths(soft_population: Population) -> VerdictTable:
    """Soft verdicts in tenths: each row's probabilities are the shares of ten draws
    from its calibrated probabilities (so that a replicated hard table has the very
    same counts)."""
    table = simulate_verdicts(soft_population, n_scenarios=120, scenario_noise=0.5, soft=True)
    assert table.probs is not None
    rng = np.random.default_rng(0)
    shares = np.array([rng.multinomial(REPLICAS, p) for p in table.probs]) / REPLICAS
    return VerdictTable.from_columns(
        table.scenario, table.judge, table.first, table.second, table.verdict, probs=shares
    )


def replicated(table: VerdictTable) -> VerdictTable:
    """The hard table with the counts of a soft table in tenths: each row ten times, a
    verdict per tenth of its probabilities, each of weight 1/10."""
    assert table.probs is not None
    tenths = np.rint(table.probs * REPLICAS).astype(np.int64)
    assert (tenths.sum(axis=1) == REPLICAS).all()
    row = np.repeat(np.arange(len(table)), REPLICAS)
    verdict = np.concatenate([np.repeat(np.arange(3), k) for k in tenths])
    hard = VerdictTable.from_columns(
        table.scenario[row], table.judge[row], table.first[row], table.second[row], verdict
    )
    return hard.with_weight(np.full(len(hard), 1.0 / REPLICAS))


def drawn(table: VerdictTable) -> VerdictTable:
    """The same rows with only the verdict each judge gave (probabilities dropped)."""
    return VerdictTable(
        table.scenario,
        table.judge,
        table.first,
        table.second,
        table.verdict,
        table.models,
        table.scenarios,
        table.weight,
    )


def test_soft_and_hard_simulations_share_their_verdicts(soft_population: Population) -> None:
    hard = simulate_verdicts(soft_population, n_scenarios=300, scenario_noise=0.3, seed=5)
    soft = simulate_verdicts(
        soft_population, n_scenarios=300, scenario_noise=0.3, seed=5, soft=True
    )
    assert hard.probs is None and soft.probs is not None
    np.testing.assert_array_equal(soft.verdict, hard.verdict)
    np.testing.assert_allclose(soft.probs.sum(axis=1), 1.0, atol=1e-12)
    assert (soft.probs >= 0).all()
    # calibrated: the labels drawn occur as often as their probabilities say
    drawn_share = np.bincount(soft.verdict, minlength=3) / len(soft)
    np.testing.assert_allclose(drawn_share, soft.probs.mean(axis=0), atol=0.015)


def test_soft_counts_equal_replicated_hard_counts(tenths: VerdictTable) -> None:
    soft, hard = VerdictCounts.from_table(tenths), VerdictCounts.from_table(replicated(tenths))
    np.testing.assert_array_equal(soft.judge, hard.judge)
    np.testing.assert_array_equal(soft.first, hard.first)
    np.testing.assert_array_equal(soft.second, hard.second)
    np.testing.assert_allclose(soft.n, hard.n, rtol=0, atol=1e-12)
    assert soft.total == pytest.approx(len(tenths))


def test_btd_on_soft_counts_equals_the_fit_on_replicated_hard_data(tenths: VerdictTable) -> None:
    fits = [
        LowRankBTD(2, restarts=2, seed=0).fit(VerdictCounts.from_table(t))
        for t in (tenths, replicated(tenths), drawn(tenths))
    ]
    soft, hard, single = (fit.params_.pack() for fit in fits)
    np.testing.assert_allclose(soft, hard, atol=1e-6)
    assert fits[0].loglik_ == pytest.approx(fits[1].loglik_, rel=1e-9)
    assert np.max(np.abs(soft - single)) > 0.05  # the probabilities are not the drawn labels


def test_ranking_on_soft_verdicts_equals_the_ranking_on_replicated_hard_data(
    tenths: VerdictTable,
) -> None:
    fits = [
        PeerRanking(bootstrap=0, restarts=2, seed=0).fit(t)
        for t in (tenths, replicated(tenths), drawn(tenths))
    ]
    soft, hard, single = fits
    np.testing.assert_allclose(soft.trust_, hard.trust_, rtol=0, atol=1e-8)
    np.testing.assert_allclose(soft.elo_, hard.elo_, rtol=0, atol=1e-5)
    np.testing.assert_allclose(soft.btd_.position_bias_, hard.btd_.position_bias_, atol=1e-6)
    assert np.max(np.abs(soft.elo_ - single.elo_)) > 1.0


def test_scenario_counts_reweight_fractional_counts(tenths: VerdictTable) -> None:
    data = ScenarioCounts.from_table(tenths)
    full = VerdictCounts.from_table(tenths)
    np.testing.assert_allclose(data.counts().n, full.n, atol=1e-12)
    np.testing.assert_allclose(data.counts(np.ones(data.n_scenarios)).n, full.n, atol=1e-12)
    resampled = np.random.default_rng(1).multinomial(
        data.n_scenarios, np.full(data.n_scenarios, 1 / data.n_scenarios)
    )
    reweighted = tenths.with_weight(tenths.weight * resampled[tenths.scenario])
    np.testing.assert_allclose(
        data.counts(resampled.astype(np.float64)).n,
        VerdictCounts.from_table(reweighted).n,
        atol=1e-12,
    )


def test_cluster_bootstrap_takes_soft_verdicts(tenths: VerdictTable) -> None:
    fit = PeerRanking(bootstrap=60, restarts=2, seed=0, n_jobs=1).fit(tenths)
    assert np.isfinite(fit.elo_ci_).all()
    assert ((fit.elo_ci_[:, 0] <= fit.elo_) & (fit.elo_ <= fit.elo_ci_[:, 1])).all()
    assert (fit.elo_ci_[:, 1] - fit.elo_ci_[:, 0] > 1.0).all()  # the draws do vary
    assert np.isfinite(fit.position_bias_ci_).all()


def test_position_bias_is_recovered_from_soft_verdicts() -> None:
    population = make_population(6, 2, tie=0.4, position_bias=0.8, seed=2)
    soft = simulate_verdicts(population, n_scenarios=400, scenario_noise=0.3, soft=True, seed=3)
    fit = PeerRanking(bootstrap=0, restarts=2, seed=0).fit(soft)
    bias = fit.btd_.position_bias_
    assert np.ptp(population.position_bias) > 0.3  # judges differ: a per-judge check
    np.testing.assert_allclose(bias, population.position_bias, atol=0.08)
    shuffled = np.random.default_rng(0).permutation(population.position_bias)
    assert np.max(np.abs(shuffled - bias)) > 0.08


@pytest.mark.slow
def test_soft_verdicts_recover_the_ranking_better_at_equal_calls() -> None:
    """Calibrated judges, replies whose quality varies by scenario (so that soft verdicts
    are noisy too), 384 judge calls on 8 models: mean Kendall tau over 16 populations
    (when written: hard 0.70, soft 0.85, the difference's standard error 0.034; since
    0.3.1's self-trust rule, s_ii + min(delta_i, 0), took noise out of every fit: hard
    0.80, soft 0.85)."""
    taus: dict[bool, list[float]] = {False: [], True: []}
    for seed in range(16):
        population = make_population(8, 2, tie=0.5, position_bias=0.5, seed=seed)
        for soft in (False, True):
            table = simulate_verdicts(
                population, n_scenarios=32, scenario_noise=0.5, soft=soft, seed=100 + seed
            )
            fit = PeerRanking(bootstrap=0, restarts=2, seed=0).fit(table)
            taus[soft].append(float(kendalltau(population.trust(), fit.trust_).statistic))
    assert np.mean(taus[True]) >= np.mean(taus[False]) + 0.03


def test_simulate_command_writes_soft_verdicts_that_fit_reads(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from eigenjury.cli import main
    from eigenjury.verdict_files import read_verdicts

    common = ["--models", "4", "--scenarios", "40", "--scenario-noise", "0.5", "--seed", "2"]
    assert main(["simulate", "--out", "hard", *common]) == 0
    assert main(["simulate", "--out", "soft", "--soft", *common]) == 0
    assert "soft verdicts" in capsys.readouterr().out
    header = Path("soft/verdicts.csv").read_text().splitlines()[0].split(",")
    assert {"p_first", "p_second", "p_tie"} <= set(header)
    hard, soft = read_verdicts("hard/verdicts.csv"), read_verdicts("soft/verdicts.csv")
    assert hard.probs is None and soft.probs is not None
    np.testing.assert_array_equal(soft.verdict, hard.verdict)
    assert json.loads(Path("soft/truth.json").read_text())["design"]["soft"] is True
    assert "soft" not in json.loads(Path("hard/truth.json").read_text())["design"]
    assert main(["fit", "soft/verdicts.csv", "--bootstrap", "0", "--out", "soft.json"]) == 0
    assert main(["fit", "hard/verdicts.csv", "--bootstrap", "0", "--out", "hard.json"]) == 0

    def elo(record: str) -> dict[str, float]:
        models = json.loads(Path(record).read_text())["models"]
        return {m["name"]: m["elo"] for m in models}

    fitted, drawn_only = elo("soft.json"), elo("hard.json")
    in_memory = PeerRanking(bootstrap=0, seed=0).fit(soft)  # `fit`'s defaults
    for name, value in zip(in_memory.models_, in_memory.elo_, strict=True):
        assert fitted[name] == pytest.approx(value, abs=0.05)  # probabilities to 6 digits
    assert max(abs(fitted[n] - drawn_only[n]) for n in fitted) > 1.0
