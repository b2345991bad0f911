"""The `batch-api` backend: a run's calls to OpenAI's and Anthropic's models go through
the providers' batch APIs (models/batch_apis.py), at half the price, answered within
24 hours; calls to other models are made here as usual.

Per endpoint, the calls the engine hands over are gathered until none has come for
`gather_s` (at most `max_gather_s` after the first, or until a batch is full), then sent
as one batch per model. Before a batch is sent its calls are claimed in the store
(engine/journal.py; a call whose success another process has committed meanwhile is
taken from the store instead), and the provider's batch id is written the moment it
answers, so a run that ends while batches are out (Ctrl-C, kill -9, a lost machine)
loses nothing: a rerun finds each call's batch and waits for it instead of sending the
call again, and a second process running the same calls waits on the first one's
batches. A send whose answer is lost (a server error, no answer) may still have made
its batch: it is looked for at the provider (OpenAI: by our id in its metadata;
Anthropic: the one batch of as many calls made since) before it is sent again, and
where the provider cannot be asked, the claim stays until it can be. Open batches are
polled, first after `first_poll_s` and then ever less often, up to every `poll_s`; an
ended batch's results are read and handed to the engine, which commits them like any
other call's. Within a run a call whose batch answered with an error that may pass (a
server error, a missing result) is sent again in a later batch, up to the retry
policy's attempts; a call left unanswered by an expired or cancelled batch ends as an
`expired` error, sent again by a rerun.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.journal import SUBMIT_LEASE_S, BatchRow, Claims, Journal
from eigenjury.engine.limits import EndpointLimits
from eigenjury.engine.store import StoredResult
from eigenjury.errors import InputError
from eigenjury.models.batch_apis import FIND_LATER, PRICE_FACTOR, BatchApi, BatchStatus, batch_api
from eigenjury.models.errors import (
    BadRequestError,
    BatchExpiredError,
    CallTimeoutError,
    MalformedResponseError,
    ProviderError,
    RateLimitError,
)
from eigenjury.models.spec import ModelSpec, shown_url
from eigenjury.models.types import Completion

T = TypeVar("T")
NAME = "batch-api"
PROVIDERS = ("openai", "anthropic")  # whose calls go in batches
WINDOW = 50_000  # calls the engine may hold unanswered for this backend (one OpenAI batch)
GATHER_S = 2.0
MAX_GATHER_S = 30.0  # calls that keep trickling in are sent at least this often
FIRST_POLL_S = 5.0

DOWNLOAD_TIMEOUTS = 10  # a batch's results may take this many call timeouts to read


class BatchApiBackend:
    """Parameters: poll_s (the longest wait between two polls of an open batch);
    gather_s (how long no new call must come before the gathered ones are sent);
    first_poll_s (the first wait, doubled at each poll up to poll_s); lease_s (how long
    a batch's send may go unrenewed before it is taken to have ended); max_gather_s
    (the longest the first gathered call waits for others)."""

    window = WINDOW

    def __init__(
        self,
        *,
        poll_s: float = 60.0,
        gather_s: float = GATHER_S,
        first_poll_s: float = FIRST_POLL_S,
        lease_s: float = SUBMIT_LEASE_S,
        max_gather_s: float = MAX_GATHER_S,
        seed: int = 0,
    ) -> None:
        self.poll_s = poll_s
        self.gather_s = gather_s
        self.max_gather_s = max_gather_s
        self.first_poll_s = min(first_poll_s, poll_s)
        self.lease_s = lease_s
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


@dataclass(frozen=True)
class _Lost:
    """A send, or a look for its batch, that got no clear answer."""

    error: ProviderError


@dataclass
class _Open:
    """A batch this lane's calls wait on."""

    row: BatchRow
    api: BatchApi
    interval: float  # the wait before the next poll, doubled at each up to poll_s
    keys: set[str] = field(default_factory=set)
    due: float = 0.0  # when to poll it next
    error: ProviderError | None = None  # why its send got no clear answer
    looks: int = 0  # looks for it at the provider that got no answer


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
        self.pending_since = 0.0  # when the first of them came
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
                send_at = self._send_at(quiet_since)
                if self.pending and (not reading or loop.time() >= send_at or self._full()):
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
                    waits.append(self._send_at(quiet_since))
                timeout = max(0.0, min(waits) - loop.time()) if waits else None
                if not inbox:
                    wake = asyncio.ensure_future(arrived.wait())
                    await asyncio.wait(
                        {wake, reader} if reading else {wake},
                        timeout=timeout,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    wake.cancel()
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    def _send_at(self, quiet_since: float) -> float:
        """When the gathered calls go: once none has come for `gather_s`, and at the
        latest MAX_GATHER_S after the first of them (calls that trickle in still go)."""
        backend = self.backend
        return min(quiet_since + backend.gather_s, self.pending_since + backend.max_gather_s)

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

    def _gather(self, items: Iterable[WorkItem]) -> None:
        if not self.pending:
            self.pending_since = asyncio.get_running_loop().time()
        self.pending.extend(items)

    def _settle(self, found: Claims, items: Iterable[WorkItem]) -> list[WorkItem]:
        """Of `items`: those committed meanwhile (by another process) are handed over
        from the store, those in a batch wait on it; the rest are returned."""
        free = []
        for item in items:
            if item.key in found.done:
                self.done.append(found.done[item.key])
                del self.items[item.key]
            elif item.key in found.held:
                self._wait_on(found.held[item.key], item)
            else:
                free.append(item)
        return free

    async def _place(self, items: Sequence[WorkItem]) -> None:
        """Each call waits on the batch an earlier run (or another process) sent it in,
        or is gathered for a new one."""
        for item in items:
            self.items[item.key] = item
        found = await self.journal.claims(item.key for item in items)
        self._gather(self._settle(found, items))

    def _wait_on(self, row: BatchRow, item: WorkItem) -> None:
        batch = self.open.get(row.id)
        if batch is None:
            batch = self.open[row.id] = _Open(row, self._api(item.spec), self.backend.first_poll_s)
            if row.provider_id is not None:
                self.journal.note(
                    f"waiting for batch {row.provider_id} of {row.spec}, sent earlier; "
                    "its calls are not sent again"
                )
            else:
                self.journal.note(
                    f"waiting for a batch of {row.spec} being sent by another process, or by "
                    "a run that stopped while sending it; its calls are sent again only "
                    f"once it is found not to have been made (within {self._lease_s:.0f} s)"
                )
        batch.keys.add(item.key)
        self.attempts[item.key] = max(self.attempts[item.key], 1)

    @property
    def _lease_s(self) -> float:
        return self.backend.lease_s

    async def _send_pending(self) -> None:
        by_spec: dict[ModelSpec, list[WorkItem]] = {}
        for item in self.pending:
            by_spec.setdefault(item.spec, []).append(item)
        self.pending = []
        for spec, items in by_spec.items():
            api = self._api(spec)
            features = api.features()
            chunk: list[tuple[WorkItem, bytes]] = []
            size = 0
            for item in items:
                line = api.line(item.key, item.request, features)
                if len(line) > api.max_bytes:
                    self._end(item, error=BadRequestError("this call is too large for a batch"))
                    continue
                if chunk and (len(chunk) >= api.max_calls or size + len(line) > api.max_bytes):
                    await self._send(spec, api, chunk, features)
                    chunk, size = [], 0
                chunk.append((item, line))
                size += len(line) + 1
            if chunk:
                await self._send(spec, api, chunk, features)

    async def _send(
        self,
        spec: ModelSpec,
        api: BatchApi,
        chunk: Sequence[tuple[WorkItem, bytes]],
        features: dict[str, str],
    ) -> None:
        now = time.time()
        row = BatchRow(
            uuid.uuid4().hex,
            None,
            shown_url(self.endpoint),
            str(spec),
            "submitting",
            0,
            now,
            now,
            json.dumps(features, sort_keys=True),
        )
        found = await self.journal.claim(row, [item.key for item, _ in chunk])
        free = {item.key for item in self._settle(found, [item for item, _ in chunk])}
        ours = [(item, line) for item, line in chunk if item.key in free]
        if not ours:
            await self.journal.drop(row.id)
            return
        row = replace(row, calls=len(ours))
        for item, _ in ours:
            self.attempts[item.key] += 1
        renewing = asyncio.ensure_future(self._renew(row.id))
        try:
            sent = await self._submit(api, [line for _, line in ours], row)
        finally:
            renewing.cancel()
            await asyncio.gather(renewing, return_exceptions=True)
        if isinstance(sent, ProviderError):  # refused: not made
            await self.journal.drop(row.id)
            for item, _ in ours:
                self._end(item, error=sent)
            return
        batch = self.open[row.id] = _Open(row, api, self.backend.first_poll_s)
        batch.keys.update(item.key for item, _ in ours)
        if isinstance(sent, _Lost):  # the row stays as it is, and is looked for once stale
            batch.error = sent.error
            batch.due = asyncio.get_running_loop().time() + self._lease_s
            self.journal.note(
                f"sending {_calls(len(ours))} of {spec} as a batch got no clear answer "
                f"({sent.error.message}); the batch is looked for at the provider in "
                f"{self._lease_s:.0f} s, and its calls are sent again only if it was not made"
            )
            return
        if not await self._made(batch, sent):
            return
        self.journal.note(f"sent {_calls(len(ours))} of {spec} as batch {sent}")
        if not self.backend.explained:
            self.backend.explained = True
            self.journal.note(
                "batches are answered within 24 hours, at half price; stopping now loses "
                "nothing: a rerun waits for the batches sent, and sends none of their calls again"
            )

    async def _made(self, batch: _Open, provider_id: str) -> bool:
        """The provider made the batch: the store knows it, and it is polled. Where the
        send had been given up meanwhile (its calls taken over by another process, which
        sends them), the batch is cancelled and its calls wait on the other's: False."""
        if await self.journal.submitted(batch.row.id, provider_id):
            batch.row = replace(batch.row, provider_id=provider_id, state="submitted")
            batch.due = asyncio.get_running_loop().time() + batch.interval
            return True
        del self.open[batch.row.id]
        try:
            await self._timed(batch.api.cancel(provider_id))
            cancelled = "cancelled"
        except ProviderError as exc:
            cancelled = f"could not be cancelled ({exc.message})"
        self.journal.note(
            f"batch {provider_id} of {batch.row.spec} was made after its send had been given "
            f"up and its calls taken over; it {cancelled}"
        )
        await self._place([self.items.pop(key) for key in batch.keys])
        return False

    async def _renew(self, batch: str) -> None:
        """Keep a batch's claim while it is being sent (a send of 200 MB takes a while)."""
        while True:
            await asyncio.sleep(self._lease_s / 6)
            await self.journal.touch(batch)

    async def _timed(self, work: Awaitable[T], *, times: int = 1) -> T:
        timeout_s = self.caller.retry.timeout_s * times
        try:
            async with asyncio.timeout(timeout_s):
                return await work
        except TimeoutError:
            raise CallTimeoutError(f"no answer within {timeout_s:g} s") from None

    async def _submit(
        self, api: BatchApi, lines: Sequence[bytes], row: BatchRow
    ) -> str | ProviderError | _Lost:
        """The provider's id of the batch of `lines`; or the error that refused it (a 4xx:
        nothing made; a 429 is tried again after its wait); or _Lost, where the send may
        have made the batch without our hearing of it (no answer, a server error): it is
        looked for once the send is stale, not sent again at once."""
        policy = self.caller.retry
        for attempt in range(1, policy.max_attempts + 1):
            try:
                return await self._timed(api.submit(lines, row.id), times=DOWNLOAD_TIMEOUTS)
            except RateLimitError as exc:
                if attempt == policy.max_attempts:
                    return exc
                await asyncio.sleep(policy.delay(attempt, exc.retry_after, self.backend.rng))
            except ProviderError as exc:
                return _Lost(exc) if exc.retryable else exc
        raise AssertionError("unreachable: the last attempt returns")

    async def _find(self, api: BatchApi, row: BatchRow) -> str | _Lost | None:
        """The batch the send of `row` made; None where it made none, or where the
        provider will not list its batches (a refusal: waiting would not help); _Lost
        where the provider cannot be asked now."""
        try:
            known = await self.journal.provider_ids()
            keys = await self.journal.keys(row.id)
            return await self._timed(
                api.find(row.id, keys, row.created_at, row.updated_at, known),
                times=DOWNLOAD_TIMEOUTS,
            )
        except ProviderError as exc:
            if exc.retryable:
                return _Lost(exc)
            self.journal.note(f"cannot look for a lost batch ({exc.message})")
            return None

    async def _poll(self, batch: _Open) -> None:
        loop = asyncio.get_running_loop()
        batch.due = loop.time() + batch.interval
        batch.interval = min(2 * batch.interval, self.backend.poll_s)
        if batch.row.provider_id is None:
            await self._look_for(batch)
            return
        provider_id = batch.row.provider_id
        try:
            status = await self._timed(batch.api.status(provider_id))
            if not status.ended:
                return
            requests = {key: self.items[key].request for key in batch.keys}
            outcomes = await self._timed(
                batch.api.outcomes(provider_id, status, requests, json.loads(batch.row.features)),
                times=DOWNLOAD_TIMEOUTS,
            )
        except ProviderError as exc:
            await self._unreadable(batch, exc)
            return
        await self._ended(batch, status, {key: (c, e) for key, c, e in outcomes})

    async def _look_for(self, batch: _Open) -> None:
        """A batch still without the provider's id: being sent by another process (wait),
        or the send ended without one (look for it at the provider; its calls are sent
        again only where it made none, and the send is still unrenewed then)."""
        row = await self.journal.row(batch.row.id)
        if row is not None and row.provider_id is not None:
            batch.row = row
            batch.due = 0.0
            return
        if row is not None and not row.stale(time.time(), self._lease_s):
            return
        found = None if row is None else await self._find(batch.api, row)
        if found == FIND_LATER:
            return  # (the batches that could be it are still running)
        if isinstance(found, _Lost):
            batch.looks += 1
            if batch.looks < self._attempts:
                return  # asked again at the next poll
            self.journal.note(f"cannot look for a lost batch ({found.error.message})")
            found = None
        if isinstance(found, str):
            assert row is not None
            batch.row = row
            if await self._made(batch, found):
                batch.due = 0.0
                self.journal.note(f"found batch {found} of {row.spec}, whose send was cut short")
            return
        if row is not None and not await self.journal.drop_stale(row.id, self._lease_s):
            return  # renewed, or its id written, meanwhile: it goes on
        del self.open[batch.row.id]
        error = batch.error or MalformedResponseError("a batch send that made no batch")
        for key in batch.keys:  # sent again (claimed anew, or found done)
            item = self.items[key]
            if self.attempts[key] >= self._attempts:
                self._end(item, error=error)
            else:
                self._gather([item])

    async def _unreadable(self, batch: _Open, exc: ProviderError) -> None:
        """A batch whose status or results could not be read: polled again if that may
        pass; sent again if the provider knows no such batch (with this key: made with
        another, or deleted); its calls ended in the error otherwise (the store keeps
        the batch, for a rerun with a key that reads it)."""
        if exc.retryable:
            self.journal.note(f"batch {batch.row.provider_id}: {exc.message}; polling again")
            return
        del self.open[batch.row.id]
        if exc.status == 404:
            self.journal.note(
                f"batch {batch.row.provider_id} is unknown to {shown_url(self.endpoint)} with "
                "this key (made with another, or deleted); its calls are sent again"
            )
            await self.journal.drop(batch.row.id)
            self._gather(self.items[key] for key in batch.keys)
            return
        for key in batch.keys:
            self._end(self.items[key], error=exc)

    async def _ended(
        self,
        batch: _Open,
        status: BatchStatus,
        outcomes: dict[str, tuple[Completion | None, ProviderError | None]],
    ) -> None:
        missing: ProviderError
        if status.problem:
            missing = BadRequestError(status.problem)
        elif status.state in ("expired", "cancelled", "canceled"):
            missing = BatchExpiredError(f"the batch was {status.state} before this call")
        else:
            missing = MalformedResponseError("the batch ended without a result for this call")
        results = {key: outcomes.get(key, (None, missing)) for key in batch.keys}
        failed = [key for key, (completion, _) in results.items() if completion is None]
        await self.journal.ended(batch.row.id, failed)  # sent again, by this run or the next
        del self.open[batch.row.id]
        waited = max(0.0, time.time() - batch.row.created_at)
        self.journal.note(
            f"batch {batch.row.provider_id} of {batch.row.spec} ended ({status.state}) after "
            f"{waited / 60:.1f} min: {len(results) - len(failed):,} answered, "
            f"{len(failed):,} failed"
        )
        for key, (completion, error) in results.items():
            item = self.items[key]
            if completion is not None:
                self._end(item, completion=completion)
            elif error is not None and error.retryable and self.attempts[key] < self._attempts:
                self._gather([item])
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
        """The call's result, for the engine to commit; a success at the batch price,
        with no latency of its own (0: what it waited is its batch's, not the model's)."""
        if completion is not None:
            price = self.caller.price(item.spec)
            factor = self.backend.price_factor(item.spec)
            cost = None if price is None else price.cost(completion.usage) * factor
            completion = replace(completion, cost_usd=cost, latency_s=0.0)
        attempts = max(1, self.attempts[item.key])
        self.done.append(self.caller.stored(item, completion, error, attempts))
        del self.items[item.key]
