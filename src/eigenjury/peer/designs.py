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
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
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


def design_all(members: Sequence[str], scenarios: Sequence[str]) -> list[Comparison]:
    """Every judge, every ordered pair, every scenario."""
    return [c for s in scenarios for c in _both_orders(s, members, members)]


def design_random_groups(
    members: Sequence[str],
    scenarios: Sequence[str],
    *,
    group_size: int = 4,
    judges_per_group: int = 1,
    seed: int = 0,
) -> list[Comparison]:
    """The original design: per scenario, a random group of evaluees and random judges
    (a judge may judge itself), every ordered pair of the group."""
    out = []
    for s in scenarios:
        group = sorted(members, key=lambda m: draw(seed, s, "evaluee", m))[:group_size]
        judges = sorted(members, key=lambda m: draw(seed, s, "judge", m))[:judges_per_group]
        out += _both_orders(s, judges, sorted(group))
    return out


def design_balanced(
    members: Sequence[str],
    scenarios: Sequence[str],
    *,
    group_size: int = 4,
    judges_per_group: int = 1,
    seed: int = 0,
) -> list[Comparison]:
    """Like random groups, but each scenario takes the evaluees and judges used least
    so far (ties broken at random), so every member does nearly equal work in each role."""
    as_evaluee: Counter[str] = Counter()
    as_judge: Counter[str] = Counter()
    out = []
    for s in scenarios:
        group = sorted(members, key=lambda m: (as_evaluee[m], draw(seed, s, "evaluee", m)))
        group = group[:group_size]
        judges = sorted(members, key=lambda m: (as_judge[m], draw(seed, s, "judge", m)))
        judges = judges[:judges_per_group]
        as_evaluee.update(group)
        as_judge.update(judges)
        out += _both_orders(s, judges, sorted(group))
    return out
