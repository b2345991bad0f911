"""Order consistency: does a judge pick the same reply when the two swap places?

For every comparison a judge made in both orders (same scenario, same pair, same
criterion), it is consistent when the same model wins both times (or both are ties),
and slot-driven when the same position wins both times: the position bias the
estimator's gamma term absorbs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from eigenjury.peer.collect import Outcome
from eigenjury.stats.verdicts import FIRST, SECOND


def _winner(first: str, second: str, verdict: int) -> str | None:
    return first if verdict == FIRST else second if verdict == SECOND else None


def order_consistency(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    """Per judge: pairs judged in both orders, share consistent, share slot-driven."""
    seen: dict[tuple[str, str, str, str, int], int] = {}
    tallies: dict[str, dict[str, int]] = defaultdict(
        lambda: {"pairs": 0, "consistent": 0, "same_slot": 0}
    )
    for o in outcomes:
        if o.verdicts is None:
            continue
        c = o.comparison
        for criterion, verdict in enumerate(o.verdicts):
            key = (c.judge, c.scenario, c.first, c.second, criterion)
            seen[key] = verdict
    for (judge, scenario, first, second, criterion), verdict in seen.items():
        if first > second:
            continue  # count each pair once, from its alphabetically first order
        swapped = seen.get((judge, scenario, second, first, criterion))
        if swapped is None:
            continue
        tally = tallies[judge]
        tally["pairs"] += 1
        tally["consistent"] += _winner(first, second, verdict) == _winner(second, first, swapped)
        tally["same_slot"] += verdict == swapped and verdict in (FIRST, SECOND)
    return {
        judge: {
            "pairs": t["pairs"],
            "consistent": round(t["consistent"] / t["pairs"], 4),
            "same_slot": round(t["same_slot"] / t["pairs"], 4),
        }
        for judge, t in sorted(tallies.items())
        if t["pairs"]
    }
