"""Likelihood verdicts' arithmetic (peer.likelihood): a reply's score is its follows-minus-
breaks log-likelihood per token, and the verdict is the higher score, never a probability."""

from __future__ import annotations

import pytest

from eigenjury.peer.likelihood import likelihood_verdict, reply_score
from eigenjury.stats.verdicts import FIRST, SECOND, TIE


def test_a_score_is_the_log_ratio_per_token() -> None:
    assert reply_score(-40.0, -46.0, 12) == pytest.approx(0.5)
    assert reply_score(-46.0, -40.0, 12) == pytest.approx(-0.5)
    # the same rate over twice the tokens is the same score: length adds no evidence
    assert reply_score(-80.0, -92.0, 24) == reply_score(-40.0, -46.0, 12)


def test_a_longer_reply_with_a_weaker_rate_loses_to_a_shorter_stronger_one() -> None:
    """The sum (eigenjury before issue 26) preferred the longer reply here: 6 nats
    against 4. Per token it is 0.25 against 0.4."""
    longer = reply_score(-100.0, -106.0, 24)
    shorter = reply_score(-40.0, -44.0, 10)
    assert likelihood_verdict(longer, shorter) == SECOND


def test_the_higher_score_wins_in_either_order_and_only_equal_scores_tie() -> None:
    assert likelihood_verdict(0.031, 0.030) == FIRST
    assert likelihood_verdict(0.030, 0.031) == SECOND
    assert likelihood_verdict(-0.2, -0.2) == TIE
    assert likelihood_verdict(1e-12, 0.0) == FIRST  # however small: a verdict, not a probability


@pytest.mark.parametrize("tokens", [0, -3])
def test_a_reply_without_tokens_has_no_score(tokens: int) -> None:
    with pytest.raises(ValueError, match="at least one token"):
        reply_score(-1.0, -2.0, tokens)
