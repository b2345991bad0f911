"""Sampling designs: which judge compares which ordered pair on which scenario.

Every comparison is made in both presentation orders. Random choices come from a
seeded hash of (scenario, role, member name) rather than a shared random stream, so
adding a member to a population changes only the groups it joins: rerunning a grown
population reuses almost all earlier work from the store.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

# Whether a member has a reply to a scenario (given answers may lack some): a design
# pairs members only where both have one.
Answered = Callable[[str, str], bool]


def _everyone(member: str, scenario: str) -> bool:
    return True


@dataclass(frozen=True, order=True, slots=True)  # a design may hold millions
class Comparison:
    """Judge compares `first` (shown as reply A) with `second` (reply B) on a scenario."""

    scenario: str
    judge: str
    first: str
    second: str


def draw(seed: int, *parts: str) -> float:
    """A uniform number in [0, 1) fixed by the seed and the parts."""
    digest = hashlib.sha256(":".join((str(seed), *parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _both_orders(scenario: str, judges: Sequence[str], group: Sequence[str]) -> list[Comparison]:
    return [
        Comparison(scenario, judge, a, b)
        for judge in judges
        for a, b in itertools.permutations(group, 2)
    ]


def design_all(
    members: Sequence[str],
    scenarios: Sequence[str],
    *,
    judges: Sequence[str] | None = None,
    answered: Answered = _everyone,
) -> list[Comparison]:
    """Every judge (default: every member), every ordered pair, every scenario."""
    return [
        c
        for s in scenarios
        for c in _both_orders(s, judges or members, [m for m in members if answered(m, s)])
    ]


def design_baseline(
    members: Sequence[str],
    scenarios: Sequence[str],
    baseline: str,
    *,
    judges_per_group: int = 1,
    seed: int = 0,
    judges: Sequence[str] | None = None,
    answered: Answered = _everyone,
) -> list[Comparison]:
    """Arena-Hard's design: on every scenario, each member against `baseline`, in both
    orders, by `judges_per_group` judges (from `judges`, default every member) drawn
    for that member and scenario, so a member added later leaves the others' draws
    as they were."""
    out = []
    pool = judges or members
    for s in scenarios:
        if not answered(baseline, s):
            continue
        for m in members:
            if m == baseline or not answered(m, s):
                continue
            picked = sorted(pool, key=lambda j: draw(seed, s, "judge", m, j))
            out += _both_orders(s, picked[:judges_per_group], sorted((m, baseline)))
    return out


def design_random_groups(
    members: Sequence[str],
    scenarios: Sequence[str],
    *,
    group_size: int = 4,
    judges_per_group: int = 1,
    seed: int = 0,
    judges: Sequence[str] | None = None,
    answered: Answered = _everyone,
) -> list[Comparison]:
    """The original design: per scenario, a random group of evaluees and random judges
    (from `judges`, default every member; a judge may judge itself), every ordered pair
    of the group."""
    return _grouped(
        members, judges, scenarios, group_size, judges_per_group, seed, answered, balanced=False
    )


def design_balanced(
    members: Sequence[str],
    scenarios: Sequence[str],
    *,
    group_size: int = 4,
    judges_per_group: int = 1,
    seed: int = 0,
    judges: Sequence[str] | None = None,
    answered: Answered = _everyone,
) -> list[Comparison]:
    """Like random groups, but each scenario takes the evaluees and judges used least
    so far (ties broken at random), so every member does nearly equal work in each role."""
    return _grouped(
        members, judges, scenarios, group_size, judges_per_group, seed, answered, balanced=True
    )


def _grouped(
    members: Sequence[str],
    judges: Sequence[str] | None,
    scenarios: Sequence[str],
    group_size: int,
    judges_per_group: int,
    seed: int,
    answered: Answered,
    *,
    balanced: bool,
) -> list[Comparison]:
    used: Counter[tuple[str, str]] = Counter()  # (role, member) -> scenarios so far
    out = []
    for s in scenarios:
        picked = {}
        pools = {"evaluee": [m for m in members if answered(m, s)], "judge": judges or members}
        for role, size in (("evaluee", group_size), ("judge", judges_per_group)):

            def order(m: str, role: str = role, s: str = s) -> tuple[int, float]:
                return (used[role, m] if balanced else 0, draw(seed, s, role, m))

            picked[role] = sorted(pools[role], key=order)[:size]
            used.update((role, m) for m in picked[role])
        out += _both_orders(s, picked["judge"], sorted(picked["evaluee"]))
    return out
