"""Neighbour generators: meaning-preserving perturbations of what a judge judges.

A neighbour changes the judged response(s) of one item, never the question, in a way
that should not move a fair judge. Each generator says what it leaves unchanged.
Code (fenced blocks and inline spans) and numbers are protected everywhere: no
generator edits them, and a paraphrase that changes them is rejected. On a pairwise
item the local generators edit one of the two responses, chosen by the rng, so that
a judge biased toward (say) markdown can show it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from eigenjury.models.types import ChatRequest, Message

_FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_PROTECTED = re.compile(r"`[^`\n]+`|\d+(?:[.,:/]\d+)*")
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "for",
        "with",
        "by",
        "from",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "it",
        "this",
        "that",
        "these",
        "those",
        "into",
        "than",
        "then",
        "so",
        "if",
    ]
)
_HEADER = re.compile(r"^(\s*)#{1,6}\s+")
_BULLET = re.compile(r"^(\s*)[-*+]\s+")
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_FILLER = (
    "I hope this is clear.",
    "Here is my answer.",
    "The points above address the question as it was asked.",
    "Let me set out my answer below.",
    "This is my response to the question.",
    "I have tried to answer as completely as I can.",
)
# More of the same, for edits that add many sentences (Verbosity.lengthen): no claim,
# no number, no code, no warmth or coldness toward the reader.
_MORE_FILLER = (
    "What follows is my view.",
    "This is how I see it.",
    "I have read what you wrote.",
    "My answer is set out here.",
    "These are my thoughts on it.",
    "I will keep to what was asked.",
    "This reply is written in plain words.",
    "The answer is given here as it stands.",
    "I have put this as simply as I could.",
    "Those are the points I would make.",
    "That is the answer I would give.",
    "I have kept the reply to the matter at hand.",
    "This is what I would say in reply.",
    "The reply below is my own view.",
    "I have given the answer in my own words.",
    "This sets out the answer.",
    "I have written this in reply to your message.",
    "Here is the reply to your message.",
)


@dataclass(frozen=True)
class JudgedItem:
    """One item a judge scores: a question and one response, or two (A, B) for a
    pairwise judge. `swapped` marks A and B exchanged (the verdict is mirrored back)."""

    id: str
    prompt: str
    responses: tuple[str, ...]
    models: tuple[str | None, ...]
    swapped: bool = False

    @property
    def pairwise(self) -> bool:
        return len(self.responses) == 2


class NeighbourGenerator(Protocol):
    """`perturb(item, rng)` returns a neighbour of `item` (or the item itself)."""

    name: str
    pairwise_only: bool

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem: ...


def protected_spans(text: str) -> list[str]:
    """The code blocks, inline code and numbers of a text, in order."""
    found: list[str] = []
    for prose, code in _split_fences(text):
        found.extend(_INLINE_PROTECTED.findall(prose))
        if code:
            found.append(code)
    return found


def _split_fences(text: str) -> list[tuple[str, str]]:
    """(prose, following fenced block or "") pairs covering the text."""
    parts: list[tuple[str, str]] = []
    start = 0
    for match in _FENCE.finditer(text):
        parts.append((text[start : match.start()], match.group(0)))
        start = match.end()
    parts.append((text[start:], ""))
    return parts


def _edit_prose(text: str, edit: Callable[[str], str]) -> str:
    """Apply `edit` to the prose between fenced code blocks."""
    return "".join(edit(prose) + code for prose, code in _split_fences(text))


def _edit_words(prose: str, edit: Callable[[str], str]) -> str:
    """Apply `edit` to the stretches between inline code and numbers."""
    return _outside(_INLINE_PROTECTED, prose, edit)


def _outside(protected: re.Pattern[str], text: str, edit: Callable[[str], str]) -> str:
    """Apply `edit` to the stretches of `text` between matches of `protected`."""
    out: list[str] = []
    start = 0
    for match in protected.finditer(text):
        out.append(edit(text[start : match.start()]))
        out.append(match.group(0))
        start = match.end()
    out.append(edit(text[start:]))
    return "".join(out)


def _edit_one_response(
    item: JudgedItem, rng: np.random.Generator, edit: Callable[[str], str]
) -> JudgedItem:
    which = int(rng.integers(len(item.responses)))
    responses = list(item.responses)
    responses[which] = edit(responses[which])
    return replace(item, responses=tuple(responses))


class Formatting:
    """Whitespace, capitalisation of function words and trailing punctuation.

    Leaves unchanged: every word (up to the case of function words such as "the" or
    "of" inside a sentence), their order, code and numbers. At least one of the three
    edits is made, each chosen by the rng.
    """

    name = "formatting"
    pairwise_only = False

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem:
        edits = [self._whitespace, self._capitalisation, self._punctuation]
        chosen = [e for e in edits if rng.random() < 0.5] or [edits[int(rng.integers(3))]]

        def edit(text: str) -> str:
            for one in chosen:
                text = one(text, rng)
            return text

        return _edit_one_response(item, rng, edit)

    @staticmethod
    def _whitespace(text: str, rng: np.random.Generator) -> str:
        def widen(stretch: str) -> str:
            return re.sub(r"(?<=\S) (?=\S)", lambda m: "  " if rng.random() < 0.2 else " ", stretch)

        def prose(p: str) -> str:
            p = _edit_words(p, widen)
            return re.sub(r"\n(?=\S)", lambda m: "\n\n" if rng.random() < 0.3 else "\n", p)

        return _edit_prose(text, prose).rstrip("\n") + ("\n" if rng.random() < 0.5 else "")

    @staticmethod
    def _capitalisation(text: str, rng: np.random.Generator) -> str:
        def toggle(match: re.Match[str]) -> str:
            word = match.group(2)
            if rng.random() >= 0.4 or not (word.islower() or word.istitle()) or len(word) < 2:
                return match.group(0)  # single letters may be labels ("plan A")
            return match.group(1) + (word.capitalize() if word.islower() else word.lower())

        def words(stretch: str) -> str:
            # a function word after a letter or comma and a space: never a sentence start
            pattern = r"(?<=[A-Za-z,])(\s+)(" + "|".join(sorted(_FUNCTION_WORDS)) + r")\b"
            return re.sub(pattern, toggle, stretch, flags=re.IGNORECASE)

        return _edit_prose(text, lambda p: _edit_words(p, words))

    @staticmethod
    def _punctuation(text: str, rng: np.random.Generator) -> str:
        def paragraph_end(match: re.Match[str]) -> str:
            body, mark, gap = match.group(1), match.group(2), match.group(3)
            if mark == ".":
                return body + gap
            return body + mark + ("." if body[-1:].isalpha() else "") + gap

        def prose(p: str) -> str:
            # the last character of each paragraph: drop a full stop, or add one after a word
            return re.sub(r"([A-Za-z])(\.?)(\n\s*\n|\s*$)", paragraph_end, p)

        return _edit_prose(text, prose)


class Markdown:
    """Markdown on or off: headers, bullets and bold are removed if present, else the
    paragraphs become bullets and the first sentence is set in bold.

    Leaves unchanged: every word and its order, numbered lists, code and numbers.
    """

    name = "markdown"
    pairwise_only = False

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem:
        return _edit_one_response(item, rng, self.toggle)

    @staticmethod
    def has_markdown(text: str) -> bool:
        prose = "".join(p for p, _ in _split_fences(text))
        lines = prose.splitlines()
        bold = _BOLD.search(_INLINE_CODE.sub("", prose))  # `a**b**c` is code, not bold
        return any(_HEADER.match(x) or _BULLET.match(x) for x in lines) or bool(bold)

    def toggle(self, text: str) -> str:
        return _edit_prose(text, self._off if self.has_markdown(text) else self._on)

    @staticmethod
    def _off(prose: str) -> str:
        lines = [_BULLET.sub(r"\1", _HEADER.sub(r"\1", x)) for x in prose.split("\n")]
        return _outside(
            _INLINE_CODE,
            "\n".join(lines),
            lambda part: _BOLD.sub(lambda m: m.group(1) or m.group(2), part),
        )

    @staticmethod
    def _on(prose: str) -> str:
        paragraphs = re.split(r"(\n\s*\n)", prose)
        texts = [p for p in paragraphs[::2] if p.strip()]
        if len(texts) >= 2:
            paragraphs[::2] = [
                f"- {p.lstrip()}" if p.strip() and not p.lstrip()[0].isdigit() else p
                for p in paragraphs[::2]
            ]
        joined = "".join(paragraphs)
        first = re.search(r"[A-Za-z][^.!?\n]*[A-Za-z]", joined)
        if first is None or "`" in first.group(0):
            return joined
        return f"{joined[: first.start()]}**{first.group(0)}**{joined[first.end() :]}"


class Verbosity:
    """One or two neutral filler sentences, at the start or the end.

    Leaves unchanged: everything already there (the filler adds no claim, number or
    code).
    """

    name = "verbosity"
    pairwise_only = False

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem:
        def pad(text: str) -> str:
            count = 1 + int(rng.integers(2))
            picks = rng.choice(len(_FILLER), size=count, replace=False)
            return self._placed(text, " ".join(_FILLER[i] for i in picks), rng)

        return _edit_one_response(item, rng, pad)

    def lengthen(self, text: str, tokens: float, rng: np.random.Generator) -> str:
        """`text` with filler sentences, in a random order, each at most once, until they
        add at least `tokens` tokens (reply_features' length proxy) or the filler runs out
        (every sentence is used then). Placed as `perturb` places it: a block at the
        start or the end."""
        from eigenjury.reply_features import text_features

        if tokens <= 0:
            return text
        pool = _FILLER + _MORE_FILLER
        sizes = text_features(pool, ("length",))["length"]
        order = rng.permutation(len(pool))
        added = np.cumsum(sizes[order])
        count = min(int(np.searchsorted(added, tokens)) + 1, len(pool))
        return self._placed(text, " ".join(pool[i] for i in order[:count]), rng)

    @staticmethod
    def _placed(text: str, filler: str, rng: np.random.Generator) -> str:
        """The filler as a paragraph before the text or after it (before, where the
        text ends inside a code fence)."""
        open_fence = text.count("```") % 2 == 1  # appending would land inside code
        if open_fence or rng.random() < 0.5:
            return f"{filler}\n\n{text}"
        return f"{text.rstrip()}\n\n{filler}"


class PositionSwap:
    """Responses A and B exchanged (pairwise judges only); the verdict is mirrored back.

    Leaves unchanged: both responses, word for word.
    """

    name = "position"
    pairwise_only = True

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem:
        if not item.pairwise:
            raise ValueError("the position neighbour needs a pairwise item")
        return replace(
            item,
            responses=item.responses[::-1],
            models=item.models[::-1],
            swapped=not item.swapped,
        )


class Identity:
    """The same input, re-judged with another seed: measures intrinsic jitter.

    Leaves unchanged: everything.
    """

    name = "identity"
    pairwise_only = False

    def perturb(self, item: JudgedItem, rng: np.random.Generator) -> JudgedItem:
        return item


LOCAL_GENERATORS: dict[str, NeighbourGenerator] = {
    g.name: g for g in (Formatting(), Markdown(), Verbosity(), PositionSwap(), Identity())
}
PARAPHRASE = "paraphrase"
GENERATOR_NAMES = (*LOCAL_GENERATORS, PARAPHRASE)

_PARAPHRASE_TASK = (
    "Rewrite the text below with the smallest changes that keep its meaning exactly: "
    "reword a few phrases, keep every fact, claim, number, name and code block as it "
    "is, keep the structure and about the same length. Reply with the rewritten text "
    "only, with no preamble."
)


@dataclass(frozen=True)
class Paraphraser:
    """A light paraphrase by an LLM (any model spec), checked before it is used.

    Leaves unchanged (checked): code blocks, inline code and numbers; the length stays
    within [min_ratio, max_ratio] of the original. Anything else is rejected and
    counted, never judged.
    """

    temperature: float | None = 0.7
    max_tokens: int | None = None
    min_ratio: float = 0.5
    max_ratio: float = 2.0

    def request(self, text: str, seed: int) -> ChatRequest:
        return ChatRequest(
            (Message("system", _PARAPHRASE_TASK), Message("user", text)),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=seed,
        )

    def accept(self, original: str, reply: str) -> str | None:
        """The paraphrase, or None when it fails a check."""
        text = reply.strip()
        ratio = len(text) / max(len(original.strip()), 1)
        if not text or not self.min_ratio <= ratio <= self.max_ratio:
            return None
        if sorted(protected_spans(text)) != sorted(protected_spans(original)):
            return None
        return text
