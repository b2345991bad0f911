"""The report of a grading run: a self-contained HTML page and a terminal table.

Per submission, a vote matrix (criteria x jurors) with split criteria highlighted, and
every juror's full reply behind a disclosure. All text from models, contracts and
submissions is escaped: it is untrusted and must never become markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.contracts.grading import CriterionResult, TaskResult
from eigenjury.files import write_text
from eigenjury.reports.kit import CSS, e, estimate_text, money, table

_MORE_CSS = """
.votes td.C{background:#e3f6e8;color:#146c2e;text-align:center}
.votes td.I{background:#fdeaea;color:#9b1c1c;text-align:center}
.votes td.U{background:#f1f1f4;color:#667085;text-align:center}
.votes tr.split td.l{border-left:4px solid #f5a623}
.pass{color:#146c2e;font-weight:600}.fail{color:#9b1c1c;font-weight:600}
"""
_CELL = {"C": ("C", "C"), "I": ("I", "I"), None: ("U", "?")}


def _vote_matrix(r: TaskResult, jurors: Sequence[str]) -> str:
    judged = [c for c in r.criteria if c.by_jury and c.votes]
    others = [c for c in r.criteria if not (c.by_jury and c.votes)]
    out = []
    if judged:
        names = list(dict.fromkeys([*jurors, *(v.juror for c in judged for v in c.votes)]))
        head = "".join(f"<th>{e(n)}</th>" for n in names)
        rows = []
        for c in judged:
            by = {v.juror: v for v in c.votes}
            cells = []
            for n in names:
                v = by.get(n)
                if v is None:
                    cells.append("<td></td>")
                    continue
                css, label = _CELL[v.grade] if v.error is None else ("U", "err")
                cells.append(f'<td class="{css}" title="{e(v.error or "")}">{label}</td>')
            split = ' class="split"' if c.split else ""
            mark = " (split)" if c.split else ""
            via = " · escalated" if c.escalated_from else ""
            rows.append(
                f'<tr{split}><td class="l">{e(c.criterion.id)}{mark}{via}</td>'
                f"<td>{c.criterion.weight:g}</td>{''.join(cells)}"
                f'<td class="{"pass" if c.passed else "fail"}">'
                f"{'pass' if c.passed else 'fail'}</td></tr>"
            )
        out.append(
            f'<table class="votes"><tr><th class="l">criterion</th><th>weight</th>{head}'
            f"<th>outcome</th></tr>{''.join(rows)}</table>"
        )
    if others:
        out.append(
            table(
                ["criterion", "grader", "weight", "outcome", "why"],
                [
                    [
                        c.criterion.id,
                        c.criterion.grader,
                        f"{c.criterion.weight:g}",
                        "pass" if c.passed else "fail",
                        c.explanation,
                    ]
                    for c in others
                ],
            )
        )
    return "".join(out)


def _replies(c: CriterionResult) -> str:
    parts = []
    for v in c.all_votes():
        text = v.text if v.error is None else f"call failed: {v.error}"
        retry = (
            f"<p><b>After the repair request</b></p><pre>{e(v.retry_text)}</pre>"
            if v.retry_text
            else ""
        )
        parts.append(
            f"<p><b>{e(v.juror)}</b>: {e(v.grade or 'unread')} · {v.output_tokens} output "
            f"tokens · {v.latency_s:.2f} s · {money(v.cost_usd)}</p><pre>{e(text)}</pre>{retry}"
        )
    return (
        f"<details><summary>Juror replies on {e(c.criterion.id)}</summary>"
        f"<p class=muted>Criterion: {e(c.criterion.prompt)}</p>{''.join(parts)}</details>"
    )


def render(record: dict[str, Any], results: Sequence[TaskResult]) -> str:
    jurors = record["jury"]["jurors"]
    out = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>Grading: {e(record['contract'])}</title><style>{CSS}{_MORE_CSS}</style>"
        "</head><body>",
        f"<h1>Grading: {e(record['contract'])}</h1>",
        f"<p class=muted>Jury: {e(', '.join(jurors) or 'none (no criterion needs one)')} · "
        "strict majority (a tie fails) · "
        f"eigenjury {e(record['eigenjury'])}</p>",
    ]
    if "escalate_to" in record:
        esc = record["escalate_to"]
        out.append(
            f"<p class=muted>Cascade: criteria within {esc['margin']} vote(s) of flipping, or "
            f"with an unread vote, escalated to {e(', '.join(esc['jurors']))}.</p>"
        )
    out.extend(f'<p class="warn">{e(w)}</p>' for w in record.get("warnings", []))
    out.append("<h2>Summary</h2><p class=muted>Intervals: 95% bootstrap over tasks.</p>")
    out.append(
        table(
            ["candidate", "tasks", "mean score", "pass rate", "split criteria", "jury cost"],
            [
                [
                    s["candidate"],
                    s["tasks"],
                    estimate_text(s["mean_score"], ".1f"),
                    estimate_text(s["pass_rate"], ".2f"),
                    f"{s['split_criteria']} of {s['judged_criteria']}",
                    money(s["jury_cost_usd"]),
                ]
                for s in record["summary"]
            ],
        )
    )
    out.append("<h2>Tasks</h2>")
    for r in results:
        verdict = "pass" if r.passed else "fail"
        out.append(
            f"<details><summary>{e(r.task_id)} · {e(r.candidate)} · score {r.score:g} of "
            f"threshold {r.threshold:g} · <span class={verdict}>{verdict}</span>"
            f"{'' if r.complete else ' · incomplete'}</summary>"
            f"<p><b>Submission</b></p><pre>{e(r.submission.text or r.submission.error)}</pre>"
            f"{_vote_matrix(r, jurors)}"
            + "".join(_replies(c) for c in r.criteria if c.by_jury and c.votes)
            + "</details>"
        )
    out.append("</body></html>")
    return "".join(out)


def write_report(path: Path, record: dict[str, Any], results: Sequence[TaskResult]) -> None:
    write_text(path, render(record, results))


def print_summary(console: Console, record: dict[str, Any]) -> None:
    grid = Table(title="Grades (95% intervals over tasks)")
    for name in ("candidate", "tasks", "mean score", "pass rate", "split", "jury cost"):
        grid.add_column(name, justify="left" if name == "candidate" else "right")
    for s in record["summary"]:
        grid.add_row(
            escape(s["candidate"]),
            str(s["tasks"]),
            estimate_text(s["mean_score"], ".1f"),
            estimate_text(s["pass_rate"], ".2f"),
            f"{s['split_criteria']}/{s['judged_criteria']}",
            money(s["jury_cost_usd"]),
        )
    console.print(grid)


def print_comparison(console: Console, record: dict[str, Any]) -> None:
    ci = f"{100 * record['settings']['ci']:g}%"
    console.print(
        f"{record['submissions']} submissions, {record['criteria']} jury-graded criteria; "
        f"{ci} intervals from a bootstrap over submissions"
    )
    grid = Table(title="Pool A against pool B")
    grid.add_column("statistic")
    grid.add_column("value", justify="right")
    if "agreement" in record:
        grid.add_row("criterion majority agreement", estimate_text(record["agreement"]))
        grid.add_row(
            f"  on criteria with every vote read ({record['criteria_common']})",
            estimate_text(record["agreement_common"]),
        )
        grid.add_row("split rate, pool A", estimate_text(record["split_rate"]["a"]))
        grid.add_row("split rate, pool B", estimate_text(record["split_rate"]["b"]))
    grid.add_row("Pearson r of task scores", estimate_text(record["task_score_pearson"]))
    grid.add_row("share of identical task scores", estimate_text(record["identical_task_scores"]))
    grid.add_row("task pass/fail agreement", estimate_text(record["task_pass_agreement"]))
    console.print(grid)
    if "per_criterion" not in record:
        return
    cost = Table(title="Per jury-graded criterion")
    for name in ("pool", "cost (USD)", "juror seconds", "output tokens"):
        cost.add_column(name, justify="left" if name == "pool" else "right")
    for side in ("a", "b"):
        figures = record["per_criterion"][side]
        cost.add_row(
            side.upper(),
            estimate_text(figures["cost_usd"], ".6f"),
            estimate_text(figures["latency_s"], ".2f"),
            estimate_text(figures["output_tokens"], ".0f"),
        )
    rel = record["a_relative_to_b"]
    cost.add_row(
        "A / B",
        estimate_text(rel["cost_usd"]),
        estimate_text(rel["latency_s"]),
        estimate_text(rel["output_tokens"]),
    )
    console.print(cost)
    cascade = record["cascade"]
    grid = Table(title=f"Cascade: A first, escalate to B within {cascade['margin']} vote(s)")
    grid.add_column("statistic")
    grid.add_column("value", justify="right")
    grid.add_row("criteria escalated", estimate_text(cascade["escalation_rate"]))
    grid.add_row("agreement with pool B", estimate_text(cascade["agreement_with_b"]))
    grid.add_row(
        "Pearson r of task scores with B", estimate_text(cascade["task_score_pearson_with_b"])
    )
    grid.add_row(
        "identical task scores with B", estimate_text(cascade["identical_task_scores_with_b"])
    )
    for name, label in (
        ("cost_usd", "cost relative to B alone"),
        ("latency_s", "juror seconds relative to B"),
        ("output_tokens", "output tokens relative to B"),
    ):
        grid.add_row(label, estimate_text(cascade["relative_to_b"][name]))
    console.print(grid)
