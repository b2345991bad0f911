"""How sure the jury is, and what a grade is worth: per criterion and task, per juror,
and scores broken down by tag, each with a task-cluster bootstrap interval.

- A criterion's `c_share` is the share of the deciding jury's votes that count as C,
  as in the majority: an unread or failed vote is not C, but on a negative criterion
  it is (it never spares the reply a penalty). Its `pass_probability` is the
  chance that a jury of the same size, each juror voting C with that share, would pass
  it: a 3-2 split gives 0.68, 5-0 gives 1. It is `undecided` where `c_share` lies within
  the margin of 1/2 (margin 0: exact ties).
- A task's `pass_probability` treats its criteria as independent, each passing with its
  own probability (a grader without a model is certain); the task is `undecided` where
  some outcome of its undecided criteria would change whether it passes.
- Per juror, over the first jury's criteria it voted on readably: agreement with the
  jury's outcome, Cohen's kappa with each other juror, Fleiss' kappa of the jury, and
  the criteria (by id) it most often votes against the outcome on. Intervals resample
  tasks (by task id, over candidates): a task's criteria share a prompt and a reply.
- Tag scores (contracts.rules): a criterion tag restricts the task's rule to the
  criteria carrying it; a task tag averages the score of the tasks carrying it.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from eigenjury.contracts.grading import CriterionResult, TaskResult
from eigenjury.contracts.jury import Jury, counted_c
from eigenjury.contracts.rules import passes, tag_score
from eigenjury.stats.agreement import (
    ClusterBootstrap,
    Estimate,
    cohen_kappa_rounds,
    fleiss_kappa_rounds,
)

_TIE = 1e-12
_MAX_STATES = 4096  # distinct point sums tracked exactly; beyond, a seeded simulation
_DRAWS = 20_000
MOST_DISAGREED = 3  # criteria named per juror


def jury_pass_probability(c_votes: int, size: int) -> float:
    """The chance a jury of `size`, each juror voting C with probability c_votes / size,
    gives a strict majority of C."""
    if size == 0:
        return 0.0
    p = c_votes / size
    return math.fsum(
        math.comb(size, k) * p**k * (1 - p) ** (size - k)
        for k in range(size + 1)
        if passes(k, size)
    )


def is_undecided(c_share: float, margin: float) -> bool:
    return abs(c_share - 0.5) <= margin + _TIE


def criterion_pass_probability(c: CriterionResult) -> float:
    """Where a jury decided: `jury_pass_probability`; otherwise certain (0 or 1)."""
    if c.by_jury and c.votes:
        return jury_pass_probability(c.c_votes, len(c.votes))
    return 1.0 if c.passed else 0.0


def task_pass_probability(r: TaskResult, *, seed: int = 0) -> float:
    """The chance the task passes with each criterion passing independently with its
    own probability: exact over the distinct point sums, or a seeded simulation of
    20,000 draws where those are too many."""
    if r.submission.text is None:
        return 0.0
    weights = [c.criterion.weight for c in r.criteria]
    chances = [criterion_pass_probability(c) for c in r.criteria]
    sums: dict[float, float] = {0.0: 1.0}
    for w, q in zip(weights, chances, strict=True):
        if q in (0.0, 1.0):
            sums = {round(s + w * q, 9): pr for s, pr in sums.items()}
            continue
        grown: dict[float, float] = defaultdict(float)
        for s, pr in sums.items():
            grown[round(s + w, 9)] += pr * q
            grown[s] += pr * (1 - q)
        sums = grown
        if len(sums) > _MAX_STATES:
            rng = np.random.default_rng(seed)
            met = rng.random((_DRAWS, len(weights))) < np.asarray(chances)
            points = met.astype(np.float64) @ np.asarray(weights)
            return float(np.mean([r.passes_with(float(p)) for p in points]))
    return math.fsum(pr for s, pr in sums.items() if r.passes_with(s))


def task_undecided(r: TaskResult, margin: float) -> bool:
    """Whether some outcome of the task's undecided criteria changes whether it passes."""
    open_ = [c for c in r.criteria if c.c_share is not None and is_undecided(c.c_share, margin)]
    if not open_ or r.submission.text is None:
        return False
    undecided = {c.criterion.id for c in open_}
    fixed = math.fsum(
        c.criterion.weight for c in r.criteria if c.passed and c.criterion.id not in undecided
    )
    low = fixed + math.fsum(min(c.criterion.weight, 0.0) for c in open_)
    high = fixed + math.fsum(max(c.criterion.weight, 0.0) for c in open_)
    return r.passes_with(low) != r.passes_with(high)


# --- the jurors ------------------------------------------------------------------------


def jury_agreement(
    results: Sequence[TaskResult],
    jury: Jury | None,
    *,
    repeats: int = 1,
    rounds: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> dict[str, Any] | None:
    """The record of how the first jury's jurors agree (contracts.record.JuryAgreement);
    None for a jury of one asked once, or without jury-graded criteria. Fleiss' kappa
    counts every answer as a rater (a juror's repeats too), over the criteria on which
    all answers were readable."""
    if jury is None or jury.size * repeats < 2:
        return None
    names = list(jury.names)
    column = {name: k for k, name in enumerate(names)}
    tasks = {task_id: k for k, task_id in enumerate(dict.fromkeys(r.task_id for r in results))}
    grid: list[np.ndarray] = []
    unit: list[int] = []
    outcome: list[bool] = []
    ids: list[tuple[str, str]] = []
    # criteria count together across tasks only where id and text are the same (an
    # imported HealthBench set numbers every example's items c1, c2, ...)
    where: dict[tuple[str, str], set[str]] = defaultdict(set)
    steady: dict[int, list[tuple[int, bool]]] = defaultdict(list)  # repeats all agreeing
    tied: Counter[int] = Counter()  # criteria where a juror's answers split evenly
    answered: list[tuple[int, int]] = []  # per criterion: readable answers, C answers
    for r in results:
        for c in r.criteria:
            votes = c.first_votes
            if not c.by_jury or not votes:
                continue
            row = np.full(len(names), -1, dtype=np.int8)  # -1: no readable vote
            answers: dict[str, list[bool]] = defaultdict(list)
            for v in votes:
                if v.juror in column and v.grade is not None:
                    answers[v.juror].append(v.grade == "C")
            for juror, said in answers.items():
                yes = sum(said)
                if 2 * yes != len(said):  # a juror's repeats: their majority; a tie, none
                    row[column[juror]] = 2 * yes > len(said)
                else:
                    tied[column[juror]] += 1
                if len(said) > 1:
                    steady[column[juror]].append((len(unit), len(set(said)) == 1))
            said_all = [x for said in answers.values() for x in said]
            answered.append((len(said_all), sum(said_all)))
            first_passed = passes(counted_c(votes, c.criterion.negative), len(votes))
            grid.append(row)
            unit.append(tasks[r.task_id])
            outcome.append(first_passed)
            ids.append((c.criterion.id, c.criterion.prompt))
            where[c.criterion.id, c.criterion.prompt].add(r.task_id)
    if not grid:
        return None
    votes_ = np.vstack(grid)
    units, passed = np.asarray(unit), np.asarray(outcome)
    boot = ClusterBootstrap(len(tasks), rounds, ci, seed)
    raters = jury.size * repeats
    read_all, c_all = np.asarray(answered).reshape(-1, 2).T
    full = read_all == raters
    fleiss = np.full(rounds + 1, np.nan)
    if full.any():
        counts = np.column_stack([c_all[full], raters - c_all[full]])
        fleiss = fleiss_kappa_rounds(boot, units[full], counts)
    jurors = []
    for name, k in column.items():
        read = votes_[:, k] >= 0
        agree = votes_[read, k] == passed[read]
        ties = tied[k] if repeats > 1 else None
        read_ids = [key for key, ok in zip(ids, read, strict=True) if ok]
        against = Counter(key for key, ok in zip(read_ids, agree, strict=True) if not ok)
        asked = Counter(read_ids)
        mine = steady.get(k, [])
        consistency = (
            _estimate(boot, [same for _, same in mine], units[[row for row, _ in mine]])
            if mine
            else None
        )
        jurors.append(
            {
                "juror": name,
                "consistency": consistency,
                "votes": int(read.sum()),
                "unread": int((~read).sum()) - (ties or 0),
                "tied": ties,
                "agreement_with_outcome": _estimate(boot, agree, units[read]),
                "most_disagreed": [
                    {
                        "criterion_id": key[0],
                        "task_id": next(iter(where[key])) if len(where[key]) == 1 else None,
                        "against": n,
                        "of": asked[key],
                    }
                    for key, n in sorted(against.items(), key=lambda kv: (-kv[1], kv[0]))[
                        :MOST_DISAGREED
                    ]
                ],
            }
        )
    pairs = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            both = (votes_[:, column[a]] >= 0) & (votes_[:, column[b]] >= 0)
            x, y = votes_[both, column[a]], votes_[both, column[b]]
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "criteria": int(both.sum()),
                    "agreement": _estimate(boot, x == y, units[both]),
                    "cohen_kappa": _on_tasks(
                        boot.estimate(
                            cohen_kappa_rounds(boot, units[both], x, y)[1]
                            if both.any()
                            else np.full(rounds + 1, np.nan)
                        ),
                        units[both],
                    ).record(),
                }
            )
    return {
        "criteria": len(grid),
        "criteria_all_read": int(full.sum()),
        "fleiss_kappa": _on_tasks(boot.estimate(fleiss), units[full]).record(),
        "jurors": jurors,
        "pairs": pairs,
    }


def _estimate(boot: ClusterBootstrap, x: Any, units: Any) -> dict[str, Any]:
    """The mean of `x` (items in tasks `units`), with no interval where they lie in one
    task however many tasks the bootstrap resamples."""
    if len(x) == 0:
        return boot.estimate(np.full(boot.weights.shape[0], np.nan)).record()
    mean = boot.estimate(boot.mean(np.asarray(x, dtype=np.float64), units))
    return _on_tasks(mean, units).record()


# --- scores by tag ---------------------------------------------------------------------


def mean_score(boot: ClusterBootstrap, mine: Sequence[TaskResult], rows: Any = None) -> Any:
    """The mean task score under each bootstrap round: the healthbench rule's mean of the
    unclipped scores, clipped, where every task is scored by it; else the plain mean."""
    if mine and all(r.scoring == "healthbench" for r in mine):
        return np.clip(boot.mean([r.unclipped for r in mine], rows), 0.0, 100.0)
    return boot.mean([r.score for r in mine], rows)


def _on_tasks(estimate: Estimate, rows: Any) -> Estimate:
    """No interval from one task (`rows`: the tasks the figure rests on): resampling it
    alone gives a zero-width one."""
    return estimate if len(set(rows)) > 1 else Estimate(estimate.value, np.nan, np.nan)


def tag_scores(
    mine: Sequence[TaskResult], boot: ClusterBootstrap, digits: int = 2
) -> list[dict[str, Any]]:
    """One candidate's scores by tag (its tasks resampled by `boot`): per criterion tag,
    the rule restricted to the tagged criteria on the tasks where they have positive
    points; per task tag, the mean score of the tasks carrying it."""
    by_criterion_tag: dict[str, tuple[list[int], list[float]]] = defaultdict(lambda: ([], []))
    for k, r in enumerate(mine):
        tagged: dict[str, list[CriterionResult]] = defaultdict(list)
        for c in r.criteria:
            for tag in dict.fromkeys(c.criterion.tags):  # a tag written twice counts once
                tagged[tag].append(c)
        for tag, found in tagged.items():
            score = tag_score([c.criterion.weight for c in found], [c.passed for c in found])
            if score is not None:
                rows, values = by_criterion_tag[tag]
                rows.append(k)
                values.append(score)
    out = []
    for tag in sorted(by_criterion_tag):
        rows, values = by_criterion_tag[tag]
        hb = all(mine[k].scoring == "healthbench" for k in rows)
        means = boot.mean(values, rows)
        out.append(
            {
                "tag": tag,
                "level": "criterion",
                "tasks": len(rows),
                "score": _on_tasks(
                    boot.estimate(np.clip(means, 0, 100) if hb else means), rows
                ).record(digits),
            }
        )
    task_tags: dict[str, list[int]] = defaultdict(list)
    for k, r in enumerate(mine):
        for tag in dict.fromkeys(r.tags):
            task_tags[tag].append(k)
    for tag in sorted(task_tags):
        rows = task_tags[tag]
        chosen = [mine[k] for k in rows]
        out.append(
            {
                "tag": tag,
                "level": "task",
                "tasks": len(rows),
                "score": _on_tasks(boot.estimate(mean_score(boot, chosen, rows)), rows).record(
                    digits
                ),
            }
        )
    return out
