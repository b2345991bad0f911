"""The engine: many model calls, fast, cached, resumable and accounted.

A run is a stream: calls are read a window ahead of the results handed over and looked
up in the store a chunk at a time; only what is missing is sent, by a pool of workers
per endpoint that respect the endpoint's limits, retry what can be retried and record
what failed as errors, so memory is set by the window, not by the number of calls. An
endpoint that refuses connections DEAD_AFTER (limits.py) times in a row is given up on
for the run: its remaining calls end at once as connection errors, not stored, so a
rerun sends them. Results reach the caller only after their batch is committed, so
nothing the caller ever saw can be lost, and a rerun after a crash sends only what was
still missing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import math
from collections.abc import (
    AsyncGenerator,
    AsyncIterable,
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
    Sized,
)
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from eigenjury.engine.accounting import Accounting
from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.journal import Journal
from eigenjury.engine.limits import EndpointLimiter, EndpointLimits, RetryPolicy
from eigenjury.engine.plan import DEFAULT_OUTPUT_TOKENS, Planner
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
from eigenjury.models.spec import ModelSpec, shown_url
from eigenjury.models.types import ChatRequest, Completion, Provider, Usage

T = TypeVar("T")
NOT_STORED = "store"  # the kind of error of a result the store could not hold
LOCAL_LIMITS = EndpointLimits(concurrency=1, adaptive=False)
WINDOW = 8192  # calls read ahead of the oldest result not yet handed over
READ_CHUNK = 2048  # calls keyed and looked up in the store at a time
FAILED_KEPT = 65_536  # a run's failed keys it remembers, so as not to send them again


class Backend(Protocol):
    """Somewhere else to make calls (a cluster, a provider's batch API). Per endpoint, it
    takes the calls of the models it `takes` as the engine hands them over and yields one
    result each (in any order) as they finish, under the endpoint's limits; the other
    models' calls are made here. The engine keeps the cache (hits never leave it), the
    budget and the store, of which it stays the single writer: a backend that must
    remember something across runs (the batches it sent) writes it through `journal`.
    `window`: the calls the engine may hold unanswered for it (None: the engine's own);
    `price_factor`: what a call costs there, against the price table."""

    @property
    def window(self) -> int | None: ...

    def takes(self, spec: ModelSpec) -> bool: ...

    def price_factor(self, spec: ModelSpec) -> float: ...

    def stream(
        self,
        endpoint: str,
        spec: ModelSpec,
        limits: EndpointLimits,
        caller: Caller,
        items: AsyncIterator[WorkItem],
        journal: Journal,
    ) -> AsyncIterator[StoredResult]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Call:
    """One model call to make: which model, what request, which sample, in which role."""

    spec: ModelSpec
    request: ChatRequest
    sample: int = 0
    role: str | None = None
    tag: Any = None  # anything the caller wants back with the result; not part of the key

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
    """Caps for one engine: a command's run, every stream of it. A call is sent only if
    its estimated cost and tokens still fit beside everything spent and in flight, so
    the caps are not overshot; calls that do not fit are returned as `budget` errors and
    not stored (a later run can make them).
    `by_model`: a cost cap per model (its spec, `spec_json`), beside the run's: a model
    that reaches its own stops alone, the others go on."""

    max_cost_usd: float | None = None
    max_tokens: int | None = None
    by_model: Mapping[str, float] = field(default_factory=dict)


class _BudgetTracker:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.cost = self.tokens = 0.0
        self.exhausted = False
        self.model_cost: dict[str, float] = dict.fromkeys(budget.by_model, 0.0)
        self.models_exhausted: set[str] = set()

    def reserve(self, cost: float, tokens: float, model: str) -> bool:
        """Whether a call of `model` (its spec JSON) estimated at `cost` and `tokens`
        fits; if so, they are reserved."""
        b = self.budget
        if self.exhausted or (
            (b.max_cost_usd is not None and self.cost + cost > b.max_cost_usd)
            or (b.max_tokens is not None and self.tokens + tokens > b.max_tokens)
        ):
            self.exhausted = True
            return False
        own = b.by_model.get(model)
        if own is not None:
            if model in self.models_exhausted or self.model_cost[model] + cost > own:
                self.models_exhausted.add(model)
                return False
            self.model_cost[model] += cost
        self.cost += cost
        self.tokens += tokens
        return True

    def settle(
        self, reserved: tuple[float, float], actual: tuple[float, float], model: str
    ) -> None:
        self.cost += actual[0] - reserved[0]
        self.tokens += actual[1] - reserved[1]
        if model in self.model_cost:
            self.model_cost[model] += actual[0] - reserved[0]


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
        capped = budget.max_cost_usd is not None or spec_json(spec) in budget.by_model
        if capped and prices.lookup(spec) is None:
            raise InputError(
                f"a cost cap is set but no price is known for {spec}; give one in a "
                "price table (--prices FILE) or cap tokens instead"
            )


def endpoint_key(endpoint: str) -> str:
    """Where the store keeps what was learned of an endpoint (its features table, beside
    the models'), without the secrets its URL may hold."""
    return canonical_json({"endpoint": shown_url(endpoint)})


def endpoint_of(spec: ModelSpec) -> str:
    """What limits are shared by: the base URL, or the model itself when in-process."""
    return spec.base_url or f"{spec.provider}:{spec.model}"


class Engine:
    """Runs calls through providers with the store as cache and journal.

    Parameters: store; limits (one EndpointLimits for every endpoint, or a mapping
    from endpoint (base URL, or "provider:model") to limits, with "*" as fallback);
    retry policy; budget; prices; providers (spec string -> provider, to inject test
    doubles); retry_errors (try again calls stored as errors; default yes); progress;
    window (how many calls a stream reads ahead of the results it has handed over:
    memory grows with it, not with the number of calls); planner (a plan: nothing is
    sent or written, and every call the store does not answer is counted by the planner
    and answered with its placeholder, engine/plan.py).

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
        window: int = WINDOW,
        planner: Planner | None = None,
    ) -> None:
        self.store = store
        self.planner = planner
        self.limits = limits or EndpointLimits()
        self.retry = retry or RetryPolicy()
        self.budget = budget or Budget()
        # what every run of this engine spent: a command's stages (evaluees, then judges)
        # share its budget, they do not each get it anew
        self.spent = _BudgetTracker(self.budget)
        self.prices = prices or PriceTable()
        self.retry_errors = retry_errors
        self.progress = progress
        self.batch_size = batch_size
        self.flush_s = flush_s
        self.backend = backend  # None: calls are made here, in this event loop
        self.window = window if backend is None or backend.window is None else backend.window
        self._io = ThreadPoolExecutor(1, thread_name_prefix="eigenjury-store")
        self.caller = Caller(
            self.retry,
            self.prices,
            providers=providers,
            seed=seed,
            known_features=self._known_features,
        )
        self.accounting = Accounting()  # the latest run's
        self.session_accounting = Accounting()  # every run of this engine's
        self.limiters: dict[str, EndpointLimiter] = {}
        self._endpoints: dict[str, dict[str, Any]] = {}  # reports of closed limiters

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.caller.aclose()  # a backend belongs to whoever made it, who closes it
        self._endpoints = {e["endpoint"]: e for e in self.endpoint_report()}
        self.limiters.clear()  # their locks belong to this event loop

    def run_sync(self, calls: Sequence[Call]) -> list[CallResult]:
        async def run_and_close() -> list[CallResult]:
            try:
                return await self.run(calls)
            finally:
                await self.aclose()

        return asyncio.run(run_and_close())

    def prepare(self, specs: Sequence[ModelSpec]) -> None:
        """Check every spec can be used (see check_specs) before any call is made; a plan
        makes no call, so needs no key or local model."""
        if self.planner is not None:
            return
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

    def _known_features(self, spec: ModelSpec) -> dict[str, str]:
        """What the store says `spec`'s endpoint supports (read on the store's thread)."""
        return self._io.submit(self.store.features, spec_json(spec)).result()

    def _keep_features(self) -> None:
        """Store what the providers found out about their endpoints, and the limits the
        endpoints were found to bear (on the store's thread), so the next run does not
        ask again and starts where this one ended."""
        if self.planner is not None:  # it found nothing out, and writes nothing
            return
        for spec, found in self.caller.learned_features().items():
            self._io.submit(self.store.put_features, spec_json(spec), found).result()
        for endpoint, limiter in self.limiters.items():
            learned = limiter.learned()
            if learned:
                self._io.submit(self.store.put_features, endpoint_key(endpoint), learned).result()

    def _learned_limits(self, endpoint: str) -> tuple[int | None, float | None]:
        """The concurrency and the pace (requests a second) an earlier run found this
        endpoint bears, where one did."""
        found = self._io.submit(self.store.features, endpoint_key(endpoint)).result()
        concurrency = found.get("concurrency", "")
        try:
            pace: float | None = float(found.get("pace", ""))
        except ValueError:
            pace = None
        if pace is not None and not (math.isfinite(pace) and pace > 0):
            pace = None
        try:
            start: int | None = int(concurrency)
        except ValueError:
            start = None
        return start, pace

    def endpoint_report(self) -> list[dict[str, Any]]:
        """Per endpoint called here: its concurrency as configured, at the start (an
        earlier run's) and at the end, its 429s, and the rates it stated."""
        current = {
            shown_url(endpoint): {"endpoint": shown_url(endpoint), **limiter.report()}
            for endpoint, limiter in self.limiters.items()
            if limiter.limits.adaptive
        }
        return [row for _, row in sorted({**self._endpoints, **current}.items())]

    def accounting_record(self) -> dict[str, Any]:
        """Every run's calls of this engine, and its endpoints' limits (an
        `AccountingRecord`)."""
        return {**self.session_accounting.record(), "endpoints": self.endpoint_report()}

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
        async with contextlib.aclosing(self.stream(calls)) as results:
            return [result async for result in results]

    async def stream(
        self,
        calls: Iterable[Call] | AsyncIterable[Call],
        *,
        ordered: bool = True,
        total: int | None = None,
    ) -> AsyncGenerator[CallResult, None]:
        """Results as they are committed: in the order of `calls` (`ordered`, through a
        bounded reorder buffer) or as they finish. `calls` is read lazily, at most
        `window` calls ahead of the results handed over, so memory does not grow with
        the number of calls. If reading `calls` raises (a bad line of a file), nothing
        more is read, every call already dispatched finishes and is committed, its
        result is yielded, and then the exception is raised. `total`: for the progress
        display (taken from `len(calls)` when it has one).

        Consume it with `contextlib.aclosing`: leaving early (or Ctrl-C) commits what
        finished, and a rerun sends only the rest."""
        if total is None and isinstance(calls, Sized):
            total = len(calls)
        if self.planner is not None:
            self.planner.stage()
        run = _Run(self, ordered=ordered, total=total)
        try:
            async for result in run.results(calls):
                yield result
        finally:
            await run.close()

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
        if self.remote(spec):
            assert self.backend is not None
            cost *= self.backend.price_factor(spec)
        return cost, prompt + output

    def remote(self, spec: ModelSpec) -> bool:
        """Whether the backend makes this model's calls (local models run here, where
        they are loaded)."""
        return self.backend is not None and spec.provider != "local" and self.backend.takes(spec)


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
        "not sent: the run's budget cap (or its model's) was reached",
        cached=False,
        attempts=0,
    )


@dataclass
class _Lane:
    """One endpoint's calls in a run: a queue its workers take from."""

    queue: asyncio.Queue[WorkItem | None]
    workers: list[asyncio.Task[None]]


class _Run:
    """One stream of calls through the engine.

    A feeder reads calls a chunk at a time (never more than `window` ahead of the
    results handed over), keys them, looks them up in the store and hands the rest to
    per-endpoint workers (or the backend); a writer commits finished results in
    batches, and only then are they handed over. Identical keys in flight share one
    call; a key that failed in this run is not sent again by it.
    """

    def __init__(self, engine: Engine, *, ordered: bool, total: int | None) -> None:
        self.engine = engine
        self.ordered = ordered
        self.slots = asyncio.Semaphore(engine.window)
        self.progress = RunProgress(total, enabled=engine.progress)
        self.budget = engine.spent
        self.writer = _Writer(engine, self.progress, self._committed)
        engine.accounting = Accounting()
        self.read = 0  # calls read so far; each one's index in the stream
        self.handed = 0  # results handed over (in order, when ordered)
        self.ready: dict[int, CallResult] = {}  # ordered: finished, waiting for their turn
        self.done: collections.deque[CallResult] = collections.deque()  # unordered
        self.wake = asyncio.Event()
        # key -> the calls waiting for it, the one sent first
        self.in_flight: dict[str, list[tuple[int, Call]]] = {}
        self.sent: dict[str, WorkItem] = {}  # key -> what was sent, while in flight
        # errors of this run (the latest FAILED_KEPT): not sent again by it
        self.failed: collections.OrderedDict[str, CallResult] = collections.OrderedDict()
        self.looking_up = False
        self.just_committed: dict[str, CallResult] = {}  # during a store lookup
        self.checked: set[ModelSpec] = set()
        self.lanes: dict[tuple[str, bool], _Lane] = {}  # by endpoint, and whether remote
        self.tasks: list[asyncio.Task[Any]] = []
        self.input_error: BaseException | None = None
        self.failure: BaseException | None = None
        self.finished = False

    async def results(
        self, calls: Iterable[Call] | AsyncIterable[Call]
    ) -> AsyncIterator[CallResult]:
        self.writer.start()
        self._spawn(self._drive(calls))
        while True:
            if self.failure is not None:
                raise self.failure
            while True:
                result = self._next()
                if result is None:
                    break
                self.slots.release()
                yield result
            self.progress.update(self.engine.accounting.total)
            if self.finished and self.handed == self.read:
                break
            await self.wake.wait()
            self.wake.clear()
        if self.input_error is not None:
            raise self.input_error

    def _next(self) -> CallResult | None:
        if self.ordered:
            result = self.ready.pop(self.handed, None)
        else:
            result = self.done.popleft() if self.done else None
        if result is not None:
            self.handed += 1
        return result

    def _spawn(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(work)
        task.add_done_callback(self._ended)
        self.tasks.append(task)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        if not task.cancelled() and task.exception() is not None and self.failure is None:
            self.failure = task.exception()
            self.wake.set()

    async def _drive(self, calls: Iterable[Call] | AsyncIterable[Call]) -> None:
        """Feed every call, then let the workers and the writer finish."""
        await self._feed(calls)
        for lane in self.lanes.values():
            for _ in lane.workers:
                lane.queue.put_nowait(None)
        await asyncio.gather(*(w for lane in self.lanes.values() for w in lane.workers))
        await self.writer.drain()
        self.finished = True
        self.wake.set()

    async def _feed(self, calls: Iterable[Call] | AsyncIterable[Call]) -> None:
        """Read calls in growing chunks (the first leaves at once); a chunk is dispatched
        when full, as soon as the window is full, or when an async source has nothing
        ready (it may be waiting for these very calls' results), so reading never waits
        on itself."""
        size = 16
        chunk: list[tuple[int, Call]] = []

        async def dispatch() -> bool:
            """Send the chunk; whether reading must stop (a call that cannot be made:
            an async source may be waiting on calls that will now never finish)."""
            nonlocal chunk, size
            if chunk:
                await self._dispatch(chunk)
                chunk, size = [], min(4 * size, READ_CHUNK)
            return self.input_error is not None

        try:
            async for call in _each(calls, waiting=dispatch):
                if len(chunk) >= size or self.slots.locked():
                    await dispatch()
                if self.input_error is not None:  # a call that cannot be made
                    return
                await self.slots.acquire()
                chunk.append((self.read, call))
                self.read += 1
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a bad input: what was read before it still runs
            self.input_error = exc
        await dispatch()

    def _key(self, call: Call) -> tuple[str, str]:
        if call.spec not in self.checked:
            self.engine.prepare([call.spec])
            self.checked.add(call.spec)
        encoded = canonical_json(call.request.identity())
        try:
            return key_of(spec_json(call.spec), encoded, call.sample), encoded
        except UnicodeEncodeError:  # neither hashable nor storable: refused before any call
            raise InputError(
                "a request holds text that is not valid Unicode (a lone surrogate, such as "
                "a \\\\ud800 escape in JSON); fix the input it came from"
            ) from None

    async def _dispatch(self, chunk: list[tuple[int, Call]]) -> None:
        keyed: list[tuple[int, Call, str, str]] = []
        try:
            for index, call in chunk:
                keyed.append((index, call, *self._key(call)))
        except InputError as exc:  # the calls before it go ahead; nothing after it is read
            self.input_error = exc
            for _ in chunk[len(keyed) :]:
                self.slots.release()  # never handed over: the stream ends at the error
            self.read = chunk[len(keyed)][0]
        self.looking_up = True
        try:
            stored = await self.engine._io_call(
                self.engine.store.get_many, [k for _, _, k, _ in keyed if k not in self.in_flight]
            )
        finally:
            self.looking_up = False
        committed, self.just_committed = self.just_committed, {}
        for index, call, key, encoded in keyed:
            if key in self.in_flight:
                self.in_flight[key].append((index, call))
                continue
            earlier = self.failed.get(key) or committed.get(key)
            hit = stored.get(key)
            if earlier is not None:
                self._hand(index, replace(earlier, call=call, cached=True))
            elif hit is not None and (hit.ok or not self.engine.retry_errors):
                self._hand(index, _from_stored(call, hit, cached=True))
            elif self.engine.planner is not None:
                self._plan(index, call, key, encoded, self.engine.planner)
            else:
                self.in_flight[key] = [(index, call)]
                item = WorkItem(key, call.spec, call.request, call.sample, encoded)
                self.sent[key] = item
                self._lane(endpoint_of(call.spec), self.engine.remote(call.spec)).queue.put_nowait(
                    item
                )

    def _plan(self, index: int, call: Call, key: str, encoded: str, planner: Planner) -> None:
        """A plan's call the store does not answer: counted, and answered with the
        planner's placeholder (a second identical call of the run as a hit of it)."""
        if planner.seen_before(key):
            completion = planner.placeholder(call.spec, call.request, len(encoded), key)
            self._hand(index, CallResult(call, key, completion, cached=True))
        else:
            completion = planner.planned(call.spec, call.role, call.request, len(encoded), key)
            self._hand(index, CallResult(call, key, completion))

    def _lane(self, endpoint: str, remote: bool) -> _Lane:
        lane = self.lanes.get((endpoint, remote))
        if lane is not None:
            return lane
        engine = self.engine
        limits = engine._limits_for(endpoint)
        lane = self.lanes[endpoint, remote] = _Lane(asyncio.Queue(), [])
        if remote:
            lane.workers.append(self._spawn(self._work_remote(endpoint, limits, lane)))
            return lane
        limiter = engine.limiters.get(endpoint)
        if limiter is None:
            start, pace = engine._learned_limits(endpoint) if limits.adaptive else (None, None)
            limiter = engine.limiters[endpoint] = EndpointLimiter(limits, start=start, pace=pace)
        limiter.revive()  # an endpoint given up on in an earlier run gets a new chance
        # no more calls can be in flight than the window holds, whatever the limit says
        workers = min(limits.concurrency, engine.window)
        lane.workers.extend(self._spawn(self._work(lane, limiter)) for _ in range(workers))
        return lane

    def _hand(self, index: int, result: CallResult) -> None:
        """A result, committed or not to be stored, to the caller's side of the stream."""
        self.engine._account(result)
        if result.cached and self.engine.planner is not None:
            self.engine.planner.stored(result.call.spec, result.call.role)
        if self.ordered:
            self.ready[index] = result
            if index == self.handed:
                self.wake.set()
        else:
            self.done.append(result)
            self.wake.set()

    def _settled(self, key: str, result: CallResult) -> None:
        """Every call waiting for `key` gets its result (the first as made, the rest as
        cache hits of it)."""
        self.sent.pop(key, None)
        waiting = self.in_flight.pop(key)
        first, call = waiting[0]
        self._hand(first, replace(result, call=call))
        for index, call in waiting[1:]:
            self._hand(index, replace(result, call=call, cached=True))
        if not result.ok and result.attempts:
            if len(self.failed) >= FAILED_KEPT:
                self.failed.popitem(last=False)
            self.failed[key] = result
        if self.looking_up:
            self.just_committed[key] = result

    def _committed(self, stored: StoredResult, why_left_out: str | None) -> None:
        call = self.in_flight[stored.key][0][1]
        result = _from_stored(call, stored, cached=False)
        if why_left_out is not None:
            result = CallResult(
                call,
                stored.key,
                None,
                NOT_STORED,
                f"the result could not be saved in the store ({why_left_out})",
                attempts=stored.attempts,
            )
        self._settled(stored.key, result)

    def _admit(self, item: WorkItem) -> bool:
        """Reserve the call's estimated cost and tokens; a call that does not fit is
        reported as not sent (and never stored)."""
        item.estimate = self.engine._estimate(item.spec, item.request)
        if self.budget.reserve(*item.estimate, spec_json(item.spec)):
            return True
        self._settled(item.key, _budget_result(self.in_flight[item.key][0][1], item.key))
        return False

    def _finish(self, item: WorkItem, result: StoredResult) -> None:
        actual = (0.0, 0.0)
        if result.completion is not None:
            actual = (result.completion.cost_usd or 0.0, result.completion.usage.total)
        self.budget.settle(item.estimate, actual, spec_json(item.spec))
        if result.attempts == 0:  # not sent (its endpoint was given up on): not stored
            call = self.in_flight[item.key][0][1]
            self._settled(item.key, _from_stored(call, result, cached=False))
            self.writer.note_once(
                f"stopped calling {shown_url(endpoint_of(item.spec))}: {result.error_message}"
            )
        else:
            self.writer.add(result)

    async def _work(self, lane: _Lane, limiter: EndpointLimiter) -> None:
        while (item := await lane.queue.get()) is not None:
            if self._admit(item):
                self._finish(item, await self.engine.caller.call(item, limiter))

    async def _work_remote(self, endpoint: str, limits: EndpointLimits, lane: _Lane) -> None:
        """Hand the endpoint's calls to the backend as it asks for them (each admitted
        against the budget on the way), and take its results as they come."""
        backend = self.engine.backend
        assert backend is not None
        first = await lane.queue.get()
        if first is None:
            return

        async def admitted() -> AsyncIterator[WorkItem]:
            item: WorkItem | None = first
            while item is not None:
                if self._admit(item):
                    yield item
                item = await lane.queue.get()

        journal = Journal(self.engine.store, self.engine._io, self.writer.note_once)
        stream = backend.stream(
            endpoint, first.spec, limits, self.engine.caller, admitted(), journal
        )
        async for result in stream:
            self._finish(self.sent[result.key], result)

    async def close(self) -> None:
        """On any exit (Ctrl-C included): stop, and commit whatever finished."""
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        try:
            await self.writer.close()
            self.engine._keep_features()
        finally:
            self.progress.close(self.engine.accounting.total)


async def _each(
    calls: Iterable[Call] | AsyncIterable[Call], *, waiting: Callable[[], Awaitable[bool]]
) -> AsyncIterator[Call]:
    """The calls of either kind of iterable. A plain one lets the loop run every
    READ_CHUNK calls, so reading a long file never holds up the calls in flight; an
    async one that has no call ready at once gets `waiting()` awaited meanwhile, and
    is read no further when that says to stop."""
    if isinstance(calls, AsyncIterable):
        source = aiter(calls)
        while True:
            ready = asyncio.ensure_future(anext(source))
            try:
                await asyncio.sleep(0)
                if not ready.done() and await waiting():
                    return
                call = await ready
            except StopAsyncIteration:
                return
            finally:
                ready.cancel()
            yield call
    for n, call in enumerate(calls, 1):
        yield call
        if n % READ_CHUNK == 0:
            await asyncio.sleep(0)


Committed = Callable[[StoredResult, "str | None"], None]


class _Writer:
    """Commits results in short batches; a result counts as done only once committed."""

    def __init__(self, engine: Engine, progress: RunProgress, committed: Committed) -> None:
        self.engine = engine
        self.progress = progress
        self.committed = committed
        self._queue: list[StoredResult] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._noted: set[str] = set()
        # while another program locks the store, commits wait; the progress says so
        self._put = functools.partial(engine.store.put_many, notify=progress.note)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    def add(self, result: StoredResult) -> None:
        self._queue.append(result)
        if len(self._queue) >= self.engine.batch_size:
            self._wake.set()

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
            self.committed(stored, left_out.get(stored.key))

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
