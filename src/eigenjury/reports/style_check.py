"""What `eigenjury style-check` prints: each judge's taste for length beside the run's
fitted coefficient, the leaderboard with the coefficient held at the taste, and what it
means in plain sentences (the viewer shows the same sentences)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.peer.record import LOCKED, SUBSTANCE, TASTE, UNDER, StyleCheckRecord, TasteRow
from eigenjury.reports.accounting import print_accounting
from eigenjury.reports.kit import fmt

TASTE_UNIT = (
    "taste: the log-odds a judge adds to the longer of two replies with the same content, "
    "per standard deviation of normalised length difference (the unit of the fitted "
    "coefficient); share: verdicts for the longer reply, a tie counting half"
)


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def open_interval(value: float | None, ci: list[float | None] | None, unbounded: str | None) -> str:
    """ "+0.41 [+0.10, +0.72]"; an unbounded taste as "above +3.1" or "below -3.1"."""
    if unbounded is not None and ci is not None:
        end = ci[0] if unbounded == "above" else ci[1]
        return f"{unbounded} {_signed(end)}"
    if value is None:
        return "-"
    if not ci:
        return _signed(value)
    low, high = (
        ("-∞" if ci[0] is None else _signed(ci[0])),
        ("∞" if ci[1] is None else _signed(ci[1])),
    )
    return f"{_signed(value)} [{low}, {high}]"


def _share(row: TasteRow) -> str:
    if row.share_ci is None:
        return f"{row.share:.0%}"
    return f"{row.share:.0%} [{row.share_ci[0]:.0%}, {row.share_ci[1]:.0%}]"


# The readings, short enough for a table column (the sentences say them in full).
SHORT = {
    SUBSTANCE: "fitted above taste: control removes substance",
    UNDER: "fitted below taste",
    TASTE: "fitted within taste",
    LOCKED: "answered by position",
}


def _cells(row: TasteRow) -> list[str]:
    return [
        "all judges, pooled" if row.judge is None else row.judge,
        f"{row.longer:g} / {row.shorter:g} / {row.ties:g}",
        _share(row),
        open_interval(row.taste, row.taste_ci, row.unbounded),
        open_interval(row.fitted, list(row.fitted_ci) if row.fitted_ci else None, None),
        open_interval(row.difference, row.difference_ci, None),
        SHORT.get(row.reading or "", "-"),
    ]


HEADERS = [
    "judge",
    "longer / shorter / tie",
    "share for the longer",
    "taste (log-odds per sd)",
    "fitted coefficient",
    "fitted minus taste",
    "reading",
]


def meaning(record: StyleCheckRecord) -> list[str]:
    """What the check found, in plain sentences."""
    edits = record.edits
    judges = len(record.judges)
    short = f", {edits.short} of them short of it as the filler ran out" if edits.short else ""
    lines = [
        f"{edits.replies} of the run's replies were made longer by neutral filler sentences "
        f"that add no content (aiming at a normalised length difference of {edits.target:.2f}, "
        f"one standard deviation of the run's; {edits.achieved:.2f} reached on average"
        f"{short}), and each of the {judges} judges compared each with itself unchanged, in "
        f"both orders: {record.pooled.verdicts:g} verdicts."
    ]
    pooled = record.pooled
    ci = f"{100 * record.ci:g}%"
    taste = open_interval(pooled.taste, pooled.taste_ci, pooled.unbounded)
    found = (
        f"Pooled over judges, the longer same-content reply got {_share(pooled)} of the "
        f"verdicts: a taste of {taste} log-odds per standard deviation ({ci})"
    )
    if pooled.fitted is None:
        lines.append(found + "; the run has no shared length coefficient to compare it with.")
    else:
        fitted = open_interval(pooled.fitted, list(pooled.fitted_ci or []) or None, None)
        lines.append(f"{found}, against the run's fitted coefficient {fitted}: {pooled.reading}.")
    if pooled.reading == SUBSTANCE:
        lines.append(
            "The controlled Elo removes that substance too; the leaderboard with the length "
            "coefficient held at the measured taste is the better reading."
        )
    elif pooled.reading == UNDER:
        lines.append(
            "The leaderboard with the length coefficient held at the measured taste is the "
            "better reading."
        )
    elif pooled.fitted is not None:
        lines.append(
            "As far as this check can tell, style control's assumption holds for length: "
            "the controlled Elo stands."
        )
    tasteful = [str(r.judge) for r in record.judges if r.taste_ci and _excludes_zero(r)]
    if tasteful:
        lines.append(f"Judges moved by length alone: {', '.join(tasteful)}.")
    locked = [str(r.judge) for r in record.judges if r.position_locked]
    if locked:
        their = "their" if len(locked) > 1 else "its"
        lines.append(
            f"{', '.join(locked)} answered by position (every decisive verdict in the same "
            f"slot): no taste can be read from {their} verdicts."
        )
    lines.append(
        "Filler is one kind of length: a judge may weigh padding otherwise than the words a "
        "fuller answer takes, so the taste measured here is that for added neutral words."
    )
    return lines


def _excludes_zero(row: TasteRow) -> bool:
    assert row.taste_ci is not None
    low, high = row.taste_ci
    return (low is not None and low > 0) or (high is not None and high < 0)


def print_style_check(console: Console, record: StyleCheckRecord) -> None:
    ci = f"{100 * record.ci:g}%"
    board = Table(
        title=f"Taste for length, measured on same-content edits ({ci} intervals)",
        title_justify="left",
        caption=escape(
            f"{TASTE_UNIT}; the unit: a standard deviation of {record.edits.scale:.3g} "
            f"({record.edits.scale_source})"
        ),
        caption_justify="left",
    )
    for header in HEADERS:
        board.add_column(header, justify="left" if header in ("judge", "reading") else "right")
    for row in [*record.judges, record.pooled]:
        board.add_row(*map(escape, _cells(row)))
    console.print(board)
    leaderboard = record.leaderboard
    if leaderboard is not None:
        held = ", ".join(f"{k} {v:+.2f}" for k, v in leaderboard.held.items())
        models = Table(
            title=f"Elo with the length coefficient held at the measured taste ({held})",
            title_justify="left",
            caption="its intervals hold the taste at its estimate: the taste's own interval "
            "is not in them",
            caption_justify="left",
        )
        for header in (
            "rank",
            "model",
            "Elo at taste",
            f"Elo {ci}",
            "Elo controlled",
            "Elo uncontrolled",
        ):
            models.add_column(header, justify="left" if header == "model" else "right")
        for m in leaderboard.models:
            interval = (
                "-"
                if m.elo_ci is None
                else "[" + ", ".join("∞" if v is None else f"{v:.0f}" for v in m.elo_ci) + "]"
            )
            models.add_row(
                str(m.rank),
                escape(m.name),
                f"{m.elo:.0f}",
                interval,
                f"{m.elo_controlled:.0f}",
                fmt(m.elo_uncontrolled),
            )
        console.print(models)
    if record.failures:
        failed = ", ".join(f"{k} {v}" for k, v in record.failures.items())
        lost = f"of {record.comparisons} comparisons, these gave no verdict: {failed}"
        console.print(f"[yellow]warning:[/] {escape(lost)}", highlight=False)
    for warning in record.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    print_accounting(console, record.accounting)
    console.print()
    for sentence in meaning(record):
        console.print(sentence, highlight=False, markup=False)
