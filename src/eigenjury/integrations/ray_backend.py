"""The Ray backend: the engine's calls made on a Ray cluster, with nothing home-made
about the distribution.

- One async actor per endpoint holds that endpoint's limiter (concurrency, requests and
  tokens per minute, backoff on 429), so the limits hold cluster-wide, and makes the
  calls with the same code as the local backend (`engine.caller`).
- The driver keeps everything else: cache hits are resolved there before anything is
  dispatched, and the budget is reserved there per call. Calls go to the actor in
  chunks (a few per actor call, so Ray's per-task cost is shared), and results stream
  back from each chunk as each call finishes (a Ray streaming generator); the driver
  stays the single writer of the store, in batches.
- An actor restarts when its process dies (`max_restarts` unlimited); the driver sends
  again the calls of a chunk whose results it had not received, so a killed worker
  loses nothing, and what was committed is never asked again, by this run or a rerun.
- API keys are never sent through Ray: not as arguments (the object store), and not as
  Ray `runtime_env` variables either, because Ray's runtime-env agent writes those, values
  included, to its log (measured with Ray 2.60). Workers read keys from their own process
  environment: a local cluster started here inherits this process's, and the nodes of an
  existing cluster must be started with the variables set. An actor whose environment
  lacks a key its spec needs stops the run with a message naming the variable.
- `map_rounds` runs bootstrap rounds as Ray tasks, the counts put in the object store
  once; `map_tasks` runs a sweep of independent simulations as Ray tasks.

`ray.init()` starts a local cluster unless an address is given (`--ray-address`,
`ray://...` or `auto`).
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import ray
from ray.exceptions import RayError, RayTaskError

from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.journal import Journal
from eigenjury.engine.limits import EndpointLimiter, EndpointLimits, RetryPolicy
from eigenjury.engine.store import StoredResult
from eigenjury.errors import InputError
from eigenjury.models.errors import ProviderError
from eigenjury.models.prices import PriceTable
from eigenjury.models.providers.scripted import ScriptedProvider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import Provider

if TYPE_CHECKING:  # the statistics (scipy) load only where bootstrap rounds run
    from eigenjury.stats.bootstrap import Statistic
    from eigenjury.stats.verdicts import FloatArray, ScenarioCounts

T = TypeVar("T")
R = TypeVar("R")


class WorkerLostError(ProviderError):
    """The cluster could not make the call at all (an actor that cannot be restarted)."""

    kind = "worker"
    retryable = True


@ray.remote(max_restarts=-1, num_cpus=0)
class EndpointActor:
    """Makes calls to one endpoint under its limits; any number at once (async actor)."""

    def __init__(
        self,
        retry: RetryPolicy,
        prices: PriceTable,
        limits: EndpointLimits,
        seed: int,
    ) -> None:
        self.caller = Caller(retry, prices, seed=seed)
        self.limiter = EndpointLimiter(limits)

    async def call_each(self, items: list[WorkItem]) -> AsyncIterator[list[StoredResult]]:
        """Make the calls at once (the limiter paces them); yield the results finished
        since the last yield, so a busy actor sends many per Ray object."""
        pending = {asyncio.ensure_future(self.caller.call(i, self.limiter)) for i in items}
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            yield [task.result() for task in done]

    async def aclose(self) -> None:
        await self.caller.aclose()

    def admit(self, spec: ModelSpec, provider: Provider | None) -> str | None:
        """Take `spec` (with the provider the driver sends for it, if any); why this
        worker cannot call it (a missing key), or None."""
        if provider is not None:
            self.caller.inject(spec, provider)
        try:
            self.caller.provider(spec)
        except InputError as exc:
            return exc.message
        return None

    def pid(self) -> int:
        return os.getpid()


def init(address: str | None = None, **options: Any) -> None:
    """Connect to a cluster (or start a local one), once per process."""
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, **options)


class RayBackend:
    """The engine's `Backend` on Ray: `Engine(store, backend=RayBackend())`. It makes
    every call but those of local models (made where they are loaded), at their price."""

    window = None

    def __init__(
        self, address: str | None = None, *, chunk: int = 64, resends: int = 5, **init_options: Any
    ) -> None:
        init(address, **init_options)
        self.chunk = chunk  # calls per actor call
        self.resends = resends  # times a lost chunk's missing calls are sent again
        self.actors: dict[tuple[str, EndpointLimits], Any] = {}  # one per endpoint and limits
        self._admitted: set[tuple[str, EndpointLimits, ModelSpec]] = set()

    def _actor(self, endpoint: str, limits: EndpointLimits, caller: Caller) -> Any:
        actor = self.actors.get((endpoint, limits))
        if actor is None:
            seed = int.from_bytes(hashlib.sha256(endpoint.encode()).digest()[:4], "big")
            actor = self.actors[endpoint, limits] = EndpointActor.options(  # type: ignore[attr-defined]
                max_concurrency=max(1000, limits.concurrency),
            ).remote(caller.retry, caller.prices, limits, seed)
        return actor

    async def _admit(
        self, actor: Any, endpoint: str, limits: EndpointLimits, spec: ModelSpec, caller: Caller
    ) -> None:
        """Each model the actor is to call, once: providers the driver was given (test
        doubles) and scripted ones travel with it; HTTP providers are made there, from its
        environment, which must hold the keys."""
        if (endpoint, limits, spec) in self._admitted:
            return
        provider = caller.injected(spec)
        if provider is None and spec.provider == "scripted":
            provider = ScriptedProvider(spec.model)
        problem = await actor.admit.remote(spec, provider)
        if problem is not None:
            raise InputError(
                f"a Ray worker cannot call {spec}: {problem} in the workers' environment "
                "(eigenjury never sends keys through Ray; start the cluster's nodes with "
                "it set)"
            )
        self._admitted.add((endpoint, limits, spec))

    def takes(self, spec: ModelSpec) -> bool:
        return True

    def price_factor(self, spec: ModelSpec) -> float:
        return 1.0

    async def stream(
        self,
        endpoint: str,
        spec: ModelSpec,
        limits: EndpointLimits,
        caller: Caller,
        items: AsyncIterator[WorkItem],
        journal: Journal | None = None,
    ) -> AsyncIterator[StoredResult]:
        """Chunks of calls to the endpoint's actor, enough in flight to keep its
        concurrency busy; results in the order they finish."""
        actor = self._actor(endpoint, limits, caller)
        size = max(1, min(self.chunk, limits.concurrency))
        slots = asyncio.Semaphore(max(2, math.ceil(2 * limits.concurrency / size)))
        results: asyncio.Queue[StoredResult | None] = asyncio.Queue()

        async def run_chunk(chunk: list[WorkItem]) -> None:
            try:
                for attempt in range(1, self.resends + 2):
                    got = await self._chunk(actor, chunk, results)
                    chunk = [item for item in chunk if item.key not in got]
                    if not chunk:
                        return
                    if attempt <= self.resends:
                        await asyncio.sleep(min(2.0**attempt, 30.0))  # the actor restarts
                lost = WorkerLostError("the Ray worker was lost, again and again")
                for item in chunk:  # errors are data: stored, and tried again by a rerun
                    await results.put(caller.failed(item, lost, attempts=self.resends + 1))
            finally:
                slots.release()

        async def feed() -> None:
            tasks = []
            try:
                chunk: list[WorkItem] = []
                async for item in items:
                    await self._admit(actor, endpoint, limits, item.spec, caller)
                    chunk.append(item)
                    if len(chunk) == size:
                        await slots.acquire()
                        tasks.append(asyncio.create_task(run_chunk(chunk)))
                        chunk = []
                if chunk:
                    await slots.acquire()
                    tasks.append(asyncio.create_task(run_chunk(chunk)))
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await results.put(None)

        feeder = asyncio.create_task(feed())
        try:
            while (result := await results.get()) is not None:
                yield result
            await feeder  # re-raise what stopped it
        finally:
            feeder.cancel()

    @staticmethod
    async def _chunk(
        actor: Any, chunk: list[WorkItem], results: asyncio.Queue[StoredResult | None]
    ) -> set[str]:
        """One streaming actor call; the keys whose results came back (all, unless the
        worker died on the way)."""
        got: set[str] = set()
        try:
            async for ref in actor.call_each.options(num_returns="streaming").remote(chunk):
                finished: list[StoredResult] = await ref
                for result in finished:
                    if result.key not in got:
                        got.add(result.key)
                        await results.put(result)
        except RayTaskError as exc:
            if isinstance(exc.cause, InputError):
                raise exc.cause from None
        except RayError:
            pass  # the worker was lost: the caller sends what is missing again
        return got

    def close(self) -> None:
        """Close the actors' connections, then end them."""
        actors = list(self.actors.values())
        self.actors.clear()
        ray.wait([a.aclose.remote() for a in actors], num_returns=len(actors), timeout=10.0)
        for actor in actors:
            ray.kill(actor)


@ray.remote
def _rounds_task(
    data: ScenarioCounts, statistic: Statistic, seeds: list[np.random.SeedSequence]
) -> list[dict[str, FloatArray]]:
    from eigenjury.stats.bootstrap import run_rounds

    return run_rounds(data, statistic, seeds)


def map_rounds(
    data: ScenarioCounts, statistic: Statistic, seeds: Sequence[np.random.SeedSequence]
) -> list[dict[str, FloatArray]]:
    """Bootstrap rounds as Ray tasks (four per CPU of the cluster), in round order."""

    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))  # type: ignore[no-untyped-call]
    chunks = [list(c) for c in np.array_split(np.arange(len(seeds)), 4 * cpus) if len(c)]
    data_ref, statistic_ref = ray.put(data), ray.put(statistic)
    parts = ray.get(
        [_rounds_task.remote(data_ref, statistic_ref, [seeds[i] for i in c]) for c in chunks]
    )
    return [r for part in parts for r in part]


def map_tasks(fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`fn` over `items` as Ray tasks, one each, results in order."""
    remote = ray.remote(fn)
    return ray.get([remote.remote(item) for item in items])


def connect(address: str | None = None) -> tuple[RayBackend, Callable[..., Any]]:
    """The backend entry point (`eigenjury.backends`): the engine's calls and the
    bootstrap rounds on the cluster at `address` (none starts a local one)."""
    return RayBackend(address), map_rounds


def task_map(address: str | None = None) -> Callable[..., list[Any]]:
    """The backend entry point for simulation sweeps: one Ray task per simulation."""
    init(address)
    return map_tasks
