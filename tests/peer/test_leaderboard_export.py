"""The leaderboard as Markdown and CSV (reports.ranking.leaderboard) on a style-controlled
fit: the uncontrolled Elo and rank change beside the controlled ones, and the note that
says what holding style equal assumes, in words a reader can take as they are."""

from __future__ import annotations

import csv
import io

from eigenjury.reports.ranking.leaderboard import leaderboard_text
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
