"""The records of contracts: a grading run (results.json, with its trace) and a jury
comparison (comparison.json).

Field names, order and values are those eigenjury 0.1 wrote, so its files still read.
Fields that 0.1 left out when they did not apply (a task's error, a criterion's votes,
the cascade) are still left out rather than written as null: `Sparse` parts say which.
Pydantic only: the viewer and `read_any_record` import this module.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, ClassVar

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from eigenjury.records import (
    AccountingRecord,
    EstimatePart,
    Overview,
    Part,
    Record,
    Sparse,
    VerdictModes,
    dump_lines,
)


class JuryPart(Sparse):
    """The jury's names and settings; only `jurors` (empty) when no criterion needs one.
    `verdict_format` only where it was forced (not "auto")."""

    OMITTED = frozenset(
        {
            "specs",
            "temperature",
            "seed",
            "max_tokens",
            "batch_criteria",
            "verdict_format",
            "undecided_margin",
            "repeats",
        }
    )

    jurors: list[str]
    """The jurors' names (a repeated model is `spec#2`, ...); empty when no criterion needs one."""
    specs: list[str] | None = None
    """Each juror's model spec, in the order of `jurors`, where some juror was given a short name
    (NAME=SPEC); left out where every name is its spec."""
    temperature: float | None = None
    """The jurors' sampling temperature (left out without a jury)."""
    seed: int | None = None
    """Their seed; each repeat of a model adds 1 (left out without a jury)."""
    max_tokens: int | None = None
    """The most tokens a juror's reply may have (left out without a jury)."""
    batch_criteria: bool | None = None
    """Whether a juror graded all of a task's criteria in one call (left out without a jury)."""
    verdict_format: str | None = None
    """How served jurors were made to give verdicts, where forced: "structured", "logprobs" or
    "text" (left out for "auto")."""
    undecided_margin: float | None = None
    """A criterion is undecided where its share of C votes lies within this of 1/2 (0: exact ties;
    left out without a jury, and by older records)."""
    repeats: int | None = None
    """How many times each juror was asked about each criterion, where the contract asked for
    repeats (left out otherwise): every answer is a vote."""


class Escalation(JuryPart):
    """The cascade's second jury, and how close to flipping a first outcome escalates."""

    margin: int
    """A first outcome escalates when this many flipped votes or fewer would change it, or a vote
    was not read."""


class TagScore(Part):
    """A candidate's score on one tag."""

    tag: str
    """The tag, as the contract writes it ("axis:accuracy", "theme:emergency_referrals")."""
    level: str
    """"criterion": the task's scoring rule restricted to the criteria carrying the tag, on the
    tasks where those have positive points (100 x points met over their positive points); "task":
    the mean score of the tasks carrying it."""
    tasks: int
    """The tasks it is computed over."""
    score: EstimatePart
    """The mean (0 to 100; under the healthbench rule the clipped mean of the unclipped values),
    with a task-bootstrap interval."""


class CandidateSummary(Sparse):
    OMITTED = frozenset({"tags", "undecided_criteria"})

    candidate: str
    """The candidate: its model spec, or the name given with its submissions."""
    tasks: int
    """Its submissions graded."""
    mean_score: EstimatePart
    """Mean task score (0 to 100), with a task-bootstrap interval; where every task is scored by the
    healthbench rule, the mean of the unclipped task scores, clipped to [0, 100], as HealthBench
    reports it."""
    pass_rate: EstimatePart
    """Share of its tasks passed, with a task-bootstrap interval."""
    split_criteria: int
    """Jury-graded criteria decided by one vote."""
    judged_criteria: int
    """Criteria a jury voted on."""
    incomplete: int
    """Submissions resting on a failed call or grader."""
    jury_cost_usd: float | None
    """What the jurors' calls on its submissions cost, in US dollars; None when a price is unknown
    or a call failed."""
    jury_output_tokens: int
    """Jurors' output tokens on its submissions, calls apportioned over their criteria."""
    undecided_criteria: int | None = None
    """Jury-graded criteria whose share of C votes lay within the undecided margin of 1/2 (left out
    without a jury, and by older records)."""
    tags: list[TagScore] | None = None
    """Its score per tag of the contract's criteria and tasks (left out where the contract has no
    tags)."""


class VoteCounts(Part):
    C: int
    """Votes "C": the submission meets the criterion."""
    I: int  # noqa: E741  (the grade letter, as written)
    """Votes "I": it does not."""
    unparsed: int
    """Replies without a readable grade, after any repair (each counts as not C)."""
    error: int
    """Failed calls (each counts as not C)."""


class CriterionOutcome(Sparse):
    """A criterion's outcome; `votes` and `split` only where a jury grades it, `error`
    only where its grader (without a model) failed to decide."""

    OMITTED = frozenset(
        {"votes", "split", "escalated", "error", "c_share", "pass_probability", "undecided"}
    )

    id: str = Field(min_length=1)
    """The criterion's id in the contract."""
    grader: str
    """Its grader: "llm_judge" (a jury), "exact_match", "regex", "numeric" or "python"."""
    weight: float
    """Its weight: the points it adds to the task score when met; a negative weight describes what
    the reply must not do, and is subtracted when met."""
    passed: bool
    """Whether it was met (by a jury: more than half the votes C); for a negative criterion, that
    the reply did what it must not."""
    awarded: float
    """Points awarded: its weight if it was met, else 0."""
    votes: VoteCounts | None = None
    """The deciding jury's votes (left out where no jury grades it)."""
    split: bool | None = None
    """Whether one vote decided it (left out where no jury grades it)."""
    escalated: bool | None = None
    """True where the cascade's second jury decided it (left out otherwise)."""
    error: str | None = None
    """Why its grader without a model failed to decide: it raised, exited, timed out or returned no
    verdict (left out otherwise)."""
    c_share: float | None = None
    """The deciding jury's share of C votes, 0 to 1 (left out where no jury grades it)."""
    pass_probability: float | None = None
    """The chance a jury of the same size, each juror voting C with that share, would pass it: 0.68
    for a 3-2 split (left out where no jury grades it)."""
    undecided: bool | None = None
    """Whether the share of C votes lies within the undecided margin of 1/2 (left out where no jury
    grades it)."""

    @property
    def by_jury(self) -> bool:
        return self.grader == "llm_judge"


class TaskOutcome(Sparse):
    """One submission graded: score, criteria, and what grading (and making) it cost."""

    OMITTED = frozenset({"error", "scoring", "unclipped_score", "pass_probability", "undecided"})

    task_id: str = Field(min_length=1)
    """The task's id in the contract."""
    candidate: str = Field(min_length=1)
    """Who submitted: the candidate's model spec, or the name given with the submission."""
    score: float
    """By the task's scoring rule: "weighted", the sum of the weights of the criteria met (negative
    ones subtract; the positive weights are meant to sum to 100); "healthbench", 100 x the points
    met over the positive points, clipped to [0, 100]."""
    scoring: str | None = None
    """The scoring rule, "healthbench" (left out for "weighted")."""
    unclipped_score: float | None = None
    """The healthbench score before clipping, below 0 where negative criteria outweigh the positive
    ones met (left out for "weighted")."""
    passed: bool
    """Whether the score reaches the threshold."""
    reward: float
    """The score / 100 (above 1 where the weights sum to more than 100)."""
    threshold: float
    """The task's pass threshold, in score points."""
    complete: bool
    """Whether every call and grader it rests on succeeded (else a rerun may change it)."""
    criteria: list[CriterionOutcome]
    """Each criterion's outcome, in the contract's order."""
    pass_probability: float | None = None
    """The chance it passes with each criterion passing independently with its own pass probability
    (graders without a model are certain); left out where no jury graded it."""
    undecided: bool | None = None
    """Whether some outcome of its undecided criteria would change whether it passes (left out where
    no jury graded it)."""
    error: str | None = None
    """The candidate's failed call, as "kind: message" (left out when it succeeded)."""
    jury_cost_usd: float | None
    """What the jurors' calls cost in US dollars, apportioned over the criteria each graded; None
    when a price is unknown or a call failed."""
    jury_input_tokens: int
    """Jurors' input tokens, repairs included, apportioned the same way."""
    jury_output_tokens: int
    """Jurors' output tokens, repairs included, apportioned the same way."""
    jury_calls: int | float
    """Juror calls, repairs included, apportioned over the criteria each graded (failed calls left
    out)."""
    candidate_cost_usd: float | None
    """What the candidate's call cost in US dollars; None when unknown, failed, or the submission
    came from a file."""
    candidate_output_tokens: int
    """Output tokens of the candidate's reply (0 where the call failed or the submission came from a
    file)."""
    submission: str | None = None
    """The submitted text; None where the candidate's call failed, or in a file of 0.1."""


class Judgement(Part):
    """One line of trace.jsonl: a juror's vote, or the decision of a grader without a
    model (`juror` None; it has no call, so the call's fields are left out, but for the
    `error` of a grader that failed to decide, whose `grade` is then None)."""

    CALL_FIELDS: ClassVar[frozenset[str]] = frozenset(
        {
            "input_tokens",
            "output_tokens",
            "latency_s",
            "cost_usd",
            "criteria_in_call",
            "attempts",
            "cached",
            "error",
            "retry_text",
        }
    )

    task_id: str
    """The task's id."""
    candidate: str
    """Who submitted."""
    criterion_id: str
    """The criterion's id."""
    stage: str
    """The stage: "jury", "first" or "escalated" (a cascade), or the grader's name for a decision
    without a model."""
    juror: str | None
    """The juror's name; None for a grader without a model."""
    grade: str | None
    """The grade, "C" or "I"; None where the reply had no readable grade, the call failed, or the
    grader failed to decide."""
    weight: float
    """The criterion's weight."""
    awarded: float
    """Points the criterion was awarded (the same on each of its votes)."""
    input_tokens: int | None = None
    """Input tokens of the juror's call and its repair, not apportioned (left out for a grader
    without a model)."""
    output_tokens: int | None = None
    """Output tokens of the call and its repair, not apportioned (left out for a grader without a
    model)."""
    latency_s: float | None = None
    """Seconds the call and its repair took (left out for a grader without a model)."""
    cost_usd: float | None = None
    """What the call and its repair cost in US dollars; None when a price is unknown or the call
    failed (left out for a grader without a model)."""
    criteria_in_call: int | None = None
    """Criteria the call graded, more than 1 with batch_criteria (left out for a grader without a
    model)."""
    attempts: int | None = None
    """1, or 2 with a repair request (left out for a grader without a model)."""
    cached: bool | None = None
    """Whether the reply came from the store (left out for a grader without a model)."""
    error: str | None = None
    """A failed call, as "kind: message", or why a grader failed to decide; None otherwise (left out
    for a grader that decided)."""
    text: str | None = None
    """The juror's first reply, or what a grader without a model compared."""
    retry_text: str | None = None
    """The reply to the repair request; None without one (left out for a grader without a model)."""
    repeat: int | None = None
    """Which of the juror's answers this is, from 0, where the contract asks for repeats (left out
    otherwise)."""

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.repeat is None:
            data.pop("repeat", None)
        if self.juror is None:
            return {
                k: v
                for k, v in data.items()
                if k not in self.CALL_FIELDS or (k == "error" and v is not None)
            }
        return data


class JudgementLines:
    """A grading's trace: its judgements as JSON lines, kept per submission in a binary
    file, in memory unless the caller gives one on disk (`eigenjury grade` does, so a
    large grading holds no juror reply once its submission is graded). Written as
    submissions finish, in any order; read back in submission order."""

    def __init__(self, file: BinaryIO | None = None) -> None:
        self._file: BinaryIO = file if file is not None else io.BytesIO()
        self._spans: dict[int, tuple[int, int]] = {}  # submission -> (offset, bytes)
        self._end = 0

    def add(self, index: int, judgements: Iterable[Judgement]) -> None:
        """The judgements of the `index`-th submission (once)."""
        if index in self._spans:
            raise ValueError(f"submission {index}'s judgements are kept already")
        data = dump_lines(judgements).encode("utf-8")
        self._file.seek(self._end)
        self._file.write(data)
        self._spans[index] = (self._end, len(data))
        self._end += len(data)

    def text(self, index: int) -> str:
        """The `index`-th submission's lines ("" where it has none)."""
        if index not in self._spans:
            return ""
        offset, size = self._spans[index]
        self._file.seek(offset)
        return self._file.read(size).decode("utf-8")

    def of(self, index: int) -> list[Judgement]:
        # split on newlines only: a reply may hold U+2028 and the like, which JSON
        # leaves unescaped and str.splitlines would break on
        return [Judgement.model_validate_json(line) for line in self.text(index).split("\n")[:-1]]

    def pieces(self) -> Iterator[str]:
        """trace.jsonl's text, a submission at a time."""
        return (self.text(i) for i in sorted(self._spans))

    def rows(self) -> Iterator[dict[str, Any]]:
        """Each judgement as its JSON object (for tables), in order."""
        for piece in self.pieces():
            yield from (json.loads(line) for line in piece.split("\n")[:-1])

    def __iter__(self) -> Iterator[Judgement]:
        for i in sorted(self._spans):
            yield from self.of(i)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, JudgementLines):
            return NotImplemented
        return list(self.pieces()) == list(other.pieces())

    __hash__ = None  # type: ignore[assignment]


class JurorDiversity(Part):
    """Whether the jurors were separate opinions, over the jury-graded criteria every
    juror of the (first) jury gave a readable vote on; only for juries of two or more."""

    criteria: int
    """How many criteria that is."""
    identical_replies: float | None
    """Share of them on which every juror's reply was word for word the same (None without
    any)."""
    fleiss_kappa: float | None
    """Fleiss' kappa of the jurors' C and I votes on them: agreement beyond what their pooled
    vote shares give by chance (None where undefined: one grade throughout, or no criterion)."""


class Disagreement(Sparse):
    OMITTED = frozenset({"task_id"})

    criterion_id: str
    """The criterion's id (the same id with the same text in several tasks counts together)."""
    task_id: str | None = None
    """Its task, where it is one task's (left out where it is several tasks')."""
    against: int
    """Votes the juror gave against the jury's outcome on it."""
    of: int
    """Its readable votes on it."""


class JurorAgreement(Sparse):
    """One juror of the first jury, over the criteria it voted on readably."""

    OMITTED = frozenset({"consistency", "tied"})

    juror: str
    """The juror's name."""
    votes: int
    """Its readable votes."""
    unread: int
    """Criteria it gave no readable vote on (unparseable reply or failed call)."""
    tied: int | None = None
    """With repeats: criteria on which its readable answers split evenly, so it has no vote there
    (left out without repeats)."""
    agreement_with_outcome: EstimatePart
    """Share of its votes that equal the jury's outcome (its own vote among those deciding it),
    with a task-bootstrap interval. With repeats, its vote on a criterion is the majority of its
    readable answers (a tie is no vote)."""
    consistency: EstimatePart | None = None
    """With repeats: the share of criteria, of those it answered readably at least twice, on which
    all its answers agreed, with a task-bootstrap interval (left out without repeats)."""
    most_disagreed: list[Disagreement]
    """The criteria (by id, over tasks and candidates) it most often voted against the outcome on,
    at most three."""


class JurorPair(Part):
    a: str
    """One juror."""
    b: str
    """The other."""
    criteria: int
    """Criteria both voted on readably."""
    agreement: EstimatePart
    """Share of those where their votes were the same, with a task-bootstrap interval."""
    cohen_kappa: EstimatePart
    """Cohen's kappa of their votes: agreement beyond what each one's own C rate gives by chance
    (value None where both voted one way throughout)."""


class JuryAgreement(Part):
    """How the first jury's jurors agreed (juries of two or more), with intervals that
    resample tasks."""

    criteria: int
    """Jury-graded criteria (over tasks and candidates)."""
    criteria_all_read: int
    """Those every juror voted on readably, over which Fleiss' kappa is computed."""
    fleiss_kappa: EstimatePart
    """Fleiss' kappa of the jury: agreement beyond what the pooled C rate gives by chance, 1 for
    full agreement, 0 for chance (value None where undefined)."""
    jurors: list[JurorAgreement]
    """Per juror, in the jury's order."""
    pairs: list[JurorPair]
    """Per pair of jurors."""


class GradingRecord(Sparse, Record):
    """A grading run: results.json. Its trace (`judgements`, one per vote or grader
    decision) is written beside it as trace.jsonl, not into results.json. `verdicts`:
    per served juror (HTTP), how its first replies gave their verdicts, one per vote."""

    KIND: ClassVar[str] = "grading"
    FILE: ClassVar[str] = "results.json"
    LONG: ClassVar[str | None] = "tasks"
    model_config = ConfigDict(arbitrary_types_allowed=True)  # the trace, kept beside
    OMITTED = frozenset(
        {"escalate_to", "accounting", "verdicts", "diversity", "candidates", "agreement"}
    )

    kind: str = KIND
    """Always "grading"."""
    contract: str
    """The contract, as the command was given it."""
    jury: JuryPart
    """The jury's names and settings."""
    candidates: dict[str, str] | None = None
    """Each candidate's model spec by the short name it was given (NAME=SPEC); left out where
    every candidate is named by its spec, or submissions were given."""
    escalate_to: Escalation | None = None
    """The cascade's second jury (left out without one)."""
    summary: list[CandidateSummary]
    """Per candidate: scores, pass rate and jury cost."""
    tasks: list[TaskOutcome]
    """Each submission graded."""
    warnings: list[str] = Field(default_factory=list)
    """What is suspicious in the contract (weights not summing to 100, a threshold out of reach)
    and in the jury (a model on it more than once at temperature 0)."""
    diversity: JurorDiversity | None = None
    """Whether the jurors were separate opinions (left out for juries of one, without a jury, and
    by records made before eigenjury 0.3.2)."""
    agreement: JuryAgreement | None = None
    """How the first jury's jurors agreed, with intervals (left out for juries of one, without
    jury-graded criteria, and by older records)."""
    verdicts: dict[str, VerdictModes] | None = None
    """Per served juror (HTTP), how its first replies gave their verdicts, one per vote (left out
    without served jurors)."""
    accounting: AccountingRecord | None = None
    """What the run's calls cost (left out where none was added, as in each pool's grading of a jury
    comparison)."""
    judgements: JudgementLines = Field(default_factory=JudgementLines, exclude=True, repr=False)
    """One per vote or grader decision, written beside as trace.jsonl, not into this file."""

    SHAPE_0_1 = frozenset({"contract", "jury", "tasks"})

    @property
    def incomplete(self) -> int:
        """Submissions resting on a failed call or grader."""
        return sum(not t.complete for t in self.tasks)

    @property
    def grader_errors(self) -> int:
        """Criteria whose grader (without a model) failed to decide."""
        return sum(c.error is not None for t in self.tasks for c in t.criteria)

    def overview(self) -> Overview:
        cost = self.accounting.total.cost_usd if self.accounting else None
        return Overview(self.contract, tuple(s.candidate for s in self.summary), cost)


class Pool(Part):
    jurors: list[str]
    """The pool's jurors' names."""
    size: int
    """How many jurors it has."""


class Pools(Part):
    a: Pool
    """Pool A (`--pool-a`), the one tried first in the cascade."""
    b: Pool
    """Pool B (`--pool-b`)."""


class ComparisonSettings(Part):
    rounds: int
    """Bootstrap rounds over the submissions behind the intervals."""
    ci: float
    """Coverage of the intervals, e.g. 0.95."""
    seed: int
    """Seeds the bootstrap."""
    cascade_margin: int
    """The cascade's escalation margin (as `cascade.margin`)."""


class BySide(Part):
    a: EstimatePart
    """Pool A's."""
    b: EstimatePart
    """Pool B's."""


class Figures(Part):
    """Per jury-graded criterion: cost, juror seconds and output tokens."""

    cost_usd: EstimatePart
    """Jury cost per criterion, in US dollars (in a part relative to B, a ratio); None where a price
    is unknown or a call failed."""
    latency_s: EstimatePart
    """Juror seconds per criterion, calls apportioned over their criteria (or a ratio)."""
    output_tokens: EstimatePart
    """Juror output tokens per criterion, apportioned the same way (or a ratio)."""


class FiguresBySide(Part):
    a: Figures
    """Pool A's."""
    b: Figures
    """Pool B's."""


class Cascade(Part):
    """Pool A first, escalating to pool B, evaluated from the votes both gave."""

    first: str
    """The pool asked first: "a"."""
    escalate_to: str
    """The pool escalated to: "b"."""
    margin: int
    """A's outcome escalates when this many flipped votes or fewer would change it, or a vote was
    not read."""
    escalation_rate: EstimatePart
    """Share of the jury-graded criteria escalated to B."""
    agreement_with_b: EstimatePart
    """Share of the criteria where the cascade's outcome is B's."""
    task_score_pearson_with_b: EstimatePart
    """Pearson correlation of the cascade's task scores with B's."""
    identical_task_scores_with_b: EstimatePart
    """Share of the submissions where the cascade's score equals B's."""
    relative_to_b: Figures
    """The cascade's cost, seconds and tokens (A's, plus B's where escalated) over B's."""


class JuryComparisonRecord(Sparse, Record):
    """Two juries on the same submissions (contracts.compare.compare_pools), with the
    cascade; the criterion-level parts are absent when no criterion has a jury."""

    KIND: ClassVar[str] = "jury-comparison"
    FILE: ClassVar[str] = "comparison.json"
    OMITTED = frozenset(
        {
            "note",
            "agreement",
            "chance_agreement",
            "kappa",
            "agreement_common",
            "criteria_common",
            "split_rate",
            "pass_rate",
            "per_criterion",
            "a_relative_to_b",
            "cascade",
        }
    )

    kind: str = KIND
    """Always "jury-comparison"."""
    pools: Pools
    """The two juries."""
    submissions: int
    """Submissions both pools graded."""
    criteria: int
    """Jury-graded criteria compared, over all submissions (those with a text to grade)."""
    settings: ComparisonSettings
    """The bootstrap and the cascade's margin."""
    task_score_pearson: EstimatePart
    """Pearson correlation of the two pools' task scores, with a submission-bootstrap interval."""
    identical_task_scores: EstimatePart
    """Share of the submissions both pools gave the same score."""
    task_pass_agreement: EstimatePart
    """Share of the submissions both pools passed, or both failed."""
    note: str | None = None
    """Why the criterion-level parts are left out, where no criterion has a jury (else left out)."""
    agreement: EstimatePart | None = None
    """Share of the jury-graded criteria with the same outcome from both pools (left out without
    jury-graded criteria)."""
    chance_agreement: EstimatePart | None = None
    """The agreement two pools passing criteria at these rates would reach by chance,
    p_a p_b + (1 - p_a)(1 - p_b): the base rate for `agreement` (left out without
    jury-graded criteria, and by records made before eigenjury 0.3.2)."""
    kappa: EstimatePart | None = None
    """Cohen's kappa of the criterion outcomes, agreement beyond chance (value None where
    chance is 1: both pools gave every criterion the same outcome; left out as
    `chance_agreement`)."""
    agreement_common: EstimatePart | None = None
    """The same, over the criteria where every vote of both pools was read (value None where none
    was; left out without jury-graded criteria)."""
    criteria_common: int | None = None
    """How many criteria that is (left out without jury-graded criteria)."""
    split_rate: BySide | None = None
    """Each pool's share of the criteria decided by one vote (left out without jury-graded
    criteria)."""
    pass_rate: BySide | None = None
    """Each pool's share of the criteria passed (left out without jury-graded criteria)."""
    per_criterion: FiguresBySide | None = None
    """Each pool's cost, juror seconds and output tokens per criterion (left out without jury-graded
    criteria)."""
    a_relative_to_b: Figures | None = None
    """A's cost, juror seconds and output tokens over B's (left out without jury-graded
    criteria)."""
    cascade: Cascade | None = None
    """Pool A first, escalating to pool B, from the votes both gave (left out without jury-graded
    criteria)."""
    contract: str
    """The contract, as the command was given it."""
    accounting: AccountingRecord | None = None
    """What the run's calls cost, both pools' and the candidates' (left out where not added)."""
    incomplete_submissions: int
    """Gradings resting on a failed call or grader, both pools counted (a submission may count
    twice)."""

    SHAPE_0_1 = frozenset({"pools", "task_score_pearson"})

    def overview(self) -> Overview:
        jurors = (*self.pools.a.jurors, *self.pools.b.jurors)
        cost = self.accounting.total.cost_usd if self.accounting else None
        return Overview(self.contract, tuple(dict.fromkeys(jurors)), cost)
