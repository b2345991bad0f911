"""The streaming engine against a plain sequential twin: one call at a time, in order,
a dict for the store. Whatever the engine does for speed (lanes per endpoint, a window
read ahead, a reorder buffer, batched commits, sharing one answer among duplicates), it
must give each call what the twin gives it, ask the model once per distinct key, and
leave the store holding what the twin's dict holds."""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from eigenjury.engine import Call, EndpointLimits, Engine, Store
from eigenjury.engine.store import request_key
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage
from eigenjury.models.errors import BadRequestError

SPEC = ModelSpec.parse("scripted:echo")


class Deterministic:
    """Replies by the request and a seeded latency; a question containing "bad" is a
    bad request (not retryable). Counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def generate(self, request: ChatRequest) -> Completion:
        text = request.messages[-1].content
        self.asked.append(text)
        await asyncio.sleep(random.Random(text).random() * 0.004)
        if "bad" in text:
            raise BadRequestError(f"refused: {text}", status=400)
        return Completion(f"answer to {text} at {request.temperature}", "stop", Usage(3, 5))

    async def aclose(self) -> None:
        return None


@dataclass(frozen=True)
class Outcome:
    key: str
    text: str | None
    error_kind: str | None


async def sequential_twin(calls: list[Call], known: dict[str, Outcome]) -> list[Outcome]:
    """The reference: each call in turn, looked up in `known` (the store) by its key,
    else asked of the model and remembered. A stored error is asked again, once a run
    (a rerun tries failed calls again); duplicates within a run share one answer."""
    provider = Deterministic()
    asked: set[str] = set()
    out = []
    for c in calls:
        key = request_key(c.spec, c.request, c.sample)
        stored_success = key in known and known[key].error_kind is None
        if not stored_success and key not in asked:
            asked.add(key)
            try:
                reply = await provider.generate(c.request)
                known[key] = Outcome(key, reply.text, None)
            except BadRequestError as exc:
                known[key] = Outcome(key, None, exc.kind)
        out.append(known[key])
    return out


def engine_outcomes(
    calls: list[Call], store: Path, *, ordered: bool, concurrency: int
) -> tuple[list[Outcome], Deterministic]:
    provider = Deterministic()

    async def go() -> list[Outcome]:
        engine = Engine(
            Store(store),
            providers={str(SPEC): provider},
            progress=False,
            limits=EndpointLimits(concurrency=concurrency),
        )
        async with engine, contextlib.aclosing(engine.stream(calls, ordered=ordered)) as run:
            got = {}
            async for r in run:
                text = r.completion.text if r.completion is not None else None
                got[r.call.tag] = Outcome(r.key, text, r.error_kind)
        return [got[i] for i in range(len(calls))]

    return asyncio.run(go()), provider


def workload(seed: int, n: int) -> list[Call]:
    """n calls drawn from a pool a third their size: repeated questions, samples,
    temperatures and bad requests, in a random order; the tag is the call's position."""
    rng = random.Random(seed)
    pool = [
        (f"{'bad ' if rng.random() < 0.1 else ''}q{i}", rng.choice([0.0, 0.7]), rng.randrange(2))
        for i in range(n // 3)
    ]
    drawn = [rng.choice(pool) for _ in range(n)]
    return [
        Call(SPEC, ChatRequest.chat(("user", q), temperature=t), sample=s, tag=i)
        for i, (q, t, s) in enumerate(drawn)
    ]


@pytest.mark.parametrize(("seed", "ordered", "concurrency"), [(1, True, 8), (2, False, 32)])
def test_the_engine_gives_what_a_sequential_twin_gives(
    tmp_path: Path, seed: int, ordered: bool, concurrency: int
) -> None:
    calls = workload(seed, 300)
    store = tmp_path / "store.sqlite"
    known: dict[str, Outcome] = {}
    # a first run over part of the calls fills the store, as an earlier session would
    first = calls[:100]
    want_first = asyncio.run(sequential_twin(first, known))
    got_first, provider = engine_outcomes(first, store, ordered=ordered, concurrency=concurrency)
    assert got_first == want_first
    assert len(provider.asked) == len({o.key for o in want_first})  # once per distinct key
    # the whole list: stored successes are read back, the rest asked once each
    succeeded = {k for k, o in known.items() if o.error_kind is None}
    want = asyncio.run(sequential_twin(calls, known))
    got, provider = engine_outcomes(calls, store, ordered=ordered, concurrency=concurrency)
    assert got == want
    assert len(provider.asked) == len({o.key for o in want} - succeeded)
    assert any(o.error_kind == "bad_request" for o in got) and any(o.text for o in got)
    with Store(store) as opened:
        stored = opened.get_many(known)
    assert set(stored) == set(known)
    for key, outcome in known.items():
        completion = stored[key].completion
        text = completion.text if completion is not None else None
        assert (text, stored[key].error_kind) == (outcome.text, outcome.error_kind)
