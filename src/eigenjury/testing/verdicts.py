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
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from eigenjury.stats.verdicts import VerdictTable


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


def verdicts(design: Design, seed: int) -> VerdictTable:
    """One study drawn from `design`."""
    rng = np.random.default_rng(seed)
    n = len(design.strengths)
    judges_n = n + design.crowd
    strength = np.asarray(design.strengths, dtype=np.float64)
    trait = _Traits(10_000, n, 0).standard_normal()  # fixed per population
    taste = design.taste_sd * _Traits(20_000, n, design.crowd).standard_normal()
    zone = design.tie_zone * _Traits(30_000, n, design.crowd).uniform(0.0, 2.0)
    slot = design.position * _Traits(40_000, n, design.crowd).uniform(0.0, 2.0)
    inclusion = np.ones(n) if design.inclusion is None else np.asarray(design.inclusion)
    weight = np.ones(n) if design.judge_weight is None else np.asarray(design.judge_weight)
    self_serving = np.zeros(judges_n, dtype=bool)
    self_serving[list(design.self_serving)] = True
    rows: list[tuple[int, int, int, int, int]] = []
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
                    verdict = 0 if abs(diff) < zone[judge] else (1 if diff > 0 else 2)
                    if self_serving[judge] and judge in (first, second):
                        verdict = 1 if first == judge else 2
                    rows.append((scenario, int(judge), int(first), int(second), verdict))
    data = np.array(rows)
    names = np.array(design.judges)
    return VerdictTable.from_columns(
        data[:, 0], names[data[:, 1]], names[data[:, 2]], names[data[:, 3]], data[:, 4]
    )
