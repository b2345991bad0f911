"""Sampling designs: counts, both orders, balance, and stability as a population grows."""

from __future__ import annotations

from collections import Counter

from eigenjury.peer.designs import design_all, design_balanced, design_random_groups

MEMBERS = [f"m{i}" for i in range(8)]
SCENARIOS = [f"s{i:02d}" for i in range(60)]


def test_all_is_every_judge_pair_and_scenario() -> None:
    comparisons = design_all(MEMBERS[:4], SCENARIOS[:3])
    assert len(comparisons) == 4 * 12 * 3 and len(set(comparisons)) == len(comparisons)


def test_random_groups_judges_every_pair_in_both_orders() -> None:
    comparisons = design_random_groups(MEMBERS, SCENARIOS, group_size=4, judges_per_group=2)
    assert len(comparisons) == 60 * 2 * 12
    keys = {(c.scenario, c.judge, c.first, c.second) for c in comparisons}
    assert all((c.scenario, c.judge, c.second, c.first) in keys for c in comparisons)
    per_scenario = Counter(c.scenario for c in comparisons)
    assert set(per_scenario.values()) == {24}


def test_balanced_spreads_work_evenly() -> None:
    comparisons = design_balanced(MEMBERS, SCENARIOS, group_size=4)
    judged = Counter(c.judge for c in comparisons)
    evaluated = Counter(m for c in comparisons for m in (c.first, c.second))
    assert max(judged.values()) - min(judged.values()) <= 12  # at most one group apart
    assert max(evaluated.values()) - min(evaluated.values()) <= 2 * 6
    rand = design_random_groups(MEMBERS, SCENARIOS, group_size=4)
    spread = Counter(c.judge for c in rand)
    assert max(spread.values()) - min(spread.values()) > max(judged.values()) - min(judged.values())


def test_random_groups_keep_most_work_when_a_member_joins() -> None:
    before = set(design_random_groups(MEMBERS, SCENARIOS, group_size=4, seed=3))
    after = set(design_random_groups([*MEMBERS, "newcomer"], SCENARIOS, group_size=4, seed=3))
    untouched = [c for c in after if "newcomer" not in (c.judge, c.first, c.second)]
    assert len(before & after) / len(before) > 0.4
    assert set(untouched) <= before  # nothing old is re-asked in a new form
