"""One external judge (an arena's crowd): the fit solved in the judge's scores' space
reaches the optimum the factorised solvers reach, at least as low, whatever the
settings; it is used only where one external judge gave every verdict, and where it
cannot settle the factorised fit proceeds as before."""

from __future__ import annotations

import numpy as np
import pytest

from eigenjury.stats.btd import DEFAULT_PRIOR, LowRankBTD, ScorePrior
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.one_judge import one_judge_start, sole_external_judge
from eigenjury.stats.simulate import make_population, simulate_verdicts
from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    TIE,
    ReplyFeatures,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
)


def _battles(n: int, seed: int, *, ties: bool = True) -> VerdictTable:
    """A crowd's battles among 7 models drawn from a Thurstone (probit) model with a tie
    zone, a first-slot edge and a taste for length: not the fit's Davidson family."""
    rng = np.random.default_rng(seed)
    strength = np.linspace(1.2, -1.2, 7)
    first = rng.integers(7, size=n)
    second = (first + 1 + rng.integers(6, size=n)) % 7
    length = rng.lognormal(6.0, 0.5, size=(2, n)) * np.exp(0.3 * strength[[first, second]])
    lists = rng.poisson(2.0, size=(2, n)).astype(np.float64)
    edge = strength[first] - strength[second] + 0.15 + 0.4 * np.log(length[0] / length[1])
    noise = rng.normal(size=n) * np.sqrt(2)
    zone = 0.5 if ties else 0.0
    verdict = np.where(edge + noise > zone, FIRST, np.where(edge + noise < -zone, SECOND, TIE))
    models = np.array([f"m{i}" for i in range(7)])
    table = VerdictTable.from_columns(
        np.arange(n).astype(str), np.full(n, "crowd"), models[first], models[second], verdict
    )
    features = ReplyFeatures(
        ("length", "lists"),
        np.column_stack([length[0], lists[0]]),
        np.column_stack([length[1], lists[1]]),
    )
    return VerdictTable(**{**table.__dict__, "features": features})


def _counts(table: VerdictTable, style: bool) -> VerdictCounts:
    names = table.features.names if style and table.features else ()
    ranking = PeerRanking(style=names, bootstrap=0)
    z = ranking._style_design(table).z if names else None
    return ScenarioCounts.from_table(table, z).counts()


def _judge_scores(model: LowRankBTD, judge: int) -> np.ndarray:
    scores = model.lenses_[judge] @ model.dispositions_.T
    shown = np.arange(len(scores)) != judge
    return np.asarray(scores[shown] - scores[shown].mean())


@pytest.mark.parametrize(
    ("dim", "style", "per_judge", "position_bias", "prior"),
    [
        (2, False, False, True, DEFAULT_PRIOR),
        (1, True, False, True, DEFAULT_PRIOR),
        (2, True, True, False, ScorePrior(2.0, 1.0, 5.0)),
        (3, True, False, True, None),
    ],
)
def test_the_scores_space_reaches_the_factorised_optimum(
    dim: int, style: bool, per_judge: bool, position_bias: bool, prior: ScorePrior | None
) -> None:
    counts = _counts(_battles(3000, 1), style)
    judge = sole_external_judge(counts)
    assert judge is not None
    settings = {
        "dim": dim,
        "style_per_judge": per_judge,
        "position_bias": position_bias,
        "prior": prior,
    }
    direct = LowRankBTD(**settings).fit(counts)  # type: ignore[arg-type]
    factorised = LowRankBTD(solver="lbfgs", **settings).fit(counts)  # type: ignore[arg-type]
    assert direct.converged_ and factorised.converged_
    assert direct.objective_ <= factorised.objective_ + 1e-10
    assert direct.objective_ == pytest.approx(factorised.objective_, abs=1e-8)
    np.testing.assert_allclose(
        _judge_scores(direct, judge), _judge_scores(factorised, judge), atol=2e-3
    )
    np.testing.assert_allclose(direct.style_coef_, factorised.style_coef_, atol=2e-3)
    # (the other models' tie and position terms bear on no verdict: only their starts)
    for term in ("tie_propensity_", "position_bias_"):
        assert getattr(direct, term)[judge] == pytest.approx(
            getattr(factorised, term)[judge], abs=2e-3
        )
    # convex: one optimum, which every start reaches (no restart warning)
    assert direct.n_agreeing_starts_ == direct.restarts
    assert direct.n_iter_ < factorised.n_iter_ / 10


def test_it_is_used_only_where_one_external_judge_gave_every_verdict() -> None:
    battles = _counts(_battles(500, 2), style=False)
    assert sole_external_judge(battles) == battles.models.index("crowd")
    peers = simulate_verdicts(make_population(5, 1, seed=3), n_scenarios=50, seed=4)
    assert sole_external_judge(ScenarioCounts.from_table(peers).counts()) is None
    names = np.array(battles.models)
    own = VerdictTable.from_columns(  # one judge, but among the evaluees
        np.array(["s1", "s2"]), np.array(["m0", "m0"]), names[[0, 1]], names[[1, 2]],
        np.array([FIRST, SECOND]),
    )  # fmt: skip
    assert sole_external_judge(ScenarioCounts.from_table(own).counts()) is None


def test_a_judge_that_never_ties_is_left_to_the_factorised_solvers() -> None:
    """Its tie logit runs to the fit's bound, beyond what the scores' space settles:
    no start from there, and the fit is the factorised one's."""
    counts = _counts(_battles(2000, 5, ties=False), style=True)
    judge = sole_external_judge(counts)
    assert judge is not None
    assert one_judge_start(counts, judge, LowRankBTD(), (2,)) is None
    direct = LowRankBTD().fit(counts)
    factorised = LowRankBTD(solver="lbfgs").fit(counts)
    assert direct.objective_ == pytest.approx(factorised.objective_, abs=1e-9)


def test_bootstrap_rounds_agree_with_the_factorised_fit() -> None:
    """Each round's refit starts from the full fit (init) and takes the same path."""
    table = _battles(1500, 7)
    settings = {"dim": 1, "bootstrap": 40, "n_jobs": 1, "style": ("length",)}
    direct = PeerRanking(**settings).fit(table)  # type: ignore[arg-type]
    factorised = PeerRanking(solver="lbfgs", **settings).fit(table)  # type: ignore[arg-type]
    np.testing.assert_allclose(direct.elo_, factorised.elo_, atol=0.05)
    np.testing.assert_allclose(direct.elo_ci_, factorised.elo_ci_, atol=0.5)
    assert not any("starts reached" in w for w in direct.warnings_)
    # the planted order of the probit strengths, and the taste for length, recovered
    assert np.all(np.diff(direct.elo_) < 0)
    assert direct.style_coef_[0] > 0


def _balanced_counts() -> VerdictCounts:
    """One judge, and a record in which every model wins as often as it loses: the
    start (each model's log odds of winning) is exactly 0, the kink of l2 |s|."""
    names = ("a", "b", "c", "d", "crowd")
    cells = [(0, 1, (1, 1, 1)), (2, 3, (1, 30, 10)), (3, 2, (1, 30, 10))]
    first, second, n = zip(*cells, strict=True)
    return VerdictCounts(
        np.full(3, 4), np.array(first), np.array(second), np.array(n, float), names
    )


def _style_hides_strength() -> VerdictCounts:
    """Without style every model is even (a flat optimum); with it, the longer reply of
    each pair wins and the shorter one's model is stronger: the styled fit must leave
    the flat start."""
    names = ("a", "b", "c", "d", "crowd")
    cells = []
    for x, y in ((0, 1), (2, 3)):
        for f, s in ((x, y), (y, x)):
            sign = 1 if f == x else -1
            cells.append((f, s, 2.0 * sign, (1, 2, 0) if sign > 0 else (1, 0, 2)))
            cells.append((f, s, 0.0, (1, 0, 2) if sign > 0 else (1, 2, 0)))
    first, second, z, n = zip(*cells, strict=True)
    return VerdictCounts(
        np.full(len(first), 4),
        np.array(first),
        np.array(second),
        np.array(n, float),
        names,
        np.array(z)[:, None],
    )


@pytest.mark.parametrize("counts", [_balanced_counts(), _style_hides_strength()])
def test_a_start_at_the_kink_is_never_taken_for_the_optimum(counts: VerdictCounts) -> None:
    """From scores exactly 0, |s| underflowed and a false stationary point (every lens
    and disposition 0, a saddle of the factorised objective) was accepted as converged:
    the objective must be the factorised solvers' own."""
    direct = LowRankBTD().fit(counts)
    factorised = LowRankBTD(solver="lbfgs").fit(counts)
    assert direct.converged_
    assert direct.objective_ == pytest.approx(factorised.objective_, abs=1e-9)
    assert np.ptp(direct.scores()[4]) > 0.5  # not a flat ranking
    assert LowRankBTD(restarts=0).fit(counts).objective_ == pytest.approx(
        direct.objective_, abs=1e-9
    )
