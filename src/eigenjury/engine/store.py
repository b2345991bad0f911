"""The store: every call result, keyed by a hash of everything that determines it.

SQLite in WAL mode. It is the cache, the journal and the resume point at once: the
engine commits a result before anyone uses it, so a run killed at any moment
(kill -9 included) loses at most calls that were still in flight, and rerunning
reuses everything committed. Failed calls are stored as errors (kind and message),
never as text, and are tried again by the next run; a success is never overwritten.
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eigenjury.files import pyarrow
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Completion, Usage

KEY_VERSION = 1
_CHUNK = 500  # keys per SELECT ... IN (...)

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
"""
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
    + " WHERE results.status != 'ok'"
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
        if r["status"] == "ok":
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


class Store:
    """A SQLite file of results. One writer at a time; readers never block it (WAL).

    Not thread-safe by itself: the engine drives it from one thread.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a committed transaction survives a crash of this process;
        # only an OS crash or power loss can drop the last few.
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=10000")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, keys: Iterable[str]) -> dict[str, StoredResult]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, StoredResult] = {}
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT {', '.join(_COLUMNS)} FROM results WHERE key IN ({marks})", chunk
            )
            for row in rows:
                found[row[0]] = StoredResult.from_row(row)
        return found

    def get(self, key: str) -> StoredResult | None:
        return self.get_many([key]).get(key)

    def put_many(self, results: Sequence[StoredResult]) -> None:
        """Commit results in one transaction. An error never replaces a success."""
        if not results:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(_UPSERT, [r.row() for r in results])
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def __iter__(self) -> Iterator[StoredResult]:
        rows = self._db.execute(f"SELECT {', '.join(_COLUMNS)} FROM results ORDER BY created_at")
        for row in rows:
            yield StoredResult.from_row(row)

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT status, COUNT(*) FROM results GROUP BY status")
        return {status: n for status, n in rows}

    def export(self, path: str | Path) -> int:
        """Write every result to .jsonl or .parquet; returns the number written."""
        path = Path(path)
        records = [r.record() for r in self]
        tmp = path.with_name(f".{path.name}.tmp")
        if path.suffix.lower() == ".parquet":
            pa, pq = pyarrow(path)
            flat = [
                {
                    **r,
                    "request": canonical_json(r["request"]),
                    "choice_logprobs": canonical_json(r["choice_logprobs"])
                    if r["choice_logprobs"]
                    else None,
                }
                for r in records
            ]
            pq.write_table(pa.Table.from_pylist(flat), tmp)
        else:
            with tmp.open("w", encoding="utf-8") as f:
                for r in records:
                    f.write(canonical_json(r) + "\n")
        tmp.replace(path)
        return len(records)
