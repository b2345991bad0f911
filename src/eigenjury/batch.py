"""Ad-hoc batches: a JSONL file of chat requests through any model, one result line each.

Each request line is an object with `id`, `messages` and optional sampling
parameters; it is validated field by field, and an error names the line and field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from eigenjury.engine.engine import Call, CallResult
from eigenjury.engine.store import SQLITE_INTEGER_MAX
from eigenjury.errors import InputError
from eigenjury.files import atomic_writer, read_jsonl
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import ChatRequest, Message


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


def read_requests(path: Path) -> list[RequestLine]:
    lines: list[RequestLine] = []
    seen: dict[str, int] = {}
    for number, line in read_jsonl(path, RequestLine):
        ident = str(line.id)
        if ident in seen:
            raise InputError(
                f"id '{ident}' was already used on line {seen[ident]}; ids must be unique",
                path=path,
                line=number,
            )
        seen[ident] = number
        lines.append(line)
    if not lines:
        raise InputError("the file has no requests; expected one JSON object a line", path=path)
    return lines


def batch_calls(lines: list[RequestLine], spec: ModelSpec) -> list[Call]:
    return [Call(spec, line.request(), line.sample, role="batch") for line in lines]


def result_record(line: RequestLine, result: CallResult) -> dict[str, Any]:
    c = result.completion
    return {
        "id": line.id,
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


def write_results(path: Path, lines: list[RequestLine], results: list[CallResult]) -> None:
    """Write atomically, in the order of the request file."""
    with atomic_writer(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for line, result in zip(lines, results, strict=True):
            f.write(json.dumps(result_record(line, result), ensure_ascii=False) + "\n")
