"""The cost of a run, as a terminal table."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.records import AccountingRecord, PlanRecord, Spread


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
    for line in endpoint_lines(accounting):
        console.print(escape(line), highlight=False)


def endpoint_lines(accounting: AccountingRecord) -> list[str]:
    """A sentence per endpoint whose limits did more than hold: refused calls, a
    concurrency learned or changed, rates the server stated."""
    lines = []
    for e in accounting.endpoints:
        said = []
        if e.rate_limited:
            said.append(f"{e.rate_limited} answers were 429s")
        if e.started_at != e.concurrency:
            said.append(f"started at {e.started_at} in flight, as an earlier run found")
        if e.ended_at != e.started_at:
            kept = " (kept for the next run)" if e.rate_limited else ""
            said.append(f"concurrency {e.started_at} -> {e.ended_at}{kept}")
        if e.paced_at is not None and e.paced_at != e.paced_from:
            start = "" if e.paced_from is None else f"{e.paced_from:.3g} -> "
            said.append(f"paced at {start}{e.paced_at:.3g} requests a second")
        stated = [
            f"{value:g} {what} a minute"
            for value, what in ((e.stated_rpm, "requests"), (e.stated_tpm, "tokens"))
            if value is not None
        ]
        if stated:
            said.append(f"the server allows {' and '.join(stated)} (kept under)")
        if said:
            lines.append(f"limits at {e.endpoint}: {'; '.join(said)}")
    return lines


def _usd(spread: Spread | None) -> str:
    if spread is None:
        return "unknown (no price)"
    return f"{spread.planned:.4f} ({spread.low:.4f}-{spread.high:.4f})"


def _tokens(spread: Spread | None) -> str:
    return "-" if spread is None else f"{spread.planned:,.0f}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def print_plan(console: Console, plan: PlanRecord) -> None:
    """The plan as a table per model and role, then the totals, the time and what each
    estimate rests on."""
    table = Table(title="Plan: calls and cost (nothing called)", title_justify="left")
    for name in PLAN_COLUMNS:
        # the role is never cut short (a narrow terminal folds it): it says what calls are
        fold: dict[str, Any] = {"overflow": "fold", "min_width": 10} if name == "role" else {}
        table.add_column(name, justify="left" if name in ("model", "role") else "right", **fold)
    for row in plan.by_model_and_role:
        role = f"{row.role} (at most)" if row.allowance else row.role
        table.add_row(
            *(
                escape(c)
                for c in (
                    row.model,
                    role,
                    str(row.calls if not row.allowance else row.to_send),
                    "-" if row.allowance else str(row.stored),
                    str(row.to_send),
                    _tokens(row.input_tokens),
                    _tokens(row.output_tokens),
                    _usd(row.cost_usd),
                )
            )
        )
    total = plan.total
    table.add_row(
        "total",
        "",
        str(total.calls),
        str(total.stored),
        str(total.to_send),
        _tokens(total.input_tokens),
        _tokens(total.output_tokens),
        escape(_usd(total.cost_usd)),
    )
    console.print(table)
    most = total.cost_usd_most
    if total.allowance_calls:
        console.print(
            f"calls made only as the replies require (repairs, escalations): at most "
            f"{total.allowance_calls}"
            + ("" if most is None else f"; with every one, at most ${most:.4f} in all"),
            highlight=False,
        )
    uncapped = sum(row.uncapped for row in plan.by_model_and_role)
    if uncapped:
        console.print(
            f"[yellow]note:[/] {uncapped} calls set no max_tokens: their replies have no upper "
            "bound, so neither has the cost (set max_tokens for a firm one)",
            highlight=False,
        )
    time = plan.time_s
    batched = any(model.batched for model in plan.models)
    console.print(
        ("time, with batches: " if batched else "time under the configured limits: ")
        + f"about {_duration(time.planned)}"
        + (f" (up to {_duration(time.high)})" if time.high > time.planned * 1.05 else "")
        + ("; most batches end within the hour, every one within 24 h" if batched else ""),
        highlight=False,
    )
    for model in plan.models:
        basis = (
            f"its {model.history_calls} calls in the store"
            if any(r.from_history for r in plan.by_model_and_role if r.model == model.model)
            else "a proxy: four characters a token, replies at their max_tokens (no history "
            "in the store)"
        )
        latency = (
            "through its batch API, at half price"
            if model.batched
            else f"{model.latency_s:.2f} s a call"
            if model.latency_s is not None
            else "assumed latency"
        )
        price = "" if model.priced else "; no price known: give one with --prices"
        console.print(
            f"  {escape(model.model)}: tokens from {basis}; {latency}{price}", highlight=False
        )
    for sentence in plan.budgets:
        console.print(f"[yellow]over budget:[/] {escape(sentence)}", highlight=False)


PLAN_COLUMNS = (
    "model",
    "role",
    "calls",
    "stored/repeat",
    "to send",
    "tokens in",
    "tokens out",
    "cost USD (range)",
)
