"""Ranking records with style control, fitted on a simulated population (under a
second): what the terminal summary, the static report and the viewer are shown."""

from __future__ import annotations

import dataclasses

import numpy as np

from eigenjury.peer.fitting import ranking_record
from eigenjury.peer.record import RankingRecord
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.simulate import make_population, simulate_verdicts
from eigenjury.stats.verdicts import ReplyFeatures


def fitted(*, bootstrap: int = 40, constant: bool = False, **style: object) -> RankingRecord:
    """Four models that differ in verbosity, judged by each other with a taste for
    length, fitted with the given style settings (none: no style control); `constant`:
    every reply as long as the others, so length is left out of style control."""
    population = make_population(4, 1, verbosity=0.6, style_effect=1.0, seed=0)
    table = simulate_verdicts(population, n_scenarios=100, seed=0)
    if constant:
        same = np.ones((len(table), 1))
        table = dataclasses.replace(table, features=ReplyFeatures(("length",), same, same))
    ranking = PeerRanking(1, bootstrap=bootstrap, n_jobs=1, **style)  # type: ignore[arg-type]
    return ranking_record(ranking.fit(table), source="verdicts.csv")


def with_rank_change(record: RankingRecord) -> RankingRecord:
    """The record with a rank change planted: the last two models swap places once style
    is held equal and the first two keep theirs (whatever the fit said)."""
    first, second, third, fourth = record.models
    first.rank_change, second.rank_change = 0, 0
    third.rank_change, fourth.rank_change = -1, 1
    return record
