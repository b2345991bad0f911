"""Objective mode: peer ranking on questions with a hidden key, checked against the key.

Evaluees answer multiple-choice questions; judges compare two answers without the
key, against a built-in correctness constitution. The recovered ranking is then
compared with each member's true accuracy (Kendall tau): a check that a judge pool
can find the better models where the truth is known, before trusting it where it
is not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np

from eigenjury.peer.data import Constitution, Question
from eigenjury.peer.record import ObjectiveCheck

CORRECTNESS = Constitution(
    "Correctness",
    (
        "Prefer the response whose chosen option is the correct answer to the question.",
        "Prefer the response whose reasoning is sound and supports its chosen option.",
    ),
)
INSTRUCTION = (
    "Reply with the letter of the correct option first, then one short sentence of reasoning."
)
_LETTER = re.compile(r"\b([A-Z])\b")


def question_text(question: Question) -> str:
    return f"{question.as_text()}\n\n{INSTRUCTION}"


def answer_letter(reply: str, options: Sequence[str]) -> str | None:
    """The first standalone option letter in a reply ("B", "B.", "Answer: B because ...")."""
    for letter in _LETTER.findall(reply):
        if letter in options:
            return str(letter)
    return None


def objective_record(
    questions: Sequence[Question],
    responses: Mapping[tuple[str, str], str | None],
    elo: Mapping[str, float],
) -> ObjectiveCheck:
    """True accuracy per member and Kendall tau between it and the recovered Elo."""
    from scipy.stats import kendalltau

    accuracy: dict[str, float] = {}
    for member in elo:
        answered = [(q, responses.get((member, q.id))) for q in questions]
        scored = [answer_letter(r, list(q.options)) == q.answer for q, r in answered if r]
        accuracy[member] = round(float(np.mean(scored)), 4) if scored else 0.0
    names = list(elo)
    tau = kendalltau([accuracy[n] for n in names], [elo[n] for n in names]).statistic
    return ObjectiveCheck(
        questions=len(questions),
        accuracy=accuracy,
        kendall_tau_elo_vs_accuracy=None if np.isnan(tau) else round(float(tau), 4),
    )
