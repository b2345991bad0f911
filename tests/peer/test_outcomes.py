"""Compact outcomes: what a run reads from them equals what the outcomes say, in far less
memory than an object per comparison."""

from __future__ import annotations

import random
import tracemalloc
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eigenjury.peer.designs import Comparison
from eigenjury.peer.outcomes import FAILURES, Outcome, Outcomes
from eigenjury.peer.record import TranscriptLine
from eigenjury.records import LinesFile
from eigenjury.stats.verdicts import FIRST, SECOND, VerdictTable

MEMBERS = ["b[1]", "a 'q'", "ümlaut", "c"]


def random_outcomes(
    n: int, *, criteria: int = 1, soft: bool = False, seed: int = 0
) -> list[Outcome]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        judge = rng.choice(MEMBERS)
        first, second = rng.sample(MEMBERS, 2)
        c = Comparison(f"s{rng.randrange(7)}", judge, first, second)
        if rng.random() < 0.15:
            out.append(Outcome(c, failure=rng.choice(FAILURES)))
            continue
        verdicts = [rng.randrange(3) for _ in range(criteria)]
        probs = None
        if soft and rng.random() < 0.7:
            p = np.array([rng.random() for _ in range(3)])
            probs = tuple(float(x) for x in p / p.sum())
        out.append(Outcome(c, verdicts, probs, repaired=rng.random() < 0.1))
    return out


def plain_table(outcomes: Sequence[Outcome], per_criterion: bool) -> VerdictTable:
    """The table built the plain way: a row per verdict, in order."""
    used = [o for o in outcomes if o.verdicts is not None]
    rows = [(o, v, str(k + 1)) for o in used for k, v in enumerate(o.verdicts or ())]
    probs = None
    if any(o.probs is not None for o in used):
        probs = [
            o.probs if o.probs is not None else tuple(float(v == x) for x in range(3))
            for o, v, _ in rows
        ]
    return VerdictTable.from_columns(
        [o.comparison.scenario for o, _, _ in rows],
        [o.comparison.judge for o, _, _ in rows],
        [o.comparison.first for o, _, _ in rows],
        [o.comparison.second for o, _, _ in rows],
        [v for _, v, _ in rows],
        criterion=[k for _, _, k in rows] if per_criterion else None,
        probs=probs,
    )


def same_table(a: VerdictTable, b: VerdictTable) -> None:
    assert a.models == b.models and tuple(a.scenarios) == tuple(b.scenarios)
    for name in ("scenario", "judge", "first", "second", "verdict", "weight"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    if b.probs is None:
        assert a.probs is None
    else:
        assert a.probs is not None
        np.testing.assert_allclose(a.probs, b.probs, atol=1e-15)


@pytest.mark.parametrize(("criteria", "soft"), [(1, False), (1, True), (3, False)])
def test_outcomes_give_back_what_was_added_and_the_same_table(criteria: int, soft: bool) -> None:
    outcomes = random_outcomes(400, criteria=criteria, soft=soft)
    kept = Outcomes.of(outcomes)
    assert list(kept) == outcomes and len(kept) == 400
    table, criterion = kept.table(per_criterion=criteria > 1)
    same_table(table, plain_table(outcomes, criteria > 1))
    assert (criterion is not None) == (criteria > 1)


def test_a_repair_settles_a_failed_comparison_in_its_own_place() -> None:
    outcomes = random_outcomes(50, seed=3)
    kept = Outcomes()
    for o in outcomes:
        kept.add(Outcome(o.comparison))  # every comparison first, as a run adds them
    late = []
    for index, o in enumerate(outcomes):
        if o.verdicts is not None and index % 3 == 0:
            kept.settle(index, Outcome(o.comparison, failure="parse"))  # then repaired
            late.append((index, o))
        else:
            kept.settle(index, o)
    for index, o in reversed(late):
        kept.settle(index, o)
    assert list(kept) == outcomes
    same_table(kept.table(per_criterion=False)[0], plain_table(outcomes, False))


def reference_order_consistency(outcomes: Sequence[Outcome]) -> dict[str, dict[str, Any]]:
    """Order consistency as first written: a dict of every verdict, looked up by hand."""
    seen: dict[tuple[str, str, str, str, int], int] = {}
    for o in outcomes:
        for k, v in enumerate(o.verdicts or ()):
            c = o.comparison
            seen[c.judge, c.scenario, c.first, c.second, k] = v
    tallies: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

    def winner(first: str, second: str, verdict: int) -> str | None:
        return first if verdict == FIRST else second if verdict == SECOND else None

    for (judge, scenario, first, second, k), v in seen.items():
        swapped = seen.get((judge, scenario, second, first, k))
        if first > second or swapped is None:
            continue
        t = tallies[judge]
        t[0] += 1
        t[1] += winner(first, second, v) == winner(second, first, swapped)
        t[2] += v == swapped and v in (FIRST, SECOND)
    return {
        j: {"pairs": t[0], "consistent": round(t[1] / t[0], 4), "same_slot": round(t[2] / t[0], 4)}
        for j, t in sorted(tallies.items())
    }


@pytest.mark.parametrize(("criteria", "seed"), [(1, 0), (1, 1), (2, 2)])
def test_order_consistency_matches_a_plain_count(criteria: int, seed: int) -> None:
    outcomes = random_outcomes(3000, criteria=criteria, seed=seed)  # repeats included
    expected = reference_order_consistency(outcomes)
    assert expected and all(t["pairs"] > 20 for t in expected.values())
    assert Outcomes.of(outcomes).order_consistency() == expected


def test_the_run_counts_come_from_the_columns() -> None:
    outcomes = random_outcomes(500, soft=True, seed=5)
    kept = Outcomes.of(outcomes)
    failures: dict[str, int] = defaultdict(int)
    soft: dict[str, int] = defaultdict(int)
    for o in outcomes:
        if o.failure:
            failures[o.failure] += 1
        if o.verdicts is not None:
            soft[o.comparison.judge] += o.probs is not None
    assert kept.failures() == dict(failures) and kept.n_failed() == sum(failures.values())
    assert kept.n_with_verdicts() == sum(o.verdicts is not None for o in outcomes)
    assert kept.n_repaired() == sum(o.repaired for o in outcomes)
    assert kept.soft_by_judge() == dict(sorted(soft.items()))


def test_outcomes_take_tens_of_bytes_a_comparison() -> None:
    outcomes = random_outcomes(20_000, seed=7)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = Outcomes.of(outcomes)
        used = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(kept) == 20_000
    assert used / 20_000 < 60, f"{used / 20_000:.0f} bytes a comparison"


def test_a_lines_file_is_moved_into_place_or_left_nowhere(tmp_path: Path) -> None:
    line = TranscriptLine(
        role="evaluee", member="m", scenario="s", messages=[["user", "hi"]], reply="ok",
        choice_logprobs=None, error=None, cached=False,
    )  # fmt: skip
    target = tmp_path / "run" / "transcripts.jsonl"
    with LinesFile(target) as lines:
        lines(line)
        lines(line)
        assert not target.exists()  # nothing is in place before the commit
        lines.commit()
    assert TranscriptLine.model_validate_json(target.read_text().splitlines()[1]) == line
    assert sorted(p.name for p in target.parent.iterdir()) == ["transcripts.jsonl"]
    with pytest.raises(RuntimeError), LinesFile(tmp_path / "run" / "other.jsonl") as lines:
        lines(line)
        raise RuntimeError("the run failed")
    assert sorted(p.name for p in target.parent.iterdir()) == ["transcripts.jsonl"]
    with pytest.raises(RuntimeError), LinesFile(tmp_path / "new" / "deeper" / "t.jsonl"):
        raise RuntimeError("the run failed before its first row")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # the folders it made: gone
