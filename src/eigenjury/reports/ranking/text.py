"""The terminal summary of a ranking. Names and model text come from users and
models: rich would read them as markup, so they are escaped and printed without
rich's highlighting (its patterns take minutes over a name of a few hundred thousand
characters)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.peer.record import RankingRecord, StylePart
from eigenjury.reports.accounting import print_accounting
from eigenjury.reports.agreement import print_agreement
from eigenjury.reports.ranking.sentences import meaning
from eigenjury.reports.ranking.words import (
    BASELINE_COLUMNS,
    SELF_PREFERENCE,
    STYLE_ASSUMPTION_SHORT,
    STYLE_COEFFICIENT,
    UNCONTROLLED,
    above_rows,
    baseline_cells,
    baseline_title,
    battle_columns,
    battle_row,
    dropped_note,
    elo_rule,
    first_replies,
    given_answers_lines,
    greenbeard_shifts,
    held_equal,
    interval_source,
    intervals_note,
    is_battles,
    is_styled,
    judge_name,
    leaderboard_row,
    position_bias_cell,
    rank_ub_note,
    self_preference_cell,
    signal_cell,
    style_headers,
    style_rows,
    tie_propensity_cell,
    trust_formation,
    upper_bound_ranks,
)


def print_summary(console: Console, record: RankingRecord) -> None:
    """The leaderboard, judge diagnostics and fit; then what the run collected and cost
    (`rank`) or how well a simulated truth was recovered (`fit --truth`), the judges'
    agreement (`fit --agreement`), and last what it all means."""
    ci_pct = f"{100 * record.settings.ci:g}%"
    styled = is_styled(record)
    title = "Peer ranking (low-rank BTD + EigenTrust)"
    if styled:
        title += f", {held_equal(record)}"
    note = intervals_note(record)
    captions = [
        *(
            [
                "change: places a model gains once style is held equal",
                f"Elo with style held equal {STYLE_ASSUMPTION_SHORT}",
            ]
            if styled
            else []
        ),
        *([note] if note else []),
        elo_rule(record),
    ]
    battles = is_battles(record)
    ranks = upper_bound_ranks(record.models)
    rank_ub = rank_ub_note(record)
    if rank_ub:
        captions.append(rank_ub)
    board = Table(
        title=escape(title),
        title_justify="left",
        caption=escape("\n".join(captions)) if captions else None,
        caption_justify="left",
    )
    if battles:  # LMArena's layout
        for column in battle_columns(ci_pct, styled):
            board.add_column(column, justify="left" if column == "model" else "right")
        for m, rank in zip(record.models, ranks, strict=True):
            board.add_row(*battle_row(m, rank, styled, escape(m.name)))
    else:
        board.add_column("rank", justify="right")
        board.add_column(f"rank {ci_pct}", justify="center")
        board.add_column("model")
        board.add_column("Elo", justify="right")
        board.add_column(f"Elo {ci_pct}", justify="center")
        for column in UNCONTROLLED if styled else []:
            board.add_column(column, justify="right")
        board.add_column("trust", justify="right")
        board.add_column("verdicts", justify="right")
        for m in record.models:
            board.add_row(*leaderboard_row(m, styled, escape(m.name)))
    console.print(board)
    if note:
        above = above_rows(record)
        console.print(
            f"above (family-wise {ci_pct}): "
            + ("; ".join(f"{name} > {below}" for name, below in above) if above else "none"),
            highlight=False,
            markup=False,
        )
    if record.baseline is not None:
        against = Table(title=escape(baseline_title(record.baseline, ci_pct)), title_justify="left")
        for column in BASELINE_COLUMNS:
            against.add_column(column, justify="left" if column == "model" else "right")
        for row in record.baseline.models:
            against.add_row(*baseline_cells(row, escape(row.model)))
        console.print(against)
    if record.style is not None:
        _print_style(console, record.style, ci_pct)

    judges = Table(title="Judges", title_justify="left")
    judges.add_column("judge", no_wrap=True)
    judges.add_column("tie propensity", justify="right")
    judges.add_column("position bias (first slot, log-odds)", justify="right")
    judges.add_column(SELF_PREFERENCE, justify="right")
    judges.add_column("verdicts", justify="right")
    judges.add_column("signal")
    for j in record.judges:
        judges.add_row(
            escape(judge_name(j.name, j.external)),
            tie_propensity_cell(j),
            position_bias_cell(j),
            self_preference_cell(j),
            f"{j.verdicts:g}",
            signal_cell(j),
        )
    console.print(judges)
    formation = trust_formation(record)
    if formation:
        console.print(escape(formation), highlight=False)

    fit = record.fit
    status = "converged" if fit.converged else "[bold red]NOT converged[/]"
    boot = record.settings.bootstrap
    console.print(
        f"fit: {fit.verdicts:g} verdicts in {fit.cells} cells over {fit.scenarios} "
        f"scenarios; d={fit.dim}; log-lik/verdict {fit.loglik_per_verdict:.4f}; "
        f"{fit.iterations} iterations, {status}; "
        f"{fit.fit_seconds:.2f}s fit"
        + (f", {interval_source(record)} in {fit.bootstrap_seconds:.2f}s" if boot else ""),
        highlight=False,
    )
    heldout = fit.heldout_loglik_per_verdict
    if heldout:
        console.print(
            f"held-out log-lik/verdict ({heldout.folds} scenario folds): "
            f"{heldout.mean:.4f} ± {heldout.stderr:.4f}",
            highlight=False,
        )
    for w in record.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    if record.truth_recovery is not None:
        rec = record.truth_recovery
        tau = rec.kendall_tau
        shown = "undefined (a ranking is constant)" if tau is None else f"{tau:.3f}"
        line = (
            f"against the truth: Kendall tau {shown}, largest Elo error {rec.max_abs_elo_error:.1f}"
        )
        if rec.elo_ci_coverage is not None:
            line += f", {rec.elo_ci_coverage:.0%} of true Elo inside their intervals"
        console.print(line, highlight=False)
    if record.run is not None:
        _print_run(console, record)
    if record.agreement is not None:
        print_agreement(console, record.agreement)
    console.print()
    for sentence in meaning(record):
        console.print(sentence, highlight=False, markup=False)


def _print_style(console: Console, style: StylePart, ci_pct: str) -> None:
    """The style coefficients (per judge and feature with per-judge coefficients) and
    the features left out."""
    if style.coefficients:  # none when every feature asked for was left out
        coefficients = Table(title="Style coefficients", title_justify="left")
        headers = style_headers(style, ci_pct)
        for header in headers:
            coefficients.add_column(header, justify="right" if header == headers[-2] else "left")
        for row in style_rows(style):
            coefficients.add_row(*map(escape, row))
        console.print(coefficients)
        console.print(f"[dim]coefficient: {STYLE_COEFFICIENT}[/]", highlight=False)
    dropped = dropped_note(style)
    if dropped:
        console.print(f"[dim]{escape(dropped)}[/]", highlight=False)


def _print_run(console: Console, record: RankingRecord) -> None:
    """What a rank run collected, its objective and greenbeard checks, and its cost."""
    summary = record.run
    assert summary is not None
    failures = summary.failures
    console.print(
        f"{summary.verdicts} verdicts from {summary.comparisons} comparisons"
        + (
            f"; not usable: {escape(', '.join(f'{k} {v}' for k, v in failures.items()))}"
            if failures
            else ""
        )
        + (f"; {summary.repaired} repaired" if summary.repaired else ""),
        highlight=False,
    )
    for line in given_answers_lines(summary):
        console.print(f"given answers: {escape(line)}", highlight=False)
    forms = first_replies(summary)
    if forms:
        console.print(
            "served judges' first replies: "
            + escape("; ".join(f"{j}: {f}" for j, f in forms.items())),
            highlight=False,
        )
    consistency = summary.order_consistency
    if consistency:
        console.print(
            "order consistency (same model wins both orders): "
            + escape(", ".join(f"{j} {v.consistent:.0%}" for j, v in consistency.items())),
            highlight=False,
        )
    if record.objective is not None:
        obj = record.objective
        console.print(
            f"objective check on {obj.questions} questions: Kendall tau between Elo and true "
            f"accuracy {obj.kendall_tau_elo_vs_accuracy}; accuracy "
            + escape(", ".join(f"{n} {a:.0%}" for n, a in obj.accuracy.items())),
            highlight=False,
        )
    if record.greenbeard is not None:
        for label, shift in greenbeard_shifts(record.greenbeard):
            clique, others = (
                "-" if v is None else f"{v:+.1f}"
                for v in (shift.mean_shift_greenbeards, shift.mean_shift_others)
            )
            console.print(
                f"greenbeard Elo shift ({label}): clique {clique}, others {others}",
                highlight=False,
            )
    print_accounting(console, summary.accounting)
