"""Verdicts a served model can give reliably: one JSON schema for a constrained reply, its
reader, and label scores read from the log-probabilities a server returns.

The schema puts `reasoning` before `verdict`, so the model writes its reasons first and
then picks a label under the same constraint, in one call: a two-step call (reason, then
ask for the label) would pay for the prompt twice and lose nothing the schema keeps.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

VerdictFormat = Literal["auto", "structured", "logprobs", "text"]
VerdictMode = Literal["structured", "scores", "text"]  # how a reply gave its verdict

_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.DOTALL)
_VERDICT_KEY = re.compile(r'"verdict"\s*:\s*"')


def verdict_schema(choices: Sequence[str], reasoning_chars: int | None = None) -> dict[str, Any]:
    """The JSON schema of a structured verdict: reasons first, then one of the labels.
    `reasoning_chars` bounds the reasons, so that a model that rambles still reaches its
    verdict within the reply's token budget (servers whose grammars take `maxLength`)."""
    reasoning: dict[str, Any] = {"type": "string"}
    if reasoning_chars is not None:
        reasoning["maxLength"] = reasoning_chars
    return {
        "type": "object",
        "properties": {"reasoning": reasoning, "verdict": {"enum": list(choices)}},
        "required": ["reasoning", "verdict"],
        "additionalProperties": False,
    }


def read_structured(text: str, choices: Sequence[str]) -> str | None:
    """The label a structured reply chose, or None when the reply is not such a reply.

    Whitespace and a Markdown code fence around the JSON are tolerated, and so are raw
    line breaks inside its strings (llama-cpp-python's grammar lets them through); the
    verdict must be exactly one of `choices` (no case folding, no trimming)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    try:
        data = json.loads(body, strict=False)
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past reading
        return None
    if not isinstance(data, dict):
        return None
    verdict = data.get("verdict")
    return verdict if isinstance(verdict, str) and verdict in choices else None


def verdict_mode(text: str, scored: bool, choices: Sequence[str]) -> VerdictMode:
    """How a reply asked for one of `choices` gave its verdict: as a structured reply,
    as free text with label scores (`scored`: the completion has `choice_logprobs`), or
    as free text alone. For accounting: which way an endpoint actually answered."""
    if read_structured(text, choices) is not None:
        return "structured"
    return "scores" if scored else "text"


def structured_label_logprobs(
    text: str, tokens: Sequence[Mapping[str, Any]], choices: Sequence[str]
) -> dict[str, float] | None:
    """Each label's log-probability at the token where a structured reply's verdict value
    is decided (see `label_logprobs_at`). `tokens` is the reply's `logprobs.content`."""
    if read_structured(text, choices) is None:
        return None
    starts = [m.end() for m in _VERDICT_KEY.finditer(text)]
    decoder = json.JSONDecoder(strict=False)
    for start in reversed(starts):  # the last key outside a string is the verdict
        try:
            value, _ = decoder.raw_decode(text, start - 1)
        except (json.JSONDecodeError, RecursionError):
            continue
        if value in choices:
            return label_logprobs_at(text, start, tokens, choices)
    return None


def verdict_line_logprobs(
    text: str, tokens: Sequence[Mapping[str, Any]], choices: Sequence[str]
) -> dict[str, float] | None:
    """Label scores of a free-text reply: read where a label last appears, as a whole word,
    on the reply's last non-empty line (every protocol asks for the verdict line last,
    and a bare label is such a line). None when that line holds no label."""
    stripped = text.rstrip()
    line_start = stripped.rfind("\n") + 1
    best = -1
    for label in choices:
        pattern = rf"(?<!\w){re.escape(label)}(?!\w)"
        for m in re.finditer(pattern, stripped[line_start:]):
            best = max(best, line_start + m.start())
    if best < 0:
        return None
    return label_logprobs_at(text, best, tokens, choices)


def label_logprobs_at(
    text: str, value_start: int, tokens: Sequence[Mapping[str, Any]], choices: Sequence[str]
) -> dict[str, float] | None:
    """Log-probabilities of the labels at the token that decides between them.

    The labels' common prefix ("GRADE: " of "GRADE: C" and "GRADE: I") is the same
    whichever is chosen; the deciding token is the one holding the first character after
    it. Its top alternatives are matched against what each label has left: an
    alternative counts for a label when, past the text the token holds before that
    character (a space, an opening quote), it is the label's rest, alone or followed by
    the closing quote. So a label whose rest is one token is scored exactly; a label
    whose rest spans several tokens, or that is not among the alternatives, is absent.
    Tokens are matched from the end of the reply, where the verdict is; None when they
    do not spell the reply there or no label is found.
    """
    anchor = value_start + _shared_prefix_length(choices)
    end = len(text)
    for token in reversed(tokens):  # from the end: a character split over tokens
        piece = str(token.get("token", ""))  # earlier in the reasoning does not matter
        start = end - len(piece)
        if text[start:end] != piece:
            return None
        if start <= anchor < end:
            lead = text[start:anchor]
            return _match_alternatives(
                lead, token.get("top_logprobs") or [], choices, anchor - value_start
            )
        end = start
    return None


def _shared_prefix_length(choices: Sequence[str]) -> int:
    first, last = min(choices), max(choices)  # the sorted ends differ soonest
    length = 0
    while length < min(len(first), len(last)) and first[length] == last[length]:
        length += 1
    return length


def _match_alternatives(
    lead: str, alternatives: Sequence[Mapping[str, Any]], choices: Sequence[str], skip: int
) -> dict[str, float] | None:
    found: dict[str, float] = {}
    for alternative in alternatives:
        piece = str(alternative.get("token", ""))
        if not piece.startswith(lead):
            continue
        rest = piece[len(lead) :]
        for label in choices:
            tail = label[skip:]
            if tail and rest in (tail, f'{tail}"'):
                logprob = float(alternative.get("logprob", -math.inf))
                found[label] = _log_add(found[label], logprob) if label in found else logprob
    return found or None


def _log_add(a: float, b: float) -> float:
    """log(exp(a) + exp(b)): two tokens that spell the same label ("A", 'A"') add up."""
    high, low = max(a, b), min(a, b)
    return high if low == -math.inf else high + math.log1p(math.exp(low - high))
