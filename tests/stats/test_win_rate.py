"""Win rates against a baseline: exact counting, and intervals that cover the truth
when verdicts on one question hang together."""

from __future__ import annotations

import numpy as np
import pytest

from eigenjury.stats.verdicts import DataError, VerdictTable
from eigenjury.stats.win_rate import baseline_win_rates


def test_wins_ties_and_losses_count_in_either_order_and_soft_verdicts_by_probability() -> None:
    table = VerdictTable.from_columns(
        scenario=["q1", "q1", "q2", "q2", "q3", "q3"],
        judge=["j"] * 6,
        first=["base", "a", "base", "a", "b", "b"],
        second=["a", "base", "a", "base", "base", "a"],  # the last row leaves base out
        verdict=[2, 1, 0, 2, 1, 1],  # a wins, a wins, tie, base wins; b wins
    )
    rates = baseline_win_rates(table, "base", rounds=0)
    got = dict(zip(rates.models, rates.rate, strict=True))
    assert got == {"a": pytest.approx((1 + 1 + 0.5 + 0) / 4), "b": 1.0}
    a = rates.models.index("a")
    assert (rates.wins[a], rates.ties[a], rates.losses[a]) == (2, 1, 1)
    assert np.isnan(rates.low).all()  # no rounds, no interval
    soft = VerdictTable.from_columns(
        scenario=["q1"], judge=["j"], first=["a"], second=["base"], verdict=[1],
        probs=[[0.2, 0.5, 0.3]],
    )  # fmt: skip
    assert baseline_win_rates(soft, "base", rounds=0).rate[0] == pytest.approx(0.5 + 0.1)
    with pytest.raises(DataError, match="no verdict compares a model with the baseline 'a'"):
        a_code = table.models.index("a")
        baseline_win_rates(table.select((table.first != a_code) & (table.second != a_code)), "a")


def _study(rng: np.random.Generator, questions: int, spread: float) -> VerdictTable:
    """A model against a baseline: each question moves the model's log-odds by its own
    difficulty (sd `spread`), judged in both orders by two judges, so the four verdicts
    on a question agree more than independent ones would."""
    shift = rng.normal(0.0, spread, questions)
    rows = np.repeat(np.arange(questions), 4)
    p_win = 1 / (1 + np.exp(-(0.4 + shift[rows])))
    won = rng.random(len(rows)) < p_win
    model_first = np.tile([True, False, True, False], questions)
    verdict = np.where(won == model_first, 1, 2)
    first = np.where(model_first, "model", "base")
    second = np.where(model_first, "base", "model")
    judge = np.tile(["j1", "j1", "j2", "j2"], questions)
    return VerdictTable.from_columns(rows, judge, first, second, verdict)


def test_question_resampled_intervals_cover_the_true_win_rate() -> None:
    """With questions that differ a lot (sd 2 logits), 200 studies of 60 questions: the
    95% intervals cover the population's win rate in about 95% of studies (resampling
    verdicts as if independent would cover far less)."""
    rng = np.random.default_rng(7)
    draws = rng.normal(0.0, 2.0, 2_000_000)
    truth = float(np.mean(1 / (1 + np.exp(-(0.4 + draws)))))
    covered = []
    for seed in range(200):
        rates = baseline_win_rates(_study(rng, 60, 2.0), "base", rounds=400, seed=seed)
        covered.append(rates.low[0] <= truth <= rates.high[0])
    assert 0.90 <= np.mean(covered) <= 0.99
