"""Collapsing verdicts to counts, criterion weights, and design checks."""

from __future__ import annotations

import numpy as np

from eigenjury.stats import (
    PeerRanking,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    check_design,
)


def _small() -> VerdictTable:
    return VerdictTable.from_columns(
        scenario=["s1", "s1", "s1", "s2", "s2", "s3"],
        judge=["a", "a", "b", "c", "c", "a"],
        first=["b", "c", "a", "a", "b", "b"],
        second=["c", "b", "c", "b", "a", "c"],
        verdict=[1, 2, 0, 1, 1, 1],
    )


def test_counts_are_the_verdict_tallies_per_cell() -> None:
    counts = VerdictCounts.from_table(_small())
    assert counts.models == ("a", "b", "c")
    tallies = {
        (counts.models[j], counts.models[f], counts.models[s]): tuple(n)
        for j, f, s, n in zip(counts.judge, counts.first, counts.second, counts.n, strict=True)
    }
    assert tallies == {
        ("a", "b", "c"): (0, 2, 0),
        ("a", "c", "b"): (0, 0, 1),
        ("b", "a", "c"): (1, 0, 0),
        ("c", "a", "b"): (0, 1, 0),
        ("c", "b", "a"): (0, 1, 0),
    }
    assert counts.total == 6


def test_dense_and_sorted_collapse_agree(monkeypatch: object, table: VerdictTable) -> None:
    import eigenjury.stats.verdicts as v

    dense = VerdictCounts.from_table(table)
    monkeypatch.setattr(v, "_DENSE_KEY_LIMIT", 0)  # type: ignore[attr-defined]
    sorted_ = VerdictCounts.from_table(table)
    np.testing.assert_array_equal(dense.n, sorted_.n)
    np.testing.assert_array_equal(dense.judge, sorted_.judge)


def _cells(counts: VerdictCounts) -> dict[tuple[int, int, int], tuple[float, ...]]:
    return {
        (int(j), int(f), int(s)): tuple(n)
        for j, f, s, n in zip(counts.judge, counts.first, counts.second, counts.n, strict=True)
        if n.sum()
    }


def test_scenario_weights_reweight_whole_scenarios() -> None:
    table = _small()
    weights = np.array([2.0, 0.0, 1.0])  # s1 drawn twice, s2 not at all, s3 once
    rows = np.repeat(np.arange(len(table)), weights[table.scenario].astype(int))
    repeated = VerdictTable(
        table.scenario[rows],
        table.judge[rows],
        table.first[rows],
        table.second[rows],
        table.verdict[rows],
        table.models,
        table.scenarios,
        table.weight[rows],
    )
    got = ScenarioCounts.from_table(table).counts(weights)
    assert _cells(got) == _cells(VerdictCounts.from_table(repeated))
    assert got.total == 7


def test_criterion_rows_of_one_judgment_share_weight_one() -> None:
    table = VerdictTable.from_columns(
        scenario=["s1"] * 4 + ["s2"],
        judge=["a"] * 5,
        first=["b"] * 4 + ["c"],
        second=["c"] * 4 + ["b"],
        verdict=[1, 1, 2, 0, 2],
        criterion=["honesty", "care", "wisdom", "humour", "honesty"],
    )
    np.testing.assert_allclose(table.weight, [0.25] * 4 + [1.0])
    counts = VerdictCounts.from_table(table)
    assert counts.total == 2.0  # two judgments, not five rows


def test_design_errors_name_the_models() -> None:
    # 'x' only ever judges (an external judge, no error); 'z' is in no usable verdict;
    # {a, b} and {c, d} are never compared with each other.
    table = VerdictTable.from_columns(
        scenario=["s1", "s2", "s3", "s4", "s5"],
        judge=["x", "a", "c", "x", "z"],
        first=["a", "b", "c", "d", "a"],
        second=["b", "a", "d", "c", "b"],
        verdict=[1, 2, 1, 0, 1],
    )
    report = check_design(VerdictCounts.from_table(table.select(table.judge != 5)))
    assert list(report.external) == [False, False, False, False, True, False]  # a b c d x z
    assert any("'z' appear in no usable verdict" in e for e in report.errors)
    assert not any("'x'" in e for e in report.errors)
    assert any(
        "2 disconnected groups" in e and "'a', 'b'" in e and "'c', 'd'" in e for e in report.errors
    )


def test_thin_data_is_a_warning_naming_the_model(table: VerdictTable) -> None:
    assert check_design(VerdictCounts.from_table(table)).warnings == ()
    rare = table.models[3]
    keep = np.ones(len(table), dtype=bool)
    involved = np.flatnonzero((table.first == 3) | (table.second == 3))
    keep[involved[20:]] = False
    report = check_design(VerdictCounts.from_table(table.select(keep)))
    assert report.errors == ()
    assert any(f"'{rare}'" in w and "thin data" in w for w in report.warnings)


def test_a_perfect_record_is_flagged() -> None:
    rows = [
        (f"s{i}", j, a, b)
        for i in range(20)
        for j, a, b in (
            ("a", "b", "c"),
            ("b", "c", "a"),
            ("c", "a", "b"),
            ("a", "d", "b"),
            ("b", "c", "d"),
        )
    ]
    verdicts = [
        1 if first == "d" else 2 if second == "d" else (i % 3)
        for i, (_, _, first, second) in enumerate(rows)
    ]
    table = VerdictTable.from_columns(*zip(*rows, strict=True), verdict=verdicts)
    ranking = PeerRanking(bootstrap=0, min_verdicts=1).fit(table)
    won = "'d' won all 40 of the verdicts (in 20 scenarios) against"  # 2 a scenario
    assert any(w.startswith(won) for w in ranking.warnings_)
    assert ranking.separation_.unbounded_above.tolist() == [False, False, False, True]
