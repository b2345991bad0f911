"""One way to run a method's model calls, for every command and config.

`run_engine` opens the engine that `EngineSettings` (engine/settings.py) describe, every
model checked first (so a refused run leaves no store behind), checks each endpoint
answers, runs the method's work, and closes the store and the backend whatever
happens. A Ctrl-C becomes `Interrupted`, which names the store: everything finished is
in it, and rerunning sends only the rest.

Every command shares one store per user (settings.default_store) unless told
otherwise, so a call one method made is a cache hit for every other, whatever folder
it is run from; a per-directory store of an older eigenjury is absorbed into it first.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from eigenjury.engine.backends import RoundMap, connect
from eigenjury.engine.engine import Budget, Engine, check_specs
from eigenjury.engine.limits import EndpointLimits, RetryPolicy
from eigenjury.engine.settings import EngineSettings
from eigenjury.engine.store import Store, adopt_directory_store
from eigenjury.errors import InputError, Interrupted
from eigenjury.models.prices import PriceTable
from eigenjury.models.spec import ModelSpec
from eigenjury.records import AccountingRecord

T = TypeVar("T")


@dataclass(frozen=True)
class Ran(Generic[T]):
    """What the work returned and what its calls cost."""

    value: T
    accounting: AccountingRecord  # this run's calls
    map_rounds: RoundMap | None = field(default=None, repr=False)  # the backend's bootstrap


# How a command names a model in an error: "member 'kind-smol'" in a rank config.
Describe = Callable[[ModelSpec, InputError], InputError]


def _plain(spec: ModelSpec, exc: InputError) -> InputError:
    return exc


def check_engine_specs(
    settings: EngineSettings,
    specs: Sequence[ModelSpec],
    *,
    base: Path | None = None,
    describe: Describe = _plain,
) -> tuple[PriceTable, Budget]:
    """The price table and budget of `settings`, or an InputError unless every spec can
    be used under them (keys, local models, prices for a cost cap); nothing is opened
    or written."""
    prices = settings.price_table(base)
    budget = Budget(max_cost_usd=settings.budget_usd, max_tokens=settings.budget_tokens)
    for spec in dict.fromkeys(specs):
        try:
            check_specs([spec], prices, budget)
        except InputError as exc:
            raise describe(spec, exc) from None
    return prices, budget


def open_engine(
    settings: EngineSettings,
    specs: Sequence[ModelSpec],
    *,
    base: Path | None = None,
    progress: bool = True,
    describe: Describe = _plain,
) -> tuple[Engine, RoundMap | None]:
    """The engine `settings` describe, for calls to `specs`, and the backend's bootstrap
    runner. Every spec and setting is checked before the store opens."""
    prices, budget = check_engine_specs(settings, specs, base=base, describe=describe)
    backend, map_rounds = connect(settings.backend, settings.ray_address)
    try:
        path = settings.store_path(base)
        if settings.store is None:
            adopt_directory_store(path)
        store = Store(path)
    except BaseException:
        if backend is not None:
            backend.close()
        raise
    engine = Engine(
        store,
        limits=EndpointLimits(concurrency=settings.concurrency, rpm=settings.rpm, tpm=settings.tpm),
        retry=RetryPolicy(max_attempts=settings.max_attempts, timeout_s=settings.timeout_s),
        budget=budget,
        prices=prices,
        retry_errors=settings.retry_errors,
        progress=progress,
        backend=backend,
    )
    return engine, map_rounds


def run_engine(
    settings: EngineSettings,
    specs: Sequence[ModelSpec],
    work: Callable[[Engine], Awaitable[T]],
    *,
    base: Path | None = None,
    progress: bool = True,
    describe: Describe = _plain,
) -> Ran[T]:
    """`work(engine)` on the engine `settings` describe, after every endpoint of `specs`
    has answered; the store and backend are closed after, whatever happens. Raises
    `Interrupted` on Ctrl-C."""
    engine, map_rounds = open_engine(
        settings, specs, base=base, progress=progress, describe=describe
    )

    async def run() -> T:
        async with engine:
            for spec in dict.fromkeys(specs):  # each model once, before anything is spent
                try:
                    await engine.check_endpoints([spec])
                except InputError as exc:
                    raise describe(spec, exc) from None
            return await work(engine)

    try:
        value = asyncio.run(run())
    except KeyboardInterrupt:
        raise Interrupted(engine.store.path) from None
    finally:
        engine.store.close()
        if engine.backend is not None:
            engine.backend.close()
    accounting = AccountingRecord.model_validate(engine.session_accounting.record())
    return Ran(value, accounting, map_rounds)
