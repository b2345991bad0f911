"""Reading verdicts: one JSON schema for a constrained reply and its reader, label scores
read from the log-probabilities a server returns, and the rule every free-text reader
follows to tell a verdict given from a verdict mentioned.

The schema puts `reasoning` before `verdict`, so the model writes its reasons first and
then picks a label under the same constraint, in one call: a two-step call (reason, then
ask for the label) would pay for the prompt twice and lose nothing the schema keeps.

In free text the last verdict counts, so that an example quoted while reasoning cannot
decide; but judges also repeat the format they were shown after their verdict
("<verdict>A</verdict> if reply A is better, ... or <verdict>tie</verdict> if ...",
"for example [[7]]"). `votes` leaves such mentions out for every reader (peer tags,
bound ratings and pairwise verdicts, contract grades): the format is never a vote.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal

VerdictFormat = Literal["auto", "structured", "logprobs", "text"]
VerdictMode = Literal["structured", "scores", "text"]  # how a reply gave its verdict

_FENCE = re.compile(r"```[A-Za-z]*\s*")
_VERDICT_KEY = re.compile(r'"verdict"\s*:\s*"')
# A verdict as a format or an example shows it, not as a judge gives it: between the
# markup that may wrap a verdict (emphasis, code, quotes, brackets, tags), preceded by an
# alternative or an example ("or X", "|X", "for example X", "e.g. X", "like X") or
# followed by a condition or an alternative ("X if ...", "X or ...", "X|Y", "X/Y"; not a
# scale: "[[7]]/10").
_OPENING = r"""(?:[\s*_`'"(\[]|<[A-Za-z][^<>\n]*>)*"""
_CLOSING = r"""(?:[*_`'")\]]|</[A-Za-z][^<>\n]*>)*"""
_MENTION_BEFORE = re.compile(
    r"(?:\bor|[|/]|\bexample\s*:?|\be\.g\.\s*,?|\bsuch\s+as|\blike)" + _OPENING + r"\Z",
    re.IGNORECASE,
)
_MENTION_AFTER = re.compile(
    _CLOSING + r"(?:[ \t]+(?:if|or|when|unless)\b|[ \t]*(?:\||/(?![ \t]*\d)))"
)
_CONTEXT_CHARS = 80  # how far before a verdict its mention words are looked for


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

    The reply is a JSON object that opens it. Whitespace and a Markdown code fence around
    it are tolerated, and so are raw line breaks inside its strings (llama-cpp-python's
    grammar lets them through); the verdict must be exactly one of `choices` (no case
    folding, no trimming). Text after the object (a server that does not enforce the
    schema lets a model go on) is not part of the verdict, whatever tags it quotes."""
    found = _structured(text, choices)
    return None if found is None else found[0]


def _structured(text: str, choices: Sequence[str]) -> tuple[str, int] | None:
    """The verdict of the JSON object that opens `text` and where that object ends."""
    start = len(text) - len(text.lstrip())
    fenced = _FENCE.match(text, start)
    if fenced:
        start = fenced.end()
    try:
        data, end = json.JSONDecoder(strict=False).raw_decode(text, start)
    except (json.JSONDecodeError, RecursionError):  # not JSON, or nested past reading
        return None
    verdict = data.get("verdict") if isinstance(data, dict) else None
    return (verdict, end) if isinstance(verdict, str) and verdict in choices else None


def is_mention(text: str, start: int, end: int) -> bool:
    """Whether the verdict at text[start:end] is mentioned (in a format or an example the
    judge was shown and repeats) rather than given."""
    before = text[max(0, start - _CONTEXT_CHARS) : start]
    return bool(_MENTION_BEFORE.search(before) or _MENTION_AFTER.match(text, end))


def votes(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of a reader's verdict `pattern` that are votes, in order: every reader
    of free text takes its last one (per criterion where there are several)."""
    for found in pattern.finditer(text):
        if not is_mention(text, found.start(), found.end()):
            yield found


def last_vote(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    """The last vote of `pattern` in `text` (see `votes`), or None."""
    found = list(votes(pattern, text))
    return found[-1] if found else None


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
    found = _structured(text, choices)
    if found is None:
        return None
    starts = [m.end() for m in _VERDICT_KEY.finditer(text, 0, found[1])]  # in the object
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
    on the reply's verdict line (every protocol asks for it last, and a bare label is
    such a line): its last non-empty line, past lines that repeat the format after the
    verdict (lines where a label is mentioned, see `is_mention`). None when that line
    holds no label."""
    patterns = [re.compile(rf"(?<!\w){re.escape(label)}(?!\w)") for label in choices]
    end = len(text.rstrip())
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        found = [m for pattern in patterns for m in pattern.finditer(text, start, end)]
        if not any(is_mention(text, m.start(), m.end()) for m in found):
            break
        end = len(text[:start].rstrip())
    else:
        return None
    if not found:
        return None
    return label_logprobs_at(text, max(m.start() for m in found), tokens, choices)


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
