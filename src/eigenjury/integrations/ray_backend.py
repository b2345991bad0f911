"""The Ray backend: the engine's calls made on a Ray cluster, with nothing home-made
about the distribution.

- One async actor per endpoint holds that endpoint's limiter (concurrency, requests and
  tokens per minute, backoff on 429), so the limits hold cluster-wide, and makes the
  calls with the same code as the local backend (`engine.caller`).
- The driver keeps everything else: cache hits are resolved there before anything is
  dispatched, the budget is reserved there per call, and results stream back to it as
  each call finishes; it stays the single writer of the store, in batches.
- Actors restart when their process dies, and Ray resubmits the calls that were in
  flight (`max_restarts` and `max_task_retries` unlimited), so a killed worker loses
  nothing; what was committed is never asked again, by this run or a rerun.
- API keys are never sent through Ray: not as arguments (the object store), and not as
  Ray `runtime_env` variables either, because Ray's runtime-env agent writes those, values
  included, to its log (measured with Ray 2.60). Workers read keys from their own process
  environment: a local cluster started here inherits this process's, and the nodes of an
  existing cluster must be started with the variables set. An actor whose environment
  lacks a key its spec needs stops the run with a message naming the variable.
- `map_rounds` runs bootstrap rounds as Ray tasks, the counts put in the object store once.

`ray.init()` starts a local cluster unless an address is given (`--ray-address`,
`ray://...` or `auto`).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import ray
from ray.exceptions import RayError

from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.engine import Send
from eigenjury.engine.limits import EndpointLimiter, EndpointLimits, RetryPolicy
from eigenjury.engine.store import StoredResult
from eigenjury.errors import InputError
from eigenjury.models.errors import ProviderError
from eigenjury.models.prices import PriceTable
from eigenjury.models.providers.scripted import ScriptedProvider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import Provider
from eigenjury.stats.bootstrap import Statistic, run_rounds
from eigenjury.stats.verdicts import FloatArray, ScenarioCounts


class WorkerLostError(ProviderError):
    """The cluster could not make the call at all (an actor that cannot be restarted)."""

    kind = "worker"
    retryable = True


@ray.remote(max_restarts=-1, max_task_retries=-1, num_cpus=0)
class EndpointActor:
    """Makes calls to one endpoint under its limits; any number at once (async actor)."""

    def __init__(
        self,
        retry: RetryPolicy,
        prices: PriceTable,
        limits: EndpointLimits,
        providers: dict[str, Provider],
        seed: int,
    ) -> None:
        self.caller = Caller(retry, prices, providers=providers, seed=seed)
        self.limiter = EndpointLimiter(limits)

    async def call(self, item: WorkItem) -> StoredResult:
        return await self.caller.call(item, self.limiter)

    def check(self, spec: ModelSpec) -> str | None:
        """Why this worker cannot call `spec` (a missing key), or None."""
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
    """The engine's `Backend` on Ray: `Engine(store, backend=RayBackend())`."""

    def __init__(self, address: str | None = None, **init_options: Any) -> None:
        init(address, **init_options)
        self.actors: dict[str, Any] = {}

    def sender(
        self, endpoint: str, spec: ModelSpec, limits: EndpointLimits, caller: Caller
    ) -> Send:
        actor = self.actors.get(endpoint)
        if actor is None:
            actor = self.actors[endpoint] = self._start(endpoint, spec, limits, caller)
        problem = ray.get(actor.check.remote(spec))
        if problem is not None:
            raise InputError(
                f"a Ray worker cannot call {spec}: {problem} in the workers' environment "
                "(eigenjury never sends keys through Ray; start the cluster's nodes with it set)"
            )

        async def send(item: WorkItem) -> StoredResult:
            try:
                result: StoredResult = await actor.call.remote(item)
            except RayError as exc:  # errors are data: stored, and tried again by a rerun
                error = WorkerLostError(f"{type(exc).__name__}: the worker was lost")
                return caller.failed(item, error, attempts=1)
            return result

        return send

    def _start(self, endpoint: str, spec: ModelSpec, limits: EndpointLimits, caller: Caller) -> Any:
        """The endpoint's actor. Providers the driver was given (test doubles) and scripted
        ones travel with it; HTTP providers are made there, from its environment."""
        provider = caller.injected(spec)
        if provider is None and spec.provider == "scripted":
            provider = ScriptedProvider(spec.model)
        seed = int.from_bytes(hashlib.sha256(endpoint.encode()).digest()[:4], "big")
        return EndpointActor.options(  # type: ignore[attr-defined]
            max_concurrency=max(1000, limits.concurrency),
        ).remote(
            caller.retry,
            caller.prices,
            limits,
            {str(spec): provider} if provider is not None else {},
            seed,
        )

    def close(self) -> None:
        for actor in self.actors.values():
            ray.kill(actor)
        self.actors.clear()


@ray.remote
def _rounds_task(
    data: ScenarioCounts, statistic: Statistic, seeds: list[np.random.SeedSequence]
) -> list[dict[str, FloatArray]]:
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
