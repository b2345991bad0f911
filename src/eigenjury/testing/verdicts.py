"""A verdict generator unlike `eigenjury simulate`, for checking the consensus fit
(tests and benchmarks/consensus_validity.py).

`eigenjury simulate` draws verdicts from the low-rank BTD model itself. This one does
not: each scenario gives every model a reply of its own quality (the model's strength
plus a scenario effect shared by every judge: verdicts within a scenario are
correlated), each judge perceives a reply through a taste of its own for a second
trait, and a verdict compares the two perceived qualities plus logistic noise, with
a judge-specific tie zone (no Davidson tie model) and first-slot advantage.
Designs may be unbalanced: some models drawn into groups far more often than others,
some judges judging far more. A judge may be self-serving: whenever its own reply is
one of the two, it picks it. External judges (a crowd) may judge beside the models.

Replies may carry lengths (the table's `length` feature), drawn from a stream of their
own so that the verdicts stay those of the same design without them: a reply's log
length is its model's habit plus `length_substance` times its quality (longer replies
really are better: their substance takes words) plus noise. Judges perceive length only
through `length_taste`, the log-odds they add per unit of normalised length difference
(a - b) / (a + b); with none, length is substance and no taste. `edit_verdicts` asks
the same judges about same-content edits: a reply against itself made longer by
filler, whose only difference is length (what `eigenjury style-check` measures).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from eigenjury.stats.style import normalised_difference
from eigenjury.stats.taste import EditVerdicts, length_edits
from eigenjury.stats.verdicts import ReplyFeatures, VerdictTable, certain

BASE_LENGTH = 200.0  # tokens of a reply of average quality and habit


@dataclass(frozen=True)
class Design:
    """What a generated study looks like (see the module docstring)."""

    strengths: tuple[float, ...] = (3.0, 0.6, 0.3, 0.1, -0.1, -0.3, -0.6, -3.0)
    scenarios: int = 30
    group_size: int = 4
    judges_per_scenario: int = 3
    scenario_sd: float = 0.6  # shared by every judge of a scenario
    taste_sd: float = 0.4  # judges' weight on the second trait
    noise: float = 1.0  # scale of each verdict's own perception noise (logistic)
    tie_zone: float = 0.25  # typical half-width of a judge's tie zone
    position: float = 0.2  # typical first-slot advantage
    inclusion: tuple[float, ...] | None = None  # relative odds of a model joining a group
    judge_weight: tuple[float, ...] | None = None  # relative odds of a judge being drawn
    self_serving: tuple[int, ...] = ()
    crowd: int = 0  # external judges (never judged); one of them judges every scenario too
    focus: tuple[int, int] | None = None  # a pair that half the scenarios show, alone
    peers_judge: bool = True  # whether the models judge
    names: tuple[str, ...] = field(default=())
    # reply lengths (None: the replies carry none): the spread of log length per reply
    length_sd: float | None = None
    length_habit_sd: float = 0.0  # spread of the models' own mean log lengths
    length_substance: float = 0.0  # log length per logit of reply quality
    # log-odds a judge adds per unit of normalised length difference: one for all, or
    # one per judge (models, then crowd)
    length_taste: float | tuple[float, ...] = 0.0

    def tastes(self) -> np.ndarray:
        """Each judge's taste for length (log-odds per unit of normalised difference)."""
        n = len(self.judges)
        taste = np.broadcast_to(np.asarray(self.length_taste, dtype=np.float64), (n,))
        return np.array(taste)

    @property
    def models(self) -> tuple[str, ...]:
        return self.names or tuple(f"m{i}" for i in range(len(self.strengths)))

    @property
    def judges(self) -> tuple[str, ...]:
        return self.models + tuple(f"crowd{i}" for i in range(self.crowd))


class _Traits:
    """One draw per model and per crowd judge, each from a stream of its own, so that a
    judge keeps its traits however many models or judges stand beside it."""

    def __init__(self, kind: int, models: int, crowd: int) -> None:
        self.streams = [np.random.default_rng([kind, 0, i]) for i in range(models)]
        self.streams += [np.random.default_rng([kind, 1, i]) for i in range(crowd)]

    def standard_normal(self) -> np.ndarray:
        return np.array([rng.standard_normal() for rng in self.streams])

    def uniform(self, low: float, high: float) -> np.ndarray:
        return np.array([rng.uniform(low, high) for rng in self.streams])


def _habits(design: Design) -> tuple[np.ndarray, np.ndarray]:
    """Each judge's tie zone and first-slot advantage."""
    n = len(design.strengths)
    zone = design.tie_zone * _Traits(30_000, n, design.crowd).uniform(0.0, 2.0)
    slot = design.position * _Traits(40_000, n, design.crowd).uniform(0.0, 2.0)
    return zone, slot


def verdicts(design: Design, seed: int) -> VerdictTable:
    """One study drawn from `design`."""
    rng = np.random.default_rng(seed)
    n = len(design.strengths)
    judges_n = n + design.crowd
    strength = np.asarray(design.strengths, dtype=np.float64)
    trait = _Traits(10_000, n, 0).standard_normal()  # fixed per population
    taste = design.taste_sd * _Traits(20_000, n, design.crowd).standard_normal()
    zone, slot = _habits(design)
    inclusion = np.ones(n) if design.inclusion is None else np.asarray(design.inclusion)
    weight = np.ones(n) if design.judge_weight is None else np.asarray(design.judge_weight)
    self_serving = np.zeros(judges_n, dtype=bool)
    self_serving[list(design.self_serving)] = True
    rows: list[tuple[int, int, int, int, int]] = []
    lengths = _Lengths(design, seed) if design.length_sd is not None else None
    length_taste = design.tastes()
    replied: list[tuple[float, float]] = []  # per row, the two replies' lengths
    for scenario in range(design.scenarios):
        # weighted draw without replacement (Efraimidis-Spirakis keys)
        keys = rng.random(n) ** (1.0 / inclusion)
        group = np.argsort(-keys)[: design.group_size]
        if design.focus is not None and rng.random() < 0.5:
            group = np.array(design.focus)
        judges: list[int] = []
        if design.peers_judge:
            judges += list(
                rng.choice(
                    n, size=design.judges_per_scenario, replace=False, p=weight / weight.sum()
                )
            )
        if design.crowd:
            judges.append(n + int(rng.integers(design.crowd)))
        quality = strength + design.scenario_sd * rng.standard_normal(n)
        length = lengths.draw(quality, np.arange(n)) if lengths is not None else np.ones(n)
        for judge in judges:
            seen = quality + taste[judge] * trait
            for first in group:
                for second in group:
                    if first == second:
                        continue
                    # the noise is drawn either way: a self-serving judge leaves every
                    # other verdict of the study as an honest one would have it
                    diff = seen[first] - seen[second] + slot[judge]
                    diff += design.noise * rng.logistic()
                    if lengths is not None:
                        replied.append((length[first], length[second]))
                        diff += length_taste[judge] * _difference(length[first], length[second])
                    verdict = 0 if abs(diff) < zone[judge] else (1 if diff > 0 else 2)
                    if self_serving[judge] and judge in (first, second):
                        verdict = 1 if first == judge else 2
                    rows.append((scenario, int(judge), int(first), int(second), verdict))
    data = np.array(rows)
    names = np.array(design.judges)
    table = VerdictTable.from_columns(
        data[:, 0], names[data[:, 1]], names[data[:, 2]], names[data[:, 3]], data[:, 4]
    )
    if lengths is None:
        return table
    pairs = np.array(replied)
    features = ReplyFeatures(("length",), pairs[:, :1], pairs[:, 1:])
    return dataclasses.replace(table, features=features)


def _difference(a: float, b: float) -> float:
    """The normalised difference (a - b) / (a + b) of two lengths."""
    return float(normalised_difference(np.array([a]), np.array([b]))[0])


class _Lengths:
    """Reply lengths, from a stream of their own: the verdicts of a design do not change
    when it gains lengths (a judge without taste gives the same verdicts)."""

    def __init__(self, design: Design, seed: int) -> None:
        self.design = design
        self.rng = np.random.default_rng([seed, 50_000])
        n = len(design.strengths)
        self.habit = design.length_habit_sd * _Traits(50_000, n, 0).standard_normal()
        self.centre = float(np.mean(design.strengths))

    def draw(self, quality: np.ndarray, models: np.ndarray) -> np.ndarray:
        """The length in tokens (at least 1) of each reply of this quality by these models."""
        d = self.design
        assert d.length_sd is not None
        log_length = np.log(BASE_LENGTH) + self.habit[models]
        log_length += d.length_substance * (quality - self.centre)
        log_length += d.length_sd * self.rng.standard_normal(len(quality))
        return np.asarray(np.maximum(np.rint(np.exp(log_length)), 1.0))


def edit_verdicts(
    design: Design, replies: int, ratio: float, scale: float, seed: int
) -> EditVerdicts:
    """Every judge of `design` compares each of `replies` replies (lengths as the design
    draws them) with itself made `ratio` times longer, in both orders. The content is
    the same, so only the judge's first-slot advantage, its taste for length, its tie
    zone and its noise decide. `scale`: the standard deviation of normalised length
    difference the tastes are measured in (a fit's, PeerRanking.style_scale_)."""
    if design.length_sd is None:
        raise ValueError("the design's replies carry no lengths (length_sd is None)")
    rng = np.random.default_rng([seed, 60_000])
    n = len(design.strengths)
    zone, slot = _habits(design)
    taste = design.tastes()
    models = rng.integers(n, size=replies)  # whose replies were sampled
    quality = np.asarray(design.strengths)[models] + design.scenario_sd * rng.standard_normal(
        replies
    )
    original = _Lengths(design, seed).draw(quality, models)
    longer = np.rint(original * ratio)
    judges = [j for j in range(len(design.judges)) if design.peers_judge or j >= n]
    rows = []
    for judge in judges:
        for unit in range(replies):
            for first, second in ((original[unit], longer[unit]), (longer[unit], original[unit])):
                diff = slot[judge] + taste[judge] * _difference(first, second)
                diff += design.noise * rng.logistic()
                verdict = 0 if abs(diff) < zone[judge] else (1 if diff > 0 else 2)
                rows.append((judge, unit, first, second, verdict))
    data = np.array(rows)
    return length_edits(
        data[:, 0].astype(np.int64),
        data[:, 1].astype(np.int64),
        data[:, 2],
        data[:, 3],
        certain(data[:, 4].astype(np.int64)),
        scale,
        design.judges,
    )
