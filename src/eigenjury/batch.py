"""Ad-hoc batches: a JSONL file of chat requests through any model, one result line each.

Each request line is an object with `id`, `messages` and optional sampling
parameters; it is validated field by field, and an error names the line and field.
The file is read lazily, as the engine takes calls, and results are written as they
arrive, so memory does not grow with the number of requests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import sqlite3
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eigenjury.engine.engine import Call, CallResult
from eigenjury.engine.store import SQLITE_INTEGER_MAX
from eigenjury.errors import InputError
from eigenjury.files import OutputFile, read_jsonl
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Message

CHUNK = 256  # request lines validated and checked for repeated ids together


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class RequestLine(BaseModel):
    """One line of a batch file."""

    model_config = ConfigDict(extra="forbid")
    id: str | int
    messages: list[_Message] = Field(min_length=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    # Whole numbers go to servers and the store as 64-bit integers. Seeds are never
    # negative: some servers (llama.cpp) take -1 for "a random seed".
    max_tokens: int | None = Field(None, ge=1, le=SQLITE_INTEGER_MAX)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    seed: int | None = Field(None, ge=0, le=SQLITE_INTEGER_MAX)
    stop: list[str] | None = None
    sample: int = Field(0, ge=0, le=SQLITE_INTEGER_MAX)
    choices: list[str] | None = Field(None, min_length=1)
    logprobs: bool = False

    def request(self) -> ChatRequest:
        return ChatRequest(
            tuple(Message(m.role, m.content) for m in self.messages),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            top_p=self.top_p,
            seed=self.seed,
            stop=tuple(self.stop or ()),
            choices=None if self.choices is None else tuple(self.choices),
            logprobs=self.logprobs,
        )


class SeenIds:
    """The ids used so far and the line of each, in a temporary SQLite database (SQLite
    deletes it when closed): millions of ids cost disk pages, not Python objects."""

    def __init__(self) -> None:
        self._db = sqlite3.connect("", isolation_level=None)  # "": a temporary file
        self._db.execute("PRAGMA journal_mode=MEMORY")  # (OFF would break ROLLBACK)
        self._db.execute(
            "CREATE TABLE ids (id TEXT PRIMARY KEY, line INTEGER NOT NULL) WITHOUT ROWID"
        )

    def close(self) -> None:
        self._db.close()

    def add(self, ids: Sequence[tuple[str, int]]) -> tuple[int, int] | None:
        """Record (id, line) pairs. If an id was used before (on an earlier line, or
        earlier in `ids`), record only the pairs before it and return its index in `ids`
        and the line it was first used on."""
        self._db.execute("BEGIN")
        before = self._db.total_changes
        self._db.executemany("INSERT OR IGNORE INTO ids VALUES (?, ?)", ids)
        if self._db.total_changes - before == len(ids):
            self._db.execute("COMMIT")
            return None
        self._db.execute("ROLLBACK")  # a repeated id in this chunk: find the first, once
        for index, (ident, line) in enumerate(ids):
            earlier = self._db.execute("SELECT line FROM ids WHERE id = ?", (ident,)).fetchone()
            if earlier is not None:
                return index, int(earlier[0])
            self._db.execute("INSERT INTO ids VALUES (?, ?)", (ident, line))
        return None


def _take(
    rows: Iterator[tuple[int, RequestLine]], n: int
) -> tuple[list[tuple[int, RequestLine]], InputError | None]:
    """Up to `n` rows, and the error of a bad line that ended them early."""
    chunk: list[tuple[int, RequestLine]] = []
    try:
        chunk.extend(itertools.islice(rows, n))  # (keeps the rows read before an error)
    except InputError as exc:
        return chunk, exc
    return chunk, None


def read_requests(path: Path) -> Iterator[tuple[int, RequestLine]]:
    """(line number, request) for every line of a batch file, read a chunk at a time.

    A bad line or a repeated id raises InputError (naming the line) only once every line
    before it has been handed over, so their calls are made and stored: the message says
    so, and that a rerun after the fix repeats nothing. An empty file is an error too."""
    rows = read_jsonl(path, RequestLine)
    done = 0
    with contextlib.closing(SeenIds()) as seen:
        while True:
            chunk, bad = _take(rows, CHUNK)
            repeated = seen.add([(str(line.id), number) for number, line in chunk])
            if repeated is not None:
                index, earlier = repeated
                yield from chunk[:index]
                number, line = chunk[index]
                bad = InputError(
                    f"id '{line.id}' was already used on line {earlier}; ids must be unique",
                    path=path,
                    line=number,
                )
                chunk = chunk[:index]
            else:
                yield from chunk
            done += len(chunk)
            if bad is not None:
                raise _after(bad, done)
            if len(chunk) < CHUNK:
                break
    if not done:
        raise InputError("the file has no requests; expected one JSON object a line", path=path)


def _after(bad: InputError, done: int) -> InputError:
    """`bad`, saying that the `done` requests before it are in the store."""
    if not done:
        return bad
    kept = "the result before it is" if done == 1 else f"the {done} results before it are"
    return InputError(
        f"{bad.message}; {kept} in the store; fix the line and rerun: nothing done is repeated",
        path=bad.path,
        line=bad.line,
    )


def batch_calls(path: Path, spec: ModelSpec) -> Iterator[Call]:
    """The calls of a batch file, read lazily; each carries its request's id as its tag."""
    for _, line in read_requests(path):
        yield Call(spec, line.request(), line.sample, role="batch", tag=line.id)


def result_record(result: CallResult) -> dict[str, Any]:
    c = result.completion
    return {
        "id": result.call.tag,
        "text": c.text if c else None,
        "finish_reason": c.finish_reason if c else None,
        "usage": {"input_tokens": c.usage.input_tokens, "output_tokens": c.usage.output_tokens}
        if c
        else None,
        "latency_s": round(c.latency_s, 4) if c else None,
        "cost": c.cost_usd if c else None,
        "choice_logprobs": dict(c.choice_logprobs) if c and c.choice_logprobs else None,
        "error": None if c else {"kind": result.error_kind, "message": result.error_message},
        "cached": result.cached,
        "attempts": result.attempts,
    }


@dataclass
class Written:
    """What a batch wrote: how many results, and how many of them errors."""

    results: int = 0
    failed: int = 0


async def write_results(out: OutputFile, results: AsyncIterator[CallResult]) -> Written:
    """Write each result as it arrives, to the temporary file of `out` (entered by the
    caller, who commits it once every result is in: a failed or interrupted run leaves no
    half file)."""
    written = Written()
    with out.writing() as f:
        async for result in results:
            f.write(json.dumps(result_record(result), ensure_ascii=False) + "\n")
            written.results += 1
            written.failed += not result.ok
    return written
