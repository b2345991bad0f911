"""One external judge (an arena's crowd): the fit solved in the judge's scores' space
reaches the optimum the factorised solvers reach, at least as low, whatever the
settings; it is used only where one external judge gave every verdict, and where it
cannot settle the factorised fit proceeds as before."""

from __future__ import annotations

import numpy as np
import pytest

from cell_orders import out_of_order, reweighted, styled_cells
from eigenjury.stats import one_judge, verdicts
from eigenjury.stats.btd import DEFAULT_PRIOR, LowRankBTD, ScorePrior
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.one_judge import one_judge_fit, sole_external_judge
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


def _factorised_gradient(model: LowRankBTD, counts: VerdictCounts) -> float:
    """The largest component of the factorised objective's own gradient at the fit
    (parameters held at 0 left out)."""
    x, bounds = model._start_and_bounds(counts, model.params_)
    _, grad = model._problem(counts).objective(x)
    held = np.array([low is not None and low == high for low, high in bounds])
    return float(np.max(np.abs(np.where(held, 0.0, grad))))


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
    # converged as the factorised solvers mean it, with the gradient it reports
    true_gradient = _factorised_gradient(direct, counts)
    assert true_gradient < direct.tol
    assert direct.grad_norm_ == pytest.approx(true_gradient, rel=1e-3, abs=0.01 * direct.tol)
    assert direct.loglik_ == pytest.approx(direct.loglik(counts), rel=1e-12)
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
    assert one_judge_fit(counts, judge, LowRankBTD(), (2,)) is None
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
    return styled_cells([4] * len(first), first, second, n, names, np.array(z)[:, None])


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


def _round(counts: VerdictCounts, seed: int) -> VerdictCounts:
    """The counts of one bootstrap round, each battle its own scenario."""
    size = counts.n_terms
    drawn = np.random.default_rng(seed).integers(size, size=size)
    return reweighted(counts, np.bincount(drawn, minlength=size).astype(np.float64))


@pytest.mark.parametrize("position_bias", [False, True])
def test_a_warm_round_is_the_optimum_of_its_counts(position_bias: bool) -> None:
    """A bootstrap round starts from the full fit and is taken without the factorised
    confirmation: what it returns must still be the round's optimum, as a cold fit and
    L-BFGS-B at a tight tolerance find it."""
    counts = _counts(_battles(4000, 11), style=True)
    judge = sole_external_judge(counts)
    assert judge is not None
    full = LowRankBTD(dim=1, position_bias=position_bias).fit(counts)
    for seed in range(3):
        resampled = _round(counts, seed)
        warm = LowRankBTD(dim=1, position_bias=position_bias).fit(resampled, init=full.params_)
        cold = LowRankBTD(dim=1, position_bias=position_bias).fit(resampled)
        tight = LowRankBTD(dim=1, position_bias=position_bias, solver="lbfgs", tol=1e-12)
        tight.fit(resampled, init=full.params_)
        assert warm.converged_ and warm.n_iter_ <= 3
        for other in (cold, tight):
            np.testing.assert_allclose(
                _judge_scores(warm, judge), _judge_scores(other, judge), atol=1e-7
            )
            np.testing.assert_allclose(warm.style_coef_, other.style_coef_, atol=1e-7)
            # (each fit stops where its gradient is inside the tolerance, 1e-9 a verdict:
            # along the flattest direction that leaves 1e-12 of objective)
            assert warm.objective_ == pytest.approx(other.objective_, abs=1e-10)
        # the factorised objective's own gradient there is inside the tolerance
        assert _factorised_gradient(warm, resampled) < warm.tol
        assert warm.loglik_ == pytest.approx(warm.loglik(resampled), rel=1e-12)


def test_an_objective_that_rounds_never_hands_the_fit_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Near the optimum the objective stops moving in its last digits before the
    gradient settles, and no backtracking step can show a decrease: the solver must
    go by the gradient there. (It halved its step until it gave up, and the factorised
    solvers then took minutes on an arena's battles.) Here the objective is rounded to
    1e-11, far coarser than float rounding."""
    expand = one_judge._ScoresProblem.expand

    def coarse(self: one_judge._ScoresProblem, theta: np.ndarray) -> tuple:
        value, *rest = expand(self, theta)
        return (round(value, 11), *rest)

    counts = _round(_counts(_battles(3000, 12), style=True), 0)
    judge = sole_external_judge(counts)
    assert judge is not None
    shape = (counts.n_style,)
    exact = one_judge_fit(counts, judge, LowRankBTD(dim=1), shape)
    monkeypatch.setattr(one_judge._ScoresProblem, "expand", coarse)
    rounded = one_judge_fit(counts, judge, LowRankBTD(dim=1), shape)
    assert exact is not None and rounded is not None
    np.testing.assert_allclose(rounded.params.dispositions, exact.params.dispositions, atol=1e-7)


def test_a_pass_in_runs_of_cells_is_a_pass_over_all_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The expansion summed run by run (each a few groups of verdicts) equals the one
    summed over every verdict at once, and over verdicts out of group order."""
    table = _battles(3000, 13)
    counts = _counts(table, style=True)
    model = LowRankBTD(dim=1)
    judge = sole_external_judge(counts)
    assert judge is not None
    start = model.fit(counts).params_

    def expansion(cells: VerdictCounts) -> tuple:
        fitted = one_judge_fit(cells, judge, model, (cells.n_style,), init=start)
        assert fitted is not None
        problem = one_judge._problem(cells, model)
        return problem.expand(one_judge._start(problem, judge, cells.shown, start))

    whole = expansion(counts)
    assert counts.style is not None and len(counts.style.runs) == 1
    monkeypatch.setattr(verdicts, "RUN_ENTRIES", 50)
    in_runs = _counts(table, style=True)
    assert in_runs.style is not None and len(in_runs.style.runs) > 20
    shuffled = out_of_order(counts)
    assert shuffled.style is not None and len(shuffled.style.runs) > 20
    assert all(run.starts is None for run in shuffled.style.runs)
    for other in (expansion(in_runs), expansion(shuffled)):
        assert other[0] == pytest.approx(whole[0], rel=1e-13)
        for a, b in zip(whole[2:], other[2:], strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-14)


def test_runs_partition_the_verdicts_into_whole_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(verdicts, "RUN_ENTRIES", 40)
    counts = _counts(_battles(2000, 14), style=True)
    entries = counts.style
    assert entries is not None
    runs = entries.runs
    covered = np.concatenate([np.arange(r.entries.start, r.entries.stop) for r in runs])
    np.testing.assert_array_equal(covered, np.arange(len(entries)))
    seen = np.concatenate([np.asarray(r.cells) for r in runs])
    np.testing.assert_array_equal(seen, np.arange(counts.n_cells))  # each cell in one run
    for run in runs:
        cells = entries.cell[run.entries]
        assert run.starts is not None
        np.testing.assert_array_equal(
            run.starts, np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
        )
        np.testing.assert_array_equal(run.cells, cells[run.starts])
        # a run is about RUN_ENTRIES long, unless one cell has more verdicts
        assert len(cells) < 40 + np.bincount(cells).max()


def test_a_near_perfect_record_at_a_million_verdicts_a_cell_is_still_solved() -> None:
    """Found in review: a last Newton step taken without evaluating it, where the step
    before had shrunk the gradient a hundredfold, moved the scores 0.02 logits along a
    nearly flat direction (models that almost never lose, every count x 1e6) and the
    fit was reported converged with its gradient 48 times the tolerance. Every step is
    evaluated now: what is reported is the fit's own gradient, objective and
    log-likelihood, at the optimum."""
    cells = [
        (4, 2, (0, 4, 0)), (5, 3, (0, 0, 5)), (3, 1, (0, 5, 0)), (3, 1, (0, 4, 0)),
        (0, 2, (0, 3, 0)), (4, 0, (0, 0, 3)), (4, 5, (0, 3, 1)), (2, 5, (1, 1, 0)),
        (5, 1, (0, 7, 0)), (1, 4, (0, 0, 7)), (3, 4, (0, 7, 0)), (1, 4, (0, 0, 6)),
        (4, 0, (0, 0, 4)), (5, 4, (2, 2, 5)), (5, 4, (0, 2, 3)), (1, 5, (0, 1, 7)),
        (2, 0, (0, 0, 3)), (3, 5, (0, 3, 0)),
    ]  # fmt: skip
    first, second, n = zip(*cells, strict=True)
    counts = VerdictCounts(
        np.full(len(cells), 6),
        np.array(first),
        np.array(second),
        np.array(n, dtype=np.float64) * 1e6,
        ("m0", "m1", "m2", "m3", "m4", "m5", "crowd"),
    )
    fitted = LowRankBTD(dim=1).fit(counts)
    assert fitted.message_ == "solved in the one judge's scores (convex)"
    tight = LowRankBTD(dim=1, solver="lbfgs", tol=1e-12).fit(counts, init=fitted.params_)
    true_gradient = _factorised_gradient(fitted, counts)
    assert true_gradient < fitted.tol
    assert fitted.grad_norm_ == pytest.approx(true_gradient, rel=1e-6)
    x, _ = fitted._start_and_bounds(counts, fitted.params_)
    assert fitted.objective_ == pytest.approx(fitted._problem(counts).objective(x)[0], rel=1e-14)
    assert fitted.loglik_ == pytest.approx(fitted.loglik(counts), rel=1e-13)
    np.testing.assert_allclose(_judge_scores(fitted, 6), _judge_scores(tight, 6), atol=1e-6)
