"""The two conventions a verdict file may follow, told apart by its columns: which
column plays which part, what an outcome value means, which reply features the file
offers and from where, and the columns to read (the layout)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from eigenjury.errors import InputError
from eigenjury.reply_features import DEFAULT_FEATURES
from eigenjury.stats.verdicts import FIRST, SECOND, TIE

REQUIRED = ("scenario", "judge", "first", "second", "verdict")
OPTIONAL = ("criterion", "strength")
# Graded verdicts: 1 a plain verdict, 2 a strong one (A>>B, B>>A), counted as
# `strong_weight` verdicts by the reader.
STRENGTHS = (1, 2)
# Soft verdicts: the judge's probability of each label, in the order written.
PROBABILITY_COLUMNS = ("p_first", "p_second", "p_tie")
PROBABILITY_LABELS = (FIRST, SECOND, TIE)  # each column's label
BATTLE_REQUIRED = ("model_a", "model_b", "winner")
# The Kaggle "arena-human-preference" form: the winner as three 0/1 columns.
ONE_HOT = ("winner_model_a", "winner_model_b", "winner_tie")
WINNERS = {
    "model_a": FIRST,
    "model_b": SECOND,
    "tie": TIE,
    "tie (bothbad)": TIE,
    "both_bad": TIE,  # LMArena's arena-human-preference-140k
}
CROWD = "crowd"  # the one judge of battles without a judge column
# Which reply features to read: "available" (the default features the file offers),
# None (none), or these names (each required).
Features = Literal["available"] | Sequence[str] | None
# LMArena's per-battle struct column, and its fields behind each default feature (a
# struct of counts is summed); "{}" is the side, a or b.
METADATA = "conv_metadata"
METADATA_FIELDS = {
    "length": "sum_assistant_{}_tokens",
    "headers": "header_count_{}",
    "lists": "list_count_{}",
    "bold": "bold_count_{}",
}
# What each convention needs, said wherever a file follows neither.
NEEDS = (
    "a verdict file needs scenario, judge, first, second, verdict (criterion and strength "
    "optional; "
    "p_first, p_second, p_tie for soft verdicts, which make verdict optional); "
    "a battle file (the Chatbot Arena convention) needs model_a, model_b, winner "
    "(judge and question_id optional), or winner_model_a, winner_model_b, winner_tie "
    "(0/1) for winner"
)


@dataclass(frozen=True)
class Convention:
    """Which file column plays which part, and what the outcome column says."""

    noun: str  # what one row is: "verdict" or "battle"
    required: tuple[str, ...]
    scenario: str
    judge: str
    first: str
    second: str
    outcome: str
    pair: tuple[str, str]  # the two replies' columns of a feature ("{}": its name)
    not_features: frozenset[str]  # names whose column pair is something else
    texts: tuple[str, str]  # the replies themselves
    outcome_value: Callable[[Any], int]  # a value's verdict, or -1
    outcomes: str  # the values allowed, in words
    parts: tuple[str, ...] = ()  # columns whose values, joined by ",", are the outcome
    arena: bool = False  # texts may be JSON lists of turns; features may be in METADATA
    probabilities: tuple[str, ...] = ()  # soft verdicts: PROBABILITY_COLUMNS

    def columns(self, found: Sequence[str], features: dict[str, str]) -> list[str]:
        """The columns to read from a file that has `found`, for these features."""
        outcome = self.parts or (self.outcome,)
        roles = (
            self.scenario,
            self.judge,
            self.first,
            self.second,
            *outcome,
            "criterion",
            *(("strength",) if self.noun == "verdict" else ()),
            *self.probabilities,
        )
        columns = [c for c in roles if c in found]
        for name, source in features.items():
            wanted = {"columns": self.feature_columns(name), "metadata": (METADATA,)}
            columns += [c for c in wanted.get(source, self.texts) if c not in columns]
        return columns

    def feature_columns(self, name: str) -> tuple[str, str]:
        first, second = self.pair
        return first.format(name), second.format(name)

    def offered(self, found: Sequence[str], metadata: Collection[str]) -> dict[str, str]:
        """Every feature the file offers and where from: "columns", "metadata" or
        "texts" (the default features only), in that order of preference."""
        offered: dict[str, str] = {}
        present = set(found)
        first, second = self.pair
        head, tail = first.split("{}")
        for column in found:
            name = column[len(head) : len(column) - len(tail)]
            matches = column.startswith(head) and column.endswith(tail) and name
            if matches and name not in self.not_features and second.format(name) in present:
                offered[name] = "columns"
        fields = set(metadata) if self.arena else set()
        for name, field in METADATA_FIELDS.items():
            if name not in offered and {field.format("a"), field.format("b")} <= fields:
                offered[name] = "metadata"
        if all(c in present for c in self.texts):
            offered.update({n: "texts" for n in DEFAULT_FEATURES if n not in offered})
        return offered


def _verdict_value(value: Any) -> int:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value  # compared as it is: float() of a huge int overflows
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    return int(number) if number in (0.0, 1.0, 2.0) else -1


def _winner_value(value: Any) -> int:
    return WINNERS.get(value.strip().lower(), -1) if isinstance(value, str) else -1


def _one_hot_value(value: Any) -> int:
    """'1,0,0' (winner_model_a, winner_model_b, winner_tie) is 1; '0,0,1' a tie."""
    try:
        flags = [float(x) for x in value.split(",")]
    except (AttributeError, ValueError):
        return -1
    return (FIRST, SECOND, TIE)[flags.index(1.0)] if sorted(flags) == [0.0, 0.0, 1.0] else -1


VERDICT_TABLE = Convention(
    "verdict",
    REQUIRED,
    "scenario",
    "judge",
    "first",
    "second",
    "verdict",
    ("first_{}", "second_{}"),
    frozenset({"text"}),
    ("first_text", "second_text"),
    _verdict_value,
    "0 (tie), 1 (first better) or 2 (second better)",
)
_BATTLES = Convention(
    "battle",
    BATTLE_REQUIRED,
    "question_id",
    "judge",
    "model_a",
    "model_b",
    "winner",
    ("{}_a", "{}_b"),
    frozenset({"model", "response", "winner_model", "conversation"}),
    ("response_a", "response_b"),
    _winner_value,
    "model_a, model_b, tie, tie (bothbad) or both_bad",
    arena=True,
)
_SOFT_VERDICTS = replace(
    VERDICT_TABLE,
    required=(*REQUIRED[:4], *PROBABILITY_COLUMNS),
    probabilities=PROBABILITY_COLUMNS,
)
_ONE_HOT_BATTLES = replace(
    _BATTLES,
    required=(*BATTLE_REQUIRED[:2], *ONE_HOT),
    outcome=", ".join(ONE_HOT),
    outcome_value=_one_hot_value,
    outcomes="a single 1 among the three (0 elsewhere)",
    parts=ONE_HOT,
)


def _convention(path: Path, found: Sequence[str], **where: Any) -> Convention:
    """The convention whose required columns the file has, or an InputError naming
    what the nearer one misses (a verdict table with some of the probability columns:
    the others)."""
    given = [c for c in PROBABILITY_COLUMNS if c in found]
    lacking = [c for c in PROBABILITY_COLUMNS if c not in found]
    if given and lacking and all(c in found for c in REQUIRED[:4]):
        raise InputError(
            f"missing column(s) {', '.join(lacking)}; found {', '.join(given)}: soft verdicts "
            f"need all three of {', '.join(PROBABILITY_COLUMNS)} (0 for a label the judge "
            "cannot give, such as p_tie without ties) or none",
            path=path,
            **where,
        )
    conventions: tuple[Convention, ...] = (VERDICT_TABLE, _BATTLES, _ONE_HOT_BATTLES)
    if given:
        conventions = (_SOFT_VERDICTS, *conventions)
    for convention in conventions:
        if all(c in found for c in convention.required):
            return convention
    nearest = max(conventions, key=lambda c: sum(x in found for x in c.required))
    missing = [c for c in nearest.required if c not in found]
    raise InputError(
        f"missing column(s) {', '.join(missing)}; found {', '.join(found) or 'none'}; {NEEDS}",
        path=path,
        **where,
    )


def requested_features(features: Features) -> tuple[str, ...] | None:
    """The feature names asked for; None: the default features the file offers."""
    if isinstance(features, str):
        if features != "available":
            raise ValueError(f"features must be 'available', None or names, not {features!r}")
        return None
    names = tuple(features or ())
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"feature(s) named twice: {', '.join(twice)}")
    return names


@dataclass(frozen=True)
class Layout:
    """What is read from a file: its convention, each feature's source ("columns",
    "metadata" or "texts"), the columns, and whether the features were named (then a
    reply without a value is an error; else its features are unknown, NaN, and only a
    fit that controls for them refuses it)."""

    convention: Convention
    features: dict[str, str]
    columns: list[str]
    named: bool = False

    def numeric(self) -> set[str]:
        """The feature and probability columns read, whose values are numbers."""
        c = self.convention
        pairs = [c.feature_columns(n) for n, s in self.features.items() if s == "columns"]
        strength = {"strength"} & set(self.columns)
        return {x for pair in pairs for x in pair} | set(c.probabilities) | strength


def file_layout(
    path: Path,
    found: Sequence[str],
    metadata: Collection[str],
    requested: tuple[str, ...] | None,
    **where: Any,
) -> Layout:
    """The layout of a file with the columns `found` (and these fields in METADATA), or
    an InputError naming a requested feature it does not offer and what that needs."""
    convention = _convention(path, found, **where)
    offered = convention.offered(found, metadata)
    if requested is None:
        features = {n: offered[n] for n in DEFAULT_FEATURES if n in offered}
    else:
        lacking = [n for n in requested if n not in offered]
        if lacking:
            needs = "; ".join(_feature_needs(convention, n) for n in lacking)
            raise InputError(
                f"{needs}; the file offers {', '.join(offered) or 'no features'}",
                path=path,
                **where,
            )
        features = {n: offered[n] for n in requested}
    return Layout(convention, features, convention.columns(found, features), requested is not None)


def _feature_needs(convention: Convention, name: str) -> str:
    """Why the file offers no feature `name`, and what would."""
    first, second = convention.feature_columns(name)
    if name in convention.not_features:
        return f"no style feature '{name}': {first} and {second} are not features"
    sources = [f"columns {first} and {second}"]
    if convention.arena and name in METADATA_FIELDS:
        field = METADATA_FIELDS[name]
        sources.append(f"{METADATA} with {field.format('a')} and {field.format('b')}")
    if name in DEFAULT_FEATURES:
        sources.append(f"the texts {convention.texts[0]} and {convention.texts[1]}")
    return f"no style feature '{name}': it needs {' or '.join(sources)}"
