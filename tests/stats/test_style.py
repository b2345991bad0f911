"""Style control: the covariates, the model with them, and recovery of planted style effects."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.optimize import approx_fprime

from eigenjury.stats.btd import BTDParams, LowRankBTD, ScorePrior, btd_objective, style_shape
from eigenjury.stats.consensus import PeerRanking, SettingError
from eigenjury.stats.simulate import Population, make_population, simulate_verdicts
from eigenjury.stats.style import CONSTANT, PER_PAIR, normalised_difference, style_design
from eigenjury.stats.verdicts import (
    DataError,
    ReplyFeatures,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
)


def _styled(seed: int = 0, **population: float) -> VerdictTable:
    settings = {"verbosity": 0.6, "style_effect": 1.0} | population
    pop = make_population(4, 1, seed=seed, **settings)  # type: ignore[arg-type]
    return simulate_verdicts(pop, n_scenarios=150, seed=seed)


def test_normalised_difference_is_scale_free_and_zero_for_two_zeros() -> None:
    a, b = np.array([300.0, 0.0, 5.0, 0.0]), np.array([100.0, 0.0, 0.0, 2.0])
    np.testing.assert_allclose(normalised_difference(a, b), [0.5, 0.0, 1.0, -1.0])
    np.testing.assert_allclose(normalised_difference(4 * a, 4 * b), normalised_difference(a, b))
    # near the float limit: the same ratios, where a - b or |a| + |b| would overflow
    huge = np.finfo(float).max / 2
    np.testing.assert_allclose(
        normalised_difference(
            np.array([huge, 2 * huge, 1.5 * huge]), np.array([-huge, huge, huge])
        ),
        [1.0, 1 / 3, 0.2],
    )


def test_design_scales_by_the_standard_deviation_and_drops_a_constant_feature() -> None:
    first = np.array([[3.0, 1.0], [1.0, 1.0], [2.0, 1.0], [1.0, 1.0]])
    second = np.array([[1.0, 1.0], [3.0, 1.0], [2.0, 1.0], [1.0, 1.0]])
    design = style_design(
        ReplyFeatures(("length", "bold"), first, second),
        np.ones(4),
        np.array([0, 0, 1, 1]),  # pair (0, 1) with four different length differences
        np.array([1, 1, 0, 0]),
        2,
    )
    assert design.names == ("length",) and design.dropped == {"bold": CONSTANT}
    diff = np.array([0.5, -0.5, 0.0, 0.0])
    np.testing.assert_allclose(design.scale, [diff.std()])
    np.testing.assert_allclose(design.z[:, 0], diff / diff.std())


def test_design_refuses_unknown_feature_values() -> None:
    first = np.array([[1.0], [np.nan]])
    with pytest.raises(DataError, match="'length' is unknown for 1 of 2 verdicts"):
        style_design(
            ReplyFeatures(("length",), first, np.ones((2, 1))),
            np.ones(2),
            np.array([0, 1]),
            np.array([1, 0]),
            2,
        )


def test_a_feature_fixed_per_evaluee_is_left_out_and_one_varying_within_is_kept() -> None:
    """Every reply of a model equally long: its effect is the model's own quality."""
    table = _styled(seed=5)
    assert table.features is not None
    habit = np.array([100.0, 300.0, 50.0, 200.0])
    fixed = ReplyFeatures(
        ("length", "house"),
        np.stack([table.features.first[:, 0], habit[table.first]], axis=1),
        np.stack([table.features.second[:, 0], habit[table.second]], axis=1),
    )
    ranking = PeerRanking(1, style=("length", "house"), bootstrap=0).fit(
        dataclasses.replace(table, features=fixed)
    )
    assert ranking.style_features_ == ("length",)
    assert ranking.style_dropped_ == {"house": PER_PAIR}


@pytest.mark.parametrize("per_judge", [False, True])
@pytest.mark.parametrize("position_bias", [False, True])
def test_objective_gradient_with_style(per_judge: bool, position_bias: bool) -> None:
    table = _styled(seed=3)
    design = style_design(
        table.features,  # type: ignore[arg-type]
        table.weight,
        table.first,
        table.second,
        table.n_models,
    )
    counts = VerdictCounts.from_table(table, design.z)
    m, d = counts.n_models, 2
    rng = np.random.default_rng(0)
    shape = style_shape(counts, per_judge)
    x = BTDParams(
        rng.standard_normal((m, d)),
        rng.standard_normal((m, d)),
        rng.normal(-1, 0.3, m),
        rng.normal(0, 0.3, m) if position_bias else np.zeros(m),
        rng.normal(0, 0.3, m),
        rng.standard_normal(shape),
    ).pack()
    args = (counts, d, 1e-3, position_bias, per_judge, ScorePrior())
    _, grad = btd_objective(x, *args)
    numeric = approx_fprime(x, lambda z: btd_objective(z, *args)[0], 1e-7)
    np.testing.assert_allclose(grad, numeric, rtol=1e-4, atol=1e-6)


def test_style_keeps_each_verdict_with_its_differences_under_its_cell() -> None:
    table = VerdictTable.from_columns(
        ["s1", "s1", "s2", "s2"], ["j"] * 4, ["a", "a", "a", "a"], ["b"] * 4, [1, 2, 1, 1]
    )
    style = np.array([[0.5], [0.5], [-1.0], [0.5]])
    counts = VerdictCounts.from_table(table, style)
    entries = counts.style
    assert entries is not None and counts.n_cells == 1 and counts.n_terms == 4
    assert counts.n.tolist() == [[0.0, 3.0, 1.0]] and entries.weight is None
    assert (
        entries.label.tolist() == [1, 2, 1, 1]
        and entries.differences(slice(None))[0].tolist() == style[:, 0].tolist()
    )
    plain = counts.without_style()
    assert plain.style is None and plain.n.tolist() == [[0.0, 3.0, 1.0]]
    scenario = ScenarioCounts.from_table(table, style)
    second = scenario.counts(np.array([0.0, 1.0]))
    assert second.n.tolist() == [[0.0, 2.0, 0.0]]
    assert second.style is not None and second.style.weights().tolist() == [0, 0, 1, 1]


def test_style_entries_lie_in_cell_order_with_their_scenarios() -> None:
    rng = np.random.default_rng(4)
    rows = 3000
    names = ["a", "b", "c", "d"]
    judge, first = rng.integers(4, size=rows), rng.integers(4, size=rows)
    second = (first + rng.integers(1, 4, size=rows)) % 4
    scenario = rng.integers(50, size=rows)
    table = VerdictTable.from_codes(
        scenario, judge, first, second, rng.integers(3, size=rows),
        models=tuple(names), scenarios=[f"s{i}" for i in range(50)],
    )  # fmt: skip
    style = rng.standard_normal((rows, 2))
    data = ScenarioCounts.from_table(table, style)
    entries = data.cells.style
    assert entries is not None and np.all(np.diff(entries.cell) >= 0)
    cells = data.cells
    # every row once, with its own scenario, cell, verdict and differences
    key = (cells.judge * 4 + cells.first) * 4 + cells.second
    got = np.column_stack(
        [data.entry_scenario, key[entries.cell], entries.label, entries.differences(slice(None)).T]
    )
    want = np.column_stack([scenario, (judge * 4 + first) * 4 + second, table.verdict, style])
    np.testing.assert_array_equal(np.unique(got, axis=0), np.unique(want, axis=0))


@pytest.mark.slow
def test_fit_recovers_a_planted_length_effect_within_its_interval() -> None:
    """In at least 90% of 50 seeded data sets the 95% interval covers the planted beta."""
    beta, covered, estimates = 1.0, 0, []
    for seed in range(50):
        table = _styled(seed, style_effect=beta)
        ranking = PeerRanking(1, style=("length",), bootstrap=100, seed=seed, n_jobs=1)
        ranking.fit(table)
        low, high = ranking.style_ci_[0] / ranking.style_scale_[0]
        covered += low <= beta <= high
        estimates.append(ranking.style_coef_[0] / ranking.style_scale_[0])
    assert covered >= 45
    assert abs(np.mean(estimates) - beta) < 0.1


def test_without_a_style_effect_the_rankings_agree_and_the_interval_covers_zero() -> None:
    table = _styled(seed=7, style_effect=0.0)
    ranking = PeerRanking(1, style=("length",), bootstrap=40, seed=0, n_jobs=1).fit(table)
    low, high = ranking.style_ci_[0]
    assert low <= 0.0 <= high
    assert (ranking.rank_change_ == 0).all()
    np.testing.assert_array_equal(ranking.rank_uncontrolled_, ranking.rank_)


def test_a_verbose_weaker_model_loses_its_place_under_style_control() -> None:
    """'wordy' is weaker than 'terse' but writes three times as long; judges love length."""
    pop = Population(
        models=("terse", "wordy", "mid", "low"),
        lenses=np.ones((4, 1)),
        dispositions=np.array([[1.0], [0.6], [0.0], [-1.0]]),
        tie_propensity=np.full(4, 0.3),
        position_bias=np.zeros(4),
        greenbeard=np.zeros(4, dtype=bool),
        verbosity=np.array([-0.6, 0.6, 0.0, 0.0]),
        style_effect=2.0,
    )
    table = simulate_verdicts(pop, n_scenarios=600, length_noise=0.3, seed=1)
    ranking = PeerRanking(1, style=("length",), bootstrap=0).fit(table)
    uncontrolled = dict(zip(ranking.models_, ranking.rank_uncontrolled_, strict=True))
    controlled = dict(zip(ranking.models_, ranking.rank_, strict=True))
    assert uncontrolled["wordy"] < uncontrolled["terse"]  # rank 1 is the best
    assert controlled["terse"] < controlled["wordy"]
    change = dict(zip(ranking.models_, ranking.rank_change_, strict=True))
    assert change["terse"] > 0 > change["wordy"]
    truth = dict(zip(pop.evaluees, pop.elo(), strict=True))
    elo = dict(zip(ranking.models_, ranking.elo_, strict=True))
    assert abs(elo["terse"] - elo["wordy"] - (truth["terse"] - truth["wordy"])) < 40


def test_per_judge_coefficients_find_the_judge_swayed_by_length() -> None:
    effect = np.array([0.0, 0.0, 2.5, 0.0])  # only model 2, as a judge, loves length
    pop = make_population(4, 1, verbosity=0.6, style_effect=effect, seed=2)
    table = simulate_verdicts(pop, n_scenarios=400, judges_per_scenario=2, seed=2)
    ranking = PeerRanking(
        1, style=("length",), style_per_judge=True, bootstrap=40, seed=0, n_jobs=1
    ).fit(table)
    per_unit = ranking.style_coef_[:, 0] / ranking.style_scale_[0]
    assert ranking.style_coef_.shape == (4, 1) and ranking.style_ci_.shape == (4, 1, 2)
    assert int(np.argmax(per_unit)) == 2
    low, high = ranking.style_ci_[2, 0] / ranking.style_scale_[0]
    assert low <= 2.5 <= high and low > 1.0
    others = ranking.style_ci_[[0, 1, 3], 0]
    assert ((others[:, 0] <= 0) & (others[:, 1] >= 0)).sum() >= 2


def test_style_settings_that_cannot_apply_are_refused_by_name() -> None:
    table = _styled()
    with pytest.raises(SettingError, match="named twice") as twice:
        PeerRanking(1, style=("length", "length"), bootstrap=0).fit(table)
    assert twice.value.setting == "style"
    with pytest.raises(SettingError, match="no style feature bold in the verdicts; they carry"):
        PeerRanking(1, style=("bold",), bootstrap=0).fit(table)
    bare = dataclasses.replace(table, features=None)
    with pytest.raises(SettingError, match="carry none"):
        PeerRanking(1, style=("length",), bootstrap=0).fit(bare)
    # a bare string is not four one-letter features (FitSettings' "none" is not the estimator's)
    with pytest.raises(SettingError, match="style takes feature names, not the string 'none'"):
        PeerRanking(1, style="none", bootstrap=0).fit(table)  # type: ignore[arg-type]


def test_a_constant_feature_alone_leaves_the_fit_uncontrolled() -> None:
    table = _styled()
    assert table.features is not None
    same = ReplyFeatures(("bold",), np.ones((len(table), 1)), np.ones((len(table), 1)))
    ranking = PeerRanking(1, style=("bold",), bootstrap=0).fit(
        dataclasses.replace(table, features=same)
    )
    assert ranking.style_features_ == () and ranking.style_dropped_ == {"bold": CONSTANT}
    assert not hasattr(ranking, "elo_uncontrolled_")
    plain = PeerRanking(1, bootstrap=0).fit(table)
    np.testing.assert_allclose(ranking.elo_, plain.elo_)


def test_the_model_with_style_predicts_with_and_without_the_differences() -> None:
    table = _styled(seed=4)
    ranking = PeerRanking(1, style=("length",), bootstrap=0).fit(table)
    btd: LowRankBTD = ranking.btd_
    j, a, b = np.array([0, 0]), np.array([1, 1]), np.array([2, 2])
    held = btd.predict_proba(j, a, b)
    np.testing.assert_allclose(held[0], held[1])
    moved = btd.predict_proba(j, a, b, style=np.array([[1.0], [-1.0]]))
    assert (moved[0, 1] > held[0, 1]) == (btd.style_coef_[0] > 0)
    np.testing.assert_allclose(moved.sum(axis=1), 1.0)


def _beyond_memory(monkeypatch: pytest.MonkeyPatch, rows: int) -> None:
    """Style differences computed run by run from the features, the verdicts in the
    order given (as for more than STYLE_IN_MEMORY verdicts), in runs of `rows`, and the
    style design's passes in chunks of `rows`."""
    from eigenjury.stats import style, verdicts

    monkeypatch.setattr(verdicts, "STYLE_IN_MEMORY", 10)
    monkeypatch.setattr(style, "STYLE_IN_MEMORY", 10)
    monkeypatch.setattr(verdicts, "RUN_ENTRIES", rows)
    monkeypatch.setattr(style, "_CHUNK", rows)


@pytest.mark.parametrize(
    "settings",
    [
        {"bootstrap": 40, "seed": 1},
        {"bootstrap": 40, "seed": 1, "interval": "sandwich", "style_per_judge": True},
        {"bootstrap": 0, "cv": 3},
    ],
)
def test_a_fit_beyond_memory_is_the_fit_in_memory(
    settings: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the verdicts are too many to keep their style differences (1e8), the fit,
    its intervals and its checks are the same to rounding, the passes taken over runs
    of verdicts in file order and the differences made as each run is taken."""
    table = _styled(seed=8, verbosity=0.8)
    names = ("length",)
    kept = PeerRanking(style=names, **settings).fit(table)  # type: ignore[arg-type]
    _beyond_memory(monkeypatch, 97)
    ranking = PeerRanking(style=names, **settings)  # type: ignore[arg-type]
    streamed = ranking.fit(table)
    entries = streamed._scenario_counts.cells.style
    assert entries is not None and entries.source.kept is None  # nothing kept, nothing sorted
    assert len(entries.runs) > 10 and all(r.starts is None for r in entries.runs)
    np.testing.assert_allclose(streamed.elo_, kept.elo_, atol=1e-8)
    np.testing.assert_allclose(streamed.style_coef_, kept.style_coef_, atol=1e-10)
    np.testing.assert_allclose(streamed.style_scale_, kept.style_scale_, rtol=1e-14)
    assert streamed.btd_.loglik_ == pytest.approx(kept.btd_.loglik_, rel=1e-12)
    np.testing.assert_allclose(
        streamed.btd_.self_bias_upper_, kept.btd_.self_bias_upper_, atol=1e-8
    )
    if kept.bootstrap:
        np.testing.assert_allclose(streamed.elo_ci_, kept.elo_ci_, atol=1e-6)
        np.testing.assert_allclose(streamed.style_ci_, kept.style_ci_, atol=1e-8)
    if kept.cv:
        np.testing.assert_allclose(streamed.heldout_.per_fold, kept.heldout_.per_fold, atol=1e-12)


def test_soft_verdicts_beyond_memory_find_their_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    table = _styled(seed=9)
    rng = np.random.default_rng(9)
    probs = rng.dirichlet(np.ones(3), size=len(table))
    probs[::3] = np.eye(3)[table.verdict[::3]]  # some hard: one entry each
    soft = dataclasses.replace(table, probs=probs)
    kept = PeerRanking(style=("length",), bootstrap=0).fit(soft)
    _beyond_memory(monkeypatch, 53)
    streamed = PeerRanking(style=("length",), bootstrap=0).fit(soft)
    entries = streamed._scenario_counts.cells.style
    assert entries is not None and entries.row is not None
    assert len(entries) == int(np.count_nonzero(probs))
    np.testing.assert_allclose(streamed.elo_, kept.elo_, atol=1e-8)
    np.testing.assert_allclose(streamed.style_coef_, kept.style_coef_, atol=1e-10)


def test_runs_out_of_cell_order_are_as_long_as_the_cells_are_many(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each run out of cell order counts into every cell: with more cells than a run
    has verdicts, counting would cost more than the run, so the run is made longer."""
    from eigenjury.stats import verdicts
    from eigenjury.stats.verdicts import KeptStyle, StyleEntries

    monkeypatch.setattr(verdicts, "RUN_ENTRIES", 100)
    rng = np.random.default_rng(2)
    cell = rng.integers(5000, size=20_000).astype(np.int16)
    label = rng.integers(3, size=20_000)
    entries = StyleEntries(cell, label, None, KeptStyle(np.zeros((1, 20_000))), 5000)
    lengths = {r.entries.stop - r.entries.start for r in entries.runs}
    assert lengths == {5000} and all(r.starts is None for r in entries.runs)
    summed = np.zeros(5000)
    for run in entries.runs:  # as a pass sums them
        summed[run.cells] += run.sums([np.ones(run.entries.stop - run.entries.start)])[0]
    np.testing.assert_array_equal(summed, entries.counts().sum(axis=1))
