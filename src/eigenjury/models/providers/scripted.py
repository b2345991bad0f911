"""Deterministic model stand-ins for tests, simulations and dry runs.

`scripted:NAME` in a spec names a script registered here: a function from a request
to reply text. Latency and failures can be injected, seeded, so the engine's retry,
timeout and accounting paths run offline exactly as against a real endpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Callable

from eigenjury.models.errors import ERROR_KINDS, ProviderError
from eigenjury.models.spec import SpecError
from eigenjury.models.types import ChatRequest, Completion, Usage

Script = Callable[[ChatRequest], str]


def _last_user(request: ChatRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def _digest(request: ChatRequest) -> int:
    text = repr(request.identity()).encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:8], "big")


def _echo(request: ChatRequest) -> str:
    return f"echo: {_last_user(request)}"


def _pick_choice(request: ChatRequest) -> str:
    """A choice picked by the request's hash: deterministic, and spread over the choices."""
    options = request.choices or ("A", "B")
    return options[_digest(request) % len(options)]


SCRIPTS: dict[str, Script] = {"echo": _echo, "choice": _pick_choice}


def register_script(name: str, script: Script) -> None:
    """Make `scripted:NAME` answer with `script(request)`."""
    SCRIPTS[name] = script


def word_count(text: str) -> int:
    return len(text.split())


class ScriptedProvider:
    """Replies from a script; optional latency and a seeded share of injected failures.

    `calls` counts generate() calls and `successes` the replies given, per request
    identity, so tests can check that nothing was asked twice (unless
    `count_successes` is off: a spec's provider, which may make millions of calls).
    """

    def __init__(
        self,
        script: Script | str = "echo",
        *,
        latency_s: float = 0.0,
        failure_rate: float = 0.0,
        failure_kinds: tuple[str, ...] = ("server",),
        seed: int = 0,
        count_successes: bool = True,
    ) -> None:
        if isinstance(script, str):
            if script not in SCRIPTS:
                raise SpecError(
                    f"no scripted model '{script}' (model spec 'scripted:{script}'); known: "
                    f"{', '.join(sorted(SCRIPTS))}"
                )
            script = SCRIPTS[script]
        self.script = script
        self.latency_s = latency_s
        self.failure_rate = failure_rate
        self.failure_kinds = failure_kinds
        self._rng = random.Random(seed)
        self.calls = 0
        self.successes: dict[str, int] = {}
        self.count_successes = count_successes

    async def generate(self, request: ChatRequest) -> Completion:
        self.calls += 1
        start = time.perf_counter()
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if self._rng.random() < self.failure_rate:
            kind = self._rng.choice(self.failure_kinds)
            error: type[ProviderError] = ERROR_KINDS[kind]
            raise error(f"injected {kind} failure", retry_after=0.0)
        text = self.script(request)
        if self.count_successes:
            key = repr(request.identity())
            self.successes[key] = self.successes.get(key, 0) + 1
        return Completion(
            text=text,
            finish_reason="stop",
            usage=Usage(sum(word_count(m.content) for m in request.messages), word_count(text)),
            latency_s=time.perf_counter() - start,
        )

    async def aclose(self) -> None:
        return None
