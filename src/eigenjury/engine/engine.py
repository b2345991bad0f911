"""The engine: many model calls, fast, cached, resumable and accounted.

A run looks every call up in the store first; only the rest is sent, by a pool of
workers per endpoint that respect the endpoint's limits, retry what can be retried
and record what failed as errors. An endpoint that refuses connections DEAD_AFTER
(limits.py) times in a row is given up on for the run: its remaining calls end at
once as connection errors, not stored, so a rerun sends them. Results reach the
caller only after their batch is committed, so nothing the caller ever saw can be
lost, and a rerun after a crash sends only what was still missing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from eigenjury.engine.accounting import Accounting
from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.limits import EndpointLimiter, EndpointLimits, RetryPolicy
from eigenjury.engine.progress import RunProgress
from eigenjury.engine.store import (
    SQLITE_INTEGER_MAX,
    Store,
    StoredResult,
    canonical_json,
    key_of,
    spec_json,
)
from eigenjury.errors import InputError
from eigenjury.models.errors import (
    BudgetExhaustedError,
    ProviderError,
)
from eigenjury.models.factory import make_provider
from eigenjury.models.prices import Price, PriceTable
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion, Provider, Usage

T = TypeVar("T")
NOT_STORED = "store"  # the kind of error of a result the store could not hold
DEFAULT_OUTPUT_TOKENS = 256  # planning estimate when a request sets no max_tokens
LOCAL_LIMITS = EndpointLimits(concurrency=1, adaptive=False)


class Backend(Protocol):
    """Somewhere else to make calls (a cluster). Per endpoint, it takes the calls as the
    engine hands them over and yields one result each (in any order) as they finish,
    under the endpoint's limits. The engine keeps the cache (hits never leave it), the
    budget and the store, of which it stays the single writer."""

    def stream(
        self,
        endpoint: str,
        spec: ModelSpec,
        limits: EndpointLimits,
        caller: Caller,
        items: AsyncIterator[WorkItem],
    ) -> AsyncIterator[StoredResult]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Call:
    """One model call to make: which model, what request, which sample, in which role."""

    spec: ModelSpec
    request: ChatRequest
    sample: int = 0
    role: str | None = None

    def __post_init__(self) -> None:
        # checked here, before any call is paid for: the store keeps samples as SQLite integers
        if not (isinstance(self.sample, int) and 0 <= self.sample <= SQLITE_INTEGER_MAX):
            raise InputError(f"sample must be a whole number from 0 to 2^63-1, got {self.sample!r}")


@dataclass(frozen=True)
class CallResult:
    call: Call
    key: str
    completion: Completion | None
    error_kind: str | None = None
    error_message: str | None = None
    cached: bool = False
    attempts: int = 0

    @property
    def ok(self) -> bool:
        return self.completion is not None


@dataclass(frozen=True)
class Budget:
    """Caps for one run. A call is sent only if its estimated cost and tokens still fit
    beside everything spent and in flight, so the caps are not overshot; calls that
    do not fit are returned as `budget` errors and not stored (a later run can make them)."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None


class _BudgetTracker:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.cost = self.tokens = 0.0
        self.exhausted = False

    def reserve(self, cost: float, tokens: float) -> bool:
        b = self.budget
        if self.exhausted or (
            (b.max_cost_usd is not None and self.cost + cost > b.max_cost_usd)
            or (b.max_tokens is not None and self.tokens + tokens > b.max_tokens)
        ):
            self.exhausted = True
            return False
        self.cost += cost
        self.tokens += tokens
        return True

    def settle(self, reserved: tuple[float, float], actual: tuple[float, float]) -> None:
        self.cost += actual[0] - reserved[0]
        self.tokens += actual[1] - reserved[1]


def check_specs(
    specs: Sequence[ModelSpec],
    prices: PriceTable,
    budget: Budget,
    provider: Callable[[ModelSpec], Provider] = make_provider,
) -> None:
    """Raise InputError unless every spec can be used: keys present, local models
    installed, prices known if a cost cap is set. Usable before an engine (and so its
    store) exists, so that a refused command leaves no store behind."""
    for spec in dict.fromkeys(specs):
        provider(spec)
        if budget.max_cost_usd is not None and prices.lookup(spec) is None:
            raise InputError(
                f"a cost cap is set but no price is known for {spec}; give one in a "
                "price table (--prices FILE) or cap tokens instead"
            )


def endpoint_of(spec: ModelSpec) -> str:
    """What limits are shared by: the base URL, or the model itself when in-process."""
    return spec.base_url or f"{spec.provider}:{spec.model}"


class Engine:
    """Runs calls through providers with the store as cache and journal.

    Parameters: store; limits (one EndpointLimits for every endpoint, or a mapping
    from endpoint (base URL, or "provider:model") to limits, with "*" as fallback);
    retry policy; budget; prices; providers (spec string -> provider, to inject test
    doubles); retry_errors (try again calls stored as errors; default yes); progress.

    Use as an async context manager, or `run_sync` from plain code.
    """

    def __init__(
        self,
        store: Store,
        *,
        limits: EndpointLimits | Mapping[str, EndpointLimits] | None = None,
        retry: RetryPolicy | None = None,
        budget: Budget | None = None,
        prices: PriceTable | None = None,
        providers: Mapping[str, Provider] | None = None,
        retry_errors: bool = True,
        progress: bool = True,
        batch_size: int = 256,
        flush_s: float = 0.05,
        seed: int = 0,
        backend: Backend | None = None,
    ) -> None:
        self.store = store
        self.limits = limits or EndpointLimits()
        self.retry = retry or RetryPolicy()
        self.budget = budget or Budget()
        self.prices = prices or PriceTable()
        self.retry_errors = retry_errors
        self.progress = progress
        self.batch_size = batch_size
        self.flush_s = flush_s
        self.backend = backend  # None: calls are made here, in this event loop
        self.caller = Caller(self.retry, self.prices, providers=providers, seed=seed)
        self._io = ThreadPoolExecutor(1, thread_name_prefix="eigenjury-store")
        self.accounting = Accounting()  # the latest run's
        self.session_accounting = Accounting()  # every run of this engine's
        self.limiters: dict[str, EndpointLimiter] = {}

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.caller.aclose()  # a backend belongs to whoever made it, who closes it
        self.limiters.clear()  # their locks belong to this event loop

    def run_sync(self, calls: Sequence[Call]) -> list[CallResult]:
        async def run_and_close() -> list[CallResult]:
            try:
                return await self.run(calls)
            finally:
                await self.aclose()

        return asyncio.run(run_and_close())

    def prepare(self, specs: Sequence[ModelSpec]) -> None:
        """Check every spec can be used (see check_specs) before any call is made."""
        check_specs(specs, self.prices, self.budget, self._provider)

    async def check_endpoints(self, specs: Sequence[ModelSpec]) -> None:
        """Raise InputError naming the first endpoint that cannot be reached at all."""
        for spec in dict.fromkeys(specs):
            check = getattr(self._provider(spec), "check_reachable", None)
            if check is not None:
                try:
                    await check()
                except ProviderError as exc:
                    raise InputError(exc.message) from None

    def _provider(self, spec: ModelSpec) -> Provider:
        return self.caller.provider(spec)

    def _price(self, spec: ModelSpec) -> Price | None:
        return self.caller.price(spec)

    def _limits_for(self, endpoint: str) -> EndpointLimits:
        if isinstance(self.limits, Mapping) and endpoint in self.limits:
            return self.limits[endpoint]
        if endpoint.startswith("local:"):
            # In-process models run one call at a time on every core; one worker keeps
            # calls in order, so consecutive prompts share their evaluated prefix.
            return LOCAL_LIMITS
        if isinstance(self.limits, EndpointLimits):
            return self.limits
        return self.limits.get("*") or EndpointLimits()

    async def _io_call(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._io, fn, *args)

    async def run(self, calls: Sequence[Call]) -> list[CallResult]:
        """Results in the order of `calls`. Raises InputError before any call is made if
        a spec is unusable; Ctrl-C (cancellation) commits what finished, then re-raises."""
        self.prepare([c.spec for c in calls])
        self.accounting = Accounting()
        encoded = [canonical_json(c.request.identity()) for c in calls]
        try:
            keys = [
                key_of(spec_json(c.spec), e, c.sample) for c, e in zip(calls, encoded, strict=True)
            ]
        except UnicodeEncodeError:  # neither hashable nor storable: refused before any call
            raise InputError(
                "a request holds text that is not valid Unicode (a lone surrogate, such as "
                "a \\ud800 escape in JSON); fix the input it came from"
            ) from None
        first: dict[str, int] = {}
        for i, key in enumerate(keys):
            first.setdefault(key, i)
        stored = await self._io_call(self.store.get_many, list(first))
        done: dict[str, CallResult] = {}
        pending: dict[str, list[WorkItem]] = {}
        call_of: dict[str, Call] = {}
        for key, i in first.items():
            hit = stored.get(key)
            if hit is not None and (hit.ok or not self.retry_errors):
                done[key] = _from_stored(calls[i], hit, cached=True)
            else:
                c = calls[i]
                call_of[key] = c
                pending.setdefault(endpoint_of(c.spec), []).append(
                    WorkItem(key, c.spec, c.request, c.sample, encoded[i])
                )
        progress = RunProgress(len(calls), enabled=self.progress)
        for result in done.values():
            self._account(result)
        writer = _Writer(self, progress, call_of)
        budget = _BudgetTracker(self.budget)
        workers: list[asyncio.Task[None]] = []
        try:
            for endpoint, items in pending.items():
                limits = self._limits_for(endpoint)
                if self.backend is not None and not endpoint.startswith("local:"):
                    # Local models always run here, where they are loaded.
                    workers.append(
                        asyncio.create_task(
                            self._work_remote(endpoint, limits, items, budget, writer)
                        )
                    )
                    continue
                limiter = self.limiters.get(endpoint)
                if limiter is None:
                    limiter = self.limiters[endpoint] = EndpointLimiter(limits)
                limiter.revive()  # an endpoint given up on in an earlier run gets a new chance
                queue: asyncio.Queue[WorkItem] = asyncio.Queue()
                for item in items:
                    queue.put_nowait(item)
                workers.extend(
                    asyncio.create_task(self._work(queue, limiter, budget, writer))
                    for _ in range(min(limits.concurrency, len(items)))
                )
            writer.start()
            await asyncio.gather(*workers)
            await writer.drain()
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await writer.close()
            progress.close(self.accounting.total)
        done.update(writer.committed)
        results = []
        for call, key in zip(calls, keys, strict=True):
            result = done[key]
            results.append(
                result if result.call is call else replace(result, call=call, cached=True)
            )
        # duplicates of a key within one run count as cache hits of the first
        for i, key in enumerate(keys):
            if first[key] != i:
                self._account(results[i])
        return results

    def _account(self, result: CallResult) -> None:
        for accounting in (self.accounting, self.session_accounting):
            accounting.add(
                str(result.call.spec),
                result.call.role,
                result.completion,
                result.error_kind,
                result.cached,
            )

    def _estimate(self, spec: ModelSpec, request: ChatRequest) -> tuple[float, float]:
        prompt = sum(len(m.content) for m in request.messages) / 4
        output = request.max_tokens or DEFAULT_OUTPUT_TOKENS
        price = self._price(spec)
        cost = price.cost(Usage(int(prompt), output)) if price else 0.0
        return cost, prompt + output

    def _admit(self, item: WorkItem, budget: _BudgetTracker, writer: _Writer) -> bool:
        """Reserve the call's estimated cost and tokens; a call that does not fit is
        reported as not sent (and never stored)."""
        item.estimate = self._estimate(item.spec, item.request)
        if budget.reserve(*item.estimate):
            return True
        writer.skip(_budget_result(writer.call_of[item.key], item.key))
        return False

    def _finish(
        self, item: WorkItem, result: StoredResult, budget: _BudgetTracker, writer: _Writer
    ) -> None:
        actual = (0.0, 0.0)
        if result.completion is not None:
            actual = (result.completion.cost_usd or 0.0, result.completion.usage.total)
        budget.settle(item.estimate, actual)
        if result.attempts == 0:  # not sent (its endpoint was given up on): not stored
            writer.skip(_from_stored(writer.call_of[item.key], result, cached=False))
            writer.note_once(f"stopped calling {endpoint_of(item.spec)}: {result.error_message}")
        else:
            writer.add(result)

    async def _work(
        self,
        queue: asyncio.Queue[WorkItem],
        limiter: EndpointLimiter,
        budget: _BudgetTracker,
        writer: _Writer,
    ) -> None:
        while True:
            try:
                item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            if self._admit(item, budget, writer):
                self._finish(item, await self.caller.call(item, limiter), budget, writer)

    async def _work_remote(
        self,
        endpoint: str,
        limits: EndpointLimits,
        items: list[WorkItem],
        budget: _BudgetTracker,
        writer: _Writer,
    ) -> None:
        """Hand the endpoint's calls to the backend as it asks for them (each admitted
        against the budget on the way), and take its results as they come."""
        assert self.backend is not None
        by_key = {item.key: item for item in items}

        async def admitted() -> AsyncIterator[WorkItem]:
            for item in items:
                if self._admit(item, budget, writer):
                    yield item

        stream = self.backend.stream(endpoint, items[0].spec, limits, self.caller, admitted())
        async for result in stream:
            self._finish(by_key[result.key], result, budget, writer)


def _from_stored(call: Call, stored: StoredResult, *, cached: bool) -> CallResult:
    return CallResult(
        call,
        stored.key,
        stored.completion,
        stored.error_kind,
        stored.error_message,
        cached,
        stored.attempts,
    )


def _budget_result(call: Call, key: str) -> CallResult:
    return CallResult(
        call,
        key,
        None,
        BudgetExhaustedError.kind,
        "not sent: the run's budget cap was reached",
        cached=False,
        attempts=0,
    )


class _Writer:
    """Commits results in short batches; a result counts as done only once committed."""

    def __init__(self, engine: Engine, progress: RunProgress, call_of: dict[str, Call]) -> None:
        self.engine = engine
        self.progress = progress
        self.call_of = call_of
        self.committed: dict[str, CallResult] = {}
        self._queue: list[StoredResult] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._noted: set[str] = set()
        # while another program locks the store, commits wait; this says so
        self._put = functools.partial(engine.store.put_many, notify=progress.note)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def add(self, result: StoredResult) -> None:
        self._queue.append(result)
        if len(self._queue) >= self.engine.batch_size:
            self._wake.set()

    def skip(self, result: CallResult) -> None:
        """A call that was not made (budget, endpoint down): reported, never stored."""
        self.committed[result.key] = result
        self.engine._account(result)
        self.progress.update(self.engine.accounting.total)

    def note_once(self, text: str) -> None:
        if text not in self._noted:
            self._noted.add(text)
            self.progress.note(text)

    async def _loop(self) -> None:
        while not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.engine.flush_s)
            self._wake.clear()
            await self._flush()

    async def _flush(self) -> None:
        batch, self._queue = self._queue, []
        if batch:
            self._publish(batch, await self.engine._io_call(self._put, batch))

    def _publish(self, batch: list[StoredResult], left_out: dict[str, str]) -> None:
        """Committed results to the caller; any the store could not hold, as errors
        (not stored, so a rerun makes them again)."""
        for stored in batch:
            call = self.call_of[stored.key]
            result = _from_stored(call, stored, cached=False)
            if stored.key in left_out:
                result = CallResult(
                    call,
                    stored.key,
                    None,
                    NOT_STORED,
                    f"the result could not be saved in the store ({left_out[stored.key]})",
                    attempts=stored.attempts,
                )
            self.committed[stored.key] = result
            self.engine._account(result)
        self.progress.update(self.engine.accounting.total)

    async def drain(self) -> None:
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await self._task
        await self._flush()

    async def close(self) -> None:
        """On any exit (Ctrl-C included): commit whatever finished before leaving.

        The commit goes through the store's own thread, after any commit already under
        way there, and is waited for here: an interrupted run still keeps every
        completed call.
        """
        self._closing = True
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        batch, self._queue = self._queue, []
        # waited for even with nothing left here: a commit still waiting for a lock on
        # the store must end before the store is closed
        left_out = self.engine._io.submit(self._put, batch).result()
        if batch:
            self._publish(batch, left_out)
