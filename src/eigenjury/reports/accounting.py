"""The cost of a run, as a terminal table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.records import AccountingRecord


def accounting_rows(accounting: AccountingRecord) -> list[dict[str, Any]]:
    """One row per (model, role), then the total, as plain data."""
    data = accounting.model_dump(mode="json")
    return [*data["by_model_and_role"], {"model": "total", "role": "", **data["total"]}]


def print_accounting(console: Console, accounting: AccountingRecord) -> None:
    table = Table(title="Calls and cost", title_justify="left")
    for name in (
        "model",
        "role",
        "calls",
        "cached",
        "errors",
        "tokens in",
        "tokens out",
        "cost USD",
        "latency p50 / p95 s",
    ):
        table.add_column(name, justify="left" if name in ("model", "role") else "right")
    rows = accounting_rows(accounting)
    for row in rows:
        errors = ", ".join(f"{k} {v}" for k, v in sorted(row["errors"].items())) or "0"
        cost = "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.4f}"
        if row["cost_usd"] is not None and not row["cost_complete"]:
            cost += " + unpriced"
        latency = row["latency_s"]
        table.add_row(  # model names are the user's: never markup
            escape(row["model"]),
            escape(row["role"]),
            str(row["calls"]),
            str(row["cached"]),
            escape(errors),
            f"{row['input_tokens']:,}",
            f"{row['output_tokens']:,}",
            cost,
            "-" if latency is None else f"{latency['p50']:.3f} / {latency['p95']:.3f}",
        )
    console.print(table)
