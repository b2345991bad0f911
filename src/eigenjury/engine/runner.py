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

from eigenjury.engine.backends import RoundMap, batched_by, connect
from eigenjury.engine.engine import Backend, Budget, Engine, check_specs, endpoint_of
from eigenjury.engine.limits import EndpointLimits, RetryPolicy
from eigenjury.engine.plan import Planner, history_of
from eigenjury.engine.settings import EngineSettings
from eigenjury.engine.store import Store, adopt_directory_store, spec_json
from eigenjury.errors import InputError, Interrupted
from eigenjury.models.prices import PriceTable
from eigenjury.models.spec import ModelSpec
from eigenjury.records import AccountingRecord, PlanRecord, now

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
    budget = run_budget(settings, specs)
    for spec in dict.fromkeys(specs):
        try:
            check_specs([spec], prices, budget)
        except InputError as exc:
            raise describe(spec, exc) from None
    return prices, budget


def _budget_key(text: str) -> str:
    """The spec JSON a model budget's name stands for, or an InputError saying budgets
    name models by their spec, not members or jurors by their names."""
    try:
        return spec_json(ModelSpec.parse(text))
    except InputError:
        raise InputError(
            f"a model budget names the model by its spec (provider:model, with its endpoint "
            f"where it has one), as the run gives it; '{text}' is not one",
            field="budget_usd_by_model",
        ) from None


def budgets_of(budgets: dict[str, float], specs: Sequence[ModelSpec]) -> dict[str, float]:
    """The model budgets of the models in `specs` (a command that calls some of a run's
    models: a style check calls only its judges)."""
    known = {spec_json(spec) for spec in specs}
    return {text: usd for text, usd in budgets.items() if _budget_key(text) in known}


def run_budget(settings: EngineSettings, specs: Sequence[ModelSpec]) -> Budget:
    """The budget of `settings`; a model budget must name a model of the run (`specs`)."""
    by_model: dict[str, float] = {}
    known = {spec_json(spec): spec for spec in specs}
    for text, usd in settings.budget_usd_by_model.items():
        key = _budget_key(text)
        if key not in known:
            models = ", ".join(dict.fromkeys(str(spec) for spec in specs))
            raise InputError(
                f"a budget is set for {text}, which this run does not call; its models are "
                f"{models}",
                field="budget_usd_by_model",
            )
        by_model[key] = usd
    return Budget(settings.budget_usd, settings.budget_tokens, by_model)


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
    backend, map_rounds = connect(
        settings.backend, settings.ray_address, poll_s=settings.batch_poll_s
    )
    try:
        path = settings.store_path(base)
        if settings.store is None:
            adopt_directory_store(path)
        store = Store(path)
    except BaseException:
        if backend is not None:
            backend.close()
        raise
    engine = _engine(settings, store, prices, budget, progress=progress, backend=backend)
    return engine, map_rounds


def _engine(
    settings: EngineSettings,
    store: Store,
    prices: PriceTable,
    budget: Budget,
    *,
    progress: bool,
    backend: Backend | None = None,
) -> Engine:
    return Engine(
        store,
        limits=EndpointLimits(concurrency=settings.concurrency, rpm=settings.rpm, tpm=settings.tpm),
        retry=RetryPolicy(max_attempts=settings.max_attempts, timeout_s=settings.timeout_s),
        budget=budget,
        prices=prices,
        retry_errors=settings.retry_errors,
        progress=progress,
        backend=backend,
    )


def plan_run(
    settings: EngineSettings,
    specs: Sequence[ModelSpec],
    work: Callable[[Engine], Awaitable[object]],
    *,
    command: str,
    base: Path | None = None,
) -> PlanRecord:
    """What `work` would call and cost on the engine `settings` describe, with nothing
    called or written (engine/plan.py): no key or endpoint is needed, and the store is
    only read, where it exists. `budgets` in the plan names every budget the plan
    exceeds. `work` must write nothing either (give it throwaway outputs)."""
    prices = settings.price_table(base)
    budget = run_budget(settings, specs)
    path = settings.store_path(base)
    store = Store(path, create=False) if path.is_file() else Store(":memory:")
    engine = _engine(settings, store, prices, budget, progress=False)
    planner = engine.planner = Planner(
        lambda spec: history_of(engine._io.submit(store.history, str(spec)).result()),
        prices,
        limits_for=engine._limits_for,
        endpoint_of=endpoint_of,
        batched=batched_by(settings.backend),
    )

    async def run() -> None:
        async with engine:
            await work(engine)

    try:
        asyncio.run(run())
        planned = planner.record()  # (it reads the history of models only found stored)
    finally:
        store.close()
    plan = PlanRecord.model_validate(
        {"command": command, "created": now(), "budgets": [], **planned}
    )
    plan.budgets = over_budget(plan, settings, budget, planner)
    return plan


def refuse_over_budget(plan: PlanRecord, *, path: Path | None = None) -> None:
    """An InputError naming each budget the plan exceeds (the run is not started);
    `path`: the config that sets the budgets, where one does."""
    if plan.budgets:
        raise InputError(
            "by its plan, " + "; ".join(plan.budgets) + ". Give less work or more budget, "
            "see the plan with --plan, or start anyway with --go (the budget still stops "
            "the calls when it is reached)",
            path=path,
        )


def over_budget(
    plan: PlanRecord, settings: EngineSettings, budget: Budget, planner: Planner
) -> list[str]:
    """A sentence for each budget the plan's estimate exceeds, or that cannot hold (a
    cost cap on a model with no known price)."""
    over = []
    cost, tokens_in, tokens_out = (
        plan.total.cost_usd,
        plan.total.input_tokens,
        plan.total.output_tokens,
    )
    if settings.budget_usd is not None and cost is not None and cost.planned > settings.budget_usd:
        over.append(
            f"the run would cost {usd(cost.planned)} ({usd(cost.low)} to {usd(cost.high)}) "
            f"against its budget of {usd(settings.budget_usd)} (--budget-usd; budget_usd in "
            f"a config): {usd(cost.planned - settings.budget_usd)} over"
        )
    if settings.budget_tokens is not None and tokens_in is not None and tokens_out is not None:
        used = tokens_in.planned + tokens_out.planned
        if used > settings.budget_tokens:
            over.append(
                f"the run would use {used:,.0f} tokens against its budget of "
                f"{settings.budget_tokens:,} (--budget-tokens; budget_tokens in a config): "
                f"{used - settings.budget_tokens:,.0f} over"
            )
    for spec, spread in planner.model_costs().items():
        cap = budget.by_model.get(spec_json(spec))
        if spread is None and (cap is not None or settings.budget_usd is not None):
            over.append(
                f"no price is known for {spec}, so a cost cap cannot hold: give its price "
                "(--prices FILE) or cap tokens instead"
            )
        elif cap is not None and spread is not None and spread.point > cap:
            over.append(
                f"{spec} would cost {usd(spread.point)} ({usd(spread.low)} to "
                f"{usd(spread.high)}) against its budget of {usd(cap)} (--budget-model; "
                f"budget_usd_by_model in a config): {usd(spread.point - cap)} over"
            )
    return over


def usd(value: float) -> str:
    """Dollars to the cent, or to four digits where that would show nothing."""
    return f"${value:.2f}" if abs(value) >= 0.1 or value == 0 else f"${value:.4g}"


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
    accounting = AccountingRecord.model_validate(engine.accounting_record())
    return Ran(value, accounting, map_rounds)
