"""The reports of contracts runs: a grading run and a jury comparison, each as files,
a self-contained HTML page and a terminal summary, all from their records.

Per submission, a vote matrix (criteria x jurors) with split criteria highlighted, and
every juror's full reply behind a disclosure. All text from models, contracts and
submissions is escaped: it is untrusted and must never become markup.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.contracts.record import (
    CriterionOutcome,
    GradingRecord,
    Judgement,
    JuryComparisonRecord,
    TaskOutcome,
)
from eigenjury.contracts.schema import Contract, Criterion
from eigenjury.names import short_labels
from eigenjury.records import EstimatePart
from eigenjury.reports.kit import e, estimate_text, money, page, page_ends, table
from eigenjury.reports.output import Outputs

_MORE_CSS = """
.votes td.C{background:#e3f6e8;color:#146c2e;text-align:center}
.votes td.I{background:#fdeaea;color:#9b1c1c;text-align:center}
.votes td.U{background:#f1f1f4;color:#667085;text-align:center}
.votes tr.split td.l{border-left:4px solid #f5a623}
.pass{color:#146c2e;font-weight:600}.fail{color:#9b1c1c;font-weight:600}
"""
_CELL = {"C": ("C", "C"), "I": ("I", "I"), None: ("U", "?")}
_Key = tuple[str, str, str]  # task, candidate, criterion


def _estimate(value: EstimatePart | None, spec: str = ".3f") -> str:
    return estimate_text(None if value is None else value.model_dump(), spec)


# --- a grading run ------------------------------------------------------------------------


def outputs(record: GradingRecord, contract: Contract) -> Outputs:
    """results.json; its trace as trace.jsonl, and tasks.csv, criteria.csv and
    judgements.csv for spreadsheets; report.html. `contract` names and states the
    criteria the record grades."""
    files = {
        # written piece by piece from the trace: a large grading's replies are never
        # all in memory
        "trace.jsonl": record.judgements.pieces(),
        "tasks.csv": _csv(
            lambda: (t.model_dump(mode="json", exclude={"criteria"}) for t in record.tasks)
        ),
        "criteria.csv": _csv(lambda: _criterion_rows(record, contract)),
        "judgements.csv": _csv(record.judgements.rows),
    }
    return Outputs(record, files=files, html=render_parts(record, contract))


def _by_criterion(judgements: Iterable[Judgement]) -> dict[_Key, list[Judgement]]:
    out: dict[_Key, list[Judgement]] = defaultdict(list)
    for j in judgements:
        out[j.task_id, j.candidate, j.criterion_id].append(j)
    return out


def _explanation(found: list[Judgement]) -> str:
    """What a grader without a model compared (a jury's criterion has none)."""
    return next((j.text or "" for j in found if j.juror is None), "")


def _criteria(contract: Contract, task_id: str) -> dict[str, Criterion]:
    return {c.id: c for c in contract.task(task_id).evaluation.criteria}


def _criterion_rows(record: GradingRecord, contract: Contract) -> Iterator[dict[str, Any]]:
    for k, t in enumerate(record.tasks):
        found = _by_criterion(record.judgements.of(k))
        named = _criteria(contract, t.task_id)
        for c in t.criteria:
            votes = (
                c.votes.model_dump()
                if c.votes
                else dict.fromkeys(("C", "I", "unparsed", "error"), 0)
            )
            yield {
                "task_id": t.task_id,
                "candidate": t.candidate,
                "criterion_id": c.id,
                "name": named[c.id].name,
                "grader": c.grader,
                "weight": c.weight,
                "passed": c.passed,
                "awarded": c.awarded,
                **{f"votes_{k}": n for k, n in votes.items()},
                "split": bool(c.split),
                "c_share": "" if c.c_share is None else c.c_share,
                "pass_probability": "" if c.pass_probability is None else c.pass_probability,
                "undecided": bool(c.undecided),
                "escalated": bool(c.escalated),
                "tags": " ".join(named[c.id].tags),
                "explanation": _explanation(found[t.task_id, t.candidate, c.id]),
                "error": c.error or "",
            }


def _csv(rows: Callable[[], Iterable[dict[str, Any]]], chunk: int = 1000) -> Iterator[str]:
    """A CSV file in pieces of `chunk` rows; its columns, every key some row has, from a
    first pass over `rows()` (made twice, so that no row is held for the second)."""
    columns = list(dict.fromkeys(k for row in rows() for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, columns, lineterminator="\n")
    writer.writeheader()
    for k, row in enumerate(rows(), 1):
        writer.writerow(row)
        if k % chunk == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def _vote_matrix(t: TaskOutcome, jurors: list[str], found: dict[_Key, list[Judgement]]) -> str:
    votes = {c.id: [j for j in found[t.task_id, t.candidate, c.id] if j.juror] for c in t.criteria}
    judged = [c for c in t.criteria if c.by_jury and votes[c.id]]
    others = [c for c in t.criteria if not (c.by_jury and votes[c.id])]
    out = []
    if judged:
        deciding = {c.id: [j for j in votes[c.id] if j.stage != "first"] for c in judged}
        names = list(
            dict.fromkeys([*jurors, *(j.juror or "" for c in judged for j in deciding[c.id])])
        )
        head = "".join(
            f'<th title="{e(n)}">{e(label)}</th>'
            for n, label in zip(names, short_labels(names), strict=True)
        )
        rows = [_matrix_row(c, deciding[c.id], names) for c in judged]
        out.append(
            f'<table class="votes"><tr><th class="l">criterion</th><th>weight</th>{head}'
            f"<th>C share · pass chance</th><th>outcome</th></tr>{''.join(rows)}</table>"
        )
    if others:
        out.append(
            table(
                ["criterion", "grader", "weight", "outcome", "why"],
                [
                    [
                        c.id,
                        c.grader,
                        f"{c.weight:g}",
                        "grader error" if c.error else outcome_word(c),
                        _explanation(found[t.task_id, t.candidate, c.id]),
                    ]
                    for c in others
                ],
            )
        )
    return "".join(out)


def _matrix_row(c: CriterionOutcome, votes: list[Judgement], names: list[str]) -> str:
    by: dict[str | None, list[Judgement]] = defaultdict(list)
    for v in votes:
        by[v.juror].append(v)  # a juror's repeats side by side in its cell
    cells = []
    for n in names:
        found = by.get(n)
        if not found:
            cells.append("<td></td>")
            continue
        looks = [_CELL[v.grade] if v.error is None else ("U", "err") for v in found]
        css = looks[0][0] if len({css for css, _ in looks}) == 1 else "U"
        errors = "; ".join(v.error for v in found if v.error)
        label = " ".join(label for _, label in looks)
        cells.append(f'<td class="{css}" title="{e(errors)}">{label}</td>')
    split = ' class="split"' if c.split else ""
    mark = " (split)" if c.split else ""
    mark += " (undecided)" if c.undecided else ""
    via = " · escalated" if c.escalated else ""
    return (
        f'<tr{split}><td class="l">{e(c.id)}{mark}{via}</td>'
        f"<td>{c.weight:g}</td>{''.join(cells)}"
        f"<td>{_share(c)}</td>"
        f'<td class="{"pass" if c.passed == (c.weight >= 0) else "fail"}">'
        f"{outcome_word(c)}</td></tr>"
    )


def _share(c: CriterionOutcome) -> str:
    """The C share and the pass probability of a jury-graded criterion."""
    if c.c_share is None:
        return "-"
    chance = "" if c.pass_probability is None else f" · p {c.pass_probability:.2f}"
    return f"{c.c_share:.0%} C{chance}"


def outcome_word(c: CriterionOutcome) -> str:
    """ "met" or "not met" for a negative criterion (met costs points), else pass or fail."""
    if c.weight < 0:
        return "met" if c.passed else "not met"
    return "pass" if c.passed else "fail"


def _replies(criterion: Criterion, votes: list[Judgement]) -> str:
    parts = []
    for v in votes:
        text = v.text if v.error is None else f"call failed: {v.error}"
        retry = (
            f"<p><b>After the repair request</b></p><pre>{e(v.retry_text)}</pre>"
            if v.retry_text
            else ""
        )
        parts.append(
            f"<p><b>{e(v.juror)}</b>{'' if v.repeat is None else f' (answer {v.repeat + 1})'}: "
            f"{e(v.grade or 'unread')} · {v.output_tokens} output "
            f"tokens · {v.latency_s or 0:.2f} s · {money(v.cost_usd)}</p><pre>{e(text)}</pre>"
            f"{retry}"
        )
    return (
        f"<details><summary>Juror replies on {e(criterion.id)}</summary>"
        f"<p class=muted>Criterion: {e(criterion.prompt)}</p>{''.join(parts)}</details>"
    )


def render(record: GradingRecord, contract: Contract) -> str:
    return "".join(render_parts(record, contract))


def render_parts(record: GradingRecord, contract: Contract) -> Iterator[str]:
    """report.html in pieces: the summary, then one piece per task (with every juror's
    reply), so a large grading's page is never held whole."""
    jurors = record.jury.jurors
    out = [
        f"<h1>Grading: {e(record.contract)}</h1>",
        f"<p class=muted>Jury: {e(', '.join(jurors) or 'none (no criterion needs one)')} · "
        "strict majority (a tie fails) · "
        f"eigenjury {e(record.eigenjury)}</p>",
    ]
    if record.escalate_to is not None:
        esc = record.escalate_to
        out.append(
            f"<p class=muted>Cascade: criteria within {esc.margin} vote(s) of flipping, or "
            f"with an unread vote, escalated to {e(', '.join(esc.jurors))}.</p>"
        )
    out.extend(f'<p class="warn">{e(w)}</p>' for w in record.warnings)
    out.append("<h2>Summary</h2><p class=muted>Intervals: 95% bootstrap over tasks.</p>")
    out.append(table(SUMMARY_COLUMNS, summary_rows(record)))
    tags = tag_table(record)
    if tags is not None:
        out.append(
            "<h2>Scores by tag</h2><p class=muted>A criterion tag: the scoring rule on the "
            "criteria carrying it; a task tag: the mean score of the tasks carrying it. 95% "
            "intervals over tasks; tasks in brackets.</p>"
        )
        out.append(table(*tags))
    agreement = agreement_lines(record)
    if agreement is not None:
        head, juror_table, pair_table = agreement
        out.append(f"<h2>Jurors</h2><p class=muted id=agreement>{e(head)}</p>")
        out.append(table(*juror_table))
        out.append(table(*pair_table))
    diversity = jury_diversity(record)
    if diversity:
        out.append(f"<p class=muted id=diversity>{e(diversity)}</p>")
    if record.verdicts:
        out.append(
            "<h2>Verdicts</h2><p class=muted>How served jurors' first replies gave their "
            "verdicts, and the share no reading could grade (before any repair).</p>"
        )
        out.append(table(_VERDICT_COLUMNS, _verdict_rows(record)))
    out.append("<h2>Tasks</h2>")
    head, tail = page_ends(f"Grading: {record.contract}", css=_MORE_CSS)
    yield head + "".join(out)
    for k, t in enumerate(record.tasks):
        found = _by_criterion(record.judgements.of(k))
        verdict = "pass" if t.passed else "fail"
        named = _criteria(contract, t.task_id)
        replies = (
            _replies(named[c.id], votes)
            for c in t.criteria
            if c.by_jury and (votes := [j for j in found[t.task_id, t.candidate, c.id] if j.juror])
        )
        chance = "" if t.pass_probability is None else f" · pass chance {t.pass_probability:.2f}"
        chance += " · undecided" if t.undecided else ""
        yield (
            f"<details><summary>{e(t.task_id)} · {e(t.candidate)} · score {t.score:g} of "
            f"threshold {t.threshold:g} · <span class={verdict}>{verdict}</span>{chance}"
            f"{'' if t.complete else ' · incomplete'}</summary>"
            f"<p><b>Submission</b></p><pre>{e(t.submission or t.error)}</pre>"
            f"{_vote_matrix(t, jurors, found)}" + "".join(replies) + "</details>"
        )
    yield tail


_VERDICT_COLUMNS = ["juror", "structured", "label scores", "text", "unread"]


def _verdict_rows(record: GradingRecord) -> list[list[str]]:
    """Per served juror: its first replies by verdict mode, and the unread share."""
    return [
        [
            juror,
            str(m.structured),
            str(m.scores),
            str(m.text),
            "-" if m.unread_rate is None else f"{m.unread} ({m.unread_rate:.0%})",
        ]
        for juror, m in (record.verdicts or {}).items()
    ]


def print_verdicts(console: Console, record: GradingRecord, title: str = "Verdicts") -> None:
    """How served jurors gave their verdicts (nothing when the jury has none)."""
    if not record.verdicts:
        return
    grid = Table(title=f"{title} of served jurors (first replies)")
    for name in _VERDICT_COLUMNS:
        grid.add_column(name, justify="left" if name == "juror" else "right")
    for row in _verdict_rows(record):
        grid.add_row(escape(row[0]), *row[1:])
    console.print(grid)


SUMMARY_COLUMNS = [
    "candidate",
    "tasks",
    "mean score",
    "pass rate",
    "split",
    "undecided",
    "jury cost",
]


def summary_rows(record: GradingRecord) -> list[list[str]]:
    """Per candidate, as the terminal, report.html and the viewer show it."""
    return [
        [
            s.candidate,
            str(s.tasks),
            _estimate(s.mean_score, ".1f"),
            _estimate(s.pass_rate, ".2f"),
            f"{s.split_criteria} of {s.judged_criteria}",
            "-" if s.undecided_criteria is None else f"{s.undecided_criteria}",
            money(s.jury_cost_usd),
        ]
        for s in record.summary
    ]


Rows = tuple[list[str], list[list[str]]]  # a table: its columns and rows


def tag_table(record: GradingRecord) -> Rows | None:
    """Scores by tag: a row per tag (criterion tags first), a column per candidate,
    "score [interval] (tasks)"; None where the contract has no tags."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for s in record.summary:
        for t in s.tags or []:
            cell = f"{_estimate(t.score, '.1f')} ({t.tasks})"
            found.setdefault((t.level, t.tag), {})[s.candidate] = cell
    if not found:
        return None
    candidates = [s.candidate for s in record.summary]
    rows = [
        [tag, level, *(cells.get(c, "-") for c in candidates)]
        for (level, tag), cells in sorted(found.items())
    ]
    return ["tag", "of", *candidates], rows


def agreement_lines(record: GradingRecord) -> tuple[str, Rows, Rows] | None:
    """How the jurors agreed: a headline, a table of jurors (with how steady each was
    across its repeats, where the contract asked for them) and a table of pairs."""
    a = record.agreement
    if a is None:
        return None
    head = (
        f"Jurors' agreement over {a.criteria} jury-graded criteria (95% intervals over tasks): "
        f"Fleiss' kappa {_estimate(a.fleiss_kappa, '.2f')} over the {a.criteria_all_read} "
        "every juror voted on readably (1 full agreement, 0 chance)"
    )
    repeats = any(j.consistency is not None for j in a.jurors)
    columns = ["juror", "votes", "unread", "agreement with outcome", "most against (of)"]
    if repeats:
        columns.insert(4, "steady over repeats")
    jurors = []
    for j in a.jurors:
        against = ", ".join(
            f"{d.task_id + '/' if d.task_id else ''}{d.criterion_id} ({d.against}/{d.of})"
            for d in j.most_disagreed
        )
        row = [j.juror, str(j.votes), str(j.unread), _estimate(j.agreement_with_outcome, ".2f")]
        if repeats:
            row.append(_estimate(j.consistency, ".2f"))
        jurors.append([*row, against or "-"])
    pairs = [
        [
            f"{p.a} · {p.b}",
            str(p.criteria),
            _estimate(p.agreement, ".2f"),
            _estimate(p.cohen_kappa, ".2f"),
        ]
        for p in a.pairs
    ]
    return head, (columns, jurors), (["jurors", "criteria", "agreement", "Cohen's kappa"], pairs)


def print_summary(console: Console, record: GradingRecord) -> None:
    grid = Table(title="Grades (95% intervals over tasks)")
    for name in SUMMARY_COLUMNS:
        grid.add_column(name, justify="left" if name == "candidate" else "right")
    for row in summary_rows(record):
        grid.add_row(escape(row[0]), *row[1:])
    console.print(grid)
    tags = tag_table(record)
    if tags is not None:
        by_tag = Table(title="Scores by tag (95% intervals over tasks; tasks in brackets)")
        for k, name in enumerate(tags[0]):
            by_tag.add_column(escape(name), justify="left" if k < 2 else "right")
        for row in tags[1]:
            by_tag.add_row(*(escape(x) for x in row))
        console.print(by_tag)
    agreement = agreement_lines(record)
    if agreement is not None:
        head, jurors, pairs = agreement
        console.print(escape(head), highlight=False)
        for title, (columns, rows) in (("Jurors", jurors), ("Pairs", pairs)):
            grid = Table(title=title)
            for k, name in enumerate(columns):
                left = k == 0 or name.startswith("most against")
                grid.add_column(name, justify="left" if left else "right")
            for row in rows:
                grid.add_row(*(escape(x) for x in row))
            console.print(grid)
    diversity = jury_diversity(record)
    if diversity:
        console.print(escape(diversity), highlight=False)
    print_verdicts(console, record)


def jury_diversity(record: GradingRecord) -> str | None:
    """Whether the jurors were separate opinions, in a line (None for a jury of one)."""
    d = record.diversity
    if d is None:
        return None
    if not d.criteria:
        return "juror diversity: no criterion has a readable vote from every juror"
    same = f"{d.identical_replies:.0%}" if d.identical_replies is not None else "-"
    kappa = (
        f"Fleiss' kappa {d.fleiss_kappa:.2f}"
        if d.fleiss_kappa is not None
        else "Fleiss' kappa undefined (every vote the same grade)"
    )
    return (
        f"juror diversity, over the {d.criteria} criteria every juror voted on: identical "
        f"replies on {same} of them; {kappa}"
    )


# --- a jury comparison --------------------------------------------------------------------


def _beyond_chance(record: JuryComparisonRecord) -> list[list[str]]:
    """The base rate of criterion agreement and Cohen's kappa; kappa undefined, with
    why, where both pools gave every criterion one outcome."""
    chance, kappa = record.chance_agreement, record.kappa
    if chance is None or kappa is None:  # a record made before 0.3.2
        return []
    rows = [["  by chance, at the pools' pass rates", _estimate(chance)]]
    if kappa.value is None:
        why = "undefined: both pools gave every criterion the same outcome"
        rows.append(["  Cohen's kappa", why])
    else:
        rows.append(["  Cohen's kappa (beyond chance)", _estimate(kappa)])
    return rows


def _comparison_rows(record: JuryComparisonRecord) -> list[list[str]]:
    """(statistic, value [interval]) rows: agreement, splits and task scores."""
    rows = []
    if record.agreement is not None and record.split_rate is not None:
        rows += [
            ["criterion majority agreement", _estimate(record.agreement)],
            *_beyond_chance(record),
            [
                f"  on criteria with every vote read ({record.criteria_common})",
                _estimate(record.agreement_common),
            ],
            ["split rate, pool A", _estimate(record.split_rate.a)],
            ["split rate, pool B", _estimate(record.split_rate.b)],
        ]
    return [
        *rows,
        ["Pearson r of task scores", _estimate(record.task_score_pearson)],
        ["share of identical task scores", _estimate(record.identical_task_scores)],
        ["task pass/fail agreement", _estimate(record.task_pass_agreement)],
    ]


def _cost_rows(record: JuryComparisonRecord) -> list[list[str]]:
    """(pool, cost, juror seconds, output tokens) per jury-graded criterion, and A / B."""
    if record.per_criterion is None or record.a_relative_to_b is None:
        return []
    rows = [
        [
            side.upper(),
            _estimate(figures.cost_usd, ".6f"),
            _estimate(figures.latency_s, ".2f"),
            _estimate(figures.output_tokens, ".0f"),
        ]
        for side, figures in (("a", record.per_criterion.a), ("b", record.per_criterion.b))
    ]
    rel = record.a_relative_to_b
    ratios = [_estimate(rel.cost_usd), _estimate(rel.latency_s), _estimate(rel.output_tokens)]
    return [*rows, ["A / B", *ratios]]


def _cascade_rows(record: JuryComparisonRecord) -> list[list[str]]:
    cascade = record.cascade
    if cascade is None:
        return []
    return [
        ["criteria escalated", _estimate(cascade.escalation_rate)],
        ["agreement with pool B", _estimate(cascade.agreement_with_b)],
        ["Pearson r of task scores with B", _estimate(cascade.task_score_pearson_with_b)],
        ["identical task scores with B", _estimate(cascade.identical_task_scores_with_b)],
        ["cost relative to B alone", _estimate(cascade.relative_to_b.cost_usd)],
        ["juror seconds relative to B", _estimate(cascade.relative_to_b.latency_s)],
        ["output tokens relative to B", _estimate(cascade.relative_to_b.output_tokens)],
    ]


_COST_HEADERS = ["pool", "cost (USD)", "juror seconds", "output tokens"]


def _cascade_title(record: JuryComparisonRecord) -> str:
    margin = record.cascade.margin if record.cascade else record.settings.cascade_margin
    return f"Cascade: A first, escalate to B within {margin} vote(s)"


def _intervals(record: JuryComparisonRecord) -> str:
    return (
        f"{record.submissions} submissions, {record.criteria} jury-graded criteria; "
        f"{100 * record.settings.ci:g}% intervals from a bootstrap over submissions"
    )


def print_comparison(console: Console, record: JuryComparisonRecord) -> None:
    console.print(_intervals(record))
    console.print(_grid("Pool A against pool B", ["statistic", "value"], _comparison_rows(record)))
    if record.cascade is None:
        return
    console.print(_grid("Per jury-graded criterion", _COST_HEADERS, _cost_rows(record)))
    console.print(_grid(_cascade_title(record), ["statistic", "value"], _cascade_rows(record)))


def _grid(title: str, headers: list[str], rows: list[list[str]]) -> Table:
    grid = Table(title=title)
    for i, name in enumerate(headers):
        grid.add_column(name, justify="left" if i == 0 else "right")
    for row in rows:
        grid.add_row(*(escape(cell) for cell in row))
    return grid


def render_comparison(record: JuryComparisonRecord) -> str:
    pools = (("A", record.pools.a.jurors), ("B", record.pools.b.jurors))
    out = [
        f"<h1>Jury comparison: {e(record.contract)}</h1>",
        f"<p class=muted>{e(_intervals(record))} · eigenjury {e(record.eigenjury)}</p>",
        table(["pool", "jurors"], [[name, ", ".join(jurors)] for name, jurors in pools], left=2),
    ]
    if record.note:
        out.append(f'<p class="warn">{e(record.note)}</p>')
    if record.incomplete_submissions:
        out.append(
            f'<p class="warn">{record.incomplete_submissions} graded submission(s) rest on '
            "failed calls or graders; rerun to try them again</p>"
        )
    out.append("<h2>Pool A against pool B</h2>")
    out.append(table(["statistic", "value"], _comparison_rows(record)))
    if record.cascade is not None:
        out.append("<h2>Per jury-graded criterion</h2>")
        out.append(table(_COST_HEADERS, _cost_rows(record)))
        out.append(f"<h2>{e(_cascade_title(record))}</h2>")
        out.append(table(["statistic", "value"], _cascade_rows(record)))
    if record.accounting is not None:
        out.append(
            f"<p class=muted>Cost of this run: {money(record.accounting.total.cost_usd)}</p>"
        )
    return page(f"Jury comparison: {record.contract}", "".join(out))


def comparison_outputs(record: JuryComparisonRecord) -> Outputs:
    """comparison.json and report.html."""
    return Outputs(record, html=render_comparison(record))
