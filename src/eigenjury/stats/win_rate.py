"""Win rates against a baseline, with a question-cluster bootstrap: Arena-Hard's score.

Beside the fitted Elo, people who judge against a baseline read a plain number: of
the verdicts between a model and the baseline, the share the model won, a tie
counting half. Verdicts on one question are not independent (the same two answers,
judged in both orders and by several judges), so the interval resamples questions,
not verdicts: each round draws the questions with replacement (a multinomial count per
question) and recomputes every model's rate from per-question sums, so a round costs a
matrix product, whatever the number of verdicts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    TIE,
    DataError,
    FloatArray,
    VerdictTable,
    certain,
    tally,
)


@dataclass(frozen=True)
class WinRates:
    """Per model other than the baseline (in `models` order): its win rate against the
    baseline (ties half), the interval's ends (NaN where no round had a verdict), and
    the weighted verdicts behind it: wins, ties, losses."""

    baseline: str
    models: tuple[str, ...]
    rate: FloatArray
    low: FloatArray
    high: FloatArray
    wins: FloatArray
    ties: FloatArray
    losses: FloatArray

    @property
    def verdicts(self) -> FloatArray:
        return self.wins + self.ties + self.losses


def baseline_win_rates(
    table: VerdictTable, baseline: str, *, rounds: int = 200, ci: float = 0.95, seed: int = 0
) -> WinRates:
    """Each model's win rate against `baseline` over the verdicts that compare the two
    (either order, any judge; each row at its weight, a soft verdict at its label
    probabilities), with a percentile interval from `rounds` question resamples (none:
    the ends are NaN)."""
    if baseline not in table.models:
        raise DataError(f"'{baseline}' is not among the verdicts' models")
    b = table.models.index(baseline)
    against = (table.first == b) ^ (table.second == b)
    rows = np.flatnonzero(against)
    if not len(rows):
        raise DataError(f"no verdict compares a model with the baseline '{baseline}'")
    other = np.where(table.first[rows] == b, table.second[rows], table.first[rows])
    probs = table.probs[rows] if table.probs is not None else certain(table.verdict[rows])
    weight = table.weight[rows]
    other_first = table.first[rows] != b
    won = np.where(other_first, probs[:, FIRST], probs[:, SECOND]) * weight
    lost = np.where(other_first, probs[:, SECOND], probs[:, FIRST]) * weight
    tied = probs[:, TIE] * weight
    present = np.unique(other)
    n_models, n_scenarios = len(present), len(table.scenarios)
    column = np.searchsorted(present, other)
    cell = table.scenario[rows].astype(np.int64) * n_models + column  # (question, model) sums

    def per_question(values: FloatArray) -> FloatArray:
        return tally(cell, values, n_scenarios * n_models).reshape(n_scenarios, n_models)

    score, total = per_question(won + tied / 2), per_question(won + tied + lost)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = score.sum(axis=0) / total.sum(axis=0)
        low = high = np.full(n_models, np.nan)
        if rounds > 0:
            asked = np.flatnonzero(total.sum(axis=1) > 0)  # questions with such a verdict
            rng = np.random.default_rng(seed)
            draws = rng.multinomial(len(asked), np.full(len(asked), 1 / len(asked)), size=rounds)
            rates = (draws @ score[asked]) / (draws @ total[asked])
            tail = 100 * (1 - ci) / 2
            low, high = np.nanpercentile(rates, [tail, 100 - tail], axis=0)
    return WinRates(
        baseline,
        tuple(table.models[i] for i in present),
        rate,
        low,
        high,
        tally(column, won, n_models),
        tally(column, tied, n_models),
        tally(column, lost, n_models),
    )
