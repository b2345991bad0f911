"""Likelihood verdicts: how judges too small to compare two replies still judge them.

A language model of a hundred million parameters does not bind the labels A and B to
the replies they name: its probabilities of the labels follow the slot, not the replies
(measured on the bundled models: docs/demo.md). What it
does model is text. So the judge scores each reply by its log-likelihood as the answer
of a speaker who follows the constitution, minus its log-likelihood as the answer of
one who breaks it: a likelihood ratio that cancels how likely the words are anyway (a
short or common reply) and keeps how much the constitution explains them. Two replies
to one scenario then give the verdict probabilities

    P(first better) = sigmoid(score(first) - score(second)),   P(tie) = 0,

soft verdicts, the same in both presentation orders (no position bias by construction).
The scoring requests are `peer.prompts.speaker_request`. Each (judge, reply) needs two
scoring calls, shared by every comparison of that reply. A score sums the ratio over
the reply's tokens, so longer replies give more confident verdicts: evidence grows
with the text read.
"""

from __future__ import annotations

import math
from typing import Literal

Speaker = Literal["follows", "breaks"]
SPEAKERS: tuple[Speaker, ...] = ("follows", "breaks")


def verdict_probabilities(first: float, second: float) -> tuple[float, float, float]:
    """(tie, first, second) probabilities from the two replies' scores (follows minus
    breaks, in nats)."""
    d = first - second
    p_first = 1.0 / (1.0 + math.exp(-d)) if d >= 0 else math.exp(d) / (1.0 + math.exp(d))
    return (0.0, p_first, 1.0 - p_first)
