"""Soft verdicts as the peer protocol collects them: label probabilities from option
scores, and the table they make."""

from __future__ import annotations

import math

import numpy as np
import pytest

from eigenjury.peer.designs import Comparison
from eigenjury.peer.outcomes import Outcome, Outcomes
from eigenjury.peer.parsing import soft_verdict
from eigenjury.stats.verdicts import VerdictCounts


def test_soft_verdicts_renormalise_the_offered_labels() -> None:
    scores = {"tie": math.log(0.1), "A": math.log(0.3), "B": math.log(0.2)}  # mass elsewhere
    assert soft_verdict(scores) == pytest.approx((1 / 6, 1 / 2, 1 / 3))
    assert soft_verdict(scores, ties=False) == pytest.approx((0.0, 0.6, 0.4))
    assert soft_verdict({"A": -1.0, "tie": -2.0}) is None  # B was not scored
    assert soft_verdict({"A": -math.inf, "B": -math.inf, "tie": -math.inf}) is None
    big = soft_verdict({"A": -1e4, "B": -1e4 - 1, "tie": -math.inf})
    assert big == pytest.approx((0.0, 1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1))))


def test_a_judge_without_probabilities_counts_its_one_verdict() -> None:
    soft = Outcome(Comparison("s1", "j", "a", "b"), [1], probs=(0.2, 0.5, 0.3))
    hard = Outcome(Comparison("s1", "k", "a", "b"), [2])
    failed = Outcome(Comparison("s2", "j", "b", "a"), None, failure="parse")
    table, _ = Outcomes.of([soft, hard, failed]).table(per_criterion=False)
    assert table.probs is not None
    np.testing.assert_allclose(table.probs, [[0.2, 0.5, 0.3], [0.0, 0.0, 1.0]])
    counts = VerdictCounts.from_table(table)
    assert counts.total == pytest.approx(2.0)
    np.testing.assert_allclose(sorted(counts.n.tolist()), [[0.0, 0.0, 1.0], [0.2, 0.5, 0.3]])
    only_hard, _ = Outcomes.of([hard]).table(per_criterion=False)
    assert only_hard.probs is None  # nothing soft: the table stays hard
