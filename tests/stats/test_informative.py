"""Whether a judge's verdicts carry information (stats.informative): judges built to be
a coin flip, position-locked, always tying or contrary, beside the honest judges of a
generator unlike the fit's own model (eigenjury.testing.verdicts), are each measured as
what they were built to be; names do not matter; a judge nothing can measure says so."""

from __future__ import annotations

import collections
import dataclasses

import numpy as np

from eigenjury.stats.informative import classify, judge_signals
from eigenjury.stats.judge_agreement import judge_agreement
from eigenjury.stats.verdicts import FIRST, SECOND, TIE, VerdictTable
from eigenjury.testing.verdicts import Design, verdicts

BUILT = ("coin", "coin", "lock", "tie", "contrary")


def _with_built_judges(seed: int, scenarios: int = 60) -> VerdictTable:
    """A generated study (8 honest judges, 3 a scenario, every pair of a group in both
    orders) and one built judge per BUILT, each judging what one honest judge judged."""
    table = verdicts(Design(scenarios=scenarios), seed)
    rng = np.random.default_rng([seed, 1])
    names = np.array(table.models)
    columns = [[table.scenario], [names[table.judge]], [names[table.first]], [names[table.second]]]
    said = [table.verdict]
    for k, kind in enumerate(BUILT):
        rows = np.flatnonzero(table.judge == k)
        honest = table.verdict[rows]
        verdict = {
            "coin": rng.integers(0, 3, len(rows)),
            "lock": np.full(len(rows), FIRST),
            "tie": np.full(len(rows), TIE),
            "contrary": np.where(honest == FIRST, SECOND, np.where(honest == SECOND, FIRST, TIE)),
        }[kind]
        for column, values in zip(
            columns,
            (table.scenario[rows], np.full(len(rows), f"{kind}{k}"), names[table.first[rows]],
             names[table.second[rows]]),
            strict=True,
        ):  # fmt: skip
            column.append(values)
        said.append(verdict)
    return VerdictTable.from_columns(*(np.concatenate(c) for c in columns), np.concatenate(said))


def test_built_judges_are_measured_as_built() -> None:
    got: dict[str, collections.Counter[tuple[str, str | None]]] = collections.defaultdict(
        collections.Counter
    )
    for seed in range(10):
        for signal in judge_signals(_with_built_judges(seed)):
            kind = "honest" if signal.judge.startswith("m") else signal.judge.rstrip("0123456789")
            got[kind][(signal.verdict, signal.reason)] += 1
    assert got["lock"] == {("uninformative", "position"): 10}
    assert got["tie"] == {("uninformative", "same label"): 10}
    # a contrarian shares comparisons with the others in about 22 of the 60 scenarios;
    # where fewer than MIN_SCENARIOS, it is unmeasured (40 studies: 39 contrary, 1)
    contrary = got["contrary"]
    assert contrary[("uninformative", "contrary")] >= 9
    assert set(contrary) <= {("uninformative", "contrary"), ("unmeasured", None)}
    # 20 coin flips: at most a slight signal, or too few scenarios to tell; never read as
    # contrary or informative (40 studies: 48 slight, 29 undetermined, 2 unmeasured, 1 weak)
    coin = got["coin"]
    assert coin[("uninformative", "slight")] >= 8
    allowed = {("uninformative", "slight"), ("undetermined", None), ("unmeasured", None)}
    assert set(coin) <= allowed | {("weak", None)} and coin[("weak", None)] <= 1
    assert got["honest"][("informative", None)] >= 75  # of 80 (313 of 320 in 40 studies)


def test_the_measures_do_not_depend_on_names() -> None:
    table = _with_built_judges(3)
    before = {s.judge: s for s in judge_signals(table)}
    rename = {
        name: f"z{len(table.models) - i:02d}-{name[::-1]}" for i, name in enumerate(table.models)
    }
    names = np.array([rename[m] for m in table.models])
    scenarios = np.array(table.scenarios)[table.scenario]  # the same names, the same units
    renamed = VerdictTable.from_columns(
        scenarios, names[table.judge], names[table.first], names[table.second], table.verdict
    )
    after = {s.judge: s for s in judge_signals(renamed)}
    for name, signal in before.items():
        other = after[rename[name]]
        assert (other.verdict, other.reason) == (signal.verdict, signal.reason)
        for mine, theirs in ((other.kappa, signal.kappa), (other.order_kappa, signal.order_kappa)):
            np.testing.assert_equal(dataclasses.astuple(mine), dataclasses.astuple(theirs))


def test_a_judge_nothing_can_measure_is_unmeasured() -> None:
    """One verdict per comparison and no other judge on it: no order consistency, no
    agreement; the verdict says so rather than guessing."""
    table = VerdictTable.from_columns(
        np.arange(40),
        np.array(["solo"] * 20 + ["other"] * 20),
        np.array(["a", "b"] * 20),
        np.array(["b", "a"] * 20),
        np.array([FIRST, SECOND, TIE, FIRST] * 10),
    )
    signals = {s.judge: s for s in judge_signals(table)}
    assert signals["solo"].verdict == "unmeasured"
    assert "nothing measures whether it read the replies" in signals["solo"].why


def test_order_kappa_is_zero_for_a_content_blind_judge_and_one_for_a_steady_one() -> None:
    """Pairs in both orders: a judge that names the same outcome both times has order
    kappa 1; one whose second verdict is drawn at its own label rates has about 0."""
    rng = np.random.default_rng(0)
    n = 4000
    scenario = np.repeat(np.arange(n), 2)
    first = np.tile(["a", "b"], n)
    second = np.tile(["b", "a"], n)
    steady_outcome = rng.integers(0, 3, n)  # 0 tie, 1 a wins, 2 b wins
    steady = np.empty(2 * n, dtype=np.int64)
    steady[0::2] = np.where(steady_outcome == 0, TIE, np.where(steady_outcome == 1, FIRST, SECOND))
    steady[1::2] = np.where(steady_outcome == 0, TIE, np.where(steady_outcome == 1, SECOND, FIRST))
    blind = rng.choice([FIRST, SECOND, TIE], size=2 * n, p=[0.5, 0.3, 0.2])
    for verdict, expected in ((steady, 1.0), (blind, 0.0)):
        table = VerdictTable.from_columns(scenario, np.array(["j"] * 2 * n), first, second, verdict)
        [row] = judge_agreement(table, None, bootstrap=200).judges
        assert abs(row.order_kappa.value - expected) < 0.05
        assert classify(row).order_kappa.value == row.order_kappa.value


def test_a_judge_repeating_its_verdicts_cannot_outvote_the_others() -> None:
    """Three honest judges and a contrarian that gives each verdict three times: each
    judge has one vote a comparison in the majority, so the honest judges are not made
    to look contrary (by verdict weight the contrarian, 3 against the other two honest
    judges' 2, would be every honest judge's majority)."""
    rng = np.random.default_rng(4)
    rows: list[tuple[int, str, str, str, int]] = []
    for scenario in range(60):
        better = rng.random() < 0.5  # which reply of this scenario is better
        for first, second in (("a", "b"), ("b", "a")):
            right = FIRST if (first == "a") == better else SECOND
            wrong = SECOND if right == FIRST else FIRST
            rows.extend(
                (scenario, judge, first, second, right if rng.random() < 0.85 else wrong)
                for judge in ("h1", "h2", "h3")
            )
            rows += [(scenario, "c", first, second, wrong)] * 3
    columns = list(zip(*rows, strict=True))
    table = VerdictTable.from_columns(*(np.array(c) for c in columns))
    signals = {s.judge: s for s in judge_signals(table)}
    assert signals["c"].reason == "contrary"
    honest = [signals[h] for h in ("h1", "h2", "h3")]
    assert not any(s.reason == "contrary" for s in honest)  # all three were, by weight
    assert sum(s.verdict == "informative" for s in honest) >= 2


def test_scenarios_that_feed_no_measure_change_no_measure() -> None:
    """A study plus arena-style battles (one verdict a scenario, which no measure can
    read): every judge's measures and verdict are those of the study alone, while tie
    and slot shares count every verdict; so a judge that picks A in every battle is
    named for it, and an arena file of only battles is unmeasured without a bootstrap
    over its scenarios."""
    study = _with_built_judges(5)
    names = np.array(study.models)
    rng = np.random.default_rng(9)
    extra = 3000
    honest = [name for name in study.models if name.startswith("m")]
    judge = np.where(np.arange(extra) % 2 == 0, "lock2", rng.choice(honest, extra))
    first = rng.choice(honest, extra)
    second = np.array([honest[(honest.index(f) + 1) % len(honest)] for f in first])
    verdict = np.where(judge == "lock2", FIRST, rng.integers(0, 3, extra))
    battles = np.array([f"battle {i}" for i in range(extra)])
    both = VerdictTable.from_columns(
        np.concatenate([np.array(study.scenarios)[study.scenario], battles]),
        np.concatenate([names[study.judge], judge]),
        np.concatenate([names[study.first], first]),
        np.concatenate([names[study.second], second]),
        np.concatenate([study.verdict, verdict]),
    )
    alone = {s.judge: s for s in judge_signals(study)}
    with_battles = {s.judge: s for s in judge_signals(both)}
    assert alone.keys() == with_battles.keys()
    for name, signal in alone.items():
        other = with_battles[name]
        assert (other.verdict, other.reason) == (signal.verdict, signal.reason)
        for mine, theirs in ((other.kappa, signal.kappa), (other.order_kappa, signal.order_kappa)):
            np.testing.assert_allclose(dataclasses.astuple(mine), dataclasses.astuple(theirs))
    lock = with_battles["lock2"]
    assert lock.first_share == 1.0 and lock.verdict == "uninformative"
    honest_shares = [with_battles[h].first_share for h in honest]
    assert honest_shares != [alone[h].first_share for h in honest]  # battles counted

    only_battles = both.select(np.isin(np.array(both.scenarios)[both.scenario], battles))
    signals = {s.judge: s for s in judge_signals(only_battles)}
    assert signals["lock2"].reason == "position"
    assert {s.verdict for n, s in signals.items() if n != "lock2"} == {"unmeasured"}
