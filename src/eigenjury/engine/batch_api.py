"""The `batch-api` backend: a run's calls to OpenAI's and Anthropic's models go through
the providers' batch APIs (models/batch_apis.py), at half the price, answered within
24 hours; calls to other models are made here as usual.

Per endpoint, the calls the engine hands over are gathered until none has come for
`gather_s` (or a batch is full), then sent as one batch per model. Before a batch is
sent its calls are claimed in the store (engine/journal.py), and the provider's batch
id is written the moment it answers, so a run that ends while batches are out (Ctrl-C,
kill -9, a lost machine) loses nothing: a rerun finds each call's batch and waits for
it instead of sending the call again, and a second process running the same calls
waits on the first one's batches. Open batches are polled, first after `first_poll_s`
and then ever less often, up to every `poll_s`; an ended batch's results are read and
handed to the engine, which commits them like any other call's. Within a run a call
whose batch answered with an error that may pass (a server error, a missing result)
is sent again in a later batch, up to the retry policy's attempts; a call left
unanswered by an expired or cancelled batch ends as an `expired` error, sent again by
a rerun.
"""

from __future__ import annotations

import asyncio
import collections
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.journal import BatchRow, Journal
from eigenjury.engine.limits import EndpointLimits
from eigenjury.engine.store import StoredResult
from eigenjury.errors import InputError
from eigenjury.models.batch_apis import PRICE_FACTOR, BatchApi, BatchStatus, batch_api
from eigenjury.models.errors import (
    BadRequestError,
    CallTimeoutError,
    MalformedResponseError,
    ProviderError,
)
from eigenjury.models.spec import ModelSpec, shown_url
from eigenjury.models.types import Completion

T = TypeVar("T")
NAME = "batch-api"
PROVIDERS = ("openai", "anthropic")  # whose calls go in batches
WINDOW = 50_000  # calls the engine may hold unanswered for this backend (one OpenAI batch)
GATHER_S = 2.0
FIRST_POLL_S = 5.0
DOWNLOAD_TIMEOUTS = 10  # a batch's results may take this many call timeouts to read


class BatchApiBackend:
    """Parameters: poll_s (the longest wait between two polls of an open batch);
    gather_s (how long no new call must come before the gathered ones are sent);
    first_poll_s (the first wait, doubled at each poll up to poll_s)."""

    window = WINDOW

    def __init__(
        self,
        *,
        poll_s: float = 60.0,
        gather_s: float = GATHER_S,
        first_poll_s: float = FIRST_POLL_S,
        seed: int = 0,
    ) -> None:
        self.poll_s = poll_s
        self.gather_s = gather_s
        self.first_poll_s = min(first_poll_s, poll_s)
        self.rng = random.Random(seed)
        self.explained = False  # whether the user was told what a batch means for the run

    def takes(self, spec: ModelSpec) -> bool:
        return spec.provider in PROVIDERS  # (backends.batched_by says the same to a plan)

    def price_factor(self, spec: ModelSpec) -> float:
        return PRICE_FACTOR if self.takes(spec) else 1.0

    def stream(
        self,
        endpoint: str,
        spec: ModelSpec,
        limits: EndpointLimits,
        caller: Caller,
        items: AsyncIterator[WorkItem],
        journal: Journal,
    ) -> AsyncIterator[StoredResult]:
        return _Lane(self, endpoint, caller, journal).run(items)

    def close(self) -> None:
        pass  # nothing is held between runs: open batches are in the store


def connect(address: str | None = None, *, poll_s: float = 60.0) -> BatchApiBackend:
    if address:
        raise InputError(
            "a Ray address was given but the backend is batch-api; leave --ray-address out",
            field="backend",
        )
    return BatchApiBackend(poll_s=poll_s)


def _calls(n: int) -> str:
    return f"{n:,} call{'s' * (n != 1)}"


@dataclass
class _Open:
    """A batch this lane's calls wait on."""

    row: BatchRow
    api: BatchApi
    keys: set[str] = field(default_factory=set)
    due: float = 0.0  # when to poll it next
    interval: float = 0.0


class _Lane:
    """One endpoint's batched calls in one engine stream."""

    def __init__(
        self, backend: BatchApiBackend, endpoint: str, caller: Caller, journal: Journal
    ) -> None:
        self.backend = backend
        self.endpoint = endpoint
        self.caller = caller
        self.journal = journal
        self.items: dict[str, WorkItem] = {}  # every call waiting for its result
        self.attempts: collections.Counter[str] = collections.Counter()
        self.pending: list[WorkItem] = []  # to send in the next batch
        self.open: dict[str, _Open] = {}  # by our batch id
        self.done: collections.deque[StoredResult] = collections.deque()
        self.apis: dict[ModelSpec, BatchApi] = {}

    async def run(self, items: AsyncIterator[WorkItem]) -> AsyncIterator[StoredResult]:
        await self.journal.open()
        inbox: list[WorkItem] = []
        arrived = asyncio.Event()

        async def read() -> None:
            async for item in items:
                inbox.append(item)
                arrived.set()

        reader = asyncio.ensure_future(read())
        loop = asyncio.get_running_loop()
        quiet_since = loop.time()
        try:
            while True:
                if inbox:
                    taken, inbox[:] = list(inbox), []
                    await self._place(taken)
                    quiet_since = loop.time()
                reading = not reader.done()
                if not reading and reader.exception() is not None:
                    raise reader.exception()  # type: ignore[misc]
                gathered = loop.time() - quiet_since >= self.backend.gather_s
                if self.pending and (not reading or gathered or self._full()):
                    await self._send_pending()
                for batch in [b for b in self.open.values() if b.due <= loop.time()]:
                    await self._poll(batch)
                while self.done:
                    yield self.done.popleft()
                if not (reading or inbox or self.pending or self.open):
                    return
                arrived.clear()
                waits = [b.due for b in self.open.values()]
                if self.pending:
                    waits.append(quiet_since + self.backend.gather_s)
                timeout = max(0.0, min(waits) - loop.time()) if waits else None
                if not inbox:
                    wake = asyncio.ensure_future(arrived.wait())
                    await asyncio.wait({wake, reader} if reading else {wake}, timeout=timeout)
                    wake.cancel()
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    def _api(self, spec: ModelSpec) -> BatchApi:
        api = self.apis.get(spec)
        if api is None:
            found = batch_api(self.caller.provider(spec))
            if found is None:  # takes() keeps every other provider away
                raise AssertionError(f"no batch API for {spec}")
            api = self.apis[spec] = found
        return api

    def _full(self) -> bool:
        """Whether a whole batch is gathered (of the first model's calls, at least)."""
        return bool(self.pending) and len(self.pending) >= self._api(self.pending[0].spec).max_calls

    async def _place(self, items: Sequence[WorkItem]) -> None:
        """Each call waits on the batch an earlier run (or another process) sent it in,
        or is gathered for a new one."""
        for item in items:
            self.items[item.key] = item
        held = await self.journal.claims(item.key for item in items)
        now = time.time()
        for item in items:
            row = held.get(item.key)
            if row is None or row.stale(now):
                self.pending.append(item)
            else:
                self._wait_on(row, item, picked_up=True)

    def _wait_on(self, row: BatchRow, item: WorkItem, *, picked_up: bool) -> None:
        batch = self.open.get(row.id)
        if batch is None:
            batch = self.open[row.id] = _Open(row, self._api(item.spec))
            batch.interval = self.backend.first_poll_s
            if picked_up and row.provider_id is not None:
                self.journal.note(
                    f"waiting for batch {row.provider_id} of {row.spec}, sent earlier; "
                    "its calls are not sent again"
                )
        batch.keys.add(item.key)
        self.attempts[item.key] = max(self.attempts[item.key], 1)

    async def _send_pending(self) -> None:
        by_spec: dict[ModelSpec, list[WorkItem]] = {}
        for item in self.pending:
            by_spec.setdefault(item.spec, []).append(item)
        self.pending = []
        for spec, items in by_spec.items():
            api = self._api(spec)
            chunk: list[tuple[WorkItem, bytes]] = []
            size = 0
            for item in items:
                line = api.line(item.key, item.request)
                if len(line) > api.max_bytes:
                    self._end(item, error=BadRequestError("this call is too large for a batch"))
                    continue
                if chunk and (len(chunk) >= api.max_calls or size + len(line) > api.max_bytes):
                    await self._send(spec, api, chunk)
                    chunk, size = [], 0
                chunk.append((item, line))
                size += len(line) + 1
            if chunk:
                await self._send(spec, api, chunk)

    async def _send(
        self, spec: ModelSpec, api: BatchApi, chunk: Sequence[tuple[WorkItem, bytes]]
    ) -> None:
        now = time.time()
        row = BatchRow(
            uuid.uuid4().hex, None, shown_url(self.endpoint), str(spec), "submitting", 0, now, now
        )
        held = await self.journal.claim(row, [item.key for item, _ in chunk])
        for item, _ in chunk:
            if item.key in held:  # another process sent it meanwhile: wait on that one
                self._wait_on(held[item.key], item, picked_up=True)
        ours = [(item, line) for item, line in chunk if item.key not in held]
        if not ours:
            await self.journal.drop(row.id)
            return
        for item, _ in ours:
            self.attempts[item.key] += 1
        try:
            provider_id = await self._submit(api, [line for _, line in ours], row.id)
        except ProviderError as exc:
            await self.journal.drop(row.id)
            for item, _ in ours:
                self._end(item, error=exc)
            return
        await self.journal.submitted(row.id, provider_id)
        batch = self.open[row.id] = _Open(
            replace(row, provider_id=provider_id, state="submitted", calls=len(ours)), api
        )
        batch.keys.update(item.key for item, _ in ours)
        batch.interval = self.backend.first_poll_s
        batch.due = asyncio.get_running_loop().time() + batch.interval
        self.journal.note(f"sent {_calls(len(ours))} of {spec} as batch {provider_id}")
        if not self.backend.explained:
            self.backend.explained = True
            self.journal.note(
                "batches are answered within 24 hours, at half price; stopping now loses "
                "nothing: a rerun waits for the batches sent, and sends none of their calls again"
            )

    async def _timed(self, work: Awaitable[T], *, times: int = 1) -> T:
        timeout_s = self.caller.retry.timeout_s * times
        try:
            async with asyncio.timeout(timeout_s):
                return await work
        except TimeoutError:
            raise CallTimeoutError(f"no answer within {timeout_s:g} s") from None

    async def _submit(self, api: BatchApi, lines: Sequence[bytes], tag: str) -> str:
        """The provider's id of the batch of `lines`, sent with `tag` (ours); a send
        whose answer was lost is looked for before it is tried again."""
        policy = self.caller.retry
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return await self._timed(api.submit(lines, tag), times=DOWNLOAD_TIMEOUTS)
            except ProviderError as exc:
                if not exc.retryable or attempt == policy.max_attempts:
                    raise
                try:
                    found = await self._timed(api.find(tag))
                except ProviderError:
                    found = None
                if found is not None:
                    return found
                await asyncio.sleep(policy.delay(attempt, exc.retry_after, self.backend.rng))
        raise AssertionError("unreachable: the last attempt raises")

    async def _poll(self, batch: _Open) -> None:
        loop = asyncio.get_running_loop()
        batch.due = loop.time() + batch.interval
        batch.interval = min(2 * batch.interval, self.backend.poll_s)
        if batch.row.provider_id is None:  # another process is sending it
            row = await self.journal.row(batch.row.id)
            if row is None or row.stale(time.time()):  # it gave up, or died
                del self.open[batch.row.id]
                self.pending.extend(self.items[key] for key in batch.keys)
            elif row.provider_id is not None:
                batch.row = row
            return
        provider_id = batch.row.provider_id
        try:
            status = await self._timed(batch.api.status(provider_id))
            if not status.ended:
                return
            requests = {key: self.items[key].request for key in batch.keys}
            outcomes = await self._timed(
                batch.api.outcomes(provider_id, status, requests), times=DOWNLOAD_TIMEOUTS
            )
        except ProviderError as exc:
            await self._unreadable(batch, exc)
            return
        await self._ended(batch, status, {key: (c, e) for key, c, e in outcomes})

    async def _unreadable(self, batch: _Open, exc: ProviderError) -> None:
        """A batch whose status or results could not be read: polled again if that may
        pass; sent again if the provider knows no such batch; its calls ended in the
        error otherwise (the store keeps the batch, for a rerun with a key that reads it)."""
        if exc.retryable:
            self.journal.note(f"batch {batch.row.provider_id}: {exc.message}; polling again")
            return
        del self.open[batch.row.id]
        if exc.status == 404:
            self.journal.note(
                f"batch {batch.row.provider_id} is unknown to {shown_url(self.endpoint)}; "
                "its calls are sent again"
            )
            await self.journal.drop(batch.row.id)
            self.pending.extend(self.items[key] for key in batch.keys)
            return
        for key in batch.keys:
            self._end(self.items[key], error=exc)

    async def _ended(
        self,
        batch: _Open,
        status: BatchStatus,
        outcomes: dict[str, tuple[Completion | None, ProviderError | None]],
    ) -> None:
        missing: ProviderError = (
            BadRequestError(status.problem)
            if status.problem
            else MalformedResponseError("the batch ended without a result for this call")
        )
        results = {key: outcomes.get(key, (None, missing)) for key in batch.keys}
        failed = [key for key, (completion, _) in results.items() if completion is None]
        await self.journal.ended(batch.row.id, failed)  # sent again, by this run or the next
        del self.open[batch.row.id]
        self.journal.note(
            f"batch {batch.row.provider_id} of {batch.row.spec} ended ({status.state}): "
            f"{len(results) - len(failed):,} answered, {len(failed):,} failed"
        )
        waited = max(0.0, time.time() - batch.row.created_at)  # each call's latency
        for key, (completion, error) in results.items():
            item = self.items[key]
            if completion is not None:
                self._end(item, completion=replace(completion, latency_s=waited))
            elif error is not None and error.retryable and self.attempts[key] < self._attempts:
                self.pending.append(item)
            else:
                self._end(item, error=error)

    @property
    def _attempts(self) -> int:
        return self.caller.retry.max_attempts

    def _end(
        self,
        item: WorkItem,
        *,
        completion: Completion | None = None,
        error: ProviderError | None = None,
    ) -> None:
        """The call's result, for the engine to commit; a success at the batch price."""
        if completion is not None:
            price = self.caller.price(item.spec)
            cost = None if price is None else price.cost(completion.usage) * PRICE_FACTOR
            completion = replace(completion, cost_usd=cost)
        attempts = max(1, self.attempts[item.key])
        self.done.append(self.caller.stored(item, completion, error, attempts))
        del self.items[item.key]
