"""The peer-judging protocol through the engine: responses, reflections, comparisons.

Each stage is one engine stream, so every response and reflection is generated once and
reused by every comparison that needs it (the store makes repeats free, across runs
too). Requests are built as the engine asks for them and results are read as they are
committed: each verdict goes to the compact `Outcomes` and each transcript line to the
run's transcript as it arrives, so memory does not grow with the number of calls.
A comparison whose judge reply cannot be read gets one short repair request (when
enabled); if that fails too it is a parse failure of that judge, never a tie.
In likelihood mode (peer.likelihood) judges score each reply instead of comparing,
and every comparison's verdict follows from its two replies' scores (the higher wins),
with no call of its own.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eigenjury.engine.accounting import Accounting
from eigenjury.engine.engine import Call, CallResult, Engine
from eigenjury.models.types import ChatRequest
from eigenjury.models.verdict_format import VerdictMode, verdict_mode
from eigenjury.peer.config import Judging, Member
from eigenjury.peer.data import Constitution
from eigenjury.peer.designs import Comparison
from eigenjury.peer.likelihood import SPEAKERS, likelihood_verdict, reply_score
from eigenjury.peer.outcomes import Outcome, Outcomes
from eigenjury.peer.parsing import (
    LABELS,
    graded_labels,
    parse_criteria,
    parse_single,
    soft_verdict,
)
from eigenjury.peer.prompts import (
    comparison_request,
    evaluee_request,
    reflection_request,
    repair_request,
    speaker_request,
)
from eigenjury.peer.record import TranscriptLine
from eigenjury.stats.verdicts import FIRST, SECOND, TIE

Persona = Callable[[str, str], str | None]  # (member, role "evaluee" | "judge") -> system prompt
Transcript = Callable[[TranscriptLine], None]  # where each line goes as it is made
Job = tuple[str, dict[str, Any], ChatRequest, Any]  # member, transcript fields, request, tag
SAMPLES = 6  # judgments the static report shows, spread over judges and scenarios


def _nowhere(line: TranscriptLine) -> None:
    """A transcript nobody keeps (a control run, a library caller)."""


@dataclass
class Collector:
    """Runs the protocol for any set of comparisons; accounts for every call by member
    and role, and sends every call's transcript line to `transcript`."""

    engine: Engine
    members: dict[str, Member]
    constitution: Constitution
    scenarios: dict[str, str]  # id -> text
    judging: Judging
    persona: Persona
    # objective mode: per question, the option letters a local evaluee picks from
    answer_choices: dict[str, tuple[str, ...]] | None = None
    transcript: Transcript = _nowhere
    accounting: Accounting = field(default_factory=Accounting)  # by member and role
    # per judge, its first read judgments on SAMPLES distinct scenarios
    samples: dict[str, list[TranscriptLine]] = field(default_factory=dict)
    responses: dict[tuple[str, str], str | None] = field(default_factory=dict)
    reflections: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    # likelihood mode: (judge, evaluee, scenario) -> the reply's score (nats per token)
    # and whether its two scoring calls came from the store
    scores: dict[tuple[str, str, str], tuple[float | None, bool]] = field(default_factory=dict)
    # given answers that lose every comparison by the config's rule, (member, scenario)
    # -> what they are ("empty", "an error marker")
    forfeits: dict[tuple[str, str], str] = field(default_factory=dict)
    # comparisons decided by that rule, by their index in the outcomes: their verdicts
    # count in the win rates, never in the fit or a judge's statistics (a rule is no
    # judge: it would look consistent, and an empty reply's length would look disliked)
    ruled: dict[int, Outcome] = field(default_factory=dict)
    # members that give answers -> the file they came from (their replies are in
    # `responses` from the start; `_respond` writes their transcript lines once)
    sources: dict[str, str] = field(default_factory=dict)
    _shown: set[tuple[str, str]] = field(default_factory=set)
    parse_failures: Counter[str] = field(default_factory=Counter)
    # per served judge, (verdict mode, read) of its first replies to comparisons
    verdict_modes: dict[str, Counter[tuple[VerdictMode, bool]]] = field(default_factory=dict)

    @property
    def per_criterion(self) -> bool:
        return self.judging.mode == "criteria"

    def _constrained(self, judge: str) -> bool:
        return self.members[judge].spec.provider == "local"

    async def _stream(
        self, role: str, jobs: Iterable[Job]
    ) -> AsyncIterator[tuple[CallResult, TranscriptLine, Any]]:
        """One engine stream of `jobs`, read in order; each result comes with its
        transcript line (which `_line` then records, once the caller has filled in what
        it read) and its job's tag."""
        calls = (
            Call(self.members[member].spec, request, role=role, tag=(member, fields, tag))
            for member, fields, request, tag in jobs
        )
        async with contextlib.aclosing(self.engine.stream(calls)) as results:
            async for result in results:
                member, fields, tag = result.call.tag
                completion = result.completion
                self.accounting.add(member, role, completion, result.error_kind, result.cached)
                line = TranscriptLine(
                    role=role,
                    member=member,
                    **fields,
                    messages=[[m.role, m.content] for m in result.call.request.messages],
                    reply=completion.text if completion else None,
                    choice_logprobs=dict(completion.choice_logprobs)
                    if completion and completion.choice_logprobs
                    else None,
                    error=None if result.ok else f"{result.error_kind}: {result.error_message}",
                    cached=result.cached,
                )
                yield result, line, tag

    def _line(self, line: TranscriptLine) -> None:
        self.transcript(line)
        if line.role in ("comparison", "repair") and line.verdicts is not None and not line.rule:
            kept = self.samples.setdefault(line.member, [])
            if len(kept) < SAMPLES and all(k.scenario != line.scenario for k in kept):
                kept.append(line)

    def sample_lines(self, n: int = SAMPLES) -> list[TranscriptLine]:
        """`n` read judgments for the static report: judges in turn, each on a scenario
        not shown yet where it has one."""
        queues = {judge: list(lines) for judge, lines in sorted(self.samples.items())}
        picked: list[TranscriptLine] = []
        shown: set[str] = set()
        while len(picked) < n and any(queues.values()):
            for lines in queues.values():
                if not lines or len(picked) == n:
                    continue
                fresh = next((k for k in lines if k.scenario not in shown), lines[0])
                lines.remove(fresh)
                picked.append(fresh)
                shown.add(fresh.scenario)
        return picked

    async def _respond(self, needed: set[tuple[str, str]]) -> None:
        given = sorted(k for k in needed - self._shown if k[0] in self.sources)
        for m, s in given:  # read, never generated: in the transcript as where they came from
            self._shown.add((m, s))
            self._line(
                TranscriptLine(
                    role="evaluee",
                    member=m,
                    scenario=s,
                    messages=[["user", self.scenarios[s]]],
                    reply=self.responses[m, s],
                    choice_logprobs=None,
                    error=None,
                    cached=False,
                    source=self.sources[m],
                )
            )
        todo = sorted(needed - self.responses.keys())
        jobs = ((m, {"scenario": s}, self._evaluee(m, s), (m, s)) for m, s in todo)
        async for result, line, (m, s) in self._stream("evaluee", jobs):
            opening = self.members[m].opening
            text = result.completion.text if result.completion else None
            if text is not None and opening:  # the reply the judges read, as the transcript's
                text = line.reply = opening + text  # (the continuation has its own space)
            self.responses[m, s] = text
            self._line(line)

    def _evaluee(self, member: str, scenario: str) -> ChatRequest:
        request = evaluee_request(
            self.persona(member, "evaluee"),
            self.scenarios[scenario],
            self.judging.evaluee,
            self.members[member].opening,
        )
        if self.answer_choices is None or not self._constrained(member):
            return request
        return replace(request, choices=self.answer_choices[scenario])

    async def _reflect(self, needed: set[tuple[str, str, str]]) -> None:
        todo = sorted(
            k
            for k in needed - self.reflections.keys()
            if self.responses.get((k[1], k[2])) is not None
        )
        jobs = (
            (
                j,
                {"scenario": s, "evaluee": e},
                reflection_request(
                    self.persona(j, "judge"),
                    self.constitution,
                    self.scenarios[s],
                    self.responses[e, s] or "",
                    self.judging.reflection,
                ),
                (j, e, s),
            )
            for j, e, s in todo
        )
        async for result, line, key in self._stream("reflection", jobs):
            self.reflections[key] = result.completion.text if result.completion else None
            self._line(line)

    async def _score(self, needed: set[tuple[str, str, str]]) -> None:
        """Likelihood mode: score each (judge, evaluee, scenario) reply once, in an order
        where consecutive calls share their prompt (judge, scenario, speaker)."""
        todo = [
            k
            for k in sorted(needed - self.scores.keys())
            if self.responses.get((k[1], k[2])) is not None
        ]
        order = sorted((j, s, speaker, e) for j, e, s in todo for speaker in SPEAKERS)
        jobs = (
            (
                j,
                {"scenario": s, "evaluee": e},
                speaker_request(
                    self.persona(j, "judge"),
                    self.constitution,
                    self.scenarios[s],
                    self.responses[e, s] or "",
                    speaker,
                ),
                (j, e, s, speaker),
            )
            for j, s, speaker, e in order
        )
        # key -> (the reply's log-likelihood, its tokens, cached); a scoring call has
        # the reply as its one choice, so the call's output tokens are the reply's
        loglik: dict[tuple[str, str, str, str], tuple[float | None, int, bool]] = {}
        async for result, line, key in self._stream("score", jobs):
            completion = result.completion
            scored = completion.choice_logprobs if completion else None
            value = next(iter(scored.values())) if scored else None
            tokens = completion.usage.output_tokens if completion else 0
            loglik[key] = (value, tokens, result.cached)
            line.tokens = tokens if value is not None else None
            self._line(line)
        for j, e, s in todo:
            (follows, tokens, cached_f), (breaks, _, cached_b) = (
                loglik[j, e, s, x] for x in SPEAKERS
            )
            score = None
            if follows is not None and breaks is not None and tokens > 0:
                score = reply_score(follows, breaks, tokens)
            self.scores[j, e, s] = (score, cached_f and cached_b)

    def _by_likelihood(self, outcome: Outcome) -> None:
        """A comparison decided by its two replies' scores (a transcript line records it)."""
        c = outcome.comparison
        (first, cached_1), (second, cached_2) = (
            self.scores[c.judge, m, c.scenario] for m in (c.first, c.second)
        )
        line = TranscriptLine(
            role="comparison",
            member=c.judge,
            **_fields(c),
            messages=[],
            reply=None,
            choice_logprobs=None,
            error=None,
            cached=cached_1 and cached_2,
        )
        if first is None or second is None:
            outcome.failure = line.failure = "judge error"
        else:
            verdict = likelihood_verdict(first, second)
            outcome.verdicts = line.verdicts = [verdict]
            line.reply = {FIRST: "A", SECOND: "B", TIE: "tie"}[verdict]
            line.scores = {"A": first, "B": second}
        self._line(line)

    def _by_rule(self, c: Comparison) -> TranscriptLine | None:
        """A comparison where a given answer loses by the config's rule, decided with no
        call (two such answers tie); None where the judge must decide."""
        first, second = (self.forfeits.get((m, c.scenario)) for m in (c.first, c.second))
        if first is None and second is None:
            return None
        verdict = TIE if first and second else SECOND if first else FIRST
        why = [f"reply {label} {what}" for label, what in (("A", first), ("B", second)) if what]
        n = len(self.constitution.criteria) if self.per_criterion else 1
        return TranscriptLine(
            role="comparison",
            member=c.judge,
            **_fields(c),
            verdicts=[verdict] * n,
            messages=[],
            reply=None,
            choice_logprobs=None,
            error=None,
            cached=False,  # no call: nothing came from the store
            rule=", ".join(why),
        )

    def _comparison(self, c: Comparison) -> ChatRequest:
        first, second = self.responses[c.first, c.scenario], self.responses[c.second, c.scenario]
        notes = None
        if self.judging.reflections:
            notes = (
                self.reflections.get((c.judge, c.first, c.scenario)) or "",
                self.reflections.get((c.judge, c.second, c.scenario)) or "",
            )
        return comparison_request(
            self.persona(c.judge, "judge"),
            self.constitution,
            self.scenarios[c.scenario],
            (first or "", second or ""),
            notes,
            self.judging.judge,
            ties=self.judging.ties,
            per_criterion=self.per_criterion,
            constrained=self._constrained(c.judge),
            served=self.members[c.judge].spec.served,
            verdict_format=self.judging.verdict_format,
            soft=self.judging.soft,
            graded=self.judging.graded,
        )

    def _parse(self, text: str) -> tuple[list[int], bool] | None:
        """The verdicts in a judge's reply, and whether a graded one was strong."""
        ties = self.judging.ties
        if self.per_criterion:
            verdicts = parse_criteria(text, len(self.constitution.criteria), ties=ties)
            return None if verdicts is None else (verdicts, False)
        single = parse_single(text, ties=ties, graded=self.judging.graded)
        return None if single is None else ([single[0]], single[1])

    def _read(self, result: CallResult) -> tuple[list[int] | None, str | None, bool]:
        """A judge's verdicts, or why there are none; and whether a graded one was strong."""
        if result.completion is None:
            return None, "judge error", False
        read = self._parse(result.completion.text)
        if read is None:
            return None, "parse", False
        return read[0], None, read[1]

    def _missing(self, c: Comparison) -> str | None:
        """Why comparison `c` cannot be asked (a reply or reflection it needs failed)."""
        if any(self.responses.get((m, c.scenario)) is None for m in (c.first, c.second)):
            return "missing response"
        if self.judging.reflections and any(
            self.reflections.get((c.judge, m, c.scenario)) is None for m in (c.first, c.second)
        ):
            return "missing reflection"
        return None

    async def collect(
        self, comparisons: Sequence[Comparison], outcomes: Outcomes | None = None
    ) -> Outcomes:
        """The outcomes of `comparisons`, in their order (added to `outcomes` if given)."""
        outcomes = Outcomes() if outcomes is None else outcomes
        start = len(outcomes)
        for c in comparisons:
            outcomes.add(Outcome(c))
        await self._respond({(m, c.scenario) for c in comparisons for m in (c.first, c.second)})
        judged = []  # (index, comparison) the judges decide; the rest the answers rule does
        for index, c in enumerate(comparisons, start):
            ruled = self._by_rule(c)
            if ruled is None:
                judged.append((index, c))
            else:
                outcomes.settle(index, Outcome(c, failure="answers rule"))
                self.ruled[index] = Outcome(c, ruled.verdicts)
                self._line(ruled)
        read = {(c.judge, m, c.scenario) for _, c in judged for m in (c.first, c.second)}
        if self.judging.mode == "likelihood":
            await self._score(read)
            for index, c in judged:
                outcome = Outcome(c, failure=self._missing(c))
                if outcome.failure is None:
                    self._by_likelihood(outcome)
                outcomes.settle(index, outcome)
            return outcomes
        if self.judging.reflections:
            await self._reflect(read)

        def jobs() -> Iterable[Job]:
            for index, c in judged:
                missing = self._missing(c)
                if missing is not None:
                    outcomes.settle(index, Outcome(c, failure=missing))
                else:
                    yield c.judge, _fields(c), self._comparison(c), (index, c)

        repairs = []
        labels = graded_labels(self.judging.ties) if self.judging.graded else LABELS
        async for result, line, (index, c) in self._stream("comparison", jobs()):
            line.verdicts, line.failure, strong = self._read(result)
            if self.members[c.judge].spec.served and line.reply is not None:
                scored = line.choice_logprobs is not None
                mode = verdict_mode(line.reply, scored, labels)
                tally = self.verdict_modes.setdefault(c.judge, Counter())
                tally[mode, line.verdicts is not None] += 1
            probs = None
            if self.judging.soft and line.verdicts is not None and line.choice_logprobs:
                probs = soft_verdict(line.choice_logprobs, ties=self.judging.ties)
            outcomes.settle(index, Outcome(c, line.verdicts, probs, line.failure, strong=strong))
            self._line(line)
            repairable = self.judging.repair and not self._constrained(c.judge)
            if line.failure == "parse" and repairable and result.completion is not None:
                repairs.append((index, c, result.completion.text))
            elif line.failure == "parse":
                self.parse_failures[c.judge] += 1
        repair_jobs = (
            (
                c.judge,
                _fields(c),
                repair_request(
                    self._comparison(c),
                    text,
                    ties=self.judging.ties,
                    per_criterion=self.per_criterion,
                    n_criteria=len(self.constitution.criteria),
                    graded=self.judging.graded,
                ),
                (index, c),
            )
            for index, c, text in repairs
        )
        async for result, line, (index, c) in self._stream("repair", repair_jobs):
            line.verdicts, line.failure, strong = self._read(result)
            self._line(line)
            if line.verdicts is not None:
                outcomes.settle(index, Outcome(c, line.verdicts, repaired=True, strong=strong))
            else:
                self.parse_failures[c.judge] += 1
        return outcomes


def _fields(c: Comparison) -> dict[str, Any]:
    return {"scenario": c.scenario, "first": c.first, "second": c.second}
