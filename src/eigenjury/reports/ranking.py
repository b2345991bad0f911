"""The reports of a peer ranking (`fit`, `rank`, `demo`): the terminal summary, the
static HTML report, and the files a run writes.

Names and model text come from users and models: rich would read them as markup, so
they are escaped and printed without rich's highlighting (its patterns take minutes
over a name of a few hundred thousand characters); in HTML they go through the kit's
escaping. The static report carries no scripts; charts are inline SVG drawn here. It
shows a few sample judgments; `eigenjury view` browses them all.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.peer.record import (
    GreenbeardShift,
    JudgeRow,
    ModelRow,
    RankingRecord,
    RunSummary,
    Shift,
    StyleCoefficient,
    StylePart,
    TranscriptLine,
)
from eigenjury.reports.accounting import ACCOUNTING_COLUMNS, accounting_cells, print_accounting
from eigenjury.reports.agreement import print_agreement
from eigenjury.reports.kit import e, fmt, page, table, with_ci
from eigenjury.reports.output import Outputs

if TYPE_CHECKING:
    from eigenjury.peer.run import RankRun
    from eigenjury.records import LinesFile

SAMPLE_JUDGMENTS = 6  # judgments the static report shows in full


def outputs(run: RankRun, transcripts: LinesFile) -> Outputs:
    """A rank run's files: results.json, verdicts.csv (an input of `fit`),
    transcripts.jsonl (written as the run went, by `transcripts`) and report.html."""
    from eigenjury.verdict_files import verdicts_csv

    return Outputs(
        run.record,
        files={
            "verdicts.csv": verdicts_csv(run.table, criterion=run.criterion),
            "transcripts.jsonl": transcripts,
        },
        html=render(run.record, run.samples),
    )


def _elo_ci(m: ModelRow) -> str:
    """ "[low, high]"; an end with no limit (a perfect record) is open: "[1268, ∞)"."""
    if not m.elo_ci:
        return "-"
    low, high = m.elo_ci
    return ("(-∞" if low is None else f"[{low:.0f}") + (
        ", ∞)" if high is None else f", {high:.0f}]"
    )


SELF_PREFERENCE = "self-preference (log-odds)"


def _self_preference(j: JudgeRow) -> str:
    """What a judge adds to its own reply, with its interval and on how many verdicts;
    "-" for a judge that never judged itself."""
    if j.self_preference is None or j.self_verdicts is None:
        return "-"
    return f"{with_ci(j.self_preference, j.self_preference_ci, '+.2f')} (n={j.self_verdicts:g})"


def _rank_ci(m: ModelRow) -> str:
    return "-" if not m.rank_ci else f"{m.rank_ci[0]}-{m.rank_ci[1]}"


def _rank_change(m: ModelRow) -> str:
    """Places gained once style is held equal: "+2", "-1", "0" (plain in any terminal)."""
    if m.rank_change is None:
        return "-"
    return f"{m.rank_change:+d}" if m.rank_change else "0"


def _styled(record: RankingRecord) -> bool:
    """Whether the leaderboard is style-controlled: it then has an uncontrolled Elo."""
    return any(m.elo_uncontrolled is not None for m in record.models)


def _held_equal(record: RankingRecord) -> str:
    features = record.style.features if record.style else []
    return f"Elo with style held equal ({', '.join(features)})"


UNCONTROLLED = ["Elo uncontrolled", "change"]  # the leaderboard's columns with style control


def _uncontrolled(m: ModelRow) -> list[str]:
    return [fmt(m.elo_uncontrolled), _rank_change(m)]


def elo_rule(record: RankingRecord) -> str:
    """Which rule made the Elo: eigenjury 0.3 changed it (docs/consensus.md), so the
    numbers of older records are not comparable."""
    if record.settings.trust is None:
        return (
            "Elo by the rule before eigenjury 0.3 (ties as half a win, no prior, a judge's "
            "verdicts on itself counted): not comparable with newer runs"
        )
    return (
        "Elo since eigenjury 0.3: ties out of trust, a prior on scores, each judge's "
        "self-preference apart (docs/consensus.md); not comparable with older runs"
    )


def intervals_note(record: RankingRecord) -> str | None:
    """Which interval is which: the marginal rank interval and the family-wise `above`
    (None for records without them: no bootstrap, or written before either)."""
    method = record.settings.pairwise_intervals
    if method is None:
        return None
    ci = f"{100 * record.settings.ci:g}%"
    return (
        f"rank {ci}: a marginal interval, the percentiles of the model's rank over the "
        f"bootstrap draws (each holds its own model's rank); above: the models it is above "
        f"with family-wise {ci} confidence, all such statements holding at once "
        f"(simultaneous {method} intervals on every pairwise Elo difference)"
    )


def _above(record: RankingRecord) -> list[tuple[str, str]]:
    """(model, the models it is above) for each model above any."""
    return [(m.name, ", ".join(m.above)) for m in record.models if m.above]


# Which reply a feature's coefficient favours, (positive, negative); the features of
# reply_features.py by name, others as "the reply with the higher <feature>".
STYLE_SIDES = {
    "length": ("the longer reply", "the shorter reply"),
    "headers": ("the reply with more headers", "the reply with fewer headers"),
    "lists": ("the reply with more list items", "the reply with fewer list items"),
    "bold": ("the reply with more bold spans", "the reply with fewer bold spans"),
}

STYLE_COEFFICIENT = (
    "a judge's log-odds of preferring a reply, per standard deviation of the normalised "
    "difference between the two replies; positive: judges favour the reply with more of it"
)
# What style control assumes, said wherever its Elo is shown (docs/style.md).
STYLE_ASSUMPTION = (
    "Elo with style held equal assumes that style reaches the verdicts only through the "
    "judges' taste: where longer (or better formatted) replies really are better, holding "
    "style equal removes that substance too. `eigenjury style-check RUN_DIR` measures each "
    "judge's taste on same-content edits of a rank run's replies, beside the fitted "
    "coefficient."
)
STYLE_ASSUMPTION_SHORT = (
    "assumes style moves verdicts only through the judges' taste: where longer replies "
    "really are better, control removes that substance too (check: eigenjury style-check)"
)
STYLE_MEANING = (
    f"A coefficient is {STYLE_COEFFICIENT}. Held equal: Elo comes from the fit with the two "
    "replies' features set equal, so a model's rating owes nothing to these features; \"Elo "
    'uncontrolled" is the fit without style control, and "change" the places a model '
    "gains once style is held equal."
)


def style_reading(c: StyleCoefficient) -> str:
    """A coefficient in words: the side judges favour when its interval leaves out 0."""
    more, less = STYLE_SIDES.get(
        c.feature,
        (f"the reply with the higher {c.feature}", f"the reply with the lower {c.feature}"),
    )
    side = more if c.coefficient > 0 else less
    shared = c.judge is None  # else the row names the judge
    if c.ci is None:
        if c.coefficient == 0:
            return "no effect"
        return f"{'judges lean' if shared else 'leans'} to {side} (no interval)"
    if c.ci[0] > 0 or c.ci[1] < 0:
        return f"{'judges favour' if shared else 'favours'} {side}"
    return "no clear effect"


def _style_rows(style: StylePart) -> list[list[str]]:
    """[judge,] feature, coefficient with its interval, reading."""
    return [
        [*([c.judge or "-"] if style.per_judge else []), c.feature,
         with_ci(c.coefficient, c.ci, "+.2f"), style_reading(c)]
        for c in style.coefficients
    ]  # fmt: skip


def _style_headers(style: StylePart, ci: str) -> list[str]:
    return [*(["judge"] if style.per_judge else []), "feature", f"coefficient {ci}", "reading"]


def _dropped(style: StylePart) -> str | None:
    if not style.dropped:
        return None
    return "left out: " + "; ".join(f"{name} ({why})" for name, why in style.dropped.items())


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def trust_formation(record: RankingRecord) -> str | None:
    """How trust was formed, when external judges took part (None otherwise: plain
    EigenTrust among the judges)."""
    external = [j for j in record.judges if j.external]
    if not external:
        return None
    peers = len(record.judges) - len(external)
    damping = record.settings.damping
    panel = f"the consensus of {_plural(len(external), 'external judge')}"
    weights = record.settings.external_weights or {}
    if len(set(weights.values())) > 1:
        panel += " (weights " + ", ".join(f"{n} {w:g}" for n, w in weights.items()) + ")"
    if damping >= 1.0:
        line = f"trust: {panel}"
        if peers:
            line += f", a = 1 (the {_plural(peers, 'peer judge')} shape only the fit)"
        return line
    return (
        f"trust: {_plural(peers, 'peer judge')} (EigenTrust) damped toward {panel}, a = {damping:g}"
    )


def _judge_name(name: str, external: bool) -> str:
    return f"{name} (external)" if external else name


# What a ranking means, in plain sentences, for both renderers. A judge is
# position-locked when its fitted first-slot log-odds reach LOCKED_BIAS (it then picks
# one slot e^3, about 20, times as often as the other between replies it rates equal), or
# when the same slot won both orders in at least LOCKED_SAME_SLOT of the pairs it saw
# both ways, over at least LOCKED_PAIRS pairs.
LOCKED_BIAS = 3.0
LOCKED_SAME_SLOT = 0.9
LOCKED_PAIRS = 5
LISTED = 6  # names (or pairs) a sentence lists before "and N more"


def _joined(items: list[str]) -> str:
    """Items in prose: "a", "a and b", "a, b and c"."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _listed(items: list[str]) -> str:
    """Joined, past LISTED items cut short: "a, ..., f and 3 more"."""
    if len(items) > LISTED:
        return _joined([*items[:LISTED], f"{len(items) - LISTED} more"])
    return _joined(items)


def _count(value: float) -> str:
    """A verdict count: whole, or to one decimal when fractional (soft verdicts)."""
    return f"{value:,.0f}" if value == round(value) else f"{value:,.1f}"


def _verdicts(record: RankingRecord) -> str:
    """How many verdicts, what likelihood verdicts are, and where probabilities stood in
    for verdicts. (Likelihood runs recorded before issue 26 gave probabilities: their
    soft counts are recorded, and they keep the sentence they had.)"""
    run = record.run
    if run is None:
        return f"{_count(record.fit.verdicts)} verdicts"
    given = f"{_count(run.verdicts)} verdicts"
    by_judge = run.soft_verdicts_by_judge
    if run.judging.mode == "likelihood" and by_judge is None:
        return (
            f"{given}, each for the reply that the judge model finds likelier, per token, "
            "from a speaker who follows the constitution than from one who breaks it (a "
            "score, not a probability)"
        )
    if run.judging.mode == "likelihood":
        source = (
            "how much likelier each judge model finds each reply from a speaker who "
            "follows the constitution than from one who breaks it"
        )
    elif run.judging.soft:
        source = "the judges' confidence in A, B or tie"
    else:
        return given
    soft = run.verdicts if by_judge is None else sum(by_judge.values())
    share = "" if soft >= run.verdicts else f", {_count(soft)} of them"
    return f"{given}{share} as probabilities from {source}"


def _what_was_ranked(record: RankingRecord) -> str:
    """Sentence 1: what was ranked, against what, by whom, on how many verdicts."""
    run = record.run
    ranked = [m.name for m in record.models]
    peers = [j.name for j in record.judges if not j.external]
    external = [j.name for j in record.judges if j.external]
    if run is not None:
        subject = (
            f"{_plural(len(ranked), 'member')} ({_listed(ranked)}) were ranked against the "
            f'constitution "{run.constitution.title}" on {_plural(run.scenarios, "scenario")}'
        )
    else:
        scenarios = _plural(record.fit.scenarios, "scenario")
        subject = f"{_plural(len(ranked), 'model')} were ranked on {scenarios}"
    panel = []
    if set(peers) == set(ranked):
        panel.append(f"all {len(peers)} of them as judges")
    elif peers:
        panel.append(f"{len(peers)} of them as judges ({_listed(peers)})")
    if external:
        panel.append(f"{_plural(len(external), 'external judge')} ({_listed(external)})")
    return f"{subject}, by {' and '.join(panel)}, giving {_verdicts(record)}."


def _what_intervals_allow(record: RankingRecord) -> str:
    """Sentence 2: the pairs the family-wise intervals tell apart, by the model above."""
    noun = "member" if record.run is not None else "model"
    settings = record.settings
    if settings.pairwise_intervals is None:
        why = "bootstrap: 0" if settings.bootstrap == 0 else "made before eigenjury computed them"
        return (
            f"The ranking carries no intervals ({why}), so it supports no conclusion about "
            f"which {noun} is above another; bootstrap rounds would give them."
        )
    ci = f"{100 * settings.ci:g}%"
    held = " with style held equal" if _styled(record) else ""
    pairs = [(m.name, below) for m in record.models for below in m.above or []]
    if not pairs:
        return (
            f"At {ci} confidence no {noun} can be told apart from another{held}: the "
            "differences may be chance; more scenarios would narrow the intervals."
        )
    told: dict[str, list[str]] = {}
    for name, below in pairs[:LISTED]:
        told.setdefault(name, []).append(below)
    clauses = [
        f"{name} {'' if i else 'is '}above {_joined(below)}"
        for i, (name, below) in enumerate(told.items())
    ]
    if len(pairs) > LISTED:
        clauses.append(_plural(len(pairs) - LISTED, "more pair"))
    n = len(record.models)
    every = len(pairs) == n * (n - 1) // 2
    ending = "every pair is told apart" if every else "no other pair can be told apart"
    lead = (
        f"With style held equal and {ci} family-wise confidence"
        if held
        else (f"With {ci} family-wise confidence")
    )
    return f"{lead}, {', and '.join(clauses)}; {ending}."


def _position_evidence(record: RankingRecord, judge: JudgeRow) -> str | None:
    """Why a judge counts as position-locked, in words (None when it is not)."""
    bias = judge.position_bias or 0.0  # None: not fitted
    strong = abs(bias) >= LOCKED_BIAS
    slot, other = ("B", "A") if bias < 0 else ("A", "B")
    order = record.run.order_consistency.get(judge.name) if record.run else None
    if order and order.pairs >= LOCKED_PAIRS and order.same_slot >= LOCKED_SAME_SLOT:
        chose = f"reply {slot}" if strong else "the same slot"  # else A and B may mix
        return (
            f"chose {chose} in both orders for {order.same_slot:.0%} of the "
            f"{order.pairs} pairs it saw both ways"
        )
    if strong:
        odds = math.exp(abs(bias))
        times = f"{odds:,.0f} times" if odds < 1000 else "over 1,000 times"
        return f"picks reply {slot} {times} as often as {other} between replies it rates equal"
    return None


def _uninformative(record: RankingRecord) -> list[str]:
    """Sentence 3, when it applies: judges that answered by position, and members that
    did not judge, with why."""
    sentences = []
    locked = [
        f"{j.name} ({evidence})"
        for j in record.judges
        if (evidence := _position_evidence(record, j)) is not None
    ]
    if locked:
        their = "their" if len(locked) > 1 else "its"
        sentences.append(
            f"{_listed(locked)} answered by position rather than by content, so {their} "
            "verdicts carry almost no information about the replies."
        )
    reasons: dict[str, list[str]] = {}
    for member in record.run.members if record.run else []:
        if member.evaluee_only is not None:
            reasons.setdefault(member.evaluee_only, []).append(member.name)
    for reason, names in reasons.items():
        were = "were evaluees" if len(names) > 1 else "was an evaluee"
        sentences.append(f"{_listed(names)} {were} only: {reason}.")
    return sentences


def meaning(record: RankingRecord) -> list[str]:
    """What the ranking means, in two or three plain sentences: what was ranked and by
    whom, what the intervals allow one to conclude, and which judges said nothing about
    the replies (position-locked, or not judging at all) and why; with style control,
    what its Elo assumes."""
    assumption = [STYLE_ASSUMPTION] if _styled(record) else []
    return [
        _what_was_ranked(record),
        _what_intervals_allow(record),
        *_uninformative(record),
        *assumption,
    ]


def print_summary(console: Console, record: RankingRecord) -> None:
    """The leaderboard, judge diagnostics and fit; then what the run collected and cost
    (`rank`) or how well a simulated truth was recovered (`fit --truth`), the judges'
    agreement (`fit --agreement`), and last what it all means."""
    ci_pct = f"{100 * record.settings.ci:g}%"
    styled = _styled(record)
    title = "Peer ranking (low-rank BTD + EigenTrust)"
    if styled:
        title += f", {_held_equal(record)}"
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
    board = Table(
        title=escape(title),
        title_justify="left",
        caption=escape("\n".join(captions)) if captions else None,
        caption_justify="left",
    )
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
        board.add_row(
            str(m.rank),
            _rank_ci(m),
            escape(m.name),
            f"{m.elo:.0f}",
            _elo_ci(m),
            *(_uncontrolled(m) if styled else []),
            f"{m.trust:.4f}",
            f"{m.verdicts_as_evaluee:g}",
        )
    console.print(board)
    if note:
        above = _above(record)
        console.print(
            f"above (family-wise {ci_pct}): "
            + ("; ".join(f"{name} > {below}" for name, below in above) if above else "none"),
            highlight=False,
            markup=False,
        )
    if record.style is not None:
        _print_style(console, record.style, ci_pct)

    judges = Table(title="Judges", title_justify="left")
    judges.add_column("judge")
    judges.add_column("tie propensity", justify="right")
    judges.add_column("position bias (first slot, log-odds)", justify="right")
    judges.add_column(SELF_PREFERENCE, justify="right")
    judges.add_column("verdicts", justify="right")
    for j in record.judges:
        judges.add_row(
            escape(_judge_name(j.name, j.external)),
            with_ci(j.tie_propensity, j.tie_propensity_ci, ".2f"),
            with_ci(j.position_bias, j.position_bias_ci, "+.2f"),
            _self_preference(j),
            f"{j.verdicts:g}",
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
        + (f", {boot} scenario-bootstrap rounds in {fit.bootstrap_seconds:.2f}s" if boot else ""),
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


def first_replies(summary: RunSummary) -> dict[str, str]:
    """Per served judge, how its first replies gave their verdicts ("17 structured;
    unread 6%"); empty without served judges."""
    return {judge: modes.line() for judge, modes in (summary.verdicts_by_judge or {}).items()}


def _print_style(console: Console, style: StylePart, ci_pct: str) -> None:
    """The style coefficients (per judge and feature with per-judge coefficients) and
    the features left out."""
    if style.coefficients:  # none when every feature asked for was left out
        coefficients = Table(title="Style coefficients", title_justify="left")
        headers = _style_headers(style, ci_pct)
        for header in headers:
            coefficients.add_column(header, justify="right" if header == headers[-2] else "left")
        for row in _style_rows(style):
            coefficients.add_row(*map(escape, row))
        console.print(coefficients)
        console.print(f"[dim]coefficient: {STYLE_COEFFICIENT}[/]", highlight=False)
    dropped = _dropped(style)
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
        for label, shift in _shifts(record.greenbeard):
            clique, others = (
                "-" if v is None else f"{v:+.1f}"
                for v in (shift.mean_shift_greenbeards, shift.mean_shift_others)
            )
            console.print(
                f"greenbeard Elo shift ({label}): clique {clique}, others {others}",
                highlight=False,
            )
    print_accounting(console, summary.accounting)


def _shifts(g: GreenbeardShift) -> list[tuple[str, Shift]]:
    """The experiment's two fits, labelled."""
    return [
        ("with self judgments", g.with_self_judgments),
        ("without self judgments", g.without_self_judgments),
    ]


def leaderboard_svg(models: list[ModelRow]) -> str:
    """Elo with its interval, one row per model, best on top."""
    rows = len(models)
    if not rows:
        return ""
    lows = [_end(m, 0, -math.inf) for m in models]
    highs = [_end(m, 1, math.inf) for m in models]
    # every interval, but no wider than twice the spread of the points either side of them
    # (at least 100): one degenerate interval (a trust of zero in some bootstrap draw
    # puts Elo near minus infinity) must not squash the others; it ends in an arrowhead
    elos = [m.elo for m in models]
    spread = max(max(elos) - min(elos), 100.0)
    lo, hi = max(min(lows), min(elos) - 2 * spread), min(max(highs), max(elos) + 2 * spread)
    pad = max(10.0, (hi - lo) * 0.08)
    lo, hi = lo - pad, hi + pad
    width, left, row_h = 760, 190, 26
    plot = width - left - 20

    def x(v: float) -> float:
        return float(left + (min(max(v, lo), hi) - lo) / (hi - lo) * plot)

    parts = [
        f'<svg width="{width}" height="{rows * row_h + 30}" role="img" '
        'aria-label="Elo with intervals">'
    ]
    for i, (m, a, b) in enumerate(zip(models, lows, highs, strict=True)):
        y = 15 + i * row_h
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{e(m.name)}</text>')
        parts.append(
            f'<line x1="{x(a):.1f}" x2="{x(b):.1f}" y1="{y}" y2="{y}" '
            'stroke="#7a8aa8" stroke-width="4" stroke-linecap="round"/>'
        )
        for end, tip, back in ((a, x(lo), 8), (b, x(hi), -8)):
            if not lo <= end <= hi:  # runs past the axis: an arrowhead at its edge
                parts.append(
                    f'<path class="beyond" d="M{tip:.1f} {y} l{back} -6 v12 z" fill="#7a8aa8"/>'
                )
        parts.append(
            f'<circle cx="{x(m.elo):.1f}" cy="{y}" r="5" fill="#2f5aa8">'
            f"<title>{e(m.name)}: {m.elo:.0f} {e(_elo_ci(m))}</title></circle>"
        )
    base = rows * row_h + 12
    for tick in _ticks(lo, hi):
        parts.append(
            f'<line x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="5" y2="{base}" stroke="#eef1f5"/>'
        )
        parts.append(
            f'<text x="{x(tick):.1f}" y="{base + 14}" text-anchor="middle">{tick:.0f}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _end(m: ModelRow, side: int, unlimited: float) -> float:
    """One end of a model's Elo interval for a chart: the point without an interval,
    `unlimited` where the interval has no limit on that side."""
    if not m.elo_ci:
        return m.elo
    end = m.elo_ci[side]
    return unlimited if end is None else end


def _ticks(lo: float, hi: float, n: int = 6) -> list[float]:
    step = 10 ** math.floor(math.log10(max((hi - lo) / n, 1e-9)))
    for mult in (1, 2, 5, 10):
        if (hi - lo) / (step * mult) <= n:
            step *= mult
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1)]


def heatmap_svg(judges: list[str], evaluees: list[str], rows: list[list[float]]) -> str:
    """The trust matrix: row = judge, column = evaluee; darker = more trust."""
    if not judges or not evaluees:
        return ""
    longest_row = max(len(n) for n in judges)
    longest_column = max(len(n) for n in evaluees)
    # room for the labels: row labels to the left, column labels slanted up and to the
    # right (the last one past the grid by as much as it rises)
    cell, left, top = 34, 20 + 7 * longest_row, 20 + 5 * longest_column
    right = max(10, top - cell // 2)
    top_value = max(max(r) for r in rows) or 1.0
    parts = [
        f'<svg width="{left + len(evaluees) * cell + right}" '
        f'height="{top + len(judges) * cell + 10}" role="img" aria-label="trust matrix">'
    ]
    for j, name in enumerate(evaluees):
        cx = left + j * cell + cell / 2
        parts.append(
            f'<text transform="translate({cx:.1f},{top - 6}) rotate(-45)">{e(name)}</text>'
        )
    for i, (name, row) in enumerate(zip(judges, rows, strict=True)):
        y = top + i * cell
        parts.append(
            f'<text x="{left - 6}" y="{y + cell / 2 + 4:.1f}" text-anchor="end">{e(name)}</text>'
        )
        for j, value in enumerate(row):
            shade = int(245 - 200 * (value / top_value))
            parts.append(
                f'<rect x="{left + j * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="rgb({shade},{shade + 5 if shade < 250 else 250},250)">'
                f"<title>{e(name)} trusts {e(evaluees[j])}: {value:.3f}</title></rect>"
            )
    parts.append("</svg>")
    return "".join(parts)


def plane_svg(dispositions: dict[str, list[float]], lenses: dict[str, list[float]]) -> str:
    """Dispositions (dots) and judge lenses (arrows) on the first two latent axes."""
    points = [(n, v[0], v[1] if len(v) > 1 else 0.0, "d") for n, v in dispositions.items()]
    points += [(n, v[0], v[1] if len(v) > 1 else 0.0, "l") for n, v in lenses.items()]
    if not points:
        return ""
    reach = max(max(abs(p[1]), abs(p[2])) for p in points) or 1.0
    size, mid = 460, 230
    scale = (mid - 40) / reach

    def at(a: float, b: float) -> tuple[float, float]:
        return mid + a * scale, mid - b * scale

    parts = [
        f'<svg width="{size}" height="{size}" role="img" aria-label="latent plane">',
        f'<line x1="20" x2="{size - 20}" y1="{mid}" y2="{mid}" stroke="#dde2ea"/>',
        f'<line y1="20" y2="{size - 20}" x1="{mid}" x2="{mid}" stroke="#dde2ea"/>',
        '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="6" refY="3" '
        'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#c2571a"/></marker></defs>',
    ]
    for name, a, b, kind in points:
        x, y = at(a, b)
        if kind == "l":
            parts.append(
                f'<line x1="{mid}" y1="{mid}" x2="{x:.1f}" y2="{y:.1f}" '
                'stroke="#c2571a" marker-end="url(#arrow)">'
                f"<title>lens of {e(name)}</title></line>"
            )
        else:
            parts.append(
                f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#2f5aa8"/>'
                f'<text x="{x + 7:.1f}" y="{y - 6:.1f}">{e(name)}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def render(
    record: RankingRecord, transcripts: list[TranscriptLine], *, samples: int = SAMPLE_JUDGMENTS
) -> str:
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
    styled = _styled(record)
    held = f" {e(_held_equal(record))};" if styled else ""
    out.append(
        f"<h2>Leaderboard</h2><p class=muted>Elo from EigenTrust over the low-rank "
        f"BTD fit;{held} bars are {ci} scenario-bootstrap intervals. "
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
                [m.name, m.rank, _rank_ci(m), fmt(m.elo), _elo_ci(m),
                 *(_uncontrolled(m) if styled else []), f"{m.trust:.4f}"]
                for m in models
            ],
        )
    )  # fmt: skip
    note = intervals_note(record)
    if note:
        above = _above(record)
        out.append(
            f'<p class="muted">{e(note)}.</p>'
            + (
                table(["model", f"above (family-wise {ci})"], [list(row) for row in above])
                if above
                else f"<p>No model is above another with family-wise {ci} confidence.</p>"
            )
        )
    if record.style is not None:
        out.append(_style_section(record.style, ci))
    tm = record.trust_matrix
    out.append(
        "<h2>Trust matrix</h2><p class=muted>Row: judge; column: evaluee; darker = "
        "more trust.</p>" + heatmap_svg(tm.judges, tm.evaluees, tm.rows)
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
                _judge_name(j.name, j.external),
                with_ci(j.tie_propensity, j.tie_propensity_ci, ".2f"),
                with_ci(j.position_bias, j.position_bias_ci, "+.2f"),
                _self_preference(j),
                order.pairs if order else 0,
                fmt(order.consistent if order else None, ".0%"),
                fmt(order.same_slot if order else None, ".0%"),
                parse.get(j.name, 0),
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
    out.append(_transcript_samples(transcripts, samples))
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
        left = len(_style_headers(style, ci)) - 2  # feature [and judge]
        out.append(table(_style_headers(style, ci), _style_rows(style), left=left))
    dropped = _dropped(style)
    if dropped:
        out.append(f"<p class=muted>{e(dropped)}.</p>")
    return "".join(out)


def _greenbeard(g: GreenbeardShift) -> str:
    rows = [
        [label, fmt(s.mean_shift_greenbeards, "+.1f"), fmt(s.mean_shift_others, "+.1f")]
        for label, s in _shifts(g)
    ]
    return (
        "<h2>Greenbeard experiment</h2><p class=muted>Members "
        + e(", ".join(g.members))
        + " share a marker and were told to favour it; Elo shift against the same run "
        "without those instructions.</p>"
        + table(["fit", "mean shift, greenbeards", "mean shift, others"], rows)
    )


def _transcript_samples(transcripts: list[TranscriptLine], n: int) -> str:
    comparisons = [t for t in transcripts if t.role == "comparison" and t.reply][:n]
    if not comparisons:
        return ""
    out = ["<h2>Sample judgments</h2><p class=muted>Model text is shown as text, escaped.</p>"]
    for t in comparisons:
        prompt = t.messages[-1][1] if t.messages else ""
        scores = ""
        if t.scores:  # likelihood mode: the verdict went to the higher score
            scores = (
                "<p>Scores (follows minus breaks, nats per token; not probabilities): "
                + ", ".join(f"{e(label)} {value:+.4f}" for label, value in t.scores.items())
                + "</p>"
            )
        out.append(
            f"<details><summary>{e(t.member)} judges {e(t.first)} (A) vs "
            f"{e(t.second)} (B) on {e(t.scenario)}</summary>"
            f"<pre>{e(prompt)}</pre>{scores}<p><b>Judge reply</b></p><pre>{e(t.reply)}</pre>"
            "</details>"
        )
    return "".join(out)
