"""Likelihood verdicts: how judges too small to compare two replies still judge them.

A language model of a hundred million parameters does not bind the labels A and B to
the replies they name: its probabilities of the labels follow the slot, not the replies
(measured on the bundled models: docs/demo.md). What it does model is text. So the
judge scores each reply by how much likelier its words are as the answer of a speaker
who follows the constitution than as the answer of one who breaks it: the log-ratio of
the two, per token of the reply, which cancels how likely the words are anyway (a
common phrase) and keeps how much the constitution explains them.

Per token, not summed: a sum grows with every sentence read, so two sentences that the
judge finds a little more likely from the follower (a polite closing) outweighed the
difference between a kind and an unkind reply (BENCHMARKS.md, section 16c).

The verdict is the reply with the higher score (a tie only when the scores are equal):
one verdict, the same in both presentation orders (no position bias by construction).
It is not a probability. A score difference could become one only through a
calibration on replies whose order is known, and on the replies written for section
16c the temperature that would do it differs by judge model and persona (and cannot be
found at all for a judge whose scores do not separate kind from unkind), so none is
claimed: the fit counts these verdicts as it counts any judge's and estimates from them
how often each judge prefers each member. The scoring requests are
`peer.prompts.speaker_request`; each (judge, reply) needs two scoring calls, shared by
every comparison of that reply.
"""

from __future__ import annotations

from typing import Literal

from eigenjury.stats.verdicts import FIRST, SECOND, TIE

Speaker = Literal["follows", "breaks"]
SPEAKERS: tuple[Speaker, ...] = ("follows", "breaks")


def reply_score(follows: float, breaks: float, tokens: int) -> float:
    """A reply's score: its log-likelihood as the answer of the speaker who follows the
    constitution minus that of the one who breaks it, per token of the reply (nats per
    token)."""
    if tokens < 1:
        raise ValueError(f"a scored reply has at least one token, not {tokens}")
    return (follows - breaks) / tokens


def likelihood_verdict(first: float, second: float) -> int:
    """The verdict (FIRST, SECOND or TIE) from the two replies' scores: the higher score
    wins; only equal scores (the same words) tie."""
    return FIRST if first > second else SECOND if second > first else TIE
