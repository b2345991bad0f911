"""Rank intervals from the bootstrap draws, simultaneous intervals on Elo differences,
and bootstrap rounds in which a model vanished."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console
from scipy.stats import norm

from eigenjury.peer.fitting import ranking_record
from eigenjury.peer.record import RankingRecord
from eigenjury.records import read_record, write_record
from eigenjury.reports.ranking import print_summary, render
from eigenjury.stats import (
    PeerRanking,
    VerdictTable,
    elo_difference_intervals,
    make_population,
    rank_intervals,
    simulate_verdicts,
)
from eigenjury.stats.bootstrap import resample_weights
from eigenjury.stats.elo import ELO_TOLERANCE


def _draws_with_ranks(ranks_of_a: list[int]) -> np.ndarray:
    """Three models' Elo per draw, with model 0 at the given rank in each draw and
    models 1 and 2 filling the other places in order."""
    rows = []
    for rank in ranks_of_a:
        others = [1600.0, 1500.0, 1400.0]
        elo_a = others.pop(rank - 1)
        rows.append([elo_a, *others])
    return np.array(rows)


def test_rank_intervals_are_the_percentiles_of_the_ranks_drawn() -> None:
    # 21 draws at ci 0.8: the 10% and 90% percentiles fall on the 3rd and 19th smallest
    # rank: model 0 [1]*15 + [2]*4 + [3]*2, model 1 [1]*6 + [2]*15, model 2 [2]*2 + [3]*19
    draws = _draws_with_ranks([1] * 15 + [2] * 4 + [3] * 2)
    np.testing.assert_array_equal(rank_intervals(draws, 0.8), [[1, 2], [1, 2], [3, 3]])


def test_rank_intervals_round_outward_to_ranks_drawn() -> None:
    # 20 draws at ci 0.9: the 95% percentile lies 5% of the way from the 19th smallest
    # rank (2) to the 20th (3), so the interval reaches 3; the 5% one lies between two 1s
    draws = _draws_with_ranks([1] * 10 + [2] * 9 + [3])
    intervals = rank_intervals(draws, 0.9)
    np.testing.assert_array_equal(intervals[0], [1, 3])
    np.testing.assert_array_equal(rank_intervals(draws, 0.5)[0], [1, 2])


def test_models_no_draw_tells_apart_get_every_rank() -> None:
    """Within 0.01 Elo in every draw: tied, so 1-N, never an order of rounding noise."""
    noise = 1500.0 + np.random.default_rng(0).normal(0.0, 1e-4, size=(40, 3))
    np.testing.assert_array_equal(rank_intervals(noise, 0.95), [[1, 3]] * 3)
    # two tied models above a third share ranks 1-2; the third is surely last
    tied = np.column_stack([noise[:, 0], noise[:, 1], noise[:, 2] - 100.0])
    np.testing.assert_array_equal(rank_intervals(tied, 0.95), [[1, 2], [1, 2], [3, 3]])
    # a real gap, however small on the Elo scale, orders them in every draw
    gap = np.tile([1500.5, 1500.0, 1400.0], (40, 1))
    np.testing.assert_array_equal(rank_intervals(gap, 0.95), [[1, 1], [2, 2], [3, 3]])


def test_a_bad_coverage_is_refused() -> None:
    with pytest.raises(ValueError, match="ci"):
        rank_intervals(np.zeros((5, 2)), 1.0)
    with pytest.raises(ValueError, match="ci"):
        elo_difference_intervals(np.zeros((5, 2)), np.zeros(2), 0.0)


def test_one_pair_gets_the_quantile_of_its_own_studentised_difference() -> None:
    """With two models the largest |t| is the pair's |t|: the interval is the
    studentised bootstrap interval of that one difference."""
    rng = np.random.default_rng(1)
    draws = rng.normal([1510.0, 1500.0], 4.0, size=(400, 2))
    estimate = np.array([1512.0, 1499.0])
    intervals = elo_difference_intervals(draws, estimate, 0.9)
    se = np.std(draws[:, 0] - draws[:, 1], ddof=1)
    t = np.abs(draws[:, 0] - draws[:, 1] - 13.0) / se
    critical = np.percentile(t, 90.0, method="higher")
    np.testing.assert_allclose(intervals[0, 1], [13.0 - critical * se, 13.0 + critical * se])
    np.testing.assert_allclose(intervals[1, 0], -intervals[0, 1, ::-1])
    np.testing.assert_array_equal(intervals[0, 0], [0.0, 0.0])


def test_simultaneous_intervals_cover_every_difference_at_once() -> None:
    """An idealised bootstrap (estimate and draws normal around the truth with the same
    covariance, correlated models): all 28 intervals of 8 models hold at once in about
    ci of the replications, where per-pair 90% intervals hold at once far less often."""
    rng = np.random.default_rng(2)
    n, ci = 8, 0.9
    truth = np.linspace(1400.0, 1600.0, n)
    mix = rng.normal(size=(n, n))
    covariance = 25.0 * (mix @ mix.T / n + np.eye(n))
    simultaneous = per_pair = 0
    replications = 300
    upper = np.triu_indices(n, 1)
    true_difference = (truth[:, None] - truth[None, :])[upper]
    for _ in range(replications):
        estimate = rng.multivariate_normal(truth, covariance)
        draws = rng.multivariate_normal(estimate, covariance, size=200)
        intervals = elo_difference_intervals(draws, estimate, ci)[upper]
        simultaneous += bool(np.all((intervals[:, 0] <= true_difference)
                                    & (true_difference <= intervals[:, 1])))  # fmt: skip
        difference = (estimate[:, None] - estimate[None, :])[upper]
        pair_se = np.std(draws[:, upper[0]] - draws[:, upper[1]], axis=0, ddof=1)
        margin = norm.ppf(0.5 + ci / 2) * pair_se
        per_pair += bool(np.all(np.abs(difference - true_difference) <= margin))
    assert abs(simultaneous / replications - ci) < 0.05
    assert per_pair / replications < ci - 0.2


def _tied_pairs(seed: int) -> tuple[np.ndarray, VerdictTable]:
    """8 models in 4 pairs of equal dispositions (equal true Elo within each pair: any
    statement that one is above its twin is false), and 150 scenarios of verdicts."""
    population = make_population(8, 2, seed=seed)
    v = population.dispositions.copy()
    v[1::2] = v[0::2]
    population = dataclasses.replace(population, dispositions=v)
    return population.elo(), simulate_verdicts(population, n_scenarios=150, seed=100 + seed)


@pytest.mark.slow
def test_statements_that_one_model_is_above_another_hold_together() -> None:
    """Across 30 simulated populations with true ties, every "i above j" read off the
    fitted simultaneous 90% intervals is true in at least 80% of them (30 draws of a
    share of 0.9 fall below 0.8 with probability 0.07); read off per-pair 90% intervals
    of the same draws, the test fails (it has the power to)."""
    ci, runs = 0.9, 30
    all_true = all_true_per_pair = statements = 0
    for seed in range(runs):
        truth, table = _tied_pairs(seed)
        ranking = PeerRanking(bootstrap=40, ci=ci, n_jobs=1, seed=seed, restarts=2).fit(table)
        truly_above = truth[:, None] - truth[None, :] > ELO_TOLERANCE
        above = ranking.elo_difference_ci_[:, :, 0] > ELO_TOLERANCE
        statements += int(above.sum())
        all_true += not (above & ~truly_above).any()
        draws = ranking.bootstrap_["elo"]
        se = np.std(draws[:, :, None] - draws[:, None, :], axis=0, ddof=1)
        difference = ranking.elo_[:, None] - ranking.elo_[None, :]
        per_pair = difference - norm.ppf(0.5 + ci / 2) * se > ELO_TOLERANCE
        all_true_per_pair += not (per_pair & ~truly_above).any()
    assert statements > 5 * runs  # the intervals do decide most pairs
    assert all_true / runs >= ci - 0.1
    assert all_true_per_pair / runs < ci - 0.1


def _with_a_rare_model() -> VerdictTable:
    """a, b and c compare each other in 30 scenarios; d answers in one scenario only."""
    rng = np.random.default_rng(5)
    rows = [
        (f"s{s}", judge, first, second, int(rng.integers(3)))
        for s in range(30)
        for judge in "abc"
        for first in "abc"
        for second in "abc"
        if first != second
    ]
    rows += [("s0", "a", "d", x, int(rng.integers(3))) for x in "abc"]
    rows += [("s0", "a", x, "d", int(rng.integers(3))) for x in "abc"]
    return VerdictTable.from_columns(*map(list, zip(*rows, strict=True)))


def test_rounds_in_which_a_model_vanished_are_counted_and_warned_of() -> None:
    table = _with_a_rare_model()
    ranking = PeerRanking(bootstrap=40, n_jobs=1, seed=3, min_verdicts=1).fit(table)
    # d vanishes exactly in the rounds that do not draw scenario s0
    rare = list(table.scenarios).index("s0")
    seeds = np.random.SeedSequence(3).spawn(40)
    expected = sum(resample_weights(len(table.scenarios), s)[rare] == 0 for s in seeds)
    assert 5 < expected < 35
    assert ranking.bootstrap_vanished_ == expected
    (warning,) = [w for w in ranking.warnings_ if "bootstrap rounds" in w]
    assert f"in {expected} of 40 bootstrap rounds" in warning
    assert f"(most often: d in {expected})" in warning
    record = ranking_record(ranking)
    assert record.fit.bootstrap_vanished == expected


def test_no_vanished_model_means_no_warning_and_no_field(table: VerdictTable) -> None:
    ranking = PeerRanking(bootstrap=40, n_jobs=1).fit(table)
    assert ranking.bootstrap_vanished_ == 0
    assert not [w for w in ranking.warnings_ if "bootstrap rounds" in w]
    assert "bootstrap_vanished" not in ranking_record(ranking).model_dump()["fit"]


def test_records_round_trip_with_and_without_the_new_fields(
    table: VerdictTable, tmp_path: Path
) -> None:
    for rounds in (40, 0):
        ranking = PeerRanking(bootstrap=rounds, n_jobs=1).fit(table)
        record = ranking_record(ranking)
        path = tmp_path / f"r{rounds}.json"
        write_record(path, record)
        data = json.loads(path.read_text())
        again = tmp_path / f"again{rounds}.json"
        write_record(again, read_record(path, RankingRecord))
        assert again.read_text() == path.read_text()
        if rounds:
            assert data["settings"]["pairwise_intervals"] == "max-t"
            first, last = data["models"][0], data["models"][-1]
            assert last["name"] in first["above"] and last["above"] == []
            # "above" agrees with the fitted simultaneous intervals
            k = ranking.models_.index(first["name"])
            lows = ranking.elo_difference_ci_[k, :, 0]
            assert sorted(first["above"]) == sorted(
                ranking.models_[j] for j in np.flatnonzero(lows > ELO_TOLERANCE)
            )
        else:
            assert "pairwise_intervals" not in data["settings"]
            assert all("above" not in m for m in data["models"])
        assert "bootstrap_vanished" not in data["fit"]


def test_the_outputs_say_which_interval_is_which(table: VerdictTable) -> None:
    record = ranking_record(PeerRanking(bootstrap=40, n_jobs=1).fit(table))
    console = Console(record=True, width=100)
    print_summary(console, record)
    text = " ".join(console.export_text().split())
    assert "rank 95%: a marginal interval" in text and "family-wise 95% confidence" in text
    first = record.models[0]
    assert first.above and f"{first.name} > {', '.join(first.above)}" in text
    html = render(record)
    assert "a marginal interval" in html and "above (family-wise 95%)" in html
    plain = ranking_record(PeerRanking(bootstrap=0).fit(table))
    console = Console(record=True, width=100)
    print_summary(console, plain)
    assert "marginal" not in console.export_text() and "family-wise" not in render(plain)
