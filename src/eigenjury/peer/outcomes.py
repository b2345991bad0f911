"""What came of each comparison, kept compactly, for runs of any size.

A run of a million comparisons cannot keep a Python object per comparison (hundreds of
bytes each, with their lists and tuples); `Outcomes` keeps integer-coded columns
(about 50 bytes a comparison) and builds from them what the run needs: the verdict
table to fit, the order-consistency tallies, the failure counts. Rows stay in the
order outcomes were added (a design's order), so a run's verdicts.csv and fit are the
same whether collected at once or streamed.
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from eigenjury.peer.designs import Comparison
from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    DataError,
    ReplyFeatures,
    VerdictTable,
    certain,
)

# Why a comparison has no fitted verdict; "answers rule": a given answer lost by the
# config's rule with no call, counted in the win rates but not fitted (a rule is no judge)
FAILURES = ("parse", "judge error", "missing response", "missing reflection", "answers rule")
_NO_PROBS = (np.nan, np.nan, np.nan)


@dataclass
class Outcome:
    """A comparison and what came of it: one verdict per criterion (or one), or a failure;
    with soft verdicts, the judge's probabilities of (tie, first, second) too."""

    comparison: Comparison
    verdicts: list[int] | None = None
    probs: tuple[float, float, float] | None = None
    failure: str | None = None  # one of FAILURES
    repaired: bool = False
    strong: bool = False  # a graded verdict said "much better" (A>>B, B>>A)


class _Names:
    """Names coded as small integers in the order first seen."""

    def __init__(self) -> None:
        self.code: dict[str, int] = {}
        self.names: list[str] = []

    def __call__(self, name: str) -> int:
        code = self.code.get(name)
        if code is None:
            code = self.code[name] = len(self.names)
            self.names.append(name)
        return code

    def sorted_codes(self) -> tuple[tuple[str, ...], np.ndarray[Any, np.dtype[np.int64]]]:
        """The names sorted, and for each code its place among them."""
        order = sorted(range(len(self.names)), key=self.names.__getitem__)
        place = np.empty(len(order), dtype=np.int64)
        place[order] = np.arange(len(order))
        return tuple(self.names[i] for i in order), place


class Outcomes:
    """Outcomes in integer-coded columns: one row per comparison, and one verdict row per
    verdict (per criterion in criteria mode) pointing at its comparison."""

    def __init__(self) -> None:
        self._members = _Names()
        self._scenarios = _Names()
        self._comparison = {name: array("i") for name in ("scenario", "judge", "first", "second")}
        self._failure = array("b")  # -1: none, else an index of FAILURES
        self._repaired = array("b")
        self._of = array("q")  # each verdict row's comparison
        self._criterion = array("h")
        self._verdict = array("b")
        self._probs = array("d")  # three per verdict row; NaN for a hard verdict
        self._strong = array("b")  # per verdict row: a strong graded verdict

    @classmethod
    def of(cls, outcomes: Iterable[Outcome]) -> Outcomes:
        kept = cls()
        for outcome in outcomes:
            kept.add(outcome)
        return kept

    def __len__(self) -> int:
        return len(self._failure)

    def add(self, outcome: Outcome) -> None:
        c = outcome.comparison
        columns = self._comparison
        columns["scenario"].append(self._scenarios(c.scenario))
        for name in ("judge", "first", "second"):
            columns[name].append(self._members(getattr(c, name)))
        self._failure.append(-1)
        self._repaired.append(0)
        self.settle(len(self) - 1, outcome)

    def settle(self, index: int, outcome: Outcome) -> None:
        """Record what came of comparison `index` (added earlier): a repair can settle a
        comparison that had failed."""
        self._failure[index] = -1 if outcome.failure is None else FAILURES.index(outcome.failure)
        self._repaired[index] = outcome.repaired
        for criterion, verdict in enumerate(outcome.verdicts or ()):
            self._of.append(index)
            self._criterion.append(criterion)
            self._verdict.append(verdict)
            self._probs.extend(outcome.probs or _NO_PROBS)
            self._strong.append(outcome.strong)

    def comparison(self, index: int) -> Comparison:
        columns, members = self._comparison, self._members.names
        return Comparison(
            self._scenarios.names[columns["scenario"][index]],
            *(members[columns[name][index]] for name in ("judge", "first", "second")),
        )

    def __iter__(self) -> Iterator[Outcome]:
        """Each comparison's outcome, rebuilt one at a time."""
        verdicts: dict[int, list[int]] = {}
        probs: dict[int, tuple[float, float, float]] = {}
        strong: set[int] = set()
        order = np.argsort(np.frombuffer(self._of, dtype=np.int64), kind="stable")
        rows = iter(order.tolist())
        row = next(rows, None)
        for index in range(len(self)):
            while row is not None and self._of[row] == index:
                verdicts.setdefault(index, []).append(self._verdict[row])
                p = tuple(self._probs[3 * row : 3 * row + 3])
                if not np.isnan(p[0]):
                    probs[index] = (p[0], p[1], p[2])
                if self._strong[row]:
                    strong.add(index)
                row = next(rows, None)
            failure = self._failure[index]
            yield Outcome(
                self.comparison(index),
                verdicts.pop(index, None),
                probs.pop(index, None),
                None if failure < 0 else FAILURES[failure],
                bool(self._repaired[index]),
                index in strong,
            )

    # what a run reports

    def failures(self) -> dict[str, int]:
        codes = np.frombuffer(self._failure, dtype=np.int8)
        counts = np.bincount(codes[codes >= 0], minlength=len(FAILURES))
        return {FAILURES[i]: int(n) for i, n in enumerate(counts) if n}

    def n_failed(self) -> int:
        return int(np.count_nonzero(np.frombuffer(self._failure, dtype=np.int8) >= 0))

    def n_with_verdicts(self) -> int:
        return len(np.unique(np.frombuffer(self._of, dtype=np.int64)))

    def n_repaired(self) -> int:
        return int(np.count_nonzero(np.frombuffer(self._repaired, dtype=np.int8)))

    def soft_by_judge(self) -> dict[str, int]:
        """Per judge that gave verdicts, how many comparisons came with probabilities."""
        rows = self._verdict_rows()
        first_rows = np.unique(rows["of"], return_index=True)[1]
        judges = rows["judge"][first_rows]
        soft = ~np.isnan(rows["probs"][first_rows, 0])
        members = self._members.names
        counts: dict[str, int] = {}
        for judge, is_soft in zip(judges.tolist(), soft.tolist(), strict=True):
            counts[members[judge]] = counts.get(members[judge], 0) + is_soft
        return dict(sorted(counts.items()))

    def _verdict_rows(self) -> dict[str, np.ndarray[Any, Any]]:
        """The verdict rows in comparison order, with their comparisons' columns."""
        of = np.frombuffer(self._of, dtype=np.int64)
        order = np.argsort(of, kind="stable")
        rows: dict[str, np.ndarray[Any, Any]] = {"of": of[order]}
        for name, column in self._comparison.items():
            rows[name] = np.frombuffer(column, dtype=np.int32).astype(np.int64)[rows["of"]]
        rows["criterion"] = np.frombuffer(self._criterion, dtype=np.int16)[order]
        rows["verdict"] = np.frombuffer(self._verdict, dtype=np.int8).astype(np.int64)[order]
        rows["probs"] = np.frombuffer(self._probs, dtype=np.float64).reshape(-1, 3)[order]
        rows["strong"] = np.frombuffer(self._strong, dtype=np.int8)[order].astype(bool)
        return rows

    def table(
        self,
        per_criterion: bool,
        responses: Mapping[tuple[str, str], str | None] | None = None,
        *,
        strong_weight: float = 1.0,
    ) -> tuple[VerdictTable, list[str] | None]:
        """The verdicts as a table, and each row's criterion number in criteria mode. With
        the `responses` ((member, scenario) -> text), the replies' style features too; a
        strong graded verdict weighs `strong_weight` (`strengths` says which)."""
        rows = self._verdict_rows()
        if not len(rows["of"]):
            raise DataError("no comparison produced a usable verdict")
        models, member_place = self._members.sorted_codes()
        scenarios, scenario_place = self._scenarios.sorted_codes()
        criterion = [str(k + 1) for k in rows["criterion"].tolist()] if per_criterion else None
        probs = rows["probs"]
        soft = ~np.isnan(probs[:, 0])
        table = VerdictTable.from_codes(
            scenario_place[rows["scenario"]],
            member_place[rows["judge"]],
            member_place[rows["first"]],
            member_place[rows["second"]],
            rows["verdict"],
            models=models,
            scenarios=scenarios,
            criterion=criterion,
            probs=np.where(soft[:, None], probs, certain(rows["verdict"])) if soft.any() else None,
        )
        if responses is not None:
            table = dataclasses.replace(table, features=self._reply_features(rows, responses))
        if rows["strong"].any():
            table = table.with_strong(rows["strong"], strong_weight)
        return table, criterion

    def strengths(self) -> list[int] | None:
        """Each row of `table`'s strength, 1 or 2 (strong), where any verdict was graded
        strong (None otherwise): what verdicts.csv keeps, so a refit can weigh them anew."""
        strong = self._verdict_rows()["strong"]
        return (1 + strong.astype(int)).tolist() if strong.any() else None

    def _reply_features(
        self, rows: dict[str, np.ndarray[Any, Any]], responses: Mapping[tuple[str, str], str | None]
    ) -> ReplyFeatures:
        """The default style features of each row's two replies, each reply measured once."""
        from eigenjury.reply_features import DEFAULT_FEATURES, text_features

        n_scenarios = len(self._scenarios.names)
        first = rows["first"] * n_scenarios + rows["scenario"]
        second = rows["second"] * n_scenarios + rows["scenario"]
        replies, inverse = np.unique(np.concatenate([first, second]), return_inverse=True)
        members, scenarios = self._members.names, self._scenarios.names
        measured = text_features(
            [
                responses.get((members[r // n_scenarios], scenarios[r % n_scenarios]))
                for r in replies
            ]
        )
        per_reply = np.stack([measured[name] for name in DEFAULT_FEATURES], axis=1)
        n = len(first)
        return ReplyFeatures(DEFAULT_FEATURES, per_reply[inverse[:n]], per_reply[inverse[n:]])

    def order_consistency(self) -> dict[str, dict[str, Any]]:
        """Per judge: pairs judged in both orders, share consistent, share slot-driven.

        For every comparison a judge made in both orders (same scenario, same pair, same
        criterion), it is consistent when the same model wins both times (or both are
        ties), and slot-driven when the same position wins both times: the position bias
        the estimator's gamma term absorbs. A comparison made twice counts once (its last
        verdict)."""
        rows = self._verdict_rows()
        if not len(rows["of"]):
            return {}
        models, place = self._members.sorted_codes()
        judge, first, second = (place[rows[name]] for name in ("judge", "first", "second"))
        m, s = len(models), len(self._scenarios.names)
        criteria = int(rows["criterion"].max()) + 1

        def key(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
            where = ((judge * s + rows["scenario"]) * m + a) * m + b
            return np.asarray(where * criteria + rows["criterion"], dtype=np.int64)

        keys = key(first, second)
        last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]  # each key's last row
        last = last[first[last] < second[last]]  # each pair once, from its first order by name
        swapped_keys = key(second, first)[last]
        seen_keys = np.unique(keys)
        found = np.isin(swapped_keys, seen_keys)
        last, swapped_keys = last[found], swapped_keys[found]
        # the swapped order's last verdict
        order = np.argsort(keys, kind="stable")
        at = np.searchsorted(keys[order], swapped_keys, side="right") - 1
        verdict, swapped = rows["verdict"][last], rows["verdict"][order[at]]
        winner_here = np.where(verdict == FIRST, 1, np.where(verdict == SECOND, 2, 0))
        # in the swapped order the first slot holds this order's second model
        winner_there = np.where(swapped == FIRST, 2, np.where(swapped == SECOND, 1, 0))
        consistent = winner_here == winner_there
        same_slot = (verdict == swapped) & (verdict != 0)
        judges = judge[last]
        out: dict[str, dict[str, Any]] = {}
        for j in np.unique(judges).tolist():
            mine = judges == j
            pairs = int(mine.sum())
            out[models[j]] = {
                "pairs": pairs,
                "consistent": round(float(consistent[mine].sum()) / pairs, 4),
                "same_slot": round(float(same_slot[mine].sum()) / pairs, 4),
            }
        return out
