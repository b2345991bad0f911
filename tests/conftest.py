"""Shared fixtures: small simulated populations with known truth, and a user cache
folder of the test session's own (the llama.cpp CPU probe writes there)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from eigenjury.stats import Population, VerdictTable, make_population, simulate_verdicts


@pytest.fixture(scope="session")
def population() -> Population:
    return make_population(8, 2, seed=3)


@pytest.fixture(scope="session")
def table(population: Population) -> VerdictTable:
    return simulate_verdicts(population, n_scenarios=1500, seed=4)


@pytest.fixture(scope="session", autouse=True)
def user_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EIGENJURY_CACHE_DIR", str(tmp_path_factory.mktemp("user-cache")))
        yield


@pytest.fixture(autouse=True)
def working_directory(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each test runs in a folder of its own, with a user data folder of its own: the
    per-user store (engine.settings.default_store) must never be the tester's, and a
    store left in the working directory by an older eigenjury never the checkout's."""
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    monkeypatch.setenv("EIGENJURY_DATA_DIR", str(tmp_path_factory.mktemp("user-data")))
