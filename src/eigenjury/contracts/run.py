"""The contracts methods in the one shape: `run` grades submissions into a
GradingRecord, `compare` grades them with two juries into a JuryComparisonRecord.
Both only call models through the engine they are given; they write and print nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from eigenjury.contracts.bundle import ContractSource
from eigenjury.contracts.compare import compare_pools
from eigenjury.contracts.grading import Submission, generate_submissions, grade
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.record import GradingRecord, JudgementLines, JuryComparisonRecord
from eigenjury.contracts.sandbox import PYTHON_GRADER_TIMEOUT_S
from eigenjury.contracts.trace import grading_record, kept_in
from eigenjury.engine import Engine
from eigenjury.models.spec import ModelSpec
from eigenjury.records import now


@dataclass(frozen=True)
class Answers:
    """Where the submissions come from: given ones, or candidates that answer each task."""

    given: tuple[Submission, ...] | None = None
    candidates: tuple[ModelSpec, ...] = ()
    names: tuple[str, ...] | None = None  # each candidate's (NAME=SPEC); default its spec
    temperature: float = 0.0
    max_tokens: int = 1024

    def named(self) -> dict[str, str] | None:
        """Each candidate's spec by its short name, where some was given one."""
        if self.names is None:
            return None
        specs = {name: str(spec) for name, spec in zip(self.names, self.candidates, strict=True)}
        return specs if any(name != spec for name, spec in specs.items()) else None

    async def submissions(self, engine: Engine, source: ContractSource) -> list[Submission]:
        if self.given is not None:
            return list(self.given)
        return await generate_submissions(
            engine,
            source,
            self.candidates,
            names=self.names,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )


@dataclass(frozen=True)
class GradingInputs:
    source: ContractSource
    contract: str  # as the user named it (recorded)
    answers: Answers
    jury: Jury | None
    escalate_to: Jury | None = None
    escalate_margin: int = 1
    grader_timeout_s: float = PYTHON_GRADER_TIMEOUT_S  # per call of a python grader
    undecided_margin: float = 0.0  # a criterion's C share this close to 1/2 is undecided

    @property
    def specs(self) -> list[ModelSpec]:
        """Every model the run may call."""
        juries = (j for j in (self.jury, self.escalate_to) if j is not None)
        return [*self.answers.candidates, *(s for jury in juries for s in jury.specs)]


async def run(
    engine: Engine, inputs: GradingInputs, trace: JudgementLines | None = None
) -> GradingRecord:
    """Grade every submission (cascading where asked); the record, with its judgements
    in `trace` (a file on disk for a large grading; default: in memory), each
    submission's written as soon as it is graded."""
    trace = trace if trace is not None else JudgementLines()
    results = await grade(
        engine,
        inputs.source,
        await inputs.answers.submissions(engine, inputs.source),
        inputs.jury,
        escalate_to=inputs.escalate_to,
        escalate_margin=inputs.escalate_margin,
        grader_timeout_s=inputs.grader_timeout_s,
        graded=kept_in(trace),
    )
    return grading_record(
        results,
        contract=inputs.contract,
        candidates=inputs.answers.named(),
        jury=inputs.jury,
        escalate_to=inputs.escalate_to,
        escalate_margin=inputs.escalate_margin,
        warnings=inputs.source.contract.warnings(),
        undecided_margin=inputs.undecided_margin,
        repeats=inputs.source.contract.repeats,
        trace=trace,
    )


@dataclass(frozen=True)
class ComparisonInputs:
    source: ContractSource
    contract: str
    answers: Answers
    pool_a: Jury
    pool_b: Jury
    margin: int = 1  # of the cascade evaluated from both pools' votes
    rounds: int = 1000
    ci: float = 0.95
    seed: int = 0
    grader_timeout_s: float = PYTHON_GRADER_TIMEOUT_S

    @property
    def specs(self) -> list[ModelSpec]:
        return [*self.answers.candidates, *self.pool_a.specs, *self.pool_b.specs]


@dataclass(frozen=True)
class Compared:
    """A jury comparison and the grading by each pool it rests on."""

    record: JuryComparisonRecord
    pool_a: GradingRecord
    pool_b: GradingRecord


async def compare(
    engine: Engine,
    inputs: ComparisonInputs,
    traces: tuple[JudgementLines, JudgementLines] | None = None,
) -> Compared:
    """Both pools grade the same submissions (one after the other: one engine run at a
    time); their agreement, cost and the cascade, with bootstrap intervals. Each pool's
    judgements go to its trace in `traces` (default: in memory) as it grades."""
    submissions = await inputs.answers.submissions(engine, inputs.source)
    timeout = inputs.grader_timeout_s
    trace_a, trace_b = traces if traces is not None else (JudgementLines(), JudgementLines())
    results_a = await grade(
        engine,
        inputs.source,
        submissions,
        inputs.pool_a,
        grader_timeout_s=timeout,
        graded=kept_in(trace_a),
    )
    results_b = await grade(
        engine,
        inputs.source,
        submissions,
        inputs.pool_b,
        grader_timeout_s=timeout,
        graded=kept_in(trace_b),
    )
    statistics = compare_pools(
        results_a,
        results_b,
        inputs.pool_a,
        inputs.pool_b,
        margin=inputs.margin,
        rounds=inputs.rounds,
        ci=inputs.ci,
        seed=inputs.seed,
    )
    record = JuryComparisonRecord.model_validate(
        {
            "created": now(),
            **statistics,
            "contract": inputs.contract,
            "incomplete_submissions": sum(not r.complete for r in (*results_a, *results_b)),
        }
    )
    return Compared(
        record,
        *(
            grading_record(
                results,
                contract=inputs.contract,
                jury=pool,
                candidates=inputs.answers.named(),
                repeats=inputs.source.contract.repeats,
                trace=trace,
            )
            for results, pool, trace in (
                (results_a, inputs.pool_a, trace_a),
                (results_b, inputs.pool_b, trace_b),
            )
        ),
    )
