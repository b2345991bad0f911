"""The store: every call result, keyed by a hash of everything that determines it.

SQLite in WAL mode. It is the cache, the journal and the resume point at once: the
engine commits a result before anyone uses it, so a run killed at any moment
(kill -9 included) loses at most calls that were still in flight, and rerunning
reuses everything committed. Failed calls are stored as errors (kind and message),
never as text, and are tried again by the next run; a success is never overwritten.
(A success stored by an older version with label scores that are not finite numbers,
NaN from a broken server, is read as the malformed reply it was, so it is asked again
and its new result replaces it.)
While another program holds a lock on the file the store waits (and says so) rather
than drop a result, and a row it cannot hold is left out alone, never with its batch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from eigenjury.engine.settings import DIRECTORY_STORE
from eigenjury.errors import InputError
from eigenjury.files import atomic_writer
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion, Usage, unusable_scores

KEY_VERSION = 1
_CHUNK = 500  # keys per SELECT ... IN (...)
_PAGE = 10_000  # rows read (and written to an export) at a time
SQLITE_INTEGER_MAX = 2**63 - 1  # the largest whole number a SQLite INTEGER holds
BUSY_TIMEOUT_MS = 1000  # how long one try waits inside SQLite for another program's lock
LOCK_REPORT_S = 10.0  # a lock held this long is reported (then again at every doubling)
T = TypeVar("T")
Notify = Callable[[str], None]
# What one row can fail on while the others are fine: a number too large for SQLite,
# text that is not encodable (lone surrogates), a value of an unsupported type, a NULL.
_ROW_ERRORS = (
    OverflowError,
    ValueError,
    TypeError,
    sqlite3.IntegrityError,
    sqlite3.InterfaceError,
    sqlite3.ProgrammingError,
    sqlite3.DataError,
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    request TEXT NOT NULL,
    sample INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'error')),
    text TEXT,
    finish_reason TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    latency_s REAL,
    cost_usd REAL,
    choice_logprobs TEXT,
    error_kind TEXT,
    error_message TEXT,
    attempts INTEGER NOT NULL,
    created_at REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS features (
    spec TEXT NOT NULL,
    feature TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (spec, feature)
) WITHOUT ROWID;
"""
BATCH_TABLES = ("batches", "batch_calls")  # provider batches (engine/journal.py)
_FEATURE_COLUMNS = {"spec", "feature", "value"}  # what an endpoint and model support
_COLUMNS = (
    "key",
    "spec",
    "request",
    "sample",
    "status",
    "text",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "latency_s",
    "cost_usd",
    "choice_logprobs",
    "error_kind",
    "error_message",
    "attempts",
    "created_at",
)
_UPSERT = (
    f"INSERT INTO results ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT(key) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in _COLUMNS[1:])
    + " WHERE results.status != 'ok' OR stored_scores_unusable(results.choice_logprobs)"
)


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def request_key(spec: ModelSpec, request: ChatRequest, sample: int = 0) -> str:
    """The store key: a hash of provider, model, endpoint (no secrets), request and sample.

    `sample` tells apart repeated draws of the same request (for example several
    samples at temperature 1); it is the only way two identical requests get two keys.
    """
    return key_of(spec_json(spec), canonical_json(request.identity()), sample)


@functools.lru_cache(maxsize=4096)
def spec_json(spec: ModelSpec) -> str:
    """The spec's identity as canonical JSON (computed once per spec: it parses a URL)."""
    return canonical_json(spec.identity())


def key_of(spec_json: str, request_json: str, sample: int) -> str:
    """The key from parts already encoded: the same text as
    canonical_json({"request": ..., "sample": ..., "spec": ..., "v": ...}), keys in
    sorted order, without encoding the request a second time."""
    text = f'{{"request":{request_json},"sample":{sample},"spec":{spec_json},"v":{KEY_VERSION}}}'
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class StoredResult:
    """One committed outcome: a completion, or an error of some kind."""

    key: str
    spec: str
    request: str  # canonical JSON of the request identity
    sample: int
    completion: Completion | None
    error_kind: str | None = None
    error_message: str | None = None
    attempts: int = 1
    created_at: float = 0.0

    @property
    def ok(self) -> bool:
        return self.completion is not None

    def row(self) -> tuple[Any, ...]:
        c = self.completion
        return (
            self.key,
            self.spec,
            self.request,
            self.sample,
            "ok" if c else "error",
            c.text if c else None,
            c.finish_reason if c else None,
            c.usage.input_tokens if c else 0,
            c.usage.output_tokens if c else 0,
            c.latency_s if c else None,
            c.cost_usd if c else None,
            canonical_json(dict(c.choice_logprobs)) if c and c.choice_logprobs else None,
            self.error_kind,
            self.error_message,
            self.attempts,
            self.created_at or time.time(),
        )

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> StoredResult:
        r = dict(zip(_COLUMNS, row, strict=True))
        completion = None
        bad = _stored_scores_problem(r["choice_logprobs"]) if r["status"] == "ok" else None
        if bad is not None:
            r["error_kind"] = "malformed"
            r["error_message"] = (
                f"stored as a success with label scores that are not finite numbers ({bad}); "
                "read as the malformed reply it was, and asked again"
            )
        elif r["status"] == "ok":
            completion = Completion(
                text=r["text"],
                finish_reason=r["finish_reason"],
                usage=Usage(r["input_tokens"], r["output_tokens"]),
                latency_s=r["latency_s"] or 0.0,
                cost_usd=r["cost_usd"],
                choice_logprobs=json.loads(r["choice_logprobs"]) if r["choice_logprobs"] else None,
            )
        return cls(
            r["key"],
            r["spec"],
            r["request"],
            r["sample"],
            completion,
            r["error_kind"],
            r["error_message"],
            r["attempts"],
            r["created_at"],
        )

    def record(self) -> dict[str, Any]:
        """A JSON-ready record (for exports)."""
        c = self.completion
        return {
            "key": self.key,
            "spec": self.spec,
            "request": json.loads(self.request),
            "sample": self.sample,
            "status": "ok" if c else "error",
            "text": c.text if c else None,
            "finish_reason": c.finish_reason if c else None,
            "input_tokens": c.usage.input_tokens if c else 0,
            "output_tokens": c.usage.output_tokens if c else 0,
            "latency_s": c.latency_s if c else None,
            "cost_usd": c.cost_usd if c else None,
            "choice_logprobs": dict(c.choice_logprobs) if c and c.choice_logprobs else None,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
            "attempts": self.attempts,
            "created_at": self.created_at,
        }


def _stored_scores_problem(text: str | None) -> str | None:
    """What makes a stored success's label scores unusable (see `unusable_scores`), or
    None when they are absent or usable."""
    if text is None:
        return None
    try:
        scores = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return "not JSON"
    if not isinstance(scores, dict):
        return "not a mapping"
    return unusable_scores(scores)


def _stored_scores_unusable(text: str | None) -> bool:
    """For the upsert: a stored success whose scores are unusable may be replaced."""
    return _stored_scores_problem(text) is not None


class StoreError(InputError):
    """A store file that cannot be used as one: named, with what to do about it."""


def _print_note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _is_locked(exc: sqlite3.Error) -> bool:
    """Another connection holds a lock: waiting helps, nothing is wrong with the file."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF  # the primary code of an extended one
    return isinstance(exc, sqlite3.OperationalError) and code in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


class Store:
    """A SQLite file of results. One writer at a time; readers never block it (WAL).

    Not thread-safe by itself: the engine drives it from one thread. While another
    program holds a lock on the file, every operation waits and tries again (saying so
    after LOCK_REPORT_S), so finished results are never dropped for a lock. A file that
    is not an eigenjury store (a folder, junk, another program's database, a damaged
    file) is a StoreError naming it. With `create=False` (reading a store, as an
    export does) the file must already be a store, and is not changed.
    """

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.create = create
        if not create and not self.path.exists():
            raise StoreError("no such store", path=self.path)
        if self.path.is_dir():
            raise StoreError(
                "this is a folder; the store is one SQLite file: give a file path such as "
                f"--store {self.path / 'store.sqlite'}",
                path=self.path,
            )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot make the folder for the store ({exc.strerror or exc}: {exc.filename}); "
                "give another path (--store NEW_FILE)",
                path=self.path,
            ) from None
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._unusable(exc) from None
        try:
            self._patiently("open it", self._open)
        except BaseException:
            self._db.close()
            raise

    def _open(self) -> None:
        self._db.create_function(
            "stored_scores_unusable", 1, _stored_scores_unusable, deterministic=True
        )
        self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._check_tables()  # before anything is changed in someone else's database
        if not self.create:
            return
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a crash of this process;
        # only an OS crash or power loss can drop the last few.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def _check_tables(self) -> None:
        tables = {
            name
            for (name,) in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'"
            )
        }
        if not tables and not self.create:
            raise StoreError(
                "this file holds no results (an empty database), so it is not an eigenjury "
                "store; give the path of a store (--store FILE)",
                path=self.path,
            )
        # (older stores lack features; only stores a batch run used have the batch tables)
        foreign = sorted(tables - {"results", "features", *BATCH_TABLES})
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(results)")}
        if "features" in tables and self._feature_columns() != _FEATURE_COLUMNS:
            foreign.append("features (with other columns)")
        if foreign or (tables and columns != set(_COLUMNS)):
            shown = ", ".join(foreign or ["results (with other columns)"])
            raise StoreError(
                f"this is a SQLite database of another program (tables: {shown}), not an "
                "eigenjury store; give the store another path (--store NEW_FILE)",
                path=self.path,
            )

    def _feature_columns(self) -> set[str]:
        return {row[1] for row in self._db.execute("PRAGMA table_info(features)")}

    def _unusable(self, exc: sqlite3.Error) -> StoreError:
        """The store file as the cause of a SQLite error, with what to do."""
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        move = "move it away or give another path (--store NEW_FILE), then run again"
        if code == sqlite3.SQLITE_NOTADB:
            what = f"this file is not an eigenjury store (not a SQLite database); {move}"
        elif code == sqlite3.SQLITE_CORRUPT:
            what = (
                "this store file is damaged (SQLite: database disk image is malformed; "
                f"`sqlite3 FILE .recover | sqlite3 NEW_FILE` can rescue what is left); {move}"
            )
        else:
            what = (
                f"cannot use this store file (SQLite: {exc}); check that it and its folder "
                "can be written and the disk has room, or give another path (--store NEW_FILE)"
            )
        return StoreError(what, path=self.path)

    def _patiently(self, what: str, operation: Callable[[], T], notify: Notify | None = None) -> T:
        """`operation()`, tried again with backoff for as long as another program holds a
        lock on the store (reported through `notify` after LOCK_REPORT_S, then at every
        doubling of the wait); any other SQLite error is a StoreError naming the file."""
        start = time.monotonic()
        report_at, pause = LOCK_REPORT_S, 0.01
        while True:
            try:
                return operation()
            except sqlite3.Error as exc:
                if not _is_locked(exc):
                    raise self._unusable(exc) from None
            waited = time.monotonic() - start
            if waited >= report_at:
                report_at *= 2
                (notify or _print_note)(
                    f"{self.path}: another program holds a lock on this store; waiting to "
                    f"{what} ({waited:.0f} s so far). Close the program that holds it; "
                    "nothing is lost meanwhile"
                )
            time.sleep(pause)
            pause = min(2 * pause, 1.0)

    def close(self) -> None:
        self._db.close()

    def run(self, what: str, operation: Callable[[sqlite3.Connection], T]) -> T:
        """`operation(connection)`, as patient with another program's lock as every other
        operation (`what` says what waits); for the store's other tables
        (engine/journal.py keeps provider batches in it)."""
        return self._patiently(what, lambda: operation(self._db))

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredResult]:
        keys = list(dict.fromkeys(keys))

        return self._patiently("read it", lambda: read_results(self._db, keys))

    def get(self, key: str) -> StoredResult | None:
        return self.get_many([key]).get(key)

    def put_many(
        self, results: Sequence[StoredResult], *, notify: Notify | None = None
    ) -> dict[str, str]:
        """Commit results in one transaction. An error never replaces a success.

        While the store is locked this waits (reporting through `notify`) until it can
        commit. A row that cannot be stored (a number too large for SQLite, text that
        cannot be encoded) is left out without holding back the others; the answer maps
        the key of each such row to why."""
        if not results:
            return {}
        what = f"save {len(results)} finished result{'s' * (len(results) > 1)}"
        return self._patiently(what, lambda: self._put(results), notify)

    def _put(self, results: Sequence[StoredResult]) -> dict[str, str]:
        left_out: dict[str, str] = {}
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.execute("SAVEPOINT batch")
            try:
                self._db.executemany(_UPSERT, [r.row() for r in results])
            except _ROW_ERRORS:
                self._db.execute("ROLLBACK TO batch")
                for r in results:  # one by one, to keep every row that can be kept
                    try:
                        self._db.execute(_UPSERT, r.row())
                    except _ROW_ERRORS as exc:
                        left_out[r.key] = f"{type(exc).__name__}: {exc}"
            self._db.execute("RELEASE batch")
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:  # (a COMMIT that met a lock leaves it open)
                self._db.execute("ROLLBACK")
            raise
        return left_out

    def __iter__(self) -> Iterator[StoredResult]:
        """Every result, oldest first, read a page at a time."""
        for page in self._pages():
            yield from map(StoredResult.from_row, page)

    def _pages(self) -> Iterator[list[Any]]:
        """The rows, oldest first (ties by key), `_PAGE` at a time through one cursor:
        memory does not grow with the store. Only the start waits for a lock: from there
        the read holds its snapshot, and a cursor that failed cannot go on where it was."""
        query = f"SELECT {', '.join(_COLUMNS)} FROM results ORDER BY created_at, key"
        cursor = self._patiently("read it", lambda: self._db.execute(query))
        try:
            while True:
                try:
                    page = cursor.fetchmany(_PAGE)
                except sqlite3.Error as exc:
                    raise self._unusable(exc) from None
                if not page:
                    return
                yield page
        finally:
            cursor.close()

    def features(self, spec_json: str) -> dict[str, str]:
        """What the endpoint and model of `spec_json` (see `spec_json()`) were found to
        support, e.g. {"structured": "json_schema", "logprobs": "absent"}."""

        def read() -> dict[str, str]:
            if not self._feature_columns():  # an older store, opened read-only
                return {}
            rows = self._db.execute(
                "SELECT feature, value FROM features WHERE spec = ?", (spec_json,)
            )
            return {feature: value for feature, value in rows}

        return self._patiently("read it", read)

    def put_features(self, spec_json: str, features: Mapping[str, str]) -> None:
        """Keep what was found out about an endpoint and model (newer values replace older)."""

        def write() -> None:  # each row commits alone; writing one again does no harm
            self._db.executemany(
                "INSERT INTO features (spec, feature, value) VALUES (?, ?, ?) "
                "ON CONFLICT(spec, feature) DO UPDATE SET value = excluded.value",
                [(spec_json, name, value) for name, value in features.items()],
            )

        self._patiently("save what endpoints support", write)

    def history(self, spec: str) -> list[tuple[Any, ...]]:
        """What the store's successes of one model (`str(spec)`, as results hold it) used,
        for a plan:
        per requested max_tokens (None where unset), the calls, their request characters
        (canonical JSON) and input tokens, their reply characters and output tokens (with
        the sum of squares, for a spread), their total latency and how many have one (a
        batched call has none). One pass over the results (the store has no index by
        model)."""

        def read() -> list[tuple[Any, ...]]:
            return list(
                self._db.execute(
                    "SELECT spec, json_extract(request, '$.max_tokens') AS cap, COUNT(*), "
                    "SUM(LENGTH(request)), SUM(input_tokens), SUM(LENGTH(text)), "
                    "SUM(output_tokens), SUM(output_tokens * output_tokens), SUM(latency_s), "
                    "SUM(latency_s > 0) "
                    "FROM results WHERE status = 'ok' AND spec = ? GROUP BY cap",
                    (spec,),
                )
            )

        return self._patiently("read it", read)

    def counts(self) -> dict[str, int]:
        def count() -> dict[str, int]:
            rows = self._db.execute("SELECT status, COUNT(*) FROM results GROUP BY status")
            return {status: n for status, n in rows}

        return self._patiently("read it", count)

    def absorb(self, other: Path) -> int:
        """Add every result of the store at `other` (a success never replaced by an
        error, as always), a page at a time; returns how many it holds."""
        kept = 0
        with Store(other, create=False) as source:
            for page in source._pages():
                results = [StoredResult.from_row(row) for row in page]
                kept += len(results) - len(self.put_many(results))
        return kept

    def export(self, path: str | Path) -> int:
        """Write every result to .jsonl or .parquet, a page at a time; returns the number
        written."""
        path = Path(path)
        written = 0
        with atomic_writer(path) as tmp:
            if path.suffix.lower() == ".parquet":
                import pyarrow as pa
                import pyarrow.parquet as pq

                schema = _parquet_schema()
                with pq.ParquetWriter(tmp, schema) as writer:
                    for page in self._pages():
                        flat = [_flat(StoredResult.from_row(row).record()) for row in page]
                        writer.write_batch(pa.RecordBatch.from_pylist(flat, schema=schema))
                        written += len(flat)
            else:
                with tmp.open("w", encoding="utf-8") as f:
                    for result in self:
                        f.write(canonical_json(result.record()) + "\n")
                        written += 1
        return written


def read_results(
    db: sqlite3.Connection, keys: Sequence[str], *, ok_only: bool = False
) -> dict[str, StoredResult]:
    """The stored results of `keys` (only the successes, with `ok_only`) by key."""
    found: dict[str, StoredResult] = {}
    only = " AND status = 'ok'" if ok_only else ""
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = db.execute(
            f"SELECT {', '.join(_COLUMNS)} FROM results WHERE key IN ({marks}){only}", chunk
        )
        for row in rows:
            result = StoredResult.from_row(row)
            if result.ok or not ok_only:  # (a success with unusable scores reads as an error)
                found[row[0]] = result
    return found


def _flat(record: dict[str, Any]) -> dict[str, Any]:
    """An export record with its nested values as canonical JSON text (for Parquet)."""
    logprobs = record["choice_logprobs"]
    return {
        **record,
        "request": canonical_json(record["request"]),
        "choice_logprobs": canonical_json(logprobs) if logprobs else None,
    }


def _parquet_schema() -> Any:
    """The Parquet columns of an export, typed whatever a page holds (a page of rows
    that all lack a cost still has a float column)."""
    import pyarrow as pa

    text, whole, real = pa.string(), pa.int64(), pa.float64()
    types = {
        "sample": whole,
        "input_tokens": whole,
        "output_tokens": whole,
        "attempts": whole,
        "latency_s": real,
        "cost_usd": real,
        "created_at": real,
    }
    return pa.schema([(name, types.get(name, text)) for name in _COLUMNS])


def absorb_and_keep(old: Path, store: Path, kept: Path) -> int:
    """Add every result of the store at `old` to `store`, then rename `old` (with any
    WAL a crash left beside it) to `kept`: never deleted, never absorbed twice. Returns
    how many results it held."""
    with Store(store) as target:
        moved = target.absorb(old)
    for suffix in ("", "-wal", "-shm"):
        part = old.with_name(old.name + suffix)
        if part.exists():
            part.rename(kept.with_name(kept.name + suffix))
    return moved


def adopt_directory_store(store: Path) -> None:
    """Absorb the working directory's store of an older eigenjury
    (./.eigenjury/store.sqlite) into `store`, the per-user one, once: its results are
    added (a success never replaced by an error), then the old file is renamed, not
    deleted, so a rerun from that folder pays for nothing and nothing is lost."""
    old = DIRECTORY_STORE
    if not old.is_file() or old.is_symlink():
        return
    if store.exists() and old.samefile(store):
        return  # the user data folder was pointed at it
    kept = old.with_name("store.sqlite.absorbed")
    moved = absorb_and_keep(old, store, kept)
    _print_note(
        f"absorbed {moved} stored calls of {old} (this folder's store, from an older "
        f"eigenjury) into the per-user store {store}; the old file is kept as {kept}"
    )
