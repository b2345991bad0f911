"""Shared fixtures: small simulated populations with known truth."""

from __future__ import annotations

import pytest

from eigenjury.stats import Population, VerdictTable, make_population, simulate_verdicts


@pytest.fixture(scope="session")
def population() -> Population:
    return make_population(8, 2, seed=3)


@pytest.fixture(scope="session")
def table(population: Population) -> VerdictTable:
    return simulate_verdicts(population, n_scenarios=1500, seed=4)
