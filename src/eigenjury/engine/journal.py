"""Provider batches in the store: which calls went in which batch, so that a run that
ends while a batch is being answered (Ctrl-C, kill -9, a lost machine) picks the batch
up again, and no call is sent, or paid for, twice.

Two tables, made the first time a batch is sent (a store that never sent one stays
readable by an older eigenjury):

- `batches`: our id for the batch (known before the provider's), the provider's id
  once it has accepted the batch, the endpoint (shown without secrets), the model, the
  state (`submitting`, `submitted`, `ended`), its calls, when made and last changed,
  and what was known of the endpoint when it was sent (`features`, JSON: how its calls
  were asked, so they are read the same way);
- `batch_calls`: each call (its store key) sent in a batch and not yet committed.

A batch's calls are claimed in one transaction before it is sent, so two processes
never send one call, and never one whose success is already committed; the provider's
id is written the moment it answers. While a batch is being sent its sender renews the
claim (`touch`); one not renewed for SUBMIT_LEASE_S, still without a provider id, is
a sender that died or lost the provider's answer: the batch is looked for at the
provider before its calls are sent again, and the send is given up only if it is still
unrenewed and without an id then (`drop_stale`). A sender that comes back to find its
send given up (`submitted` is False) cancels the batch it made. A claim goes when its
call's success is committed (`prune`, as every batch stream starts) or when its batch
ended with an error for it (the call is then sent again, as any failed call is); an
ended batch is forgotten once it holds no claim, or after RESULTS_KEPT_S (the providers
keep results about a month).
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from dataclasses import astuple, dataclass, fields, replace
from typing import Any, TypeVar

from eigenjury.engine.store import Store, StoredResult, read_results

T = TypeVar("T")
SUBMIT_LEASE_S = 120.0  # a send not renewed for this long has ended (renewed every 20 s)
RESULTS_KEPT_S = 29 * 86400.0  # Anthropic keeps results 29 days (OpenAI's files longer)
_CHUNK = 500  # keys per SELECT ... IN (...)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    provider_id TEXT,
    endpoint TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('submitting', 'submitted', 'ended')),
    calls INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    features TEXT NOT NULL DEFAULT '{}'
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batch_calls (
    key TEXT PRIMARY KEY,
    batch TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_calls_of ON batch_calls (batch);
"""


@dataclass(frozen=True)
class BatchRow:
    """One batch as the store keeps it."""

    id: str
    provider_id: str | None
    endpoint: str  # shown_url: no secrets
    spec: str  # str(spec): no secrets
    state: str
    calls: int
    created_at: float
    updated_at: float
    features: str = "{}"  # JSON: what was known of the endpoint when it was sent

    def stale(self, now: float, lease_s: float = SUBMIT_LEASE_S) -> bool:
        """A send that has ended without the provider's id: its sender died, or lost the
        answer (the batch may still have been made)."""
        return self.provider_id is None and now - self.updated_at > lease_s


@dataclass(frozen=True)
class Claims:
    """Of some calls: the batch each one is in (`held`), and the results of those
    whose success is committed (`done`: nothing to send or wait for)."""

    held: dict[str, BatchRow]
    done: dict[str, StoredResult]


_ROW = ", ".join(f"b.{f.name}" for f in fields(BatchRow))


def _claims(db: sqlite3.Connection, keys: Sequence[str]) -> dict[str, BatchRow]:
    found: dict[str, BatchRow] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        rows = db.execute(
            f"SELECT c.key, {_ROW} FROM batch_calls c JOIN batches b ON b.id = c.batch "
            f"WHERE c.key IN ({','.join('?' * len(chunk))})",
            chunk,
        )
        for key, *row in rows:
            found[key] = BatchRow(*row)
    return found


def _drop(db: sqlite3.Connection, batch: str) -> None:
    db.execute("DELETE FROM batch_calls WHERE batch = ?", (batch,))
    db.execute("DELETE FROM batches WHERE id = ?", (batch,))


def _transaction(db: sqlite3.Connection, work: Callable[[], T]) -> T:
    db.execute("BEGIN IMMEDIATE")
    try:
        done = work()
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return done


def create(db: sqlite3.Connection) -> None:
    db.executescript(_SCHEMA)


def claims(db: sqlite3.Connection, keys: Sequence[str]) -> Claims:
    """The batch each of `keys` was sent in, where one was, and the committed ones."""
    done = read_results(db, keys, ok_only=True)
    held = {k: row for k, row in _claims(db, keys).items() if k not in done}
    return Claims(held, done)


def claim(db: sqlite3.Connection, batch: BatchRow, keys: Sequence[str]) -> Claims:
    """Record `batch` as being sent with those of `keys` that are neither committed nor
    held by another batch (those are returned); `keys` given to a batch of ours that
    has since been given up (`drop`) are claimed again."""

    def work() -> Claims:
        found = claims(db, keys)
        free = [k for k in keys if k not in found.held and k not in found.done]
        values = astuple(replace(batch, calls=len(free)))
        db.execute(f"INSERT INTO batches VALUES ({','.join('?' * len(values))})", values)
        db.executemany(
            "INSERT INTO batch_calls (key, batch) VALUES (?, ?)", [(k, batch.id) for k in free]
        )
        return found

    return _transaction(db, work)


def touch(db: sqlite3.Connection, batch: str) -> None:
    """The batch is still being sent (its claim is renewed)."""
    db.execute("UPDATE batches SET updated_at = ? WHERE id = ?", (time.time(), batch))


def submitted(db: sqlite3.Connection, batch: str, provider_id: str) -> bool:
    """The provider made the batch; False where its row is gone: another process took
    the send for dead and its calls over (the batch is then to be cancelled)."""
    return (
        db.execute(
            "UPDATE batches SET provider_id = ?, state = 'submitted', updated_at = ? WHERE id = ?",
            (provider_id, time.time(), batch),
        ).rowcount
        > 0
    )


def ended(db: sqlite3.Connection, batch: str, released: Sequence[str]) -> None:
    """The batch has ended; `released`: its calls that ended in an error (sent again)."""

    def work() -> None:
        db.execute(
            "UPDATE batches SET state = 'ended', updated_at = ? WHERE id = ?", (time.time(), batch)
        )
        db.executemany(
            "DELETE FROM batch_calls WHERE key = ? AND batch = ?", [(k, batch) for k in released]
        )

    _transaction(db, work)


def drop(db: sqlite3.Connection, batch: str) -> None:
    """A batch that was not made (the provider refused it, or does not know it): its
    calls are free."""
    _transaction(db, lambda: _drop(db, batch))


def drop_stale(db: sqlite3.Connection, batch: str, lease_s: float) -> bool:
    """Give up a send found not to have made its batch, unless meanwhile its sender
    renewed it or wrote the provider's id (then it goes on); whether it was given up."""

    def work() -> bool:
        still = db.execute(
            "SELECT 1 FROM batches WHERE id = ? AND provider_id IS NULL AND updated_at < ?",
            (batch, time.time() - lease_s),
        ).fetchone()
        if still:
            _drop(db, batch)
        return still is not None

    return _transaction(db, work)


def keys(db: sqlite3.Connection, batch: str) -> list[str]:
    """The calls claimed for a batch."""
    return [k for (k,) in db.execute("SELECT key FROM batch_calls WHERE batch = ?", (batch,))]


def provider_ids(db: sqlite3.Connection) -> set[str]:
    """The provider's ids of every batch the store knows of (a lost send's batch is
    looked for among the others)."""
    return {
        i for (i,) in db.execute("SELECT provider_id FROM batches WHERE provider_id IS NOT NULL")
    }


def row(db: sqlite3.Connection, batch: str) -> BatchRow | None:
    found = db.execute(f"SELECT {_ROW} FROM batches b WHERE b.id = ?", (batch,)).fetchone()
    return None if found is None else BatchRow(*found)


def prune(db: sqlite3.Connection) -> None:
    """Forget the claims of calls whose success is committed, and ended batches with no
    claim left or too old for the provider to still hold their results."""

    def work() -> None:
        db.execute(  # (a success with unusable scores reads as an error: it is sent again)
            "DELETE FROM batch_calls WHERE EXISTS (SELECT 1 FROM results r WHERE "
            "r.key = batch_calls.key AND r.status = 'ok' "
            "AND NOT stored_scores_unusable(r.choice_logprobs))"
        )
        old = time.time() - RESULTS_KEPT_S
        for (batch,) in db.execute(
            "SELECT id FROM batches WHERE state = 'ended' AND updated_at < ?", (old,)
        ).fetchall():
            _drop(db, batch)
        db.execute(
            "DELETE FROM batches WHERE state = 'ended' AND NOT EXISTS "
            "(SELECT 1 FROM batch_calls c WHERE c.batch = batches.id)"
        )

    _transaction(db, work)


class Journal:
    """A backend's view of the batches in the store, written through the engine's store
    thread (the engine stays the store's single writer), and a way to tell the user."""

    def __init__(self, store: Store, io: Executor, note: Callable[[str], None]) -> None:
        self.store = store
        self._io = io
        self.note = note

    async def _do(self, what: str, operation: Callable[..., T], *args: Any) -> T:
        def run() -> T:
            return self.store.run(what, lambda db: operation(db, *args))

        return await asyncio.get_running_loop().run_in_executor(self._io, run)

    async def open(self) -> None:
        """Make the tables where they are missing, and forget what is done with."""
        await self._do("keep provider batches", create)
        await self._do("tidy provider batches", prune)

    async def claims(self, keys: Iterable[str]) -> Claims:
        return await self._do("read provider batches", claims, list(keys))

    async def claim(self, batch: BatchRow, keys: Sequence[str]) -> Claims:
        return await self._do("record a provider batch", claim, batch, keys)

    async def touch(self, batch: str) -> None:
        await self._do("record a provider batch", touch, batch)

    async def submitted(self, batch: str, provider_id: str) -> bool:
        return await self._do("record a provider batch", submitted, batch, provider_id)

    async def drop_stale(self, batch: str, lease_s: float) -> bool:
        return await self._do("record a provider batch", drop_stale, batch, lease_s)

    async def keys(self, batch: str) -> list[str]:
        return await self._do("read provider batches", keys, batch)

    async def provider_ids(self) -> set[str]:
        return await self._do("read provider batches", provider_ids)

    async def ended(self, batch: str, released: Sequence[str]) -> None:
        await self._do("record a provider batch", ended, batch, released)

    async def drop(self, batch: str) -> None:
        await self._do("record a provider batch", drop, batch)

    async def row(self, batch: str) -> BatchRow | None:
        return await self._do("read provider batches", row, batch)
