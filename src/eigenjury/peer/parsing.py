"""Verdicts from judge replies: bound to the last answer tag that is a vote (the format
repeated after it is not: models.verdict_format.votes); anything else is a failure.

A reply that cannot be read is never turned into a tie: it is returned as None and
counted as a parse failure of its judge.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Mapping

from eigenjury.models.verdict_format import last_vote, read_structured, votes
from eigenjury.stats.verdicts import FIRST, SECOND, TIE

LABELS = ("A", "B", "tie")  # shown first, shown second, neither
# Graded verdicts, Arena-Hard's five points: much better, better, as good (each way)
GRADED_LABELS = ("A>>B", "A>B", "A=B", "B>A", "B>>A")
_GRADED = {"A>>B": (FIRST, True), "A>B": (FIRST, False), "A=B": (TIE, False),
           "B>A": (SECOND, False), "B>>A": (SECOND, True)}  # fmt: skip
# a label as written, spaces around its sign allowed ("A > B")
_GRADED_TAG = re.compile(
    r"(?:<verdict>\s*|\[\[\s*)([AB]\s*(?:>>|>|=)\s*[AB])(?:\s*</verdict>|\s*\]\])",
    re.IGNORECASE,
)

_CODES = {"a": FIRST, "b": SECOND, "tie": TIE}
_VERDICT = re.compile(r"<verdict>\s*(A|B|tie)\s*</verdict>", re.IGNORECASE)
_CRITERION = re.compile(
    r"<criterion\s+n\s*=\s*[\"']?(\d+)[\"']?\s*>\s*(A|B|tie)\s*</criterion>", re.IGNORECASE
)


def _code(label: str, ties: bool) -> int | None:
    code = _CODES[label.lower()]
    return None if code == TIE and not ties else code


def parse_verdict(text: str, *, ties: bool = True) -> int | None:
    """0 (tie), 1 (A, shown first) or 2 (B) from a structured reply (the JSON verdict a
    served judge gives under a schema), else from the last verdict tag; a bare label
    (the whole reply, as local judges give) counts too."""
    structured = read_structured(text, LABELS)
    if structured is not None:
        return _code(structured, ties)
    bare = text.strip().lower()
    if bare in _CODES:
        return _code(bare, ties)
    found = last_vote(_VERDICT, text)
    return None if found is None else _code(found.group(1), ties)


def graded_labels(ties: bool) -> tuple[str, ...]:
    """The graded labels a judge is offered (A=B only where ties are allowed)."""
    return GRADED_LABELS if ties else tuple(x for x in GRADED_LABELS if x != "A=B")


def parse_graded(text: str, *, ties: bool = True) -> tuple[int, bool] | None:
    """A graded verdict, (0 tie, 1 A or 2 B; whether it was strong), from a structured
    reply, a bare label, or the last verdict tag (`<verdict>A>B</verdict>`, or
    Arena-Hard's `[[A>B]]`)."""
    allowed = graded_labels(ties)
    label = read_structured(text, allowed)
    if label is None:
        text = html.unescape(text)  # "A&gt;B" from a judge that escapes its markup
        bare = _compact(text)
        found = last_vote(_GRADED_TAG, text)
        label = bare if bare in allowed else _compact(found.group(1)) if found else None
    return _GRADED[label] if label in allowed else None


def parse_single(text: str, *, ties: bool = True, graded: bool = False) -> tuple[int, bool] | None:
    """One verdict a comparison, on three labels or (`graded`) five: the verdict, and
    whether it was strong; None where the reply cannot be read."""
    if graded:
        return parse_graded(text, ties=ties)
    verdict = parse_verdict(text, ties=ties)
    return None if verdict is None else (verdict, False)


def _compact(label: str) -> str:
    """A graded label without spaces, in capitals ("a > b" -> "A>B")."""
    return re.sub(r"\s+", "", label).upper()


def parse_criteria(text: str, n_criteria: int, *, ties: bool = True) -> list[int] | None:
    """One verdict per criterion (the last tag that is a vote for each); None unless all
    are there."""
    last: dict[int, str] = {}
    for found in votes(_CRITERION, text):
        last[int(found.group(1))] = found.group(2)
    if any(i not in last for i in range(1, n_criteria + 1)):
        return None
    codes = [_code(last[i], ties) for i in range(1, n_criteria + 1)]
    return None if any(c is None for c in codes) else [c for c in codes if c is not None]


def soft_verdict(
    choice_logprobs: Mapping[str, float], *, ties: bool = True
) -> tuple[float, float, float] | None:
    """A soft verdict: the judge's own probabilities of (tie, A, B), renormalised over
    the labels it was offered; None unless it scored every one. These are the model's
    probabilities (temperature 1): a judge's sampling temperature shapes only the
    verdict it draws, not what it believes."""
    labels = ("tie", "A", "B") if ties else ("A", "B")
    if any(label not in choice_logprobs for label in labels):
        return None
    scores = [choice_logprobs[label] for label in labels]
    top = max(scores)
    if not math.isfinite(top):
        return None
    weights = [math.exp(v - top) for v in scores]
    total = math.fsum(weights)
    probs = [w / total for w in weights]
    return (probs[0], probs[1], probs[2]) if ties else (0.0, probs[0], probs[1])
