"""The pair solver for style-controlled fits: its second-order model is the objective's
own, and it reaches the optimum L-BFGS-B reaches, in far fewer passes over the cells."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from cell_orders import out_of_order, reweighted
from eigenjury.stats import btd, verdicts
from eigenjury.stats.btd import (
    DEFAULT_PRIOR,
    LowRankBTD,
    ScorePrior,
    _expand,
    _Problem,
    davidson_curvature,
    davidson_nll,
)
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.simulate import make_population, simulate_verdicts
from eigenjury.stats.verdicts import (
    OutcomeSums,
    ReplyFeatures,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
)


def _styled(seed: int, *, external: int = 0, n_scenarios: int = 120) -> VerdictTable:
    population = make_population(
        5, 2, verbosity=0.5, style_effect=0.5, external=external, seed=seed
    )
    return simulate_verdicts(population, n_scenarios=n_scenarios, seed=seed + 1)


def _two_features(table: VerdictTable, seed: int) -> VerdictTable:
    """A second, independent feature beside the length (markdown items, say)."""
    rng = np.random.default_rng(seed)
    rows = len(table.judge)
    extra = rng.poisson(3.0, size=(2, rows)).astype(np.float64)
    features = ReplyFeatures(
        ("length", "lists"),
        np.column_stack([table.features.first[:, 0], extra[0]]),
        np.column_stack([table.features.second[:, 0], extra[1]]),
    )
    return dataclasses.replace(table, features=features)


def _counts(table: VerdictTable) -> VerdictCounts:
    ranking = PeerRanking(style=table.features.names, bootstrap=0)
    return ScenarioCounts.from_table(table, ranking._style_design(table).z).counts()


def test_curvature_is_the_derivative_of_the_gradient() -> None:
    rng = np.random.default_rng(0)
    cells = 40
    offset, log_tie = rng.normal(0, 3, cells), rng.normal(-1, 1, cells)
    counts = rng.poisson(3, (cells, 3)).astype(np.float64)
    n = OutcomeSums.of(counts)
    nll, g_a, g_tie, h_aa, h_at, h_tt = davidson_curvature(offset, log_tie, n)
    reference, g, g_ref_tie = davidson_nll(
        offset, np.zeros(cells), log_tie, np.zeros(cells), counts
    )
    assert nll.sum() == pytest.approx(reference, rel=1e-12)
    np.testing.assert_allclose(g_a, g, atol=1e-12)
    np.testing.assert_allclose(g_tie, g_ref_tie, atol=1e-12)
    step = 1e-6
    up, down = (davidson_curvature(offset + s, log_tie, n) for s in (step, -step))
    np.testing.assert_allclose(h_aa, (up[1] - down[1]) / (2 * step), atol=1e-7)
    np.testing.assert_allclose(h_at, (up[2] - down[2]) / (2 * step), atol=1e-7)
    up, down = (davidson_curvature(offset, log_tie + s, n) for s in (step, -step))
    np.testing.assert_allclose(h_tt, (up[2] - down[2]) / (2 * step), atol=1e-7)
    # far from even (|offset| to 700) and with ties all but ruled out, the curvature
    # keeps its digits: never negative, and the variance's closed form to rounding
    far = OutcomeSums.of(np.ones((cells, 3)))
    wide = np.linspace(-700, 700, cells)
    for tie in (-30.0, -15.0, 0.0, 3.0):
        h = davidson_curvature(wide, tie, far)[3]
        t, lam = np.exp(-0.5 * np.abs(wide)), np.exp(tie)
        variance = (4 * t**2 + lam * t * (1 + t**2)) / (1 + lam * t + t**2) ** 2
        assert np.all(h >= 0)
        np.testing.assert_allclose(h, 0.25 * 3 * variance, rtol=1e-13)
    # one tie logit for every cell (one judge) is the same as it repeated per cell
    shared = davidson_curvature(offset, -0.4, n)
    repeated = davidson_curvature(offset, np.full(cells, -0.4), n)
    for one, each in zip(shared, repeated, strict=True):
        np.testing.assert_allclose(one, each, rtol=1e-15)


@pytest.mark.parametrize(
    ("per_judge", "prior", "position_bias", "external"),
    [
        (False, DEFAULT_PRIOR, True, 0),
        (True, DEFAULT_PRIOR, False, 1),
        (False, None, True, 1),
        (True, ScorePrior(2.0, 1.0, 5.0), True, 0),
    ],
)
def test_expansion_is_the_objective_to_second_order(
    per_judge: bool, prior: ScorePrior | None, position_bias: bool, external: int
) -> None:
    counts = _counts(_two_features(_styled(3, external=external, n_scenarios=40), 4))
    assert counts.n_cells < counts.n_terms
    problem = _Problem(counts, 2, 1e-3, position_bias, per_judge, prior)
    fit = LowRankBTD(2, prior=prior, position_bias=position_bias, style_per_judge=per_judge)
    x = fit.fit(counts).params_.pack()
    x = x + 0.3 * np.random.default_rng(5).standard_normal(x.size)  # away from the optimum
    expansion = _expand(problem, x)
    value, grad = problem.objective(x)
    assert expansion.value == pytest.approx(value, rel=1e-13)
    np.testing.assert_allclose(expansion.grad, grad, atol=1e-15)
    hessian = expansion.outer + expansion.bilinear
    # a parameter held at 0 (no position bias) has no gradient to differentiate
    free = np.array([b != (0.0, 0.0) for b in fit._start_and_bounds(counts, fit.params_)[1]])
    step = 1e-6
    for i in np.flatnonzero(free):
        up, down = x.copy(), x.copy()
        up[i] += step
        down[i] -= step
        column = (problem.objective(up)[1] - problem.objective(down)[1]) / (2 * step)
        np.testing.assert_allclose(
            hessian[free, i], column[free], atol=1e-8, err_msg=f"parameter {i}"
        )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"style_per_judge": True},
        {"position_bias": False, "dim": 1},
        {"self_preference": False, "prior": None},
        {"style_fixed": {"lists": 0.1}},
    ],
    ids=["shared", "per-judge", "no-position-bias", "no-prior", "held"],
)
def test_both_solvers_reach_the_same_fit(settings: dict[str, object]) -> None:
    table = _two_features(_styled(7, external=1, n_scenarios=150), 8)
    features = ("length", "lists")
    fits = {
        solver: PeerRanking(style=features, bootstrap=0, solver=solver, **settings).fit(table)  # type: ignore[arg-type]
        for solver in ("lbfgs", "auto")
    }
    new, old = fits["auto"], fits["lbfgs"]
    assert new.btd_.converged_ and old.btd_.converged_
    assert new.btd_.objective_ <= old.btd_.objective_ + 1e-12
    np.testing.assert_allclose(new.elo_, old.elo_, atol=1e-3)
    np.testing.assert_allclose(new.style_coef_, old.style_coef_, atol=1e-5)
    shown = new.counts_.shown  # scores are identified up to a constant per judge
    centred = [f.btd_.scores()[:, shown] for f in (new, old)]
    centred = [c - c.mean(axis=1, keepdims=True) for c in centred]
    np.testing.assert_allclose(centred[0], centred[1], atol=1e-5)
    np.testing.assert_allclose(new.btd_.self_bias_upper_, old.btd_.self_bias_upper_, atol=1e-4)
    if "style_fixed" in settings:
        assert new.style_coef_[1] == 0.1


def test_the_pair_solver_takes_a_handful_of_passes_where_lbfgs_takes_dozens() -> None:
    counts = _counts(_styled(11, n_scenarios=600))
    start = LowRankBTD(2).fit(counts).params_
    warm = {
        solver: LowRankBTD(2, solver=solver).fit(counts, init=start) for solver in ("auto", "lbfgs")
    }
    resampled = reweighted(counts, np.random.default_rng(2).poisson(1.0, counts.n_terms) * 1.0)
    moved = {
        solver: LowRankBTD(2, solver=solver).fit(resampled, init=start)
        for solver in ("auto", "lbfgs")
    }
    # a step is one pass over the cells; an L-BFGS iteration at least one
    assert 3 * moved["auto"].n_iter_ < moved["lbfgs"].n_iter_
    assert moved["auto"].objective_ <= moved["lbfgs"].objective_ + 1e-12
    assert warm["auto"].n_iter_ <= 2  # at the optimum already: nothing to do


def test_cells_that_do_not_lie_together_sum_the_same() -> None:
    counts = _counts(_styled(13, n_scenarios=50))
    shuffled = out_of_order(counts)
    np.testing.assert_allclose(shuffled.without_style().total, counts.without_style().total)
    fits = [LowRankBTD(2).fit(c) for c in (counts, shuffled)]
    np.testing.assert_allclose(fits[0].scores(), fits[1].scores(), atol=1e-6)


def test_an_unknown_solver_is_refused() -> None:
    with pytest.raises(ValueError, match="solver must be 'auto' or 'lbfgs'"):
        LowRankBTD(2, solver="newton").fit(_counts(_styled(1, n_scenarios=20)))  # type: ignore[arg-type]


def _agreeing_judges(n: int, seed: int, m: int = 20) -> VerdictTable:
    """Every judge sees the same strengths (and a taste for length): a fit of dimension 2
    has a second dimension with only noise to fit, which the small L2 term barely
    holds, so near the optimum the exact Hessian bends slightly negative."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0, 0.7, m)
    judge, first = rng.integers(m, size=n), rng.integers(m, size=n)
    second = (first + 1 + rng.integers(m - 1, size=n)) % m
    length = np.exp(rng.normal(6, 0.5, (2, n)))
    edge = strength[first] - strength[second] + 0.3 * (length[0] - length[1]) / length.sum(0)
    u = rng.random(n)
    verdict = np.where(u < 0.2, 0, np.where(u < 0.2 + 0.8 / (1 + np.exp(-edge)), 1, 2))
    names = np.array([f"m{i}" for i in range(m)])
    table = VerdictTable.from_columns(
        (np.arange(n) // 20).astype(str), names[judge], names[first], names[second], verdict
    )
    features = ReplyFeatures(("length",), length[0][:, None], length[1][:, None])
    return dataclasses.replace(table, features=features)


def test_a_dimension_of_noise_does_not_slow_newton_to_a_crawl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On these 300,000 verdicts the Gauss-Newton steps that replaced the exact Hessian
    wherever it was not definite shrank the gradient by a constant factor a step: 50
    steps ended at 2e-6, and L-BFGS-B went on from there. Each curvature taken at its
    size keeps Newton's steps everywhere else: a handful of steps to the tolerance."""
    steps: list[int] = []
    solve = btd._pair_solve

    def counted(*args: object) -> tuple[object, int]:
        here, taken = solve(*args)  # type: ignore[arg-type]
        steps.append(taken)
        return here, taken

    monkeypatch.setattr(btd, "_pair_solve", counted)
    counts = _counts(_agreeing_judges(300_000, 1))
    fitted = LowRankBTD().fit(counts)
    assert fitted.message_ == "pair solver converged" and fitted.grad_norm_ < fitted.tol
    assert steps == [steps[0]] and steps[0] <= 12


@pytest.mark.parametrize("per_judge", [False, True])
def test_an_expansion_in_runs_is_the_expansion_over_all_cells(
    per_judge: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Summed a run of whole cells at a time, in order or out of it, the expansion is
    the same as over every verdict at once."""
    table = _two_features(_styled(9, external=1, n_scenarios=60), 10)
    counts = _counts(table)
    assert counts.style is not None and len(counts.style.runs) == 1
    problem = _Problem(counts, 2, 1e-3, True, per_judge, DEFAULT_PRIOR)
    x = LowRankBTD(2, style_per_judge=per_judge).fit(counts).params_.pack()
    whole = _expand(problem, x)
    monkeypatch.setattr(verdicts, "RUN_ENTRIES", 37)
    in_runs = _counts(table)
    assert in_runs.style is not None and len(in_runs.style.runs) > 10
    for cells in (in_runs, out_of_order(counts)):
        other = _expand(_Problem(cells, 2, 1e-3, True, per_judge, DEFAULT_PRIOR), x)
        assert other.value == pytest.approx(whole.value, rel=1e-13)
        np.testing.assert_allclose(other.grad, whole.grad, rtol=1e-9, atol=1e-15)
        np.testing.assert_allclose(other.outer, whole.outer, rtol=1e-9, atol=1e-14)
        np.testing.assert_allclose(other.bilinear, whole.bilinear, rtol=1e-9, atol=1e-14)
