"""Cells and notes that the terminal summary and the static report both show, in
the same words: intervals, style control, trust formation, the greenbeard fits."""

from __future__ import annotations

import math
from collections.abc import Sequence

from eigenjury.peer.record import (
    BaselinePart,
    BaselineRow,
    GreenbeardShift,
    JudgeRow,
    ModelRow,
    RankingRecord,
    RunSummary,
    Shift,
    StyleCoefficient,
    StylePart,
)
from eigenjury.reports.kit import fmt, with_ci


def elo_ci_cell(m: ModelRow) -> str:
    """ "[low, high]"; an end with no limit (a perfect record) is open: "[1268, ∞)"."""
    if not m.elo_ci:
        return "-"
    low, high = m.elo_ci
    return ("(-∞" if low is None else f"[{low:.0f}") + (
        ", ∞)" if high is None else f", {high:.0f}]"
    )


SELF_PREFERENCE = "self-preference (log-odds)"
# The fit's bound on a judge's position bias (stats.btd._LOG_BOUND; a test keeps them
# equal), which only a judge that always picks one slot reaches. Its tie propensity then
# has no say in any verdict, so whatever value the fit left it at is no estimate.
SLOT_BOUND = 15.0


def _by_slot(j: JudgeRow) -> bool:
    return j.position_bias is not None and abs(j.position_bias) >= SLOT_BOUND - 1e-6


def position_bias_cell(j: JudgeRow) -> str:
    """The position bias with its interval, or, at the fit's bound, the slot it always
    picks (the number there is the bound, not an estimate)."""
    if _by_slot(j):
        assert j.position_bias is not None
        return f"always the {'first' if j.position_bias > 0 else 'second'} slot (at the bound)"
    return with_ci(j.position_bias, j.position_bias_ci, "+.2f")


def tie_propensity_cell(j: JudgeRow) -> str:
    """The tie propensity with its interval; not determined for a judge that answers by
    slot alone."""
    if _by_slot(j):
        return "not determined (answers by slot)"
    return with_ci(j.tie_propensity, j.tie_propensity_ci, ".2f")


# a judgment's verdict per criterion, in the viewer's words (view/static/app.js)
VERDICT_WORDS = {0: "tie", 1: "first better", 2: "second better"}


def label_probabilities(logprobs: dict[str, float]) -> str:
    """A judge's log-probabilities of its allowed answers as probabilities over them
    ("A 0.912, B 0.071, tie 0.017"), as the viewer shows them."""
    top = max(logprobs.values())
    weights = {label: math.exp(value - top) for label, value in logprobs.items()}
    total = sum(weights.values())
    return ", ".join(f"{label} {weight / total:.3f}" for label, weight in weights.items())


# the viewer's trust heatmap says the same (view/static/app.js)
EMPTY_ROWS = (
    " Empty rows: members that never judge; they pass the trust that reaches them on "
    "evenly to every evaluee (see the warnings)."
)


def self_preference_cell(j: JudgeRow) -> str:
    """What a judge adds to its own reply, with its interval and on how many verdicts;
    "-" for a judge that never judged itself."""
    if j.self_preference is None or j.self_verdicts is None:
        return "-"
    return f"{with_ci(j.self_preference, j.self_preference_ci, '+.2f')} (n={j.self_verdicts:g})"


def signal_cell(j: JudgeRow) -> str:
    """Whether a judge's verdicts carry information: "informative", "weak",
    "uninformative: position" and so on; "-" where not measured (no bootstrap)."""
    if j.signal is None:
        return "-"
    return j.signal.verdict + (f": {j.signal.reason}" if j.signal.reason else "")


def rank_ci_cell(m: ModelRow) -> str:
    return "-" if not m.rank_ci else f"{m.rank_ci[0]}-{m.rank_ci[1]}"


def _rank_change(m: ModelRow) -> str:
    """Places gained once style is held equal: "+2", "-1", "0" (plain in any terminal)."""
    if m.rank_change is None:
        return "-"
    return f"{m.rank_change:+d}" if m.rank_change else "0"


def is_styled(record: RankingRecord) -> bool:
    """Whether the leaderboard is style-controlled: it then has an uncontrolled Elo."""
    return any(m.elo_uncontrolled is not None for m in record.models)


def held_equal(record: RankingRecord) -> str:
    features = record.style.features if record.style else []
    return f"Elo with style held equal ({', '.join(features)})"


UNCONTROLLED = ["Elo uncontrolled", "change"]  # the leaderboard's columns with style control


def leaderboard_row(m: ModelRow, styled: bool, name: str) -> list[str]:
    """A model's leaderboard cells as the terminal and the Markdown export show them:
    rank, its interval, `name` (the model's, escaped for where it goes), Elo, its
    interval, the uncontrolled Elo and change where `styled`, trust, verdicts."""
    return [
        str(m.rank),
        rank_ci_cell(m),
        name,
        f"{m.elo:.0f}",
        elo_ci_cell(m),
        *(uncontrolled_cells(m) if styled else []),
        f"{m.trust:.4f}",
        f"{m.verdicts_as_evaluee:g}",
    ]


def interval_source(record: RankingRecord) -> str:
    """Where the intervals come from, in the tables' words: the scenario bootstrap's
    refits, or draws from the sandwich covariance of one fit."""
    rounds = record.settings.bootstrap
    if record.settings.interval == "sandwich":
        return f"sandwich intervals (cluster-robust by scenario, {rounds} draws, no refits)"
    return f"scenario-bootstrap intervals ({rounds} rounds)"


def is_battles(record: RankingRecord) -> bool:
    """Whether the verdicts are battles (arena votes, a panel's): no evaluee judges,
    so the leaderboard follows LMArena's conventions (`battle_row`)."""
    return bool(record.judges) and all(j.external for j in record.judges)


def battle_columns(level: str, styled: bool) -> list[str]:
    """The headers of `battle_row`'s cells, the interval's at `level` ("95%")."""
    columns = ["Rank (UB)", "model", "Elo", f"{level} CI", "votes"]
    return columns + (["Elo uncontrolled", "rank uncontrolled", "change"] if styled else [])


def rank_ub_note(record: RankingRecord) -> str | None:
    """What Rank (UB) and +u/-l mean, under a battle leaderboard with intervals."""
    if not (is_battles(record) and record.models and record.models[0].elo_ci is not None):
        return None
    return (
        "Rank (UB): 1 + the number of models whose interval lies wholly above this one's "
        "(LMArena's); CI as +above/-below the Elo"
    )


def upper_bound_ranks(models: Sequence[ModelRow]) -> list[int | None]:
    """LMArena's Rank (UB): 1 + the number of models whose interval lies wholly above
    this one's (their lower end above its upper end; an open end reaches to infinity);
    None without intervals."""
    if any(m.elo_ci is None for m in models):
        return [None] * len(models)
    low = [-math.inf if m.elo_ci[0] is None else m.elo_ci[0] for m in models if m.elo_ci]
    high = [math.inf if m.elo_ci[1] is None else m.elo_ci[1] for m in models if m.elo_ci]
    return [1 + sum(other > top for other in low) for top in high]


def plus_minus_cell(m: ModelRow) -> str:
    """The interval as LMArena writes it, relative to the Elo: "+12/-9"; an open end
    (a perfect record) is infinite: "+∞/-15"."""
    if not m.elo_ci:
        return "-"
    low, high = m.elo_ci
    up = "+∞" if high is None else f"+{high - m.elo:.0f}"
    down = "-∞" if low is None else f"-{m.elo - low:.0f}"
    return f"{up}/{down}"


BASELINE_COLUMNS = (
    "model", "win rate", "interval", "from Elo", "interval", "verdicts", "won / tied / lost"
)  # fmt: skip


def baseline_title(part: BaselinePart, ci: str) -> str:
    """What the win-rate table shows, and how sure it is."""
    how = (
        f"{ci} intervals from {part.rounds} bootstrap rounds of the questions, in points"
        if part.rounds
        else "no intervals (no bootstrap rounds)"
    )
    held = ", style held equal" if part.styled else ""
    return (
        f"Against the baseline {part.baseline} (Arena-Hard's score): win rate, the share of "
        f"verdicts between a model and the baseline that the model won, a tie counting "
        f"half; from Elo, the share of decisive verdicts the fit predicts it wins{held}; "
        f"{how}"
    )


def _percent(value: float, interval: Sequence[float | None]) -> tuple[str, str]:
    """A share as a percentage, and its interval as +u/-l points ("-" without one)."""
    low, high = interval
    rate = 100 * value
    if low is None or high is None:
        return f"{rate:.1f}%", "-"
    return f"{rate:.1f}%", f"+{100 * high - rate:.1f}/-{rate - 100 * low:.1f}"


def baseline_cells(row: BaselineRow, name: str) -> list[str]:
    """A model's cells in the win-rate table: `name`, its win rate in percent with the
    interval as +u/-l points, the same as the fitted Elo predicts it, the verdicts and
    how they went."""
    split = f"{row.wins:g} / {row.ties:g} / {row.losses:g}"
    return [
        name,
        *_percent(row.win_rate, row.win_rate_ci),
        *_percent(row.elo_win_rate, row.elo_win_rate_ci),
        f"{row.verdicts:g}",
        split,
    ]


def battle_row(m: ModelRow, rank_ub: int | None, styled: bool, name: str) -> list[str]:
    """A model's cells in LMArena's layout: Rank (UB) (the rank without intervals),
    `name`, Elo, the interval as +u/-l, votes, and with style control the uncontrolled
    Elo, the uncontrolled rank and the places gained once style is held equal."""
    cells = [str(m.rank if rank_ub is None else rank_ub), name, f"{m.elo:.0f}"]
    cells += [plus_minus_cell(m), f"{m.verdicts_as_evaluee:g}"]
    if styled:
        unranked = "-" if m.rank_change is None else str(m.rank + m.rank_change)
        cells += [fmt(m.elo_uncontrolled), unranked, _rank_change(m)]
    return cells


def uncontrolled_cells(m: ModelRow) -> list[str]:
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
    above = (
        f"above: the models it is above with family-wise {ci} confidence, all such "
        f"statements holding at once (simultaneous {method} intervals on every pairwise "
        "Elo difference)"
    )
    if is_battles(record):  # LMArena's layout has Rank (UB) instead of the rank interval
        return above
    return (
        f"rank {ci}: a marginal interval, the percentiles of the model's rank over the "
        f"bootstrap draws (each holds its own model's rank); {above}"
    )


def above_rows(record: RankingRecord) -> list[tuple[str, str]]:
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


# A coefficient is shown to two decimals: below half the last one it reads as 0.00
SHOWN_COEFFICIENT = 0.005
NO_EFFECT = "no effect measured"


def style_reading(c: StyleCoefficient) -> str:
    """A coefficient in words: the side judges favour when its interval leaves out 0;
    "no effect measured" when it is too small to show or its interval has no width (the
    draws never moved it: nothing measured it), never a direction."""
    more, less = STYLE_SIDES.get(
        c.feature,
        (f"the reply with the higher {c.feature}", f"the reply with the lower {c.feature}"),
    )
    side = more if c.coefficient > 0 else less
    shared = c.judge is None  # else the row names the judge
    if abs(c.coefficient) < SHOWN_COEFFICIENT or (c.ci is not None and c.ci[0] == c.ci[1]):
        return NO_EFFECT
    if c.ci is None:
        return f"{'judges lean' if shared else 'leans'} to {side} (no interval)"
    if c.ci[0] > 0 or c.ci[1] < 0:
        return f"{'judges favour' if shared else 'favours'} {side}"
    return "no clear effect"


def style_rows(style: StylePart) -> list[list[str]]:
    """[judge,] feature, coefficient with its interval, reading."""
    return [
        [*([c.judge or "-"] if style.per_judge else []), c.feature,
         with_ci(c.coefficient, c.ci, "+.2f"), style_reading(c)]
        for c in style.coefficients
    ]  # fmt: skip


def style_headers(style: StylePart, ci: str) -> list[str]:
    return [*(["judge"] if style.per_judge else []), "feature", f"coefficient {ci}", "reading"]


def dropped_note(style: StylePart) -> str | None:
    if not style.dropped:
        return None
    return "left out: " + "; ".join(f"{name} ({why})" for name, why in style.dropped.items())


def plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def trust_formation(record: RankingRecord) -> str | None:
    """How trust was formed, when external judges took part (None otherwise: plain
    EigenTrust among the judges)."""
    external = [j for j in record.judges if j.external]
    if not external:
        return None
    peers = len(record.judges) - len(external)
    damping = record.settings.damping
    panel = f"the consensus of {plural(len(external), 'external judge')}"
    weights = record.settings.external_weights or {}
    if len(set(weights.values())) > 1:
        panel += " (weights " + ", ".join(f"{n} {w:g}" for n, w in weights.items()) + ")"
    if damping >= 1.0:
        line = f"trust: {panel}"
        if peers:
            line += f", a = 1 (the {plural(peers, 'peer judge')} shape only the fit)"
        return line
    return (
        f"trust: {plural(peers, 'peer judge')} (EigenTrust) damped toward {panel}, a = {damping:g}"
    )


def judge_name(name: str, external: bool) -> str:
    return f"{name} (external)" if external else name


def first_replies(summary: RunSummary) -> dict[str, str]:
    """Per served judge, how its first replies gave their verdicts ("17 structured;
    unread 6%"); empty without served judges."""
    return {judge: modes.line() for judge, modes in (summary.verdicts_by_judge or {}).items()}


def greenbeard_shifts(g: GreenbeardShift) -> list[tuple[str, Shift]]:
    """The experiment's two fits, labelled."""
    return [
        ("with self judgments", g.with_self_judgments),
        ("without self judgments", g.without_self_judgments),
    ]


def given_answers_lines(summary: RunSummary) -> list[str]:
    """Per member that gave its answers: where they came from and what became of them
    on the run's questions (answered, missing, empty and failed with the rule each
    followed, unused, fields not read)."""
    lines = []
    for m in summary.members:
        a = m.answers
        if a is None:
            continue
        parts = [f"{a.answered} answered"]
        parts += [f"{a.missing} missing (left out)"] if a.missing else []
        parts += [f"{a.empty} empty ({a.empty_rule})"] if a.empty else []
        parts += [f"{a.errors} error markers ({a.errors_rule})"] if a.errors else []
        parts += [f"{a.unused} for questions not used"] if a.unused else []
        parts += [f"fields not read: {', '.join(a.ignored_fields)}"] if a.ignored_fields else []
        lines.append(f"{m.name} ({a.format}, {a.file}): {', '.join(parts)}")
    return lines
