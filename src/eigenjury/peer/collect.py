"""The peer-judging protocol through the engine: responses, reflections, comparisons.

Each stage is one engine run, so every response and reflection is generated once and
reused by every comparison that needs it (the store makes repeats free, across runs
too). A comparison whose judge reply cannot be read gets one short repair request
(when enabled); if that fails too it is a parse failure of that judge, never a tie.
In likelihood mode (peer.likelihood) judges score each reply instead of comparing,
and every comparison's verdict follows from its two replies' scores, with no call of
its own.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eigenjury.engine.engine import Call, CallResult, Engine
from eigenjury.models.types import ChatRequest
from eigenjury.peer.config import Judging, Member
from eigenjury.peer.data import Constitution
from eigenjury.peer.designs import Comparison
from eigenjury.peer.likelihood import SPEAKERS, verdict_probabilities
from eigenjury.peer.parsing import parse_criteria, parse_verdict, soft_verdict
from eigenjury.peer.prompts import (
    comparison_request,
    evaluee_request,
    reflection_request,
    repair_request,
    speaker_request,
)
from eigenjury.peer.record import TranscriptLine

Persona = Callable[[str, str], str | None]  # (member, role "evaluee" | "judge") -> system prompt


@dataclass
class Outcome:
    """A comparison and what came of it: one verdict per criterion (or one), or a failure;
    with soft verdicts, the judge's probabilities of (tie, first, second) too."""

    comparison: Comparison
    verdicts: list[int] | None = None
    probs: tuple[float, float, float] | None = None
    failure: str | None = None  # "parse", "judge error", "missing response", ...
    repaired: bool = False


@dataclass
class Collector:
    """Runs the protocol for any set of comparisons; keeps every call for accounting."""

    engine: Engine
    members: dict[str, Member]
    constitution: Constitution
    scenarios: dict[str, str]  # id -> text
    judging: Judging
    persona: Persona
    # objective mode: per question, the option letters a local evaluee picks from
    answer_choices: dict[str, tuple[str, ...]] | None = None
    calls: list[tuple[str, CallResult]] = field(default_factory=list)  # (member, result)
    transcripts: list[TranscriptLine] = field(default_factory=list)
    responses: dict[tuple[str, str], str | None] = field(default_factory=dict)
    reflections: dict[tuple[str, str, str], str | None] = field(default_factory=dict)
    # likelihood mode: (judge, evaluee, scenario) -> the reply's score and whether its
    # two scoring calls came from the store
    scores: dict[tuple[str, str, str], tuple[float | None, bool]] = field(default_factory=dict)
    parse_failures: Counter[str] = field(default_factory=Counter)

    @property
    def per_criterion(self) -> bool:
        return self.judging.mode == "criteria"

    def _constrained(self, judge: str) -> bool:
        return self.members[judge].spec.provider == "local"

    async def _run(
        self, role: str, jobs: Sequence[tuple[str, dict[str, Any], ChatRequest]]
    ) -> list[tuple[CallResult, TranscriptLine]]:
        """One engine run; `jobs` are (member, transcript fields, request). Each result
        comes with its transcript line, where a comparison's verdicts are filled in."""
        calls = [Call(self.members[m].spec, request, role=role) for m, _, request in jobs]
        results = await self.engine.run(calls)
        done = []
        for (member, fields, request), result in zip(jobs, results, strict=True):
            self.calls.append((member, result))
            completion = result.completion
            line = TranscriptLine(
                role=role,
                member=member,
                **fields,
                messages=[[m.role, m.content] for m in request.messages],
                reply=completion.text if completion else None,
                choice_logprobs=dict(completion.choice_logprobs)
                if completion and completion.choice_logprobs
                else None,
                error=None if result.ok else f"{result.error_kind}: {result.error_message}",
                cached=result.cached,
            )
            self.transcripts.append(line)
            done.append((result, line))
        return done

    async def _respond(self, needed: set[tuple[str, str]]) -> None:
        todo = sorted(needed - self.responses.keys())
        jobs = [(m, {"scenario": s}, self._evaluee(m, s)) for m, s in todo]
        for (m, s), (result, line) in zip(todo, await self._run("evaluee", jobs), strict=True):
            opening = self.members[m].opening
            text = result.completion.text if result.completion else None
            if text is not None and opening:  # the reply the judges read, as the transcript's
                text = line.reply = opening + text  # (the continuation has its own space)
            self.responses[m, s] = text

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
        jobs = [
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
            )
            for j, e, s in todo
        ]
        for key, (result, _) in zip(todo, await self._run("reflection", jobs), strict=True):
            self.reflections[key] = result.completion.text if result.completion else None

    async def _score(self, needed: set[tuple[str, str, str]]) -> None:
        """Likelihood mode: score each (judge, evaluee, scenario) reply once, in an order
        where consecutive calls share their prompt (judge, scenario, speaker)."""
        todo = [
            k
            for k in sorted(needed - self.scores.keys())
            if self.responses.get((k[1], k[2])) is not None
        ]
        order = sorted((j, s, speaker, e) for j, e, s in todo for speaker in SPEAKERS)
        jobs = [
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
            )
            for j, s, speaker, e in order
        ]
        loglik: dict[tuple[str, str, str, str], tuple[float | None, bool]] = {}
        for (j, s, speaker, e), (result, _) in zip(
            order, await self._run("score", jobs), strict=True
        ):
            scored = result.completion.choice_logprobs if result.completion else None
            value = next(iter(scored.values())) if scored else None
            loglik[j, e, s, speaker] = (value, result.cached)
        for j, e, s in todo:
            (follows, cached_f), (breaks, cached_b) = (loglik[j, e, s, x] for x in SPEAKERS)
            score = None if follows is None or breaks is None else follows - breaks
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
            outcome.probs = verdict_probabilities(first, second)
            label = "A" if outcome.probs[1] >= outcome.probs[2] else "B"
            outcome.verdicts = line.verdicts = [1 if label == "A" else 2]
            line.reply = label
            line.choice_logprobs = {
                name: math.log(p) if p > 0 else -math.inf
                for name, p in zip(("A", "B"), outcome.probs[1:], strict=True)
            }
        self.transcripts.append(line)

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
        )

    def _parse(self, text: str) -> list[int] | None:
        if self.per_criterion:
            return parse_criteria(text, len(self.constitution.criteria), ties=self.judging.ties)
        verdict = parse_verdict(text, ties=self.judging.ties)
        return None if verdict is None else [verdict]

    def _read(self, result: CallResult) -> tuple[list[int] | None, str | None]:
        """A judge's verdicts, or why there are none."""
        if result.completion is None:
            return None, "judge error"
        verdicts = self._parse(result.completion.text)
        return verdicts, None if verdicts is not None else "parse"

    async def collect(self, comparisons: Sequence[Comparison]) -> list[Outcome]:
        """Outcomes in the order of `comparisons`."""
        await self._respond({(m, c.scenario) for c in comparisons for m in (c.first, c.second)})
        if self.judging.mode == "likelihood":
            await self._score(
                {(c.judge, m, c.scenario) for c in comparisons for m in (c.first, c.second)}
            )
            outcomes = [Outcome(c) for c in comparisons]
            for outcome in outcomes:
                c = outcome.comparison
                if any(self.responses.get((m, c.scenario)) is None for m in (c.first, c.second)):
                    outcome.failure = "missing response"
                else:
                    self._by_likelihood(outcome)
            return outcomes
        if self.judging.reflections:
            await self._reflect(
                {(c.judge, m, c.scenario) for c in comparisons for m in (c.first, c.second)}
            )
        outcomes = [Outcome(c) for c in comparisons]
        ready = []
        for outcome in outcomes:
            c = outcome.comparison
            if (
                self.responses.get((c.first, c.scenario)) is None
                or self.responses.get((c.second, c.scenario)) is None
            ):
                outcome.failure = "missing response"
            elif self.judging.reflections and (
                self.reflections.get((c.judge, c.first, c.scenario)) is None
                or self.reflections.get((c.judge, c.second, c.scenario)) is None
            ):
                outcome.failure = "missing reflection"
            else:
                ready.append(outcome)
        requests = [self._comparison(o.comparison) for o in ready]
        jobs = [
            (o.comparison.judge, _fields(o.comparison), r)
            for o, r in zip(ready, requests, strict=True)
        ]
        repairs = []
        for outcome, request, (result, line) in zip(
            ready, requests, await self._run("comparison", jobs), strict=True
        ):
            line.verdicts, line.failure = self._read(result)
            outcome.verdicts, outcome.failure = line.verdicts, line.failure
            if self.judging.soft and line.verdicts is not None and line.choice_logprobs:
                outcome.probs = soft_verdict(line.choice_logprobs, ties=self.judging.ties)
            repairable = self.judging.repair and not self._constrained(outcome.comparison.judge)
            if outcome.failure == "parse" and repairable and result.completion is not None:
                repairs.append((outcome, request, result.completion.text))
        if repairs:
            jobs = [
                (
                    o.comparison.judge,
                    _fields(o.comparison),
                    repair_request(
                        req,
                        text,
                        ties=self.judging.ties,
                        per_criterion=self.per_criterion,
                        n_criteria=len(self.constitution.criteria),
                    ),
                )
                for o, req, text in repairs
            ]
            for (outcome, _, _), (result, line) in zip(
                repairs, await self._run("repair", jobs), strict=True
            ):
                line.verdicts, line.failure = self._read(result)
                if line.verdicts is not None:
                    outcome.verdicts, outcome.failure, outcome.repaired = line.verdicts, None, True
        for outcome in outcomes:
            if outcome.failure == "parse":
                self.parse_failures[outcome.comparison.judge] += 1
        return outcomes


def _fields(c: Comparison) -> dict[str, Any]:
    return {"scenario": c.scenario, "first": c.first, "second": c.second}
