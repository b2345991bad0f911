"""What the ranking's tables say: the leaderboard as Markdown and CSV
(reports.ranking.leaderboard) on a style-controlled fit, with the note that says what
holding style equal assumes; a judge whose estimates sit at the fit's bound."""

from __future__ import annotations

import csv
import io

import numpy as np
from rich.console import Console

from eigenjury.peer.fitting import ranking_record
from eigenjury.peer.record import ModelRow
from eigenjury.reports.ranking import print_summary
from eigenjury.reports.ranking.html import render
from eigenjury.reports.ranking.leaderboard import leaderboard_text
from eigenjury.reports.ranking.words import SLOT_BOUND, plus_minus_cell, upper_bound_ranks
from eigenjury.stats.btd import _LOG_BOUND
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.simulate import make_population, simulate_verdicts
from eigenjury.stats.verdicts import FIRST, VerdictTable
from style_records import fitted, with_rank_change


def test_a_style_controlled_leaderboard_says_what_it_holds_equal() -> None:
    record = with_rank_change(fitted(style=("length",)))
    markdown = leaderboard_text(record, "md")
    header = markdown.splitlines()[0]
    assert "Elo uncontrolled" in header and "change" in header
    notes = [line for line in markdown.splitlines() if line.startswith("- ")]
    [held] = [n for n in notes if "held equal (" in n]
    assert held.startswith("- Elo with style held equal (") and held.count("held equal") == 1
    rows = list(csv.DictReader(io.StringIO(leaderboard_text(record, "csv"))))
    assert [r["model"] for r in rows] == [m.name for m in record.models]
    assert [r["rank_change"] for r in rows] == [str(m.rank_change) for m in record.models]
    assert [float(r["elo_uncontrolled"]) for r in rows] == [
        m.elo_uncontrolled for m in record.models
    ]


def test_a_judge_at_the_slot_bound_is_said_to_answer_by_slot() -> None:
    """A judge that always picks the first reply drives its position bias to the fit's
    bound; the tables say so rather than print the bound (+15.00) and a tie propensity
    no verdict determines as estimates."""
    population = make_population(4, 1, seed=2)
    table = simulate_verdicts(population, n_scenarios=60, seed=2)
    names = np.array(table.models)
    rows = np.flatnonzero(table.judge == 0)
    locked = VerdictTable.from_columns(
        np.array(table.scenarios)[np.concatenate([table.scenario, table.scenario[rows]])],
        np.concatenate([names[table.judge], np.full(len(rows), "locked")]),
        np.concatenate([names[table.first], names[table.first[rows]]]),
        np.concatenate([names[table.second], names[table.second[rows]]]),
        np.concatenate([table.verdict, np.full(len(rows), FIRST)]),
    )
    record = ranking_record(PeerRanking(1, bootstrap=40, n_jobs=1).fit(locked), source="v.csv")
    [judge] = [j for j in record.judges if j.name == "locked"]
    assert judge.position_bias == SLOT_BOUND == _LOG_BOUND
    console = Console(record=True, width=250)
    print_summary(console, record)
    text = console.export_text()
    assert "always the first slot (at the bound)" in text
    assert "not determined (answers by slot)" in text and "+15.00" not in text
    page = render(record)
    assert "always the first slot (at the bound)" in page


def _row(name: str, elo: float, low: float | None, high: float | None, rank: int) -> ModelRow:
    return ModelRow(
        name=name,
        elo=elo,
        elo_ci=[low, high],
        trust=0.25,
        trust_ci=None,
        rank=rank,
        rank_ci=None,
        verdicts_as_evaluee=10.0,
    )


def test_rank_ub_counts_the_models_wholly_above_and_open_ends_reach_infinity() -> None:
    models = [
        _row("a", 1700, 1650, None, 1),  # a perfect record: open above
        _row("b", 1600, 1580, 1660, 2),  # overlaps a: a's low 1650 < 1660
        _row("c", 1500, 1450, 1560, 3),  # below a and b
        _row("d", 1480, None, 1590, 4),  # open below; b's low 1580 < 1590, a's 1650 above
    ]
    assert upper_bound_ranks(models) == [1, 1, 3, 2]
    assert [plus_minus_cell(m) for m in models] == ["+∞/-50", "+60/-20", "+60/-50", "+110/-∞"]
    assert upper_bound_ranks([models[0].model_copy(update={"elo_ci": None}), models[1]]) == [
        None,
        None,
    ]


def test_battles_get_lmarena_s_leaderboard_and_peer_verdicts_keep_theirs() -> None:
    rng = np.random.default_rng(4)
    models = np.array(["m0", "m1", "m2", "m3"])
    strength = np.array([1.0, 0.4, 0.0, -0.8])
    first = rng.integers(4, size=3000)
    second = (first + 1 + rng.integers(3, size=3000)) % 4
    wins = rng.random(3000) < 1 / (1 + np.exp(strength[second] - strength[first]))
    battles = VerdictTable.from_columns(
        np.arange(3000).astype(str),
        np.full(3000, "crowd"),
        models[first],
        models[second],
        np.where(wins, FIRST, 2),
    )
    record = ranking_record(PeerRanking(1, bootstrap=40, n_jobs=1).fit(battles), source="b.csv")
    markdown = leaderboard_text(record, "md")
    assert markdown.splitlines()[0] == "| Rank (UB) | model | Elo | 95% CI | votes |"
    assert "| 1 | m0 |" in markdown and "Rank (UB): 1 + the number of models" in markdown
    rows = list(csv.DictReader(io.StringIO(leaderboard_text(record, "csv"))))
    assert [int(r["rank_ub"]) for r in rows] == upper_bound_ranks(record.models)
    console = Console(record=True, width=200)
    print_summary(console, record)
    assert "Rank (UB)" in console.export_text() and "rank 95%" not in console.export_text()
    peer = fitted(style=("length",))
    assert leaderboard_text(peer, "md").splitlines()[0].startswith("| rank | rank 95% | model |")
