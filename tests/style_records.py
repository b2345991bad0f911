"""Ranking records with style control, fitted on a simulated population (under a
second): what the terminal summary, the static report and the viewer are shown."""

from __future__ import annotations

import dataclasses

import numpy as np

from eigenjury.peer.fitting import ranking_record
from eigenjury.peer.record import SUBSTANCE, RankingRecord, StyleCheckRecord
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
    is held equal, the others keep theirs."""
    *others, third, fourth = record.models
    for model in others:  # (the fit itself may move them: since issue 26 it does)
        model.rank_change = 0
    third.rank_change, fourth.rank_change = -1, 1
    return record


def style_check(ranking: RankingRecord) -> StyleCheckRecord:
    """A style check of `ranking` as `eigenjury style-check` writes it: one judge with a
    taste, one without, the fitted coefficient above their pooled taste, and the
    leaderboard held at that taste (numbers made up; their shape is the command's)."""
    tally = {
        "calls": 160,
        "cached": 0,
        "errors": {},
        "input_tokens": 48_000,
        "output_tokens": 160,
        "cost_usd": 0.0,
        "cost_complete": True,
        "latency_s": None,
    }
    judge = {"verdicts": 80.0, "ties": 4.0, "share_ci": [0.5, 0.7]}
    return StyleCheckRecord.model_validate(
        {
            "source": "runs/styled",
            "run_name": "styled",
            "judging": "single",
            "ci": 0.95,
            "bootstrap": 300,
            "edits": {
                "edit": "neutral filler sentences",
                "replies": 40,
                "seed": 0,
                "target": 0.3,
                "achieved": 0.29,
                "short": 2,
                "scale": 0.3,
                "scale_source": "the run's style control",
            },
            "judges": [
                {
                    **judge,
                    "judge": "model-0",
                    "longer": 55.0,
                    "shorter": 21.0,
                    "share": 0.71,
                    "taste": 0.62,
                    "taste_ci": [0.3, 0.95],
                },
                {
                    **judge,
                    "judge": "model-1",
                    "longer": 37.0,
                    "shorter": 39.0,
                    "share": 0.49,
                    "taste": -0.03,
                    "taste_ci": [-0.33, 0.27],
                },
            ],
            "pooled": {
                "judge": None,
                "verdicts": 160.0,
                "longer": 92.0,
                "shorter": 60.0,
                "ties": 8.0,
                "share": 0.6,
                "share_ci": [0.55, 0.65],
                "taste": 0.3,
                "taste_ci": [0.1, 0.5],
                "fitted": 1.1,
                "fitted_ci": [0.8, 1.4],
                "difference": 0.8,
                "difference_ci": [0.44, 1.16],
                "reading": SUBSTANCE,
            },
            "comparisons": 160,
            "failures": {},
            "accounting": {"total": tally, "by_model_and_role": []},
            "warnings": [],
            "leaderboard": {
                "held": {"length": 0.3},
                "models": [
                    {
                        "name": m.name,
                        "elo": m.elo + 5 * (2 - m.rank),
                        "elo_ci": m.elo_ci,
                        "rank": m.rank,
                        "elo_controlled": m.elo,
                        "elo_uncontrolled": m.elo_uncontrolled,
                    }
                    for m in ranking.models
                ],
            },
        }
    )
