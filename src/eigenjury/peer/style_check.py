"""`eigenjury style-check`: how much of a rank run's length effect is the judges' taste.

Style control holds length equal and assumes length reaches the verdicts only through
the judges' taste; where longer replies really are better, the fitted coefficient takes
that substance too, and the controlled Elo loses it. The check measures taste with the
content held fixed: a sample of the run's replies, each made longer by neutral filler
sentences (bounds.neighbours.Verbosity), is compared by every judge of the run with the
reply as it was, in both orders, through the run's own protocol (peer.collect: the
same comparison prompt, personas, reflections, repairs and verdict reading; the
engine, so every call is stored, accounted and resumable). Each judge's taste follows
(stats.taste) in the fit's units, beside the run's fitted coefficient; and the run's
verdicts are refitted with the coefficient held at the measured taste.

Everything is read before anything is spent (`prepare_check`): the run's record, its config
(named by the record, or given), and its replies (the evaluee lines of its
transcripts.jsonl). Nothing here prints or writes a file: reports.style_check does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eigenjury.bounds.neighbours import Verbosity
from eigenjury.engine import Engine
from eigenjury.errors import InputError, located
from eigenjury.files import open_regular
from eigenjury.peer.collect import Transcript
from eigenjury.peer.designs import Comparison
from eigenjury.peer.fitting import fit_config
from eigenjury.peer.outcomes import Outcomes
from eigenjury.peer.record import (
    LOCKED,
    SUBSTANCE,
    TASTE,
    UNDER,
    EditsPart,
    RankingRecord,
    StyleCheckRecord,
    TasteLeaderboard,
    TasteModelRow,
    TasteRow,
)
from eigenjury.peer.run import Inputs, make_collector, prepare
from eigenjury.records import AccountingRecord, now, read_record
from eigenjury.stats.bootstrap import rounds_problem
from eigenjury.stats.style import normalised_difference, style_design
from eigenjury.stats.taste import (
    EditEffect,
    difference_interval,
    length_edits,
    measure_edit_effect,
)
from eigenjury.stats.verdicts import DataError, VerdictTable, certain

DEFAULT_REPLIES = 50  # sampled replies; every judge compares each in both orders
DEFAULT_ROUNDS = 500  # bootstrap rounds over the edited replies
# The edit's size when the run gives none (it did not control for length): a normalised
# difference of 0.2, a reply made 1.5 times as long.
FALLBACK_TARGET = 0.2
MAX_TARGET = 0.5  # three times as long: beyond it filler swamps any reply
EDIT = "neutral filler sentences (bounds.neighbours.Verbosity), one block at the start or end"
LONGER = " (longer)"  # how the lengthened reply is named in the check's transcript
_EVALUEE = re.compile(rb'\{"role":\s*"evaluee"')  # how a reply's transcript line begins


@dataclass(frozen=True)
class CheckSettings:
    replies: int = DEFAULT_REPLIES
    target: float | None = None  # normalised length difference of each edit (None: the run's)
    seed: int = 0
    rounds: int = DEFAULT_ROUNDS


@dataclass(frozen=True)
class Reply:
    member: str
    scenario: str
    text: str


@dataclass(frozen=True)
class CheckInputs:
    """What the check runs on: the run's folder, record and inputs, its replies, the
    length scale the taste is measured in, and the settings."""

    folder: Path
    record: RankingRecord
    run: Inputs
    replies: list[Reply]
    scale: float
    scale_source: str
    settings: CheckSettings

    @property
    def judges(self) -> list[str]:
        """The members that judge, in the config's order."""
        return [m.name for m in self.run.config.population if m.judges]


def prepare_check(folder: Path, config: Path | None, settings: CheckSettings) -> CheckInputs:
    """Read and check everything the check needs, before anything is spent."""
    results = folder / RankingRecord.FILE
    if not folder.is_dir():
        raise InputError("no such folder; give the output folder of a `rank` run", path=folder)
    if not results.is_file():
        raise InputError(
            f"not a rank run's folder: it has no {RankingRecord.FILE} (rank writes "
            "results.json, verdicts.csv and transcripts.jsonl there); give the folder "
            "a `rank` run wrote",
            path=folder,
        )
    record = read_record(results, RankingRecord)
    problem = rounds_problem(settings.rounds, record.settings.ci)
    if problem:  # at the run's interval level
        raise InputError(problem, field="--bootstrap")
    if record.run is None:
        raise InputError(
            "this ranking was fitted from a verdict file (`eigenjury fit`), not collected by "
            "`rank`: the check needs the run's judges and replies",
            path=results,
        )
    config_path = config if config is not None else _config_of(record, results)
    run = prepare(config_path, folder)
    members = [m.name for m in run.config.population]
    if sorted(members) != sorted(m.name for m in record.run.members):
        raise InputError(
            "this config does not describe the run in "
            f"{folder}: its members are {', '.join(members)}, the run's "
            f"{', '.join(m.name for m in record.run.members)}; give the run's config with "
            "--config",
            path=config_path,
            field="population",
        )
    replies = read_replies(folder / "transcripts.jsonl", run.scenarios)
    scale, source = _length_scale(record, folder, run)
    return CheckInputs(folder, record, run, replies, scale, source, settings)


def _config_of(record: RankingRecord, results: Path) -> Path:
    """The config the run was made with, as its record names it."""
    if not record.source:
        raise InputError(
            "the record does not name the config the run was made with; give it with --config",
            path=results,
        )
    path = Path(record.source)
    if not path.is_file():
        raise InputError(
            f"the run was made with the config {record.source}, which is not there (it is "
            "named as `rank` was given it, relative to where rank ran); give it with --config",
            path=results,
            field="source",
        )
    return path


def read_replies(path: Path, scenarios: dict[str, str]) -> list[Reply]:
    """Every reply the run's evaluees gave (the evaluee lines of its transcripts, which
    lead with their role), on the config's scenarios."""
    import json

    if not path.is_file():
        raise InputError(
            "the run has no transcripts.jsonl, where its replies are; rerun `rank` to write "
            "it (its calls come from the store)",
            path=path,
        )
    replies: dict[tuple[str, str], Reply] = {}
    with open_regular(path) as f:
        for number, line in enumerate(f, start=1):
            if not _EVALUEE.match(line):
                continue
            try:
                data = json.loads(line)
                member, scenario, text = data["member"], data["scenario"], data.get("reply")
            except (ValueError, KeyError, TypeError):
                raise InputError(
                    "not a transcript line of an evaluee's reply", path=path, line=number
                ) from None
            if isinstance(text, str) and text.strip() and scenario in scenarios:
                replies[member, scenario] = Reply(member, scenario, text)
    if not replies:
        raise InputError(
            "the run's transcripts hold no reply on the config's scenarios (no evaluee line "
            "with a reply); the check lengthens the run's own replies",
            path=path,
        )
    return sorted(replies.values(), key=lambda r: (r.member, r.scenario))


def _length_scale(record: RankingRecord, folder: Path, run: Inputs) -> tuple[float, str]:
    """The run's standard deviation of normalised length difference: the unit of its
    length coefficient (from the record), else of the verdicts' lengths."""
    if record.style is not None and "length" in record.style.scale:
        return record.style.scale["length"], "the run's style control"
    table = _verdicts(folder)
    if table.features is None or "length" not in table.features.names:
        raise InputError(
            "the run's verdicts.csv carries no reply lengths (first_length, second_length); "
            "rerun `rank` to write them",
            path=folder / "verdicts.csv",
        )
    with located(folder / "verdicts.csv"):
        design = style_design(
            table.features.only(["length"]), table.weight, table.first, table.second,
            table.n_models,
        )  # fmt: skip
    if not design.names:
        raise InputError(
            "the run's replies leave length without a standard deviation to measure taste "
            f"in ({design.dropped['length']})",
            path=folder / "verdicts.csv",
        )
    return float(design.scale[0]), "the run's verdicts (it did not control for length)"


def _verdicts(folder: Path) -> VerdictTable:
    from eigenjury.verdict_files import read_verdicts

    path = folder / "verdicts.csv"
    if not path.is_file():
        raise InputError("the run has no verdicts.csv; rerun `rank` to write it", path=path)
    return read_verdicts(path)


def target_of(check: CheckInputs) -> float:
    """The normalised length difference each edit aims at: one standard deviation of the
    run's (so the taste needs no extrapolation), at most MAX_TARGET."""
    if check.settings.target is not None:
        return check.settings.target
    return min(check.scale, MAX_TARGET) if check.scale > 0 else FALLBACK_TARGET


@dataclass(frozen=True)
class Edited:
    """A sampled reply and its longer version."""

    reply: Reply
    longer: str
    alias: str  # the name the longer version goes by in the check's comparisons


@dataclass(frozen=True)
class Collected:
    edited: list[Edited]
    outcomes: Outcomes
    comparisons: list[Comparison]
    accounting: AccountingRecord


def lengthened(check: CheckInputs) -> list[Edited]:
    """`replies` of the run's replies (seeded), each with filler added toward the target
    normalised difference d: L (1 + d) / (1 - d) tokens in all."""
    from eigenjury.reply_features import text_features

    settings = check.settings
    rng = np.random.default_rng(settings.seed)
    pool = check.replies
    chosen = np.sort(rng.choice(len(pool), size=min(settings.replies, len(pool)), replace=False))
    sampled = [pool[i] for i in chosen]
    lengths = text_features([r.text for r in sampled], ("length",))["length"]
    d = target_of(check)
    names = {m.name for m in check.run.config.population}
    verbosity = Verbosity()
    edited = []
    for i, (reply, length) in enumerate(zip(sampled, lengths, strict=True)):
        alias = reply.member + LONGER
        while alias in names:
            alias += "'"
        tokens = length * 2 * d / (1 - d)
        longer = verbosity.lengthen(reply.text, tokens, np.random.default_rng([settings.seed, i]))
        edited.append(Edited(reply, longer, alias))
    return edited


async def collect(
    engine: Engine, check: CheckInputs, transcript: Transcript | None = None
) -> Collected:
    """Every judge compares each sampled reply with its longer version, in both orders,
    through the run's protocol."""
    run = check.run
    collector = make_collector(run.config, engine, run.constitution, run.scenarios)
    if transcript is not None:
        collector.transcript = transcript
    edited = lengthened(check)
    comparisons = []
    for e in edited:
        collector.responses[e.reply.member, e.reply.scenario] = e.reply.text
        collector.responses[e.alias, e.reply.scenario] = e.longer
        for judge in check.judges:
            comparisons.append(Comparison(e.reply.scenario, judge, e.reply.member, e.alias))
            comparisons.append(Comparison(e.reply.scenario, judge, e.alias, e.reply.member))
    outcomes = await collector.collect(comparisons)
    accounting = AccountingRecord.model_validate(collector.accounting.record())
    return Collected(edited, outcomes, comparisons, accounting)


def measure(check: CheckInputs, got: Collected, ci: float) -> list[EditEffect]:
    """Each judge's taste and the pooled one (last), from the verdicts collected."""
    from eigenjury.reply_features import text_features

    judges = tuple(check.judges)
    longer_of = {(e.alias, e.reply.scenario): e for e in got.edited}
    texts = [t for e in got.edited for t in (e.reply.text, e.longer)]
    measured = text_features(texts, ("length",))["length"].reshape(-1, 2)
    length = {}
    for e, (plain, long) in zip(got.edited, measured, strict=True):
        length[e.reply.member, e.reply.scenario] = plain
        length[e.alias, e.reply.scenario] = long
    unit = {(e.reply.member, e.reply.scenario): u for u, e in enumerate(got.edited)}
    rows: list[tuple[int, int, float, float, np.ndarray]] = []
    for outcome in got.outcomes:
        c = outcome.comparison
        if outcome.verdicts is None:
            continue
        edited = longer_of.get((c.first, c.scenario)) or longer_of[c.second, c.scenario]
        key = (edited.reply.member, edited.reply.scenario)
        first, second = length[c.first, c.scenario], length[c.second, c.scenario]
        if outcome.probs is not None:
            weights = [np.asarray(outcome.probs)]
        else:  # one verdict per criterion: a comparison counts once
            weights = list(certain(outcome.verdicts) / len(outcome.verdicts))
        rows.extend((judges.index(c.judge), unit[key], first, second, n) for n in weights)
    if not rows:
        raise DataError("no comparison of the check produced a usable verdict")
    edits = length_edits(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows]),
        np.stack([r[4] for r in rows]),
        check.scale,
        judges,
    )
    return measure_edit_effect(edits, ci=ci, rounds=check.settings.rounds, seed=check.settings.seed)


def reading(low: float | None, high: float | None) -> str:
    """The comparison in words, from the interval of fitted minus taste."""
    if low is not None and low > 0:
        return SUBSTANCE
    if high is not None and high < 0:
        return UNDER
    return TASTE


def taste_row(effect: EditEffect, fitted: float | None, fitted_ci: list[float] | None) -> TasteRow:
    """A judge's (or the pooled) taste, beside the run's coefficient for it."""
    row = TasteRow(
        judge=effect.judge,
        verdicts=round(effect.verdicts, 3),
        longer=round(effect.toward, 3),
        shorter=round(effect.away, 3),
        ties=round(effect.ties, 3),
        share=round(effect.share, 4),
        share_ci=None if effect.share_ci is None else [round(v, 4) for v in effect.share_ci],
        taste=None if effect.effect is None else round(effect.effect, 4),
        taste_ci=None
        if effect.effect_ci is None
        else [None if v is None else round(v, 4) for v in effect.effect_ci],
        unbounded=effect.unbounded,
        position_locked=effect.position_locked or None,
        fitted=fitted,
        fitted_ci=fitted_ci,
    )
    if effect.position_locked:
        row.reading = LOCKED
        return row
    if fitted is None or effect.effect is None:
        return row  # nothing to compare
    if effect.effect_ci is None or not fitted_ci:  # no intervals (no bootstrap): no reading
        row.difference = round(fitted - effect.effect, 4)
        return row
    diff, low, high = difference_interval(
        fitted, (fitted_ci[0], fitted_ci[1]), effect.effect, effect.effect_ci
    )
    row.difference = round(diff, 4)
    row.difference_ci = [None if v is None else round(v, 4) for v in (low, high)]
    row.reading = reading(low, high)
    return row


def _fitted(record: RankingRecord, judge: str | None) -> tuple[float | None, list[float] | None]:
    """The run's length coefficient for `judge` (None: the shared one) and its interval."""
    if record.style is None:
        return None, None
    for c in record.style.coefficients:
        if c.feature == "length" and c.judge == judge:
            return c.coefficient, c.ci
    return None, None


def assemble(check: CheckInputs, got: Collected) -> StyleCheckRecord:
    """The check's record: tastes beside the run's coefficients, and the leaderboard
    with the coefficient held at the taste."""
    record = check.record
    assert record.run is not None
    ci = record.settings.ci
    with located(
        check.folder,
        context="cannot measure the judges' taste",
        hint="what was collected is kept in the store, so rerun to resume",
    ):
        effects = measure(check, got, ci)
    per_judge = bool(record.style and record.style.per_judge)
    rows = [taste_row(e, *_fitted(record, e.judge if per_judge else None)) for e in effects[:-1]]
    pooled = taste_row(effects[-1], *(_fitted(record, None) if not per_judge else (None, None)))
    warnings = []
    fitted_length = record.style is not None and "length" in record.style.features
    if not fitted_length:
        warnings.append(
            "the run did not control for length: there is no fitted coefficient to compare "
            "the taste with (fit: {style: default} controls for it)"
        )
    achieved, short = _achieved(got.edited, target_of(check))
    leaderboard = None
    if fitted_length:
        leaderboard, why = _at_taste(check, effects, per_judge)
        if why:
            warnings.append(why)
    return StyleCheckRecord(
        created=now(),
        source=str(check.folder),
        run_name=record.run.name,
        judging=record.run.judging.mode,
        ci=ci,
        bootstrap=check.settings.rounds,
        edits=EditsPart(
            edit=EDIT,
            replies=len(got.edited),
            seed=check.settings.seed,
            target=round(target_of(check), 4),
            achieved=round(achieved, 4),
            short=short,
            scale=round(check.scale, 6),
            scale_source=check.scale_source,
        ),
        judges=rows,
        pooled=pooled,
        comparisons=len(got.comparisons),
        failures=got.outcomes.failures(),
        accounting=got.accounting,
        warnings=warnings,
        leaderboard=leaderboard,
    )


def _achieved(edited: list[Edited], target: float) -> tuple[float, int]:
    """The mean normalised length difference the edits reached, and how many fell short
    of `target` (by more than a filler sentence's worth: 5%)."""
    from eigenjury.reply_features import text_features

    texts = [t for e in edited for t in (e.longer, e.reply.text)]
    lengths = text_features(texts, ("length",))["length"].reshape(-1, 2)
    reached = normalised_difference(lengths[:, 0], lengths[:, 1])
    return float(reached.mean()), int(np.sum(reached < 0.95 * target))


def _at_taste(
    check: CheckInputs, effects: list[EditEffect], per_judge: bool
) -> tuple[TasteLeaderboard | None, str | None]:
    """The run's verdicts refitted with the length coefficient held at the taste."""
    record = check.record
    if per_judge:
        held_by_judge = {e.judge: e.effect for e in effects[:-1] if e.effect is not None}
        if not held_by_judge:
            return None, "no judge's taste is bounded: nothing to hold the coefficients at"
        held: dict[str, float] = {str(k): float(v) for k, v in held_by_judge.items()}
        fixed: dict[str, float | dict[str, float]] = {"length": held}
    else:
        pooled = effects[-1].effect
        if pooled is None:
            return None, (
                "the pooled taste is unbounded: the leaderboard at the taste cannot be given"
            )
        held = {"length": float(pooled)}
        fixed = {"length": float(pooled)}
    table = _verdicts(check.folder)
    with located(check.folder / "verdicts.csv", context="cannot refit the run's verdicts"):
        ranking = fit_config(check.run.config, table, style_fixed=fixed)
    run_elo = {m.name: m for m in record.models}
    boot = ranking.bootstrap > 0
    models = []
    for k in np.argsort(-ranking.elo_, kind="stable"):
        name = ranking.models_[k]
        ci = ranking.elo_ci_[k] if boot else None
        models.append(
            TasteModelRow(
                name=name,
                elo=round(float(ranking.elo_[k]), 2),
                elo_ci=None
                if ci is None
                else [round(float(v), 2) if np.isfinite(v) else None for v in ci],
                rank=int(ranking.rank_[k]),
                elo_controlled=run_elo[name].elo,
                elo_uncontrolled=run_elo[name].elo_uncontrolled,
            )
        )
    return TasteLeaderboard(held={k: round(v, 4) for k, v in held.items()}, models=models), None
