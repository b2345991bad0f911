"""`eigenjury simulate`: verdicts drawn from a known population, with its truth record,
to check the method before spending money; and that truth read back for `fit --truth`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eigenjury.errors import InputError
from eigenjury.files import load_json, read_text
from eigenjury.peer.record import SimulatedDesign, TruthRecord
from eigenjury.records import now
from eigenjury.stats.simulate import Population, simulate_verdicts
from eigenjury.stats.verdicts import VerdictTable


@dataclass(frozen=True)
class Simulation:
    """The verdicts drawn and the truth they were drawn from."""

    table: VerdictTable
    truth: TruthRecord


def simulate(population: Population, design: SimulatedDesign) -> Simulation:
    """Verdicts of `population` in the random-groups `design` (seeded one past the
    population's seed, so the two draws are independent), and their truth record."""
    table = simulate_verdicts(
        population,
        n_scenarios=design.scenarios,
        group_size=design.group_size,
        judges_per_scenario=design.judges_per_scenario,
        scenario_noise=design.scenario_noise,
        soft=bool(design.soft),
        seed=design.seed + 1,
    )
    truth = TruthRecord(
        created=now(),
        population=population.to_dict(),
        design=design,
        trust=population.trust().tolist(),
        elo=population.elo().tolist(),
    )
    return Simulation(table, truth)


def read_truth(path: Path, models: tuple[str, ...]) -> Population:
    """The population of a truth file, which must be the one of `models`. Only its
    population is read: files of older versions, and ones written by hand, carry no
    more."""
    data = load_json(read_text(path), path)
    try:
        if not isinstance(data, dict) or "population" not in data:
            raise ValueError("no population in it")
        population = Population.from_dict(data["population"])
    except ValueError as exc:
        raise InputError(
            f"not a truth file written by `eigenjury simulate` ({exc})", path=path
        ) from None
    if set(models) != set(population.models):
        unknown = sorted(set(models) ^ set(population.models))
        raise InputError(
            "the verdicts and the truth describe different populations (differing: "
            f"{', '.join(unknown[:5])}); recovery needs the same models in both",
            path=path,
        )
    return population
