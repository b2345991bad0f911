"""The records of contracts: a grading run (results.json, with its trace) and a jury
comparison (comparison.json).

Field names, order and values are those eigenjury 0.1 wrote, so its files still read.
Fields that 0.1 left out when they did not apply (a task's error, a criterion's votes,
the cascade) are still left out rather than written as null: `Sparse` parts say which.
Pydantic only: the viewer and `read_any_record` import this module.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from eigenjury.records import AccountingRecord, Overview, Part, Record, Sparse, VerdictModes


class Estimate(Part):
    """A bootstrap estimate (stats.agreement.Estimate.record()); None where undefined."""

    value: float | None
    ci: tuple[float | None, float | None]


class JuryPart(Sparse):
    """The jury's names and settings; only `jurors` (empty) when no criterion needs one.
    `verdict_format` only where it was forced (not "auto")."""

    OMITTED = frozenset({"temperature", "seed", "max_tokens", "batch_criteria", "verdict_format"})

    jurors: list[str]
    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    batch_criteria: bool | None = None
    verdict_format: str | None = None


class Escalation(JuryPart):
    """The cascade's second jury, and how close to flipping a first outcome escalates."""

    margin: int


class CandidateSummary(Part):
    candidate: str
    tasks: int
    mean_score: Estimate
    pass_rate: Estimate
    split_criteria: int
    judged_criteria: int
    incomplete: int
    jury_cost_usd: float | None
    jury_output_tokens: int


class VoteCounts(Part):
    C: int
    I: int  # noqa: E741  (the grade letter, as written)
    unparsed: int
    error: int


class CriterionOutcome(Sparse):
    """A criterion's outcome; `votes` and `split` only where a jury grades it, `error`
    only where its grader (without a model) failed to decide."""

    OMITTED = frozenset({"votes", "split", "escalated", "error"})

    id: str = Field(min_length=1)
    grader: str
    weight: float
    passed: bool
    awarded: float
    votes: VoteCounts | None = None
    split: bool | None = None
    escalated: bool | None = None  # true where the cascade's second jury decided
    error: str | None = None  # the grader raised, exited, timed out or returned no verdict

    @property
    def by_jury(self) -> bool:
        return self.grader == "llm_judge"


class TaskOutcome(Sparse):
    """One submission graded: score, criteria, and what grading (and making) it cost."""

    OMITTED = frozenset({"error"})

    task_id: str = Field(min_length=1)
    candidate: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=100.0)
    passed: bool
    reward: float
    threshold: float
    complete: bool  # every call and grader it rests on succeeded (else a rerun may change it)
    criteria: list[CriterionOutcome]
    error: str | None = None  # the candidate's call failed
    jury_cost_usd: float | None
    jury_input_tokens: int
    jury_output_tokens: int
    jury_calls: int | float  # calls apportioned over the criteria they graded
    candidate_cost_usd: float | None
    candidate_output_tokens: int
    submission: str | None = None  # None: the call failed, or a 0.1 file


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
    candidate: str
    criterion_id: str
    stage: str  # "jury", "first" or "escalated" (a cascade), or the grader's name
    juror: str | None
    grade: str | None
    weight: float
    awarded: float
    input_tokens: int | None = None
    output_tokens: int | None = None
    latency_s: float | None = None
    cost_usd: float | None = None
    criteria_in_call: int | None = None
    attempts: int | None = None
    cached: bool | None = None
    error: str | None = None
    text: str | None = None
    retry_text: str | None = None

    @model_serializer(mode="wrap")
    def _omit_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.juror is None:
            return {
                k: v
                for k, v in data.items()
                if k not in self.CALL_FIELDS or (k == "error" and v is not None)
            }
        return data


class GradingRecord(Sparse, Record):
    """A grading run: results.json. Its trace (`judgements`, one per vote or grader
    decision) is written beside it as trace.jsonl, not into results.json. `verdicts`:
    per served juror (HTTP), how its first replies gave their verdicts, one per vote."""

    KIND: ClassVar[str] = "grading"
    FILE: ClassVar[str] = "results.json"
    OMITTED = frozenset({"escalate_to", "accounting", "verdicts"})

    kind: str = KIND
    contract: str
    jury: JuryPart
    escalate_to: Escalation | None = None
    summary: list[CandidateSummary]
    tasks: list[TaskOutcome]
    warnings: list[str] = Field(default_factory=list)
    verdicts: dict[str, VerdictModes] | None = None
    accounting: AccountingRecord | None = None  # none for each pool of a jury comparison
    judgements: list[Judgement] = Field(default_factory=list, exclude=True, repr=False)

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> bool:
        return {"contract", "jury", "tasks"} <= data.keys()

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
    size: int


class Pools(Part):
    a: Pool
    b: Pool


class ComparisonSettings(Part):
    rounds: int
    ci: float
    seed: int
    cascade_margin: int


class BySide(Part):
    a: Estimate
    b: Estimate


class Figures(Part):
    """Per jury-graded criterion: cost, juror seconds and output tokens."""

    cost_usd: Estimate
    latency_s: Estimate
    output_tokens: Estimate


class FiguresBySide(Part):
    a: Figures
    b: Figures


class Cascade(Part):
    """Pool A first, escalating to pool B, evaluated from the votes both gave."""

    first: str
    escalate_to: str
    margin: int
    escalation_rate: Estimate
    agreement_with_b: Estimate
    task_score_pearson_with_b: Estimate
    identical_task_scores_with_b: Estimate
    relative_to_b: Figures


class JuryComparisonRecord(Sparse, Record):
    """Two juries on the same submissions (contracts.compare.compare_pools), with the
    cascade; the criterion-level parts are absent when no criterion has a jury."""

    KIND: ClassVar[str] = "jury-comparison"
    FILE: ClassVar[str] = "comparison.json"
    OMITTED = frozenset(
        {
            "note",
            "agreement",
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
    pools: Pools
    submissions: int
    criteria: int
    settings: ComparisonSettings
    task_score_pearson: Estimate
    identical_task_scores: Estimate
    task_pass_agreement: Estimate
    note: str | None = None
    agreement: Estimate | None = None
    agreement_common: Estimate | None = None
    criteria_common: int | None = None
    split_rate: BySide | None = None
    pass_rate: BySide | None = None
    per_criterion: FiguresBySide | None = None
    a_relative_to_b: Figures | None = None
    cascade: Cascade | None = None
    contract: str
    accounting: AccountingRecord | None = None
    incomplete_submissions: int

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> bool:
        return {"pools", "task_score_pearson"} <= data.keys()

    def overview(self) -> Overview:
        jurors = (*self.pools.a.jurors, *self.pools.b.jurors)
        cost = self.accounting.total.cost_usd if self.accounting else None
        return Overview(self.contract, tuple(dict.fromkeys(jurors)), cost)
