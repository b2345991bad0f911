"""External judges (judges that are never judged) in the peer ranking: recovery and
calibration on simulated truth, the reduction to Davidson / Bradley-Terry for one
judge, the external weights and the damping, bootstrap rounds, exclude_self."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from eigenjury.stats import (
    DataError,
    Davidson,
    PeerRanking,
    Population,
    VerdictCounts,
    VerdictTable,
    eigentrust,
    make_population,
    simulate_verdicts,
    trust_matrix,
)
from eigenjury.stats.consensus import SettingError
from eigenjury.stats.eigentrust import own_scores, panel_trust

ELO_PER_NAT = 400.0 / np.log(10.0)


@pytest.fixture(scope="module")
def panel_only() -> Population:
    """8 evaluees judged by 3 external judges only (an arena with three voters)."""
    return make_population(8, 2, external=3, peer_judges=False, seed=3)


@pytest.fixture(scope="module")
def mixed() -> Population:
    """8 peer judges that are also evaluees, and 2 external judges."""
    return make_population(8, 2, external=2, seed=3)


def _names(table: VerdictTable, codes: np.ndarray) -> list[str]:
    return [table.models[c] for c in codes]


def _rebuild(table: VerdictTable, keep: np.ndarray) -> VerdictTable:
    """The rows where `keep` holds, names coded afresh (dropped names disappear)."""
    part = table.select(keep)
    return VerdictTable.from_columns(
        [table.scenarios[s] for s in part.scenario],
        _names(part, part.judge),
        _names(part, part.first),
        _names(part, part.second),
        part.verdict,
    )


@pytest.mark.parametrize("kind", ["panel_only", "mixed"])
def test_external_judges_are_accepted_and_the_truth_recovered(
    kind: str, request: pytest.FixtureRequest
) -> None:
    population: Population = request.getfixturevalue(kind)
    table = simulate_verdicts(population, n_scenarios=1500, seed=4)
    ranking = PeerRanking(bootstrap=0).fit(table)
    assert ranking.judges_ == population.models
    assert ranking.models_ == population.evaluees
    assert list(ranking.external_) == list(population.external_mask)
    assert ranking.damping_ == (1.0 if kind == "panel_only" else 0.5)
    assert ranking.external_weights_ == {name: 1.0 for name in population.external}
    assert ranking.trust_matrix_.shape == (len(ranking.judges_), len(ranking.models_))
    assert ranking.elo_.shape == ranking.trust_.shape == (8,)
    np.testing.assert_allclose(ranking.trust_.sum(), 1.0)
    true_elo = population.elo()
    assert kendalltau(true_elo, ranking.elo_).statistic >= 0.85
    assert np.max(np.abs(true_elo - ranking.elo_)) < 30


@pytest.mark.slow
@pytest.mark.parametrize(
    "population",
    [
        make_population(6, 2, external=3, peer_judges=False, seed=11),
        make_population(6, 2, external=2, seed=11),
    ],
    ids=["panel_only", "mixed"],
)
def test_intervals_with_external_judges_are_calibrated(population: Population) -> None:
    """95% Elo intervals cover the true Elo about 95% of the time, as without external
    judges (tests/stats/test_consensus.py: 30 datasets x 6 models, the same band)."""
    true_elo = population.elo()
    inside, taus = [], []
    for k in range(30):
        table = simulate_verdicts(population, n_scenarios=600, seed=100 + k)
        ranking = PeerRanking(bootstrap=100, restarts=2, seed=k, n_jobs=2).fit(table)
        lo, hi = ranking.elo_ci_[:, 0], ranking.elo_ci_[:, 1]
        inside.append((lo <= true_elo) & (true_elo <= hi))
        taus.append(kendalltau(true_elo, ranking.elo_).statistic)
    coverage = float(np.mean(inside))
    print(f"coverage {coverage:.3f} over {np.size(inside)} intervals; mean tau {np.mean(taus):.3f}")
    assert 0.88 <= coverage <= 0.995
    assert np.mean(taus) >= 0.8


def test_one_external_judge_ranks_as_a_davidson_fit() -> None:
    """One judge's BTD row is a free score vector, so the fit is Davidson's MLE; with
    t = T_x the order of Elo is the order of those scores."""
    population = make_population(7, 2, external=1, peer_judges=False, position_bias=0.0, seed=5)
    table = simulate_verdicts(population, n_scenarios=800, group_size=4, seed=6)
    ranking = PeerRanking(bootstrap=0, position_bias=False).fit(table)
    davidson = Davidson().fit(VerdictCounts.from_table(table))
    evaluees = np.flatnonzero(~ranking.external_)
    strength = davidson.strength_[evaluees]
    np.testing.assert_array_equal(np.argsort(-ranking.elo_), np.argsort(-strength))
    judge = int(np.flatnonzero(ranking.external_)[0])
    scores = ranking.btd_.scores()[judge, evaluees]
    np.testing.assert_allclose(scores - scores.mean(), strength, atol=1e-4)
    assert ranking.btd_.tie_propensity_[judge] == pytest.approx(davidson.tie_propensity_, rel=1e-3)


def test_without_ties_one_external_judge_gives_the_bradley_terry_elo() -> None:
    """lambda -> 0: T_xj = pi_xj / sum_k pi_xk, so Elo differences are 400 / ln 10 times
    score differences: the arena's Bradley-Terry Elo."""
    population = make_population(
        6, 2, tie=0.0, external=1, peer_judges=False, position_bias=0.0, seed=7
    )
    table = simulate_verdicts(population, n_scenarios=600, seed=8)
    assert not np.any(table.verdict == 0)
    ranking = PeerRanking(bootstrap=0, position_bias=False).fit(table)
    judge = int(np.flatnonzero(ranking.external_)[0])
    evaluees = np.flatnonzero(~ranking.external_)
    scores = ranking.btd_.scores()[judge, evaluees]
    elo = ranking.elo_ - ranking.elo_.mean()
    np.testing.assert_allclose(elo, ELO_PER_NAT * (scores - scores.mean()), atol=1e-3)
    davidson = Davidson().fit(VerdictCounts.from_table(table))
    np.testing.assert_allclose(elo, davidson.ratings_[evaluees] - 1500.0, atol=0.5)


def test_with_ties_one_external_judge_still_gives_the_bradley_terry_elo() -> None:
    """Ties stay out of trust (stats.eigentrust): a judge that ties often gives the same
    Elo scale as one that never ties (EigenBench's rule compressed it)."""
    population = make_population(6, 2, tie=1.0, external=1, peer_judges=False, seed=7)
    table = simulate_verdicts(population, n_scenarios=600, seed=8)
    assert np.mean(table.verdict == 0) > 0.2
    ranking = PeerRanking(bootstrap=0).fit(table)
    judge = int(np.flatnonzero(ranking.external_)[0])
    scores = ranking.btd_.scores()[judge, np.flatnonzero(~ranking.external_)]
    elo = ranking.elo_ - ranking.elo_.mean()
    np.testing.assert_allclose(elo, ELO_PER_NAT * (scores - scores.mean()), atol=1e-3)


def test_weights_scale_free_and_weight_zero_leaves_the_judge_out(mixed: Population) -> None:
    table = simulate_verdicts(mixed, n_scenarios=800, seed=9)
    equal = PeerRanking(bootstrap=0).fit(table)
    doubled = PeerRanking(bootstrap=0, external_weights={"judge-0": 2, "judge-1": 2}).fit(table)
    np.testing.assert_allclose(doubled.elo_, equal.elo_, atol=1e-9)
    silenced = PeerRanking(bootstrap=0, external_weights={"judge-0": 0}).fit(table)
    assert silenced.external_weights_ == {"judge-0": 0.0, "judge-1": 1.0}
    one = silenced.judges_.index("judge-1")
    evaluees = np.flatnonzero(~silenced.external_)
    expected = eigentrust(
        silenced.trust_matrix_[evaluees], damping=0.5, pretrust=silenced.trust_matrix_[one]
    )
    np.testing.assert_allclose(silenced.trust_, expected, atol=1e-12)
    assert np.max(np.abs(silenced.elo_ - equal.elo_)) > 0.1  # the weight did something


def test_a_weight_zero_judge_counts_as_much_as_its_rows_dropped() -> None:
    """Dispositions are shared by all judges, so a judge's verdicts shape everyone's
    scores through them and weight 0 is not the same as no rows in general. With as
    many latent dimensions as judges, each judge's score row is free, and without the
    prior (which draws each judge toward the consensus of all) the judges' fits separate
    (up to the tiny L2 penalty) and the two agree."""
    population = make_population(6, 2, external=2, peer_judges=False, seed=12)
    table = simulate_verdicts(population, n_scenarios=800, seed=13)
    silenced = PeerRanking(bootstrap=0, prior=None, external_weights={"judge-1": 0}).fit(table)
    dropped = PeerRanking(bootstrap=0, prior=None).fit(
        _rebuild(table, table.judge != table.models.index("judge-1"))
    )
    assert set(dropped.judges_) == set(table.models) - {"judge-1"}
    assert dropped.models_ == silenced.models_
    np.testing.assert_allclose(silenced.elo_, dropped.elo_, atol=0.05)


def test_damping_defaults_and_refusals(panel_only: Population, mixed: Population) -> None:
    peers_only = simulate_verdicts(make_population(6, 2, seed=3), n_scenarios=500, seed=4)
    plain = PeerRanking(bootstrap=0).fit(peers_only)
    assert plain.damping_ == 0.0 and plain.external_weights_ is None
    assert plain.models_ == plain.judges_ and not plain.external_.any()
    # today's computation, bit for bit (a judge's own score lowered as far as its
    # verdicts on itself show it modest)
    matrix = trust_matrix(own_scores(plain.btd_.scores(), plain.btd_.self_bias_upper_))
    np.testing.assert_array_equal(plain.trust_, eigentrust(matrix))
    with pytest.raises(DataError, match="damping 1 makes trust the pre-trust alone"):
        PeerRanking(bootstrap=0, damping=1.0).fit(peers_only)

    both = simulate_verdicts(mixed, n_scenarios=600, seed=4)
    assert PeerRanking(bootstrap=0, damping=0.2).fit(both).damping_ == 0.2
    consensus = PeerRanking(bootstrap=0, damping=1.0).fit(both)
    panel = [consensus.judges_.index(n) for n in mixed.external]
    np.testing.assert_allclose(consensus.trust_, consensus.trust_matrix_[panel].mean(axis=0))
    with pytest.raises(DataError, match="pre-trust vector cannot be given"):
        PeerRanking(bootstrap=0, pretrust=np.full(8, 1 / 8)).fit(both)

    voters = simulate_verdicts(panel_only, n_scenarios=600, seed=4)
    assert PeerRanking(bootstrap=0, damping=1.0).fit(voters).damping_ == 1.0
    with pytest.raises(DataError, match="no evaluee ever judges"):
        PeerRanking(bootstrap=0, damping=0.5).fit(voters)
    with pytest.raises(DataError, match="a population that ranks itself"):
        PeerRanking(bootstrap=0, external_judges=False).fit(voters)


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"judge-0": -1.0}, "'judge-0' must be a finite number >= 0"),
        ({"judge-0": float("nan")}, "'judge-0' must be a finite number >= 0"),
        ({"model-0": 1.0}, "'model-0' is an evaluee, not an external judge"),
        ({"nobody": 1.0}, "'nobody' is not a judge in the verdicts"),
        ({"judge-0": 0.0, "judge-1": 0.0}, "every external judge has weight 0"),
    ],
)
def test_weights_that_cannot_apply_are_refused_by_name(
    mixed: Population, weights: dict[str, float], message: str
) -> None:
    table = simulate_verdicts(mixed, n_scenarios=200, seed=4)
    with pytest.raises(SettingError, match=message) as refused:
        PeerRanking(bootstrap=0, external_weights=weights).fit(table)
    assert refused.value.setting == "external_weights"


def test_the_anchor_must_be_an_evaluee(mixed: Population) -> None:
    table = simulate_verdicts(mixed, n_scenarios=300, seed=4)
    with pytest.raises(DataError, match="'judge-0' is an external judge"):
        PeerRanking(bootstrap=0, anchor="judge-0").fit(table)
    ranking = PeerRanking(bootstrap=0, anchor="model-3", anchor_value=1000).fit(table)
    assert ranking.elo_[ranking.models_.index("model-3")] == pytest.approx(1000.0)


def test_an_external_judge_absent_from_a_round_drops_out_of_the_pretrust() -> None:
    trust = np.array(
        [[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.3, 0.2, 0.5], [0.6, 0.2, 0.2], [0.0, 0.0, 0.0]]
    )
    evaluees, external = np.arange(3), np.array([3, 4])
    alone = panel_trust(trust, evaluees, external, np.array([1.0, 5.0]), damping=1.0)
    np.testing.assert_allclose(alone, trust[3])  # judge 4 has no row: judge 3 alone
    nobody = panel_trust(trust[:3], evaluees, external[:0], np.ones(0), damping=1.0)
    np.testing.assert_allclose(nobody, np.full(3, 1 / 3))  # no panel left: uniform
    damped = panel_trust(trust, evaluees, external, np.array([1.0, 5.0]), damping=0.3)
    np.testing.assert_allclose(damped, eigentrust(trust[:3], damping=0.3, pretrust=trust[3]))


@pytest.mark.slow
def test_a_thin_external_judge_in_the_bootstrap(mixed: Population) -> None:
    """A judge with verdicts in only a few scenarios is missing from many rounds; those
    rounds use the other external judge alone, and every interval stays finite."""
    table = simulate_verdicts(mixed, n_scenarios=400, seed=14)
    thin = table.models.index("judge-0")
    rare = (table.judge != thin) | np.isin(table.scenario, np.unique(table.scenario)[:8])
    ranking = PeerRanking(bootstrap=40, n_jobs=1, min_verdicts=1).fit(table.select(rare))
    assert ranking.external_[thin]
    assert np.isfinite(ranking.elo_ci_).all()
    assert np.all(ranking.elo_ci_[:, 0] <= ranking.elo_ci_[:, 1])


def test_exclude_self_decides_who_is_external_after_dropping_self_judgments(
    mixed: Population,
) -> None:
    """'zed' judges the others and appears as an evaluee only in its own verdicts:
    with exclude_self it is never judged, an external judge."""
    table = simulate_verdicts(mixed, n_scenarios=600, seed=15)
    zed = ["zed"] * 40
    with_zed = VerdictTable.from_columns(
        [table.scenarios[s] for s in table.scenario] + [f"z{i % 20}" for i in range(40)],
        _names(table, table.judge) + zed,
        _names(table, table.first) + zed[:20] + ["model-2"] * 20,
        _names(table, table.second) + ["model-0", "model-1"] * 10 + ["model-3"] * 20,
        np.concatenate([table.verdict, np.tile([1, 2], 20)]),
    )
    kept = PeerRanking(bootstrap=0).fit(with_zed)
    assert "zed" in kept.models_  # judged, by itself
    excluded = PeerRanking(bootstrap=0, exclude_self=True).fit(with_zed)
    assert "zed" not in excluded.models_ and "zed" in excluded.judges_
    assert excluded.external_[excluded.judges_.index("zed")]
    true_elo = mixed.elo()
    fitted = excluded.elo_[[excluded.models_.index(m) for m in mixed.evaluees]]
    assert kendalltau(true_elo, fitted).statistic >= 0.7


def test_a_population_with_external_judges_round_trips(mixed: Population) -> None:
    again = Population.from_dict(mixed.to_dict())
    assert again.external == mixed.external and again.peer_judges
    np.testing.assert_allclose(again.elo(), mixed.elo())
    assert "external" not in make_population(4, 2).to_dict()
    with pytest.raises(ValueError, match="false only with external judges"):
        Population.from_dict({**make_population(4, 2).to_dict(), "peer_judges": False})
