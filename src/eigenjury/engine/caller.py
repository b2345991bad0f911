"""One call, made properly: under the endpoint's limits, with retries, timeouts and
pricing, ending in a result to store (a completion or a recorded error).

This is the part of the engine that runs wherever calls are made: in the driver's
event loop with the local backend, inside an endpoint actor with the Ray backend.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import aiohttp

from eigenjury.engine.limits import EndpointLimiter, RetryPolicy
from eigenjury.engine.store import StoredResult
from eigenjury.models.errors import (
    CallTimeoutError,
    ConnectionFailedError,
    MalformedResponseError,
    ProviderError,
    RateLimitError,
    redact,
)
from eigenjury.models.factory import make_provider
from eigenjury.models.prices import Price, PriceTable
from eigenjury.models.providers.http import HttpProvider, new_session
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion, Provider, unusable_scores

OVERLOADED = (503, 529)  # statuses of a server too busy to answer now


@dataclass
class WorkItem:
    """A call still to make: its store key, what to send, and its planned cost."""

    key: str
    spec: ModelSpec
    request: ChatRequest
    sample: int
    request_json: str  # the request's identity, encoded once for the key and the record
    estimate: tuple[float, float] = (0.0, 0.0)  # cost, tokens


class Caller:
    """Providers (one per spec, HTTP sessions pooled per endpoint), prices, retries.

    `known_features` gives, for a spec, what an earlier run found its endpoint supports
    (the store's `features`); `learned_features()` is what the providers know now."""

    def __init__(
        self,
        retry: RetryPolicy,
        prices: PriceTable,
        *,
        providers: Mapping[str, Provider] | None = None,
        seed: int = 0,
        known_features: Callable[[ModelSpec], Mapping[str, str]] | None = None,
    ) -> None:
        self.retry = retry
        self.prices = prices
        self._known_features = known_features
        self._injected = dict(providers or {})
        self._rng = random.Random(seed)
        self._providers: dict[ModelSpec, Provider] = {}
        self._prices: dict[ModelSpec, Price | None] = {}
        self._sessions: dict[str, aiohttp.ClientSession] = {}
        self.secrets: tuple[str, ...] = ()

    async def aclose(self) -> None:
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()

    def _session(self, base_url: str) -> aiohttp.ClientSession:
        """The one pooled session for an endpoint, made on first use (inside the loop)."""
        session = self._sessions.get(base_url)
        if session is None or session.closed:
            session = self._sessions[base_url] = new_session()
        return session

    def inject(self, spec: ModelSpec, provider: Provider) -> None:
        """Use `provider` for `spec` (a test double, or a provider sent from elsewhere)."""
        self._injected[str(spec)] = provider

    def injected(self, spec: ModelSpec) -> Provider | None:
        """A provider given for this spec (a test double), if any."""
        return self._injected.get(str(spec))

    def provider(self, spec: ModelSpec) -> Provider:
        injected = self.injected(spec)
        if injected is not None:
            return injected
        if spec not in self._providers:  # (by spec: two specs may differ only in secrets)
            base = spec.base_url or ""
            known = self._known_features(spec) if self._known_features else None
            self._providers[spec] = make_provider(
                spec, sessions=lambda: self._session(base), features=known
            )
            self.secrets = (*self.secrets, *spec.secrets())
        return self._providers[spec]

    def learned_features(self) -> dict[ModelSpec, dict[str, str]]:
        """What each HTTP provider made here knows its endpoint supports, to be stored."""
        return {
            p.spec: dict(p.features)
            for p in self._providers.values()
            if isinstance(p, HttpProvider) and p.features
        }

    def price(self, spec: ModelSpec) -> Price | None:
        if spec not in self._prices:
            self._prices[spec] = self.prices.lookup(spec)
        return self._prices[spec]

    async def call(self, item: WorkItem, limiter: EndpointLimiter) -> StoredResult:
        """Attempt the call until it succeeds, fails for good, or runs out of attempts.

        Once the endpoint is given up on (see EndpointLimiter.dead) no further attempt
        is made: the result is a connection error, with attempts 0 if none was made
        (such a call was not sent, and is not stored)."""
        provider = self.provider(item.spec)
        policy = self.retry
        error: ProviderError | None = None
        for attempt in range(1, policy.max_attempts + 1):
            if not await limiter.acquire(item.estimate[1]):
                assert limiter.dead is not None
                return self.stored(item, None, ConnectionFailedError(limiter.dead), attempt - 1)
            try:
                async with asyncio.timeout(policy.timeout_s):
                    completion = await provider.generate(item.request)
                bad = unusable_scores(completion.choice_logprobs)
                if bad is not None:
                    raise MalformedResponseError(
                        f"the reply's label scores are not all finite numbers ({bad})"
                    )
            except ProviderError as exc:
                error = exc
            except TimeoutError:
                error = CallTimeoutError(f"no answer within {policy.timeout_s:g} s")
            except (asyncio.CancelledError, KeyboardInterrupt):
                await limiter.release()
                raise
            except Exception as exc:  # a provider bug is recorded, not raised: errors are data
                error = ProviderError(f"{type(exc).__name__}: {exc}")
            else:
                _heed(provider, limiter, item.spec)
                limiter.on_success()
                limiter.on_reply()
                await limiter.release()
                limiter.settle_tokens(item.estimate[1], completion.usage.total)
                price = self.price(item.spec)
                cost = None if price is None else price.cost(completion.usage)
                return self.stored(item, replace(completion, cost_usd=cost), None, attempt)
            if isinstance(error, ConnectionFailedError):
                limiter.on_connection_failure(error.message)
            elif not isinstance(error, CallTimeoutError):
                limiter.on_reply()  # whatever the answer was, the server gave one
            # a 503 is an overloaded server's 429 (Anthropic's 529 too): both say "slower"
            if isinstance(error, RateLimitError) or error.status in OVERLOADED:
                _heed(provider, limiter, item.spec)
                limiter.on_rate_limit()
            await limiter.release()
            if not error.retryable or attempt == policy.max_attempts:
                break
            await limiter.pause(policy.delay(attempt, error.retry_after, self._rng))
        assert error is not None
        return self.stored(item, None, error, attempt)

    def failed(self, item: WorkItem, error: ProviderError, attempts: int) -> StoredResult:
        """A call that ended in `error` without a provider's answer (a lost worker)."""
        return self.stored(item, None, error, attempts)

    def stored(
        self,
        item: WorkItem,
        completion: Completion | None,
        error: ProviderError | None,
        attempts: int,
    ) -> StoredResult:
        """The call's result to store, its error message without any secret."""
        return StoredResult(
            key=item.key,
            spec=str(item.spec),
            request=item.request_json,
            sample=item.sample,
            completion=completion,
            error_kind=None if error is None else error.kind,
            error_message=None if error is None else redact(error.message, self.secrets),
            attempts=attempts,
            created_at=time.time(),
        )


def _heed(provider: Provider, limiter: EndpointLimiter, spec: ModelSpec) -> None:
    """The limits the provider's server stated for its model (HTTP providers read them
    from every answer's headers), as the endpoint's ceiling."""
    stated = getattr(provider, "stated_limits", None)
    if stated:
        limiter.heed(str(spec), stated)
