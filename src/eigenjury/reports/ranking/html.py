"""The static HTML report of a ranking, and the files a rank run writes. Names and
model text go through the kit's escaping. It shows a few sample judgments; `eigenjury
view` browses them all."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eigenjury.peer.record import GreenbeardShift, RankingRecord, StylePart
from eigenjury.reports.accounting import ACCOUNTING_COLUMNS, accounting_cells
from eigenjury.reports.kit import e, fmt, page, table
from eigenjury.reports.output import Outputs
from eigenjury.reports.ranking.charts import heatmap_svg, leaderboard_svg, plane_svg
from eigenjury.reports.ranking.sentences import meaning
from eigenjury.reports.ranking.words import (
    BASELINE_COLUMNS,
    EMPTY_ROWS,
    SELF_PREFERENCE,
    STYLE_ASSUMPTION,
    STYLE_MEANING,
    UNCONTROLLED,
    VERDICT_WORDS,
    above_rows,
    baseline_cells,
    baseline_title,
    dropped_note,
    elo_ci_cell,
    elo_rule,
    first_replies,
    greenbeard_shifts,
    held_equal,
    interval_source,
    intervals_note,
    is_styled,
    judge_name,
    label_probabilities,
    position_bias_cell,
    rank_ci_cell,
    self_preference_cell,
    signal_cell,
    style_headers,
    style_rows,
    tie_propensity_cell,
    trust_formation,
    uncontrolled_cells,
)

if TYPE_CHECKING:
    from eigenjury.peer.run import RankRun, SampleJudgment
    from eigenjury.records import LinesFile


def outputs(run: RankRun, transcripts: LinesFile) -> Outputs:
    """A rank run's files: results.json, verdicts.csv (an input of `fit`),
    transcripts.jsonl (written as the run went, by `transcripts`) and report.html."""
    from eigenjury.verdict_files import verdicts_csv

    return Outputs(
        run.record,
        files={
            "verdicts.csv": verdicts_csv(
                run.table, criterion=run.criterion, strength=run.outcomes.strengths()
            ),
            "transcripts.jsonl": transcripts,
        },
        html=render(run.record, run.samples),
    )


def render(record: RankingRecord, samples: Sequence[SampleJudgment] = ()) -> str:
    """The whole static report of a rank run (a `fit` record renders without the run's
    parts)."""
    run = record.run
    models = record.models
    ci = f"{100 * record.settings.ci:g}%"
    title = (run.name if run else None) or "Peer ranking"
    out = [f"<h1>{e(title)}</h1>"]
    out.append(
        f'<p class="muted">Constitution: {e(run.constitution.title if run else None)} · '
        f"{len(models)} models · {run.scenarios if run else '?'} scenarios · "
        f"{e(run.design.design if run else '')} design · "
        f"{run.verdicts if run else record.fit.verdicts} verdicts · eigenjury "
        f"{e(record.eigenjury)}</p>"
    )
    out.extend(f'<p class="warn">{e(w)}</p>' for w in record.warnings)
    styled = is_styled(record)
    held = f" {e(held_equal(record))};" if styled else ""
    out.append(
        f"<h2>Leaderboard</h2><p class=muted>Elo from EigenTrust over the low-rank "
        f"BTD fit;{held} bars are {ci} {e(interval_source(record))}. "
        f"{e(elo_rule(record))}.</p>"
    )
    if styled:
        out.append(f'<p class="muted" id="style-assumption">{e(STYLE_ASSUMPTION)}</p>')
    formation = trust_formation(record)
    if formation:
        out.append(f'<p class="muted">{e(formation)}</p>')
    out.append(leaderboard_svg(models))
    uncontrolled = UNCONTROLLED if styled else []
    out.append(
        table(
            ["model", "rank", f"rank {ci}", "Elo", f"Elo {ci}", *uncontrolled, "trust"],
            [
                [m.name, m.rank, rank_ci_cell(m), fmt(m.elo), elo_ci_cell(m),
                 *(uncontrolled_cells(m) if styled else []), f"{m.trust:.4f}"]
                for m in models
            ],
        )
    )  # fmt: skip
    note = intervals_note(record)
    if note:
        above = above_rows(record)
        out.append(
            f'<p class="muted">{e(note)}.</p>'
            + (
                table(["model", f"above (family-wise {ci})"], [list(row) for row in above])
                if above
                else f"<p>No model is above another with family-wise {ci} confidence.</p>"
            )
        )
    if record.baseline is not None:
        part = record.baseline
        out.append(
            f"<h2>Against the baseline</h2><p class=muted>{e(baseline_title(part, ci))}.</p>"
            + table(list(BASELINE_COLUMNS), [baseline_cells(r, r.model) for r in part.models])
        )
    if record.style is not None:
        out.append(_style_section(record.style, ci))
    tm = record.trust_matrix
    out.append(
        "<h2>Trust matrix</h2><p class=muted>Row: judge; column: evaluee; darker = "
        f"more trust.{EMPTY_ROWS if any(not any(r) for r in tm.rows) else ''}</p>"
        + heatmap_svg(tm.judges, tm.evaluees, tm.rows)
    )
    lenses = {j.name: j.lens for j in record.judges}
    out.append(
        "<h2>Dispositions and lenses</h2><p class=muted>Dots: evaluees' dispositions; "
        "arrows: judges' lenses (first two latent axes; axis 1 is the consensus).</p>"
        + plane_svg(record.dispositions, lenses)
    )
    consistency = run.order_consistency if run else {}
    parse = run.parse_failures_by_judge if run else {}
    forms = first_replies(run) if run else {}
    out.append("<h2>Judges</h2>")
    rows = []
    for j in record.judges:
        order = consistency.get(j.name)
        rows.append(
            [
                judge_name(j.name, j.external),
                tie_propensity_cell(j),
                position_bias_cell(j),
                self_preference_cell(j),
                order.pairs if order else 0,
                fmt(order.consistent if order else None, ".0%"),
                fmt(order.same_slot if order else None, ".0%"),
                parse.get(j.name, 0),
                signal_cell(j),
                *([forms.get(j.name, "-")] if forms else []),
            ]
        )
    out.append(
        table(
            [
                "judge",
                "tie propensity",
                "position bias",
                SELF_PREFERENCE,
                "pairs in both orders",
                "consistent",
                "same slot won both",
                "parse failures",
                "signal",
                *(["first replies"] if forms else []),
            ],
            rows,
        )
    )
    if record.greenbeard is not None:
        out.append(_greenbeard(record.greenbeard))
    if record.objective is not None:
        obj = record.objective
        elo = {m.name: m.elo for m in models}
        out.append(
            f"<h2>Objective check</h2><p class=muted>{obj.questions} questions with a hidden "
            f"key; Kendall tau between Elo and true accuracy: "
            f"{fmt(obj.kendall_tau_elo_vs_accuracy, '.3f')}.</p>"
            + table(
                ["model", "Elo", "accuracy"],
                [[n, fmt(elo.get(n)), f"{a:.0%}"] for n, a in obj.accuracy.items()],
            )
        )
    if run is not None:
        out.append("<h2>Calls, tokens and cost</h2>")
        out.append(table(list(ACCOUNTING_COLUMNS), accounting_cells(run.accounting), left=2))
    out.append(_sample_judgments(samples))
    fit = record.fit
    out.append(
        f'<p class="muted">Fit: {fit.verdicts:g} verdicts, {fit.cells} cells, '
        f"d = {fit.dim}, log-likelihood per verdict {fit.loglik_per_verdict:.4f}, "
        f"{'converged' if fit.converged else 'NOT converged'}.</p>"
    )
    out.append("<h2>What this means</h2>" + "".join(f"<p>{e(s)}</p>" for s in meaning(record)))
    return page(title, "\n".join(out))


def _style_section(style: StylePart, ci: str) -> str:
    """The coefficients, what they and "held equal" mean, and the features left out."""
    out = ["<h2>Style control</h2>"]
    if style.coefficients:  # none when every feature asked for was left out
        out.append(
            f"<p class=muted>{e(STYLE_MEANING)} Normalised difference: "
            f"{e(style.normalisation)}.</p>"
        )
        left = len(style_headers(style, ci)) - 2  # feature [and judge]
        out.append(table(style_headers(style, ci), style_rows(style), left=left))
    dropped = dropped_note(style)
    if dropped:
        out.append(f"<p class=muted>{e(dropped)}.</p>")
    return "".join(out)


def _greenbeard(g: GreenbeardShift) -> str:
    rows = [
        [label, fmt(s.mean_shift_greenbeards, "+.1f"), fmt(s.mean_shift_others, "+.1f")]
        for label, s in greenbeard_shifts(g)
    ]
    return (
        "<h2>Greenbeard experiment</h2><p class=muted>Members "
        + e(", ".join(g.members))
        + " share a marker and were told to favour it; Elo shift against the same run "
        "without those instructions.</p>"
        + table(["fit", "mean shift, greenbeards", "mean shift, others"], rows)
    )


def _sample_judgments(samples: Sequence[SampleJudgment]) -> str:
    """A few judgments in full (judges in turn, on different scenarios): the message,
    both replies, the judge's reply or scores, and its probabilities where it gave any."""
    if not samples:
        return ""
    out = ["<h2>Sample judgments</h2><p class=muted>Model text is shown as text, escaped.</p>"]
    for sample in samples:
        t = sample.judgment
        said = ", ".join(VERDICT_WORDS.get(v, "unread") if v is not None else "unread"
                         for v in t.verdicts or ())  # fmt: skip
        if t.scores:  # likelihood mode: the verdict went to the higher score
            how = (
                "<p>Scores (follows minus breaks, nats per token; not probabilities): "
                + ", ".join(f"{e(label)} {value:+.4f}" for label, value in t.scores.items())
                + "</p>"
            )
        else:
            how = f"<p><b>{e(t.member)}'s reply</b></p><pre>{e(t.reply or '')}</pre>"
            if t.choice_logprobs:
                odds = label_probabilities(t.choice_logprobs)
                how += f"<p>Its probabilities of its answers: {e(odds)}</p>"
            prompt = "".join(
                f"<p><b>{e(role)}</b></p><pre>{e(text)}</pre>" for role, text in t.messages
            )
            how += f"<details><summary>the judge's prompt</summary>{prompt}</details>"
        repair = " (after a repair request)" if t.role == "repair" else ""
        out.append(
            f"<details><summary>{e(t.member)} judges {e(t.first)} (A) vs {e(t.second)} (B) "
            f"on {e(t.scenario)}: {e(said)}{repair}</summary>"
            f"<p><b>The message</b></p><pre>{e(sample.question)}</pre>"
            f"<p><b>A: {e(t.first)}</b></p><pre>{e(sample.first_reply or '(no reply)')}</pre>"
            f"<p><b>B: {e(t.second)}</b></p><pre>{e(sample.second_reply or '(no reply)')}</pre>"
            f"{how}</details>"
        )
    return "".join(out)
