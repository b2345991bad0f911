"""A ranking record's leaderboard as a plain table, to paste or to load elsewhere:
`eigenjury export-leaderboard`. Markdown is for reading (numbers rounded as the
terminal rounds them, the notes that qualify them under the table); CSV is for
programs (the record's values as stored, an empty cell where there is none)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Literal

from eigenjury.peer.record import RankingRecord
from eigenjury.reports.ranking.words import (
    BASELINE_COLUMNS,
    STYLE_ASSUMPTION_SHORT,
    UNCONTROLLED,
    above_rows,
    baseline_cells,
    baseline_title,
    battle_columns,
    battle_row,
    elo_rule,
    held_equal,
    interval_source,
    intervals_note,
    is_battles,
    is_styled,
    leaderboard_row,
    rank_ub_note,
    upper_bound_ranks,
)

LeaderboardFormat = Literal["md", "csv"]


def leaderboard_text(record: RankingRecord, form: LeaderboardFormat) -> str:
    return _markdown(record) if form == "md" else _csv(record)


def _level(record: RankingRecord) -> str:
    return f"{100 * record.settings.ci:g}%"


def _markdown(record: RankingRecord) -> str:
    level, styled = _level(record), is_styled(record)
    ranks = upper_bound_ranks(record.models)
    if is_battles(record):  # LMArena's layout
        headers = battle_columns(level, styled)
        rows = [
            battle_row(m, rank, styled, _cell(m.name))
            for m, rank in zip(record.models, ranks, strict=True)
        ]
    else:
        headers = ["rank", f"rank {level}", "model", "Elo", f"Elo {level}"]
        headers += [*UNCONTROLLED] if styled else []
        headers += ["trust", "verdicts"]
        rows = [leaderboard_row(m, styled, _cell(m.name)) for m in record.models]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    notes = [
        f"Elo {level}: {interval_source(record)}"
        if record.settings.bootstrap
        else "no intervals: fitted without bootstrap",
        intervals_note(record),
        elo_rule(record),
        rank_ub_note(record),
    ]
    if styled:
        notes += [
            f"{held_equal(record)} {STYLE_ASSUMPTION_SHORT}",
            "change: places a model gains once style is held equal",
        ]
    above = above_rows(record)
    if record.settings.pairwise_intervals is not None:
        shown = "; ".join(f"{name} > {below}" for name, below in above)
        notes.append(f"above (family-wise {level}): {shown or 'none'}")
    text = "\n".join(lines) + "\n\n" + "".join(f"- {_cell(n)}\n" for n in notes if n)
    if record.baseline is not None:  # the baseline design's win rates, under their title
        part = record.baseline
        rows = [baseline_cells(r, _cell(r.model)) for r in part.models]
        table = ["| " + " | ".join(BASELINE_COLUMNS) + " |", "|" + "---|" * len(BASELINE_COLUMNS)]
        table += ["| " + " | ".join(row) + " |" for row in rows]
        text += f"\n{_cell(baseline_title(part, level))}\n\n" + "\n".join(table) + "\n"
    return text


def _cell(text: str) -> str:
    """Text safe in a Markdown table cell: a pipe would split it."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _csv(record: RankingRecord) -> str:
    level = f"{100 * record.settings.ci:g}"
    styled = is_styled(record)
    headers = ["rank", f"rank_low_{level}", f"rank_high_{level}", "model", "elo",
               f"elo_low_{level}", f"elo_high_{level}"]  # fmt: skip
    headers += ["elo_uncontrolled", "rank_change"] if styled else []
    headers += ["trust", "verdicts", "rank_ub"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(headers)
    for m, rank_ub in zip(record.models, upper_bound_ranks(record.models), strict=True):
        writer.writerow(
            [
                m.rank,
                *_pair(m.rank_ci),
                m.name,
                m.elo,
                *_pair(m.elo_ci),
                *([_blank(m.elo_uncontrolled), _blank(m.rank_change)] if styled else []),
                m.trust,
                _blank(m.verdicts_as_evaluee),
                _blank(rank_ub),
            ]
        )
    return out.getvalue()


def _pair(interval: Sequence[float | int | None] | None) -> list[object]:
    if not interval:
        return ["", ""]
    return [_blank(interval[0]), _blank(interval[1])]


def _blank(value: object) -> object:
    """A cell: empty for None, a whole number without ".0"."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
