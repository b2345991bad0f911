"""The cost of a run, as a terminal table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.records import AccountingRecord


def _rows(accounting: AccountingRecord) -> list[dict[str, Any]]:
    """One row per (model, role), then the total, as plain data."""
    data = accounting.model_dump(mode="json")
    return [*data["by_model_and_role"], {"model": "total", "role": "", **data["total"]}]


ACCOUNTING_COLUMNS = (
    "model",
    "role",
    "calls",
    "cached",
    "errors",
    "tokens in",
    "tokens out",
    "cost USD",
    "latency p50 / p95 s",
)


def accounting_cells(accounting: AccountingRecord) -> list[list[str]]:
    """Each row of the cost table as text (ACCOUNTING_COLUMNS), the total last; shared by
    the terminal table and the HTML reports."""
    cells = []
    for row in _rows(accounting):
        errors = ", ".join(f"{k} {v}" for k, v in sorted(row["errors"].items())) or "0"
        cost = "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
        if row["cost_usd"] is not None and not row["cost_complete"]:
            cost += " + unpriced"
        latency = row["latency_s"]
        cells.append(
            [
                row["model"],
                row["role"],
                str(row["calls"]),
                str(row["cached"]),
                errors,
                f"{row['input_tokens']:,}",
                f"{row['output_tokens']:,}",
                cost,
                "-" if latency is None else f"{latency['p50']:.3f} / {latency['p95']:.3f}",
            ]
        )
    return cells


def print_accounting(console: Console, accounting: AccountingRecord) -> None:
    table = Table(title="Calls and cost", title_justify="left")
    for name in ACCOUNTING_COLUMNS:
        table.add_column(name, justify="left" if name in ("model", "role") else "right")
    for cells in accounting_cells(accounting):
        table.add_row(*(escape(c) for c in cells))  # model names are the user's: never markup
    console.print(table)
