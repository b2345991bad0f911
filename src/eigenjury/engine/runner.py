"""One way to run a method's model calls, for every command and config.

`EngineSettings` holds the engine's knobs with one set of defaults, whether they come
from a rank config's `engine:` section or from a command's options. `run_engine` opens
the engine the settings describe (every model checked first, so a refused run leaves no
store behind), checks each endpoint answers, runs the method's work, and closes the
store and the backend whatever happens. A Ctrl-C becomes `Interrupted`, which names the
store: everything finished is in it, and rerunning sends only the rest.

Every command shares one store per working directory (DEFAULT_STORE) unless told
otherwise, so a call one method made is a cache hit for every other.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from eigenjury.engine.backends import connect
from eigenjury.engine.engine import Budget, Engine, check_specs
from eigenjury.engine.limits import MIN_PER_MINUTE, EndpointLimits, RetryPolicy
from eigenjury.engine.store import Store
from eigenjury.errors import InputError
from eigenjury.models.prices import PriceTable
from eigenjury.models.spec import ModelSpec
from eigenjury.records import AccountingRecord

if TYPE_CHECKING:
    from eigenjury.stats.bootstrap import RoundMap

DEFAULT_STORE = Path(".eigenjury/store.sqlite")
T = TypeVar("T")


class EngineSettings(BaseModel):
    """The engine's knobs. Relative `store` and `prices` paths are resolved against
    `base` (a config file's folder; the working directory for command options)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    store: str | None = Field(None, description=f"SQLite store of call results ({DEFAULT_STORE})")
    concurrency: int = Field(16, ge=1, description="calls in flight per endpoint; halved on 429")
    rpm: float | None = Field(None, description="requests per minute per endpoint")
    tpm: float | None = Field(None, description="tokens per minute per endpoint")
    timeout_s: float = Field(120.0, gt=0, description="seconds per attempt")
    max_attempts: int = Field(6, ge=1)
    budget_usd: float | None = Field(None, ge=0)
    budget_tokens: int | None = Field(None, gt=0)  # 0 would stop the run before any call
    prices: str | None = Field(None, description="price table (TOML or JSON)")
    retry_errors: bool = True  # try again calls stored as errors
    backend: str = "local"  # or a registered backend such as "ray"
    ray_address: str | None = None  # a cluster to join; none starts a local one

    @field_validator("rpm", "tpm")
    @classmethod
    def _rate(cls, rate: float | None) -> float | None:
        if rate is not None and rate < MIN_PER_MINUTE:  # hours per call, silently
            raise ValueError(
                f"must be at least 1/60 (one an hour), got {rate:g}; leave it out for no limit"
            )
        return rate

    def store_path(self, base: Path | None = None) -> Path:
        if self.store is None:
            return DEFAULT_STORE
        return (base or Path()) / self.store

    def price_table(self, base: Path | None = None) -> PriceTable:
        return PriceTable.from_file((base or Path()) / self.prices) if self.prices else PriceTable()


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run; everything finished is in `store`."""

    def __init__(self, store: Path) -> None:
        super().__init__(str(store))
        self.store = store


@dataclass(frozen=True)
class Ran(Generic[T]):
    """What the work returned, what its calls cost, and where they are kept."""

    value: T
    accounting: AccountingRecord  # this run's calls
    store: Path
    map_rounds: RoundMap | None = field(default=None, repr=False)  # the backend's bootstrap


# How a command names a model in an error: "member 'kind-smol'" in a rank config.
Describe = Callable[[ModelSpec, InputError], InputError]


def _plain(spec: ModelSpec, exc: InputError) -> InputError:
    return exc


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
    prices = settings.price_table(base)
    budget = Budget(max_cost_usd=settings.budget_usd, max_tokens=settings.budget_tokens)
    for spec in dict.fromkeys(specs):
        try:
            check_specs([spec], prices, budget)
        except InputError as exc:
            raise describe(spec, exc) from None
    backend, map_rounds = connect(settings.backend, settings.ray_address)
    try:
        store = Store(settings.store_path(base))
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
                    engine.prepare([spec])
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
    return Ran(value, accounting, engine.store.path, map_rounds)
