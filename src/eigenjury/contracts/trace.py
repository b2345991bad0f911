"""A grading run's results as its record, and its audit trail.

Every task, criterion and juror vote is kept: grade, full juror text (and the repair
reply, if one was needed), tokens, latency, cost and the weight awarded. The record
(results.json) holds the outcome; its judgements (trace.jsonl) one line per vote or
grader decision. Pure: reports/grading.py writes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from eigenjury.contracts.certainty import (
    criterion_pass_probability,
    is_undecided,
    jury_agreement,
    mean_score,
    tag_scores,
    task_pass_probability,
    task_undecided,
)
from eigenjury.contracts.grading import CriterionResult, TaskResult
from eigenjury.contracts.jury import Jury, Vote, c_votes
from eigenjury.contracts.record import (
    CandidateSummary,
    CriterionOutcome,
    Escalation,
    GradingRecord,
    Judgement,
    JudgementLines,
    JurorDiversity,
    JuryPart,
    TaskOutcome,
    VoteCounts,
)
from eigenjury.models.verdict_format import VerdictMode
from eigenjury.records import VerdictModes, now
from eigenjury.stats.agreement import ClusterBootstrap, fleiss_kappa


def vote_counts(c: CriterionResult) -> VoteCounts:
    return VoteCounts(C=c_votes(c.votes), I=c.i_votes, unparsed=c.unparsed, error=c.errors)


def _cost(values: Sequence[float | None]) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v))


def result_cost(r: TaskResult) -> dict[str, Any]:
    """What grading (and making) this submission cost, jurors' calls apportioned."""
    votes = [v for c in r.criteria for v in c.all_votes()]
    s = r.submission
    return {
        "jury_cost_usd": _cost([v.apportioned_cost for v in votes]),
        "jury_input_tokens": round(sum(v.input_tokens * v.share for v in votes)),
        "jury_output_tokens": round(sum(v.output_tokens * v.share for v in votes)),
        "jury_calls": sum(v.attempts * v.share for v in votes if v.error is None),
        "candidate_cost_usd": s.cost_usd,
        "candidate_output_tokens": s.output_tokens,
    }


def criterion_outcome(c: CriterionResult, margin: float = 0.0) -> CriterionOutcome:
    share = c.c_share
    return CriterionOutcome(
        id=c.criterion.id,
        grader=c.criterion.grader,
        weight=c.criterion.weight,
        passed=c.passed,
        awarded=c.awarded,
        votes=vote_counts(c) if c.by_jury else None,
        split=c.split if c.by_jury else None,
        escalated=True if c.escalated_from else None,
        error=c.grader_error,
        c_share=None if share is None else round(share, 4),
        pass_probability=None if share is None else round(criterion_pass_probability(c), 4),
        undecided=None if share is None else is_undecided(share, margin),
    )


def task_outcome(r: TaskResult, margin: float = 0.0) -> TaskOutcome:
    judged = any(c.c_share is not None for c in r.criteria)
    healthbench = r.scoring == "healthbench"
    return TaskOutcome(
        task_id=r.task_id,
        candidate=r.candidate,
        score=r.score,
        scoring=r.scoring if healthbench else None,
        unclipped_score=r.unclipped if healthbench else None,
        passed=r.passed,
        reward=r.reward,
        threshold=r.threshold,
        complete=r.complete,
        criteria=[criterion_outcome(c, margin) for c in r.criteria],
        pass_probability=round(task_pass_probability(r), 4) if judged else None,
        undecided=task_undecided(r, margin) if judged else None,
        error=r.submission.error or None,
        submission=r.submission.text,
        **result_cost(r),
    )


def summary(
    results: Sequence[TaskResult],
    *,
    margin: float | None = None,
    rounds: int = 1000,
    ci: float = 0.95,
    seed: int = 0,
) -> list[CandidateSummary]:
    """Per candidate: mean score, pass rate and scores by tag with task-bootstrap
    intervals, cost, and (with a jury, `margin` given) the undecided criteria."""
    out = []
    for candidate in dict.fromkeys(r.candidate for r in results):
        mine = [r for r in results if r.candidate == candidate]
        boot = ClusterBootstrap(len(mine), rounds, ci, seed)
        judged = [c for r in mine for c in r.criteria if c.by_jury and c.votes]
        costs = [result_cost(r) for r in mine]
        by_tag = tag_scores(mine, boot)
        undecided = (
            None
            if margin is None
            else sum(is_undecided(c.c_share, margin) for c in judged if c.c_share is not None)
        )
        out.append(
            CandidateSummary.model_validate(
                {
                    "candidate": candidate,
                    "tasks": len(mine),
                    "mean_score": boot.estimate(mean_score(boot, mine)).record(2),
                    "pass_rate": boot.estimate(boot.mean([r.passed for r in mine])).record(),
                    "split_criteria": sum(c.split for c in judged),
                    "judged_criteria": len(judged),
                    "incomplete": sum(not r.complete for r in mine),
                    "jury_cost_usd": _cost([c["jury_cost_usd"] for c in costs]),
                    "jury_output_tokens": sum(c["jury_output_tokens"] for c in costs),
                    "undecided_criteria": undecided,
                    "tags": by_tag or None,
                }
            )
        )
    return out


def grading_record(
    results: Sequence[TaskResult],
    *,
    contract: str,
    jury: Jury | None,
    escalate_to: Jury | None = None,
    escalate_margin: int = 1,
    warnings: Sequence[str] = (),
    candidates: dict[str, str] | None = None,
    undecided_margin: float = 0.0,
    repeats: int = 1,
    trace: JudgementLines | None = None,
) -> GradingRecord:
    """The record of graded `results`, with their judgements: `trace` where they were
    kept as the grading went (`kept_in`), else from the results (no accounting: the
    command adds what the run's calls cost once the engine has closed)."""
    margin = None if jury is None else undecided_margin
    if trace is None:
        trace = JudgementLines()
        for i, r in enumerate(results):
            trace.add(i, judgements([r]))
    return GradingRecord(
        created=now(),
        contract=contract,
        jury=_jury_part(jury, margin, repeats),
        candidates=candidates,
        escalate_to=(
            None
            if escalate_to is None
            else Escalation(**_jury_part(escalate_to).model_dump(), margin=escalate_margin)
        ),
        summary=summary(results, margin=margin),
        tasks=[task_outcome(r, undecided_margin) for r in results],
        warnings=[*warnings, *(jury.warnings(repeats) if jury is not None else [])],
        diversity=juror_diversity(results, jury, repeats),
        agreement=jury_agreement(results, jury, repeats=repeats),
        verdicts=verdict_modes(results, (jury, escalate_to)),
        judgements=trace,
    )


def kept_in(trace: JudgementLines) -> Callable[[int, TaskResult], TaskResult]:
    """For `grade(graded=...)`: each submission's judgements written to `trace` as soon
    as it is graded, and its result kept without the replies."""

    def keep(index: int, result: TaskResult) -> TaskResult:
        trace.add(index, judgements([result]))
        return result.without_replies()

    return keep


def juror_diversity(
    results: Sequence[TaskResult], jury: Jury | None, repeats: int = 1
) -> JurorDiversity | None:
    """Identical replies and Fleiss' kappa of the first jury's answers (every answer a
    rater, a juror's repeats included), over the criteria on which all of them were
    readable (None for a jury of one asked once)."""
    if jury is None or jury.size * repeats < 2:
        return None
    counts, identical = [], []
    for r in results:
        for c in r.criteria:
            votes = c.first_votes
            every_juror = len({v.juror for v in votes}) == jury.size  # each with its repeats
            if not c.by_jury or not every_juror or any(v.grade is None for v in votes):
                continue
            passed = sum(v.grade == "C" for v in votes)
            counts.append((passed, len(votes) - passed))
            identical.append(len({v.reply_digest for v in votes}) == 1)
    kappa = fleiss_kappa(counts) if counts else float("nan")
    return JurorDiversity(
        criteria=len(counts),
        identical_replies=round(sum(identical) / len(identical), 4) if identical else None,
        fleiss_kappa=round(kappa, 4) if np.isfinite(kappa) else None,
    )


def verdict_modes(
    results: Sequence[TaskResult], juries: Iterable[Jury | None]
) -> dict[str, VerdictModes] | None:
    """Per served juror, how its first replies gave their verdicts (one per vote: a call
    on several criteria counts once for each); None without a served juror."""
    served = [j.name for jury in juries if jury is not None for j in jury.jurors if j.spec.served]
    replies: dict[str, list[tuple[VerdictMode, bool]]] = {name: [] for name in served}
    for r in results:
        for c in r.criteria:
            for v in c.all_votes():
                if v.juror in replies and v.verdict_mode is not None:
                    replies[v.juror].append((v.verdict_mode, v.first_read))
    return {name: VerdictModes.tally(found) for name, found in replies.items()} or None


def _jury_part(
    jury: Jury | None, undecided_margin: float | None = None, repeats: int = 1
) -> JuryPart:
    """The jury's names and settings (no jurors: every criterion has a grader without a model)."""
    if jury is None:
        return JuryPart(jurors=[])
    named = any(j.name.partition("#")[0] != str(j.spec) for j in jury.jurors)
    return JuryPart(
        jurors=list(jury.names),
        specs=[str(j.spec) for j in jury.jurors] if named else None,
        temperature=jury.temperature,
        seed=jury.seed,
        max_tokens=jury.max_tokens,
        batch_criteria=jury.batch_criteria,
        verdict_format=None if jury.verdict_format == "auto" else jury.verdict_format,
        undecided_margin=undecided_margin,
        repeats=repeats if repeats > 1 else None,
    )


def _vote_judgement(
    r: TaskResult, c: CriterionResult, v: Vote, stage: str, repeated: bool = False
) -> Judgement:
    return Judgement(
        task_id=r.task_id,
        candidate=r.candidate,
        criterion_id=c.criterion.id,
        stage=stage,
        juror=v.juror,
        grade=v.grade,
        weight=c.criterion.weight,
        awarded=c.awarded,
        input_tokens=v.input_tokens,
        output_tokens=v.output_tokens,
        latency_s=round(v.latency_s, 4),
        cost_usd=v.cost_usd,
        criteria_in_call=round(1 / v.share),
        attempts=v.attempts,
        cached=v.cached,
        error=v.error,
        text=v.text,
        retry_text=v.retry_text,
        repeat=v.repeat if repeated else None,
    )


def judgements(results: Sequence[TaskResult]) -> Iterator[Judgement]:
    """One per juror vote, or per decision of a grader without a model."""
    for r in results:
        for c in r.criteria:
            if not c.by_jury or not c.votes:
                yield Judgement(
                    task_id=r.task_id,
                    candidate=r.candidate,
                    criterion_id=c.criterion.id,
                    stage=c.criterion.grader,
                    juror=None,
                    grade=None if c.grader_error else "C" if c.passed else "I",
                    weight=c.criterion.weight,
                    awarded=c.awarded,
                    error=c.grader_error,
                    text=c.explanation,
                )
                continue
            repeated = any(v.repeat for v in c.all_votes())
            for v in c.escalated_from:
                yield _vote_judgement(r, c, v, "first", repeated)
            for v in c.votes:
                stage = "escalated" if c.escalated_from else "jury"
                yield _vote_judgement(r, c, v, stage, repeated)
