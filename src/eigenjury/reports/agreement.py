"""The agreement of judges with a reference judge, as a terminal table with the
conventions it rests on (`eigenjury agreement`, `fit --agreement`).

Judge names come from data files: they are escaped and printed without rich's
highlighting. The viewer shows the record as JSON; no HTML report is written.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.peer.record import AgreementTable
from eigenjury.records import EstimatePart
from eigenjury.reports.kit import estimate_text


def _cell(value: EstimatePart) -> str:
    return estimate_text(value.model_dump(), ".3f")


def print_agreement(console: Console, table: AgreementTable) -> None:
    """Each judge's agreement, then its biases (two tables, best agreement first, so
    that intervals fit a terminal), then what the numbers mean."""
    references = ", ".join(table.references)
    agreement = Table(
        title=f"Agreement with the reference majority ({references})", title_justify="left"
    )
    biases = Table(title="Judges' biases on the same comparisons", title_justify="left")
    for shown, columns in (
        (agreement, ("comparisons", "agreement", "decisive agreement", "kappa")),
        (biases, ("pairs in both orders", "flip share", "first slot", "longer")),
    ):
        shown.add_column("judge")
        for name in columns:
            shown.add_column(name, justify="right")
    for row in table.judges:
        name = escape(row.judge) + (" (reference)" if row.reference else "")
        agreement.add_row(
            name,
            f"{row.with_majority}/{row.comparisons}",
            _cell(row.agreement),
            _cell(row.agreement_decisive),
            _cell(row.kappa),
        )
        biases.add_row(
            name,
            f"{row.flip_pairs:g}",
            _cell(row.flip_share),
            _cell(row.position_bias),
            _cell(row.longer_preference),
        )
    console.print(agreement, highlight=False)
    console.print(biases, highlight=False)
    boot = table.settings.bootstrap
    ci_pct = f"{100 * table.settings.ci:g}%"
    intervals = (
        f"intervals: {ci_pct} percentile, {boot} scenario-bootstrap rounds"
        if boot
        else "no intervals (--bootstrap 0)"
    )
    notes = [
        f"{table.comparisons} comparisons (scenario, pair of evaluees) judged by the "
        f"references; {table.without_majority} have no majority (outcomes tied for the "
        "largest weight) and are left out of agreement and kappa",
        "comparisons: those with a majority / those the judge shares with the references; "
        "outcomes are who won or a tie, whatever the order shown; a tie is a third "
        "outcome, not half a win",
        "agreement: share of verdicts equal to the majority; decisive agreement: the same "
        "where both the verdict and the majority name a winner; kappa: Cohen's, over the "
        "three outcomes, each comparison counted in both orientations (0 = a judge that "
        "ties at its own rate and otherwise names the winner by a coin flip); kappa "
        "used to change with the models' names, and no longer does",
        "flip share: pairs judged in both orders whose outcome changes with the order; "
        "first slot: share of decisive verdicts for the reply shown first (0.5 = no "
        "position bias); longer: share of decisive verdicts for the longer reply (0.5 = "
        "no length bias; '-' without lengths)",
        "a reference is compared with the majority of the other references ('-' when it "
        f"is the only one); {intervals}",
    ]
    for note in notes:
        console.print(f"[dim]{escape(note)}[/]", highlight=False)
