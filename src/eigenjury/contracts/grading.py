"""Grading submissions against a contract: graders without a model first, then the jury,
then the rules (strict majority per criterion, the task's scoring rule, threshold).

With a second, larger jury to escalate to (a cascade), the first jury votes on every
criterion and the larger one only where the first jury's outcome is within
`escalate_margin` votes of flipping, or where any of its votes was unreadable or failed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from eigenjury.contracts.bundle import ContractSource
from eigenjury.contracts.graders import check_python_graders, grade_without_model
from eigenjury.contracts.jury import (
    Ballot,
    Jury,
    Poll,
    Vote,
    c_votes,
    counted_c,
    majority,
    poll,
)
from eigenjury.contracts.prompts import candidate_request
from eigenjury.contracts.rules import (
    clip_score,
    flip_distance,
    is_split,
    positive_points,
    score_of_points,
    task_passes,
    unclipped_score,
)
from eigenjury.contracts.sandbox import PYTHON_GRADER_TIMEOUT_S, GraderSandbox
from eigenjury.contracts.schema import Criterion, Scoring, Task
from eigenjury.engine import Call, Engine
from eigenjury.errors import InputError
from eigenjury.models.spec import ModelSpec


@dataclass(frozen=True, slots=True)
class Submission:
    task_id: str
    candidate: str
    text: str | None  # None: the candidate's call failed (see `error`)
    error: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None


@dataclass(frozen=True, slots=True)
class CriterionResult:
    """A criterion's outcome; `passed` is whether it was met (for a negative criterion:
    the reply did what it must not, and loses its points)."""

    criterion: Criterion
    passed: bool
    votes: tuple[Vote, ...] = ()  # the deciding jury's, in juror order; none without a jury
    explanation: str = ""  # graders without a model say what they compared
    escalated_from: tuple[Vote, ...] = ()  # cascade: the first jury's votes, when escalated
    grader_error: str | None = None  # a grader without a model failed to decide (not passed)

    @property
    def by_jury(self) -> bool:
        return self.criterion.grader == "llm_judge"

    @property
    def awarded(self) -> float:
        return self.criterion.weight if self.passed else 0.0

    @property
    def c_votes(self) -> int:
        """The votes that count as C (on a negative criterion, unread ones too)."""
        return counted_c(self.votes, self.criterion.negative)

    @property
    def i_votes(self) -> int:
        return sum(v.grade == "I" for v in self.votes)

    @property
    def unparsed(self) -> int:
        return sum(v.unparsed for v in self.votes)

    @property
    def errors(self) -> int:
        return sum(v.error is not None for v in self.votes)

    @property
    def split(self) -> bool:
        return self.by_jury and is_split(self.c_votes, len(self.votes))

    @property
    def c_share(self) -> float | None:
        """The deciding jury's share of votes counted as C (an unread or failed vote is
        not C, but on a negative criterion it is); None where no jury voted."""
        return self.c_votes / len(self.votes) if self.by_jury and self.votes else None

    def all_votes(self) -> tuple[Vote, ...]:
        return self.escalated_from + self.votes

    @property
    def first_votes(self) -> tuple[Vote, ...]:
        """The first jury's votes (a cascade's first stage, where it escalated)."""
        return self.escalated_from or self.votes


@dataclass(frozen=True, slots=True)
class TaskResult:
    task_id: str
    candidate: str
    threshold: float
    criteria: tuple[CriterionResult, ...]
    submission: Submission
    scoring: Scoring = "weighted"
    tags: tuple[str, ...] = ()  # the task's
    unclipped: float = field(init=False)  # the score before the healthbench rule's clipping
    score: float = field(init=False)
    passed: bool = field(init=False)

    def __post_init__(self) -> None:
        weights = [c.criterion.weight for c in self.criteria]
        unclipped = unclipped_score(weights, [c.passed for c in self.criteria], self.scoring)
        score = clip_score(unclipped, self.scoring)
        object.__setattr__(self, "unclipped", unclipped)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "passed", task_passes(score, self.threshold))

    def passes_with(self, points: float) -> bool:
        """Whether the task would pass with `points` met (by its rule and threshold)."""
        positive = positive_points(c.criterion.weight for c in self.criteria)
        score = clip_score(score_of_points(points, positive, self.scoring), self.scoring)
        return task_passes(score, self.threshold)

    @property
    def reward(self) -> float:
        return self.score / 100.0

    def without_replies(self) -> TaskResult:
        """The result without its jurors' reply texts (kept in the trace instead)."""
        criteria = tuple(
            replace(
                c,
                votes=tuple(v.without_text() for v in c.votes),
                escalated_from=tuple(v.without_text() for v in c.escalated_from),
            )
            for c in self.criteria
        )
        return replace(self, criteria=criteria)

    @property
    def complete(self) -> bool:
        """Every call and grader this result rests on succeeded (else a rerun, or a
        mended grader, may change it)."""
        return self.submission.text is not None and not any(
            c.errors or c.grader_error for c in self.criteria
        )


async def generate_submissions(
    engine: Engine,
    source: ContractSource,
    candidates: Sequence[ModelSpec],
    *,
    names: Sequence[str] | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    max_tokens: int = 1024,
) -> list[Submission]:
    """Each candidate answers each task once (from the store when it already has); its
    submissions carry its name (default: its spec)."""
    contract = source.contract
    called = names if names is not None else [str(spec) for spec in candidates]
    calls = (
        Call(
            spec,
            candidate_request(
                task,
                source.task_reference(task),
                temperature=temperature,
                seed=seed,
                max_tokens=max_tokens,
            ),
            role="candidate",
            tag=(task.task_id, name),
        )
        for spec, name in zip(candidates, called, strict=True)
        for task in contract.tasks
    )
    out = []
    total = len(candidates) * len(contract.tasks)
    async with contextlib.aclosing(engine.stream(calls, total=total)) as results:
        async for result in results:
            c, (task_id, name) = result.completion, result.call.tag
            if c is None:
                error = f"{result.error_kind}: {result.error_message}"
                out.append(Submission(task_id, name, None, error))
                continue
            out.append(
                Submission(
                    task_id,
                    name,
                    c.text,
                    input_tokens=c.usage.input_tokens,
                    output_tokens=c.usage.output_tokens,
                    latency_s=c.latency_s,
                    cost_usd=c.cost_usd,
                )
            )
    return out


def require_jury(source: ContractSource, jury: Jury | None) -> None:
    """A jury is needed only when some criterion is graded by one (`llm_judge`); an
    input error naming those criteria when it is needed and missing."""
    if jury is not None:
        return
    needing = [
        f"task '{task.task_id}' criterion '{c.id}'"
        for task in source.contract.tasks
        for c in task.evaluation.criteria
        if c.grader == "llm_judge"
    ]
    if needing:
        more = f" and {len(needing) - 5} more" if len(needing) > 5 else ""
        raise InputError(
            "no juror given, but these llm_judge criteria are graded by a jury: "
            f"{', '.join(needing[:5])}{more}; give the jurors (--jury SPEC, repeated)",
            path=source.path,
        )


async def grade(
    engine: Engine,
    source: ContractSource,
    submissions: Sequence[Submission],
    jury: Jury | None,
    *,
    escalate_to: Jury | None = None,
    escalate_margin: int = 1,
    grader_timeout_s: float = PYTHON_GRADER_TIMEOUT_S,
    graded: Callable[[int, TaskResult], TaskResult] | None = None,
) -> list[TaskResult]:
    """Grade every submission; the result order follows `submissions`. No jury is needed
    for a contract whose criteria all have graders without a model. Python graders run
    in a child process, each call within `grader_timeout_s`. `graded(i, result)` is
    called as each submission's grading finishes (in any order), and what it returns is
    kept in its place: a caller that writes the replies away keeps a slim result, so a
    large grading does not hold every reply."""
    require_jury(source, jury)
    if engine.planner is not None:  # a plan grades nothing: no user code runs for it
        decided = [_planned(source.contract.task(s.task_id)) for s in submissions]
    else:
        with GraderSandbox(grader_timeout_s) as sandbox:
            check_python_graders(source.contract, source.path, sandbox)
            decided = [
                decide_without_model(source.contract.task(s.task_id), s, sandbox)
                for s in submissions
            ]
    grading = _Grading(source, submissions, decided, escalate_to, escalate_margin, graded)
    polls = grading.polls(jury)
    if polls:
        await poll(engine, polls, total=sum(p.size for p in polls), finished=grading.finished)
    return grading.done()


@dataclass
class _Grading:
    """Submissions being graded: each assembled as soon as its jury (and its cascade's
    second jury) has voted, and handed to `graded`."""

    source: ContractSource
    submissions: Sequence[Submission]
    decided: list[dict[str, CriterionResult]]  # each submission's criteria decided without a model
    escalate_to: Jury | None
    escalate_margin: int
    graded: Callable[[int, TaskResult], TaskResult] | None
    results: dict[int, TaskResult] = field(default_factory=dict)
    first_votes: dict[int, dict[str, list[Vote]]] = field(default_factory=dict)  # escalated

    def polls(self, jury: Jury | None) -> list[Poll]:
        """The first jury's poll per submission it has criteria to vote on; every other
        submission is assembled at once."""
        contract, out = self.source.contract, []
        for i, s in enumerate(self.submissions):
            task = contract.task(s.task_id)
            judged = tuple(c for c in task.evaluation.criteria if c.grader == "llm_judge")
            if jury is None or not judged or s.text is None:
                self._assemble(i, {}, {})
                continue
            ballot = Ballot(task, self.source.task_reference(task), s.text, judged)
            out.append(Poll(ballot, jury, contract.repeats, key=i))
        return out

    def finished(self, p: Poll) -> list[Poll]:
        """A poll has every vote: the cascade's second poll where the first jury's
        outcome on some criterion is close or unread, else the submission's result."""
        i: int = p.key
        votes = p.votes()
        if i in self.first_votes:  # the second jury's
            self._assemble(i, self.first_votes.pop(i), votes)
            return []
        if self.escalate_to is not None:
            b = p.ballot
            close = tuple(
                c
                for c in b.criteria
                if needs_escalation(votes[c.id], len(votes[c.id]), self.escalate_margin)
            )
            if close:
                self.first_votes[i] = votes
                second = Ballot(b.task, b.reference, b.submission, close)
                return [Poll(second, self.escalate_to, p.repeats, key=i, role="escalation")]
        self._assemble(i, votes, {})
        return []

    def _assemble(
        self, i: int, votes: Mapping[str, Sequence[Vote]], escalated: Mapping[str, Sequence[Vote]]
    ) -> None:
        s = self.submissions[i]
        result = assemble(
            self.source.contract.task(s.task_id), s, votes, escalated, decided=self.decided[i]
        )
        self.decided[i] = {}
        self.results[i] = result if self.graded is None else self.graded(i, result)

    def done(self) -> list[TaskResult]:
        return [self.results[i] for i in range(len(self.submissions))]


def _planned(task: Task) -> dict[str, CriterionResult]:
    """A plan's stand-in for the criteria graded without a model (never run by it)."""
    return {
        c.id: CriterionResult(c, False, explanation="not graded: a plan")
        for c in task.evaluation.criteria
        if c.grader != "llm_judge"
    }


def decide_without_model(
    task: Task, submission: Submission, sandbox: GraderSandbox | None = None
) -> dict[str, CriterionResult]:
    """The criteria of `task` graded without a model (python graders in `sandbox`),
    by id; nothing passes without a submission."""
    out = {}
    for c in task.evaluation.criteria:
        if submission.text is None:
            out[c.id] = CriterionResult(c, False, explanation="no submission")
        elif c.grader != "llm_judge":
            got = grade_without_model(c, submission.text, task, sandbox)
            # a grader that failed to decide never spares the reply a negative criterion
            met = got.passed or (got.error is not None and c.negative)
            out[c.id] = CriterionResult(c, met, explanation=got.explanation, grader_error=got.error)
    return out


def assemble(
    task: Task,
    submission: Submission,
    votes: Mapping[str, Sequence[Vote]],
    escalated: Mapping[str, Sequence[Vote]] | None = None,
    sandbox: GraderSandbox | None = None,
    *,
    decided: Mapping[str, CriterionResult] | None = None,
) -> TaskResult:
    """The grading rules on one submission: each criterion graded without a model as
    `decided` (else graded now, python graders in `sandbox`), each llm_judge one by the
    majority of its jury's `votes`, or of the `escalated` jury's where a cascade
    regraded it; nothing passes without a submission."""
    if decided is None:
        decided = decide_without_model(task, submission, sandbox)
    criteria = []
    for c in task.evaluation.criteria:
        if c.id in decided:
            criteria.append(decided[c.id])
        elif escalated and c.id in escalated:
            late = tuple(escalated[c.id])
            criteria.append(
                CriterionResult(
                    c, majority(late, c.negative), late, escalated_from=tuple(votes[c.id])
                )
            )
        else:
            early = tuple(votes[c.id])
            criteria.append(CriterionResult(c, majority(early, c.negative), early))
    return TaskResult(
        submission.task_id,
        submission.candidate,
        task.evaluation.pass_threshold,
        tuple(criteria),
        submission,
        task.evaluation.scoring,
        task.tags,
    )


def needs_escalation(votes: Sequence[Vote], jury_size: int, margin: int) -> bool:
    """The first jury's outcome is within `margin` flipped votes, or a vote was not read."""
    if any(v.grade is None for v in votes):
        return True
    return flip_distance(c_votes(votes), jury_size) <= margin
