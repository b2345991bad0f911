"""The judges whose sensitivity is measured: a single-score judge and a pairwise one.

Both prompts are written for eigenjury. A served judge (HTTP) is also given the
verdicts as choices, so its endpoint returns a structured verdict (reasons first) where
it supports one; its verdict is read first. Otherwise parsing binds to the LAST verdict
in the reply (a judge may quote the format while reasoning) that is a vote: the format
repeated after it ("for example [[7]]", "[[A>>B]] if A is much better, ...") is not
(models.verdict_format.votes). A reply without one is a failure, returned as None,
and never scored (in particular never as a tie).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eigenjury.bounds.neighbours import JudgedItem
from eigenjury.bounds.scores import SCALES, Scale
from eigenjury.models.types import ChatRequest, Message
from eigenjury.models.verdict_format import VerdictFormat, last_vote, read_structured

_SINGLE_TASK = (
    "You are an impartial judge of answers. Rate how well the response answers the "
    "question, on a scale from 1 (useless or wrong) to 10 (excellent): judge correctness, "
    "helpfulness and clarity of the content; do not reward length, formatting or style for "
    "their own sake. Give a brief justification, then end with your rating in double "
    "square brackets, for example [[7]]."
)
_PAIRWISE_TASK = (
    "You are an impartial judge comparing two answers to the same question. Judge "
    "correctness, helpfulness and clarity of the content; the order of the answers, "
    "their length and their formatting must not influence you. Give a brief "
    "justification, then end with exactly one verdict: [[A>>B]] if A is much better, "
    "[[A>B]] if A is better, [[A=B]] if they are about equal, [[B>A]] if B is better, "
    "[[B>>A]] if B is much better."
)
_RATING = re.compile(r"\[\[\s*(\d{1,2})\s*\]\]")
_VERDICT = re.compile(r"\[\[\s*(A>>B|A>B|A=B|B=A|B>A|B>>A)\s*\]\]")
# Arena-Hard style, 1 (A much better) .. 5 (B much better)
VERDICT_SCORES = {"A>>B": 1.0, "A>B": 2.0, "A=B": 3.0, "B=A": 3.0, "B>A": 4.0, "B>>A": 5.0}
# The verdicts a served judge chooses among (B=A is only read, never offered)
RATING_CHOICES = tuple(f"[[{n}]]" for n in range(1, 11))
VERDICT_CHOICES = ("[[A>>B]]", "[[A>B]]", "[[A=B]]", "[[B>A]]", "[[B>>A]]")


@dataclass(frozen=True)
class JudgeProtocol:
    """How an item is put to the judge and how its reply becomes a raw score.

    "single": one response, a 1..10 rating. "pairwise": responses A and B, a 5-point
    verdict (1 = A much better .. 5 = B much better, in the item's own order: a
    verdict on a swapped item is mirrored back, 6 - v).
    """

    kind: str
    temperature: float | None = 0.0
    max_tokens: int | None = None

    @property
    def scale(self) -> Scale:
        return SCALES["likert10"] if self.kind == "single" else SCALES["pairwise5"]

    @property
    def choices(self) -> tuple[str, ...]:
        return RATING_CHOICES if self.kind == "single" else VERDICT_CHOICES

    def request(
        self, item: JudgedItem, seed: int, verdict_format: VerdictFormat | None = None
    ) -> ChatRequest:
        """The judge's request; with `verdict_format` (served judges), the verdict is
        also asked for among `choices`, in that format."""
        if self.kind == "single":
            task = _SINGLE_TASK
            body = f"Question:\n{item.prompt}\n\nResponse:\n{item.responses[0]}"
        else:
            task = _PAIRWISE_TASK
            a, b = item.responses
            body = (
                f"Question:\n{item.prompt}\n\n"
                f"[Answer A begins]\n{a}\n[Answer A ends]\n\n"
                f"[Answer B begins]\n{b}\n[Answer B ends]"
            )
        return ChatRequest(
            (Message("system", task), Message("user", body)),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=seed,
            choices=None if verdict_format is None else self.choices,
            verdict_format=verdict_format or "auto",
        )

    def parse(self, text: str, item: JudgedItem) -> float | None:
        """The raw score from a structured reply's verdict, else from the last verdict,
        in the item's original order; None if there is none or it is off the scale."""
        text = read_structured(text, self.choices) or text
        found = last_vote(_RATING if self.kind == "single" else _VERDICT, text)
        if found is None:
            return None
        if self.kind == "single":
            value = float(found.group(1))
            return value if self.scale.low <= value <= self.scale.high else None
        value = VERDICT_SCORES[found.group(1)]
        return 6.0 - value if item.swapped else value


PROTOCOLS = ("single", "pairwise")
