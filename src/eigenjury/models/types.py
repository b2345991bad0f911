"""The one seam for model access: a chat request in, a completion out.

These are plain frozen dataclasses: millions of them pass through the engine, and
their identity (what determines a result) is hashed into the store's keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from eigenjury.models.verdict_format import VerdictFormat

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """Everything that determines a completion, apart from the model.

    `choices` constrains the reply to one of the given strings where the provider can
    (local models: by grammar); with `logprobs` as well, the completion carries each
    choice's log-probability (option scoring). `grammar` is a GBNF grammar (local).
    None for a sampling parameter means the provider's default. `verdict_format` forces
    how a served model is asked for one of the `choices` (see models.verdict_format);
    "auto" lets the provider use the best its endpoint supports.
    """

    messages: tuple[Message, ...]
    temperature: float | None = None
    max_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()
    choices: tuple[str, ...] | None = None
    grammar: str | None = None
    logprobs: bool = False
    verdict_format: VerdictFormat = "auto"

    @classmethod
    def chat(cls, *turns: tuple[Role, str], **params: Any) -> ChatRequest:
        """ChatRequest.chat(("system", "..."), ("user", "..."), temperature=0)."""
        return cls(tuple(Message(role, content) for role, content in turns), **params)

    def identity(self) -> dict[str, Any]:
        """A JSON-ready description of the request, for hashing and storing."""
        out: dict[str, Any] = {"messages": [[m.role, m.content] for m in self.messages]}
        for name in ("temperature", "max_tokens", "top_p", "seed", "grammar"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.stop:
            out["stop"] = list(self.stop)
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.logprobs:
            out["logprobs"] = True
        if self.verdict_format != "auto":
            out["verdict_format"] = self.verdict_format
        return out


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer. `cost_usd` is None when the model has no known price."""

    text: str
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cost_usd: float | None = None
    choice_logprobs: Mapping[str, float] | None = None


def unusable_scores(scores: Mapping[str, Any] | None) -> str | None:
    """What makes label scores unusable, e.g. "A = nan", or None when they are usable.

    A log-probability must be a finite number: NaN or an infinity (as a broken server
    sends them) can neither be computed with nor written as JSON, so a completion that
    carries one is a malformed reply, never a success."""
    for label, value in (scores or {}).items():
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            return f"{label} = {value!r}"
    return None


class Provider(Protocol):
    """A model endpoint. Implementations raise `ProviderError` subclasses, never return
    error text as a completion."""

    async def generate(self, request: ChatRequest) -> Completion: ...

    async def aclose(self) -> None: ...
