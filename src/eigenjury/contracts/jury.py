"""Juries: every juror gets the same grading prompt and gives one vote per criterion.

Calls go through the engine, so votes are cached, resumable and accounted. Jurors are
asked at a fixed temperature and seed (where the provider honours them). A reply
without a readable verdict gets one repair request; if that fails too, the vote is
recorded as unparseable (it counts as not C). A failed call is recorded as an error
vote, never turned into a grade. Local models are scored over the two allowed
verdict lines (or constrained by a grammar when criteria are batched), so they always
give a readable vote. A served juror (HTTP) asked about one criterion is also given the
two verdict lines as choices, so its endpoint returns a structured verdict (reasons
first) where it supports one; each vote keeps how its first reply gave the verdict.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eigenjury.contracts.prompts import juror_request, repair_request
from eigenjury.contracts.rules import GRADE_CHOICES, parse_grade, parse_grades, passes
from eigenjury.contracts.schema import Criterion, Task
from eigenjury.engine import Call, CallResult, Engine
from eigenjury.engine.store import spec_json
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion
from eigenjury.models.verdict_format import VerdictFormat, VerdictMode, verdict_mode


def juror_names(bases: Sequence[str]) -> list[tuple[str, int]]:
    """(name, sample) per juror: a repeated model is `base#2`, `base#3`, ..., each its
    own sample, so it is asked separately rather than answered from the cache."""
    seen: Counter[str] = Counter()
    out = []
    for base in bases:
        seen[base] += 1
        n = seen[base]
        out.append((base if n == 1 else f"{base}#{n}", n - 1))
    return out


@dataclass(frozen=True)
class Juror:
    name: str
    spec: ModelSpec
    # The same model twice on a jury: distinct calls, not one cached answer, and distinct
    # seeds, or a server that honours the seed would give every copy the same reply.
    sample: int = 0

    @property
    def constrained(self) -> bool:
        return self.spec.provider == "local"


@dataclass(frozen=True)
class Jury:
    jurors: tuple[Juror, ...]
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 1024
    batch_criteria: bool = False  # grade all of a task's criteria in one call per juror
    verdict_format: VerdictFormat = "auto"  # how served jurors give a verdict

    @classmethod
    def from_specs(
        cls,
        specs: Sequence[str | ModelSpec],
        *,
        temperature: float = 0.0,
        seed: int = 0,
        max_tokens: int = 1024,
        batch_criteria: bool = False,
        verdict_format: VerdictFormat = "auto",
        names: Sequence[str | None] | None = None,
    ) -> Jury:
        """Jurors named by `names` where given (NAME=SPEC on the command line), else by
        their spec; a repeated name is `name#2`, `name#3`, ... Each further juror of one
        model is its own sample whatever it is called (`g1=M`, `g2=M` are two samples of
        M, not one reply from the store counted twice)."""
        parsed = [v if isinstance(v, ModelSpec) else ModelSpec.parse(v) for v in specs]
        if not parsed:
            raise ValueError("a jury needs at least one juror")
        given = list(names) if names is not None else [None] * len(parsed)
        bases = [name or str(spec) for name, spec in zip(given, parsed, strict=True)]
        seats: Counter[str] = Counter()
        samples = []
        for spec in parsed:  # by what the store keys (two spellings of one endpoint: one)
            samples.append(seats[spec_json(spec)])
            seats[spec_json(spec)] += 1
        jurors = (
            Juror(name, spec, sample)
            for spec, (name, _), sample in zip(parsed, juror_names(bases), samples, strict=True)
        )
        return cls(tuple(jurors), temperature, seed, max_tokens, batch_criteria, verdict_format)

    @property
    def size(self) -> int:
        return len(self.jurors)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.jurors)

    @property
    def specs(self) -> tuple[ModelSpec, ...]:
        return tuple(j.spec for j in self.jurors)

    def warnings(self, repeats: int = 1) -> list[str]:
        """A model on the jury more than once, or asked `repeats` times, at temperature 0
        decodes greedily, so its copies give the same reply (whatever their seeds): they
        are one opinion counted several times, and a split between them cannot happen."""
        if self.temperature > 0:
            return []
        repeated = (
            [
                f"each juror is asked {repeats} times (the contract's repeats) at temperature "
                "0: greedy decoding gives the same reply each time, so the repeats add no "
                "information; set a juror temperature above 0"
            ]
            if repeats > 1
            else []
        )
        seats = Counter(spec_json(j.spec) for j in self.jurors)
        named = {spec_json(j.spec): str(j.spec) for j in self.jurors}
        return [
            f"the juror {named[seat]} sits on the jury {n} times at temperature 0: greedy "
            f"decoding gives its copies the same reply, so their votes are one opinion "
            f"counted {n} times and a unanimous vote is no consensus; use different models, "
            "or a temperature above 0"
            for seat, n in seats.items()
            if n > 1
        ] + repeated


@dataclass(frozen=True, slots=True)
class Vote:
    """One juror's vote on one criterion, with what it cost.

    Token, latency and cost figures are those of the call (and its repair, if any);
    `share` is 1 / the number of criteria that call graded, for apportioning them.
    `verdict_mode` is how the first reply gave its verdict (None: the call failed) and
    `first_read` whether it gave this criterion's grade, before any repair."""

    juror: str
    grade: str | None  # "C", "I", or None: unparseable, or the call failed
    text: str | None
    retry_text: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    latency_s: float = 0.0
    cost_usd: float | None = None
    attempts: int = 1
    error: str | None = None
    cached: bool = False
    share: float = 1.0
    verdict_mode: VerdictMode | None = None
    first_read: bool = False
    repeat: int = 0  # which of the juror's answers, where the contract asks for repeats
    text_digest: int | None = None  # the first reply's hash, where its text was let go

    @property
    def reply_digest(self) -> int | None:
        """Tells the first replies apart, with or without their text."""
        return hash(self.text) if self.text is not None else self.text_digest

    def without_text(self) -> Vote:
        """The vote without its replies' text (a large grading keeps them in its trace)."""
        return replace(self, text=None, retry_text=None, text_digest=self.reply_digest)

    @property
    def unparsed(self) -> bool:
        return self.grade is None and self.error is None

    @property
    def apportioned_cost(self) -> float | None:
        return None if self.cost_usd is None else self.cost_usd * self.share


def c_votes(votes: Sequence[Vote]) -> int:
    return sum(v.grade == "C" for v in votes)


def counted_c(votes: Sequence[Vote], negative: bool = False) -> int:
    """The votes that count as C: the C votes, and on a negative criterion also the
    unread and failed ones (a vote nobody could read never spares the reply a penalty,
    as on a positive criterion it never earns points)."""
    unread = sum(v.grade is None for v in votes) if negative else 0
    return c_votes(votes) + unread


def majority(votes: Sequence[Vote], negative: bool = False) -> bool:
    """The jury's outcome: strict majority of the votes counted as C (a tie fails)."""
    return passes(counted_c(votes, negative), len(votes))


@dataclass(frozen=True)
class Ballot:
    """What a jury is asked to grade: criteria of one task for one submission."""

    task: Task
    reference: str | None
    submission: str
    criteria: tuple[Criterion, ...]


def criterion_groups(
    task: Task, criteria: tuple[Criterion, ...], batch: bool
) -> list[tuple[Criterion, ...]]:
    """What one juror call grades: all of the task's `criteria` where the jury batches
    them (`batch`) or the task allows it, else one criterion a call."""
    if (batch or task.evaluation.batch_criteria) and criteria:
        return [criteria]
    return [(c,) for c in criteria]


REPEAT_STRIDE = 1000  # more than the copies of one model a jury holds


def repeat_sample(juror: Juror, repeat: int) -> int:
    """The store's sample (and the seed's offset) of a juror's `repeat`-th answer: its
    own for the first, and a stride apart for the others, so no two answers are one
    cached reply and a rerun with more jurors or repeats finds every answer it had."""
    return juror.sample + repeat * REPEAT_STRIDE


def read_grades(text: str, group: tuple[Criterion, ...]) -> dict[str, str | None]:
    if len(group) == 1:
        return {group[0].id: parse_grade(text)}
    return parse_grades(text, [c.id for c in group])


@dataclass
class _Asked:
    """One juror's question on a group of criteria of a poll's ballot, and its replies
    (kept without their requests, which are built again for a repair)."""

    poll: Poll
    juror: Juror
    group: tuple[Criterion, ...]
    repeat: int = 0
    first: Completion | None = None
    error: str | None = None
    cached: bool = False
    retry: Completion | None = None
    retried: bool = False

    @property
    def sample(self) -> int:
        return repeat_sample(self.juror, self.repeat)

    def request(self) -> ChatRequest:
        ballot, jury = self.poll.ballot, self.poll.jury
        return juror_request(
            ballot.task,
            ballot.reference,
            ballot.submission,
            self.group,
            constrained=self.juror.constrained,
            temperature=jury.temperature,
            seed=jury.seed + self.sample,  # a repeated model or answer draws anew, not one reply
            max_tokens=jury.max_tokens,
            verdict_format=jury.verdict_format if self.juror.spec.served else None,
        )

    def call(self) -> Call:
        return Call(self.juror.spec, self.request(), self.sample, self.poll.role, tag=self)

    def answered(self, result: CallResult) -> Call | None:
        """Take the first reply; the repair call to make where it left a grade unread."""
        self.first, self.cached = result.completion, result.cached
        if self.first is None:
            self.error = f"{result.error_kind}: {result.error_message}"
            return None
        if self.juror.constrained or None not in read_grades(self.first.text, self.group).values():
            return None
        request = repair_request(self.request(), self.first.text, self.group)
        return Call(self.juror.spec, request, self.sample, "juror-retry", tag=self)

    def repaired(self, result: CallResult) -> None:
        self.retry, self.retried = result.completion, True
        self.cached = self.cached and result.cached

    def votes(self) -> dict[str, Vote]:
        if self.first is None:
            return votes_from_replies(
                self.juror.name, self.group, None, error=self.error, repeat=self.repeat
            )
        return votes_from_replies(
            self.juror.name,
            self.group,
            self.first,
            retry=self.retry,
            retried=self.retried,
            cached=self.cached,
            repeat=self.repeat,
        )


@dataclass
class Poll:
    """A jury's questions on one ballot (each juror, each group of criteria, each
    repeat), and its votes once every question has its final reply: the first, or the
    repair of one that left a grade unread. `key` is the caller's."""

    ballot: Ballot
    jury: Jury
    repeats: int = 1
    key: Any = None
    role: str = "juror"  # "escalation": a cascade's second jury, asked where the first was unsure
    asked: list[_Asked] = field(default_factory=list)
    waiting: int = 0  # questions without their final reply

    @property
    def groups(self) -> list[tuple[Criterion, ...]]:
        """The criteria each call grades."""
        return criterion_groups(self.ballot.task, self.ballot.criteria, self.jury.batch_criteria)

    @property
    def size(self) -> int:
        """How many first calls the poll makes."""
        return len(self.groups) * self.jury.size * self.repeats

    def calls(self) -> Iterator[Call]:
        """The first calls, each request built as the engine reads it (a contract's
        prompts can be long)."""
        self.asked = [
            _Asked(self, juror, group, r)
            for group in self.groups
            for juror in self.jury.jurors
            for r in range(self.repeats)
        ]
        self.waiting = len(self.asked)
        return (a.call() for a in self.asked)

    def votes(self) -> dict[str, list[Vote]]:
        """Criterion id -> the jury's votes in juror order (each juror's repeats together)."""
        out: dict[str, list[Vote]] = {c.id: [] for c in self.ballot.criteria}
        for a in self.asked:
            for criterion_id, v in a.votes().items():
                out[criterion_id].append(v)
        return out


async def poll(
    engine: Engine,
    polls: Iterable[Poll],
    *,
    total: int | None,
    finished: Callable[[Poll], Iterable[Poll]],
) -> None:
    """Every poll through one engine stream: first calls as the engine reads them,
    a repair as soon as a reply needs one; `finished(p)` is called once poll `p` has
    every final reply (its votes in `p.votes()`), and the polls it returns (a cascade's
    second jury) are asked in the same stream. So a poll's replies are held only while
    it is open, not until every poll is done. `total`: the first calls, for progress."""
    ready: collections.deque[Call] = collections.deque()  # repairs and follow-up polls
    wake = asyncio.Event()
    open_polls = 0

    def opened(p: Poll) -> Iterator[Call]:
        nonlocal open_polls
        calls = p.calls()
        if not p.asked:
            raise ValueError("a poll needs at least one question")
        open_polls += 1
        return calls

    async def calls() -> AsyncIterator[Call]:
        for p in polls:
            for call in opened(p):
                while ready:  # the open polls first: they free their replies sooner
                    yield ready.popleft()
                yield call
        while ready or open_polls:
            while ready:
                yield ready.popleft()
            if open_polls:
                wake.clear()
                await wake.wait()

    stream = engine.stream(calls(), ordered=False, total=total)
    async with contextlib.aclosing(stream) as results:
        async for result in results:
            a: _Asked = result.call.tag
            if result.call.role == "juror-retry":
                a.repaired(result)
            else:
                repair = a.answered(result)
                if repair is not None:
                    ready.append(repair)
                    wake.set()
                    continue
            a.poll.waiting -= 1
            if a.poll.waiting:
                continue
            for follow in finished(a.poll):
                ready.extend(opened(follow))
            a.poll.asked = []  # its replies are the caller's now
            open_polls -= 1
            wake.set()


def votes_from_replies(
    juror: str,
    group: tuple[Criterion, ...],
    first: Completion | None,
    *,
    error: str | None = None,
    retry: Completion | None = None,
    retried: bool = False,
    cached: bool = False,
    repeat: int = 0,
) -> dict[str, Vote]:
    """One juror's votes on a group of criteria from its reply and its repair reply
    (a grade the first reply gave is kept; the repair fills only what was missing)."""
    share = 1.0 / len(group)
    if first is None:
        return {
            c.id: Vote(juror, None, None, error=error, share=share, repeat=repeat) for c in group
        }
    grades = read_grades(first.text, group)
    mode = verdict_mode(first.text, first.choice_logprobs is not None, GRADE_CHOICES)
    read = {k: g is not None for k, g in grades.items()}
    replies = [first] if retry is None else [first, retry]
    if retry is not None:
        repaired = read_grades(retry.text, group)
        grades = {k: g if g is not None else repaired[k] for k, g in grades.items()}
    costs = [c.cost_usd for c in replies]
    cost = None if any(c is None for c in costs) else sum(c for c in costs if c is not None)
    return {
        criterion_id: Vote(
            juror,
            grade,
            first.text,
            retry_text=None if retry is None else retry.text,
            input_tokens=sum(c.usage.input_tokens for c in replies),
            output_tokens=sum(c.usage.output_tokens for c in replies),
            latency_s=sum(c.latency_s for c in replies),
            cost_usd=cost,
            attempts=2 if retried else 1,
            cached=cached,
            share=share,
            verdict_mode=mode,
            first_read=read[criterion_id],
            repeat=repeat,
        )
        for criterion_id, grade in grades.items()
    }
