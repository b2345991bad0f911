"""Limits a server states (x-ratelimit headers) as the ceiling, and the concurrency an
endpoint was found to bear, kept in the store for the next run and shown in the
accounting."""

from __future__ import annotations

import asyncio
import contextlib
import types
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from eigenjury.engine import Call, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.engine import limits as limits_module
from eigenjury.engine.engine import endpoint_key
from eigenjury.engine.limits import STATED_SHARE, EndpointLimiter
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.providers.http import stated_limits
from eigenjury.records import AccountingRecord
from eigenjury.reports.accounting import print_accounting
from eigenjury.testing.server import FaultServer, Throttle

RETRY = RetryPolicy(max_attempts=30, timeout_s=5.0, backoff_s=0.05, backoff_max_s=1.0)


def test_stated_limits_are_read_from_openai_and_anthropic_headers() -> None:
    assert stated_limits(
        {"x-ratelimit-limit-requests": "500", "x-ratelimit-limit-tokens": "200000"}
    ) == {"rpm": 500.0, "tpm": 200000.0}
    anthropic = {
        "anthropic-ratelimit-requests-limit": "50",
        "anthropic-ratelimit-tokens-limit": "4e4",
        "anthropic-ratelimit-output-tokens-limit": "8000",  # apart: not the combined limit
    }
    assert stated_limits(anthropic) == {"rpm": 50.0, "tpm": 40000.0}
    # junk, zero, negative and infinite values are not limits
    for junk in ("", "many", "0", "-5", "inf", "nan"):
        assert stated_limits({"x-ratelimit-limit-requests": junk}) == {}


def test_a_stated_rate_becomes_the_ceiling_unless_a_lower_one_is_configured() -> None:
    """The lowest of the configured and the stated rate holds, and follows the server's
    statement both ways; models of one endpoint stating their own limits (OpenAI's are
    per model) add up, rather than the ceiling flapping between them."""

    async def go() -> tuple[Any, ...]:
        free = EndpointLimiter(EndpointLimits(concurrency=8))
        free.heed("m", {"rpm": 600.0})
        lower = EndpointLimiter(EndpointLimits(concurrency=8, rpm=100))
        lower.heed("m", {"rpm": 600.0})
        tokens = EndpointLimiter(EndpointLimits(concurrency=8, tpm=100_000))
        tokens.heed("m", {"tpm": 50_000.0})
        halved = tokens._tokens.rate if tokens._tokens else None
        tokens.heed("m", {"tpm": 1e6})  # the server allows more again: back to the config
        shared = EndpointLimiter(EndpointLimits(concurrency=8))
        for _ in range(3):
            shared.heed("big", {"rpm": 30_000.0})
            shared.heed("small", {"rpm": 500.0})
        return free, lower, halved, tokens, shared

    free, lower, halved, tokens, shared = asyncio.run(go())
    assert free._requests is not None and free._requests.rate == 600 * STATED_SHARE / 60
    assert lower._requests is not None and lower._requests.rate == 100 / 60
    assert halved == 50_000 * STATED_SHARE / 60
    assert tokens._tokens is not None and tokens._tokens.rate == 100_000 / 60
    assert shared._requests is not None
    assert shared._requests.rate == pytest.approx(30_500 * STATED_SHARE / 60)


def run_calls(base: str, store: Path, n: int, concurrency: int, prefix: str) -> dict[str, Any]:
    """`n` distinct calls through a fresh engine on `store`; its accounting record."""
    spec = ModelSpec.parse(f"openai-compatible:m@{base}")

    async def go() -> dict[str, Any]:
        engine = Engine(
            Store(store), limits=EndpointLimits(concurrency=concurrency), retry=RETRY,
            progress=False,
        )  # fmt: skip
        async with engine:
            calls = (Call(spec, ChatRequest.chat(("user", f"{prefix} {k}"))) for k in range(n))
            async with contextlib.aclosing(engine.stream(calls, ordered=False)) as results:
                assert all([r.ok async for r in results])
        engine.store.close()
        return engine.accounting_record()

    return asyncio.run(go())


def serve(work: Any, throttle: Throttle) -> Any:
    async def go() -> Any:
        server = FaultServer(throttle=throttle)
        base = await server.start()
        try:
            return await asyncio.to_thread(work, base, server)
        finally:
            await server.stop()

    return asyncio.run(go())


def test_a_server_stating_its_rate_is_kept_under_it(tmp_path: Path) -> None:
    """At 40 requests a second, stated in x-ratelimit headers: the engine paces itself
    under it after the first answer, so almost nothing is refused; the accounting says
    what the server stated."""

    def work(base: str, server: FaultServer) -> tuple[dict[str, Any], int, int]:
        record = run_calls(base, tmp_path / "s.sqlite", 160, 32, "q")
        return record, server.throttled, server.requests

    record, refused, requests = serve(work, Throttle(rate=40, retry_after_s=0.2, headers=True))
    (endpoint,) = AccountingRecord.model_validate(record).endpoints
    assert endpoint.stated_rpm == 2400 and endpoint.rate_limited == refused
    # the first burst (before any header was read) may be refused; then none
    assert refused <= 40 and requests == 160 + refused


def test_the_concurrency_a_throttling_server_bears_is_kept_for_the_next_run(
    tmp_path: Path,
) -> None:
    def work(base: str, server: FaultServer) -> tuple[dict[str, Any], dict[str, Any], Any]:
        first = run_calls(base, tmp_path / "s.sqlite", 300, 64, "a")
        with Store(tmp_path / "s.sqlite") as store:
            kept = store.features(endpoint_key(base))
        second = run_calls(base, tmp_path / "s.sqlite", 100, 64, "b")
        return first, second, kept

    throttle = Throttle(rate=100, per_in_flight_s=0.002, retry_after_s=0.3)
    first, second, kept = serve(work, throttle)
    (one,) = AccountingRecord.model_validate(first).endpoints
    (two,) = AccountingRecord.model_validate(second).endpoints
    assert one.rate_limited > 0 and one.started_at == 64 and one.ended_at < 64
    assert kept["concurrency"] == str(one.ended_at)
    assert one.paced_at is not None and kept["pace"] == f"{one.paced_at:.6g}"
    # the second run starts where the first ended
    assert two.started_at == one.ended_at and two.paced_from == float(kept["pace"])
    console = Console(record=True, width=200)
    print_accounting(console, AccountingRecord.model_validate(first))
    text = console.export_text()
    assert f"concurrency 64 -> {one.ended_at} (kept for the next run)" in text
    assert f"{one.rate_limited} answers were 429s" in text


def test_a_throttling_server_is_paced_and_a_stray_429_is_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """429s that are a share of the last second's answers pace the requests at 0.9 of
    those the server accepted (read off a whole second: the first burst sets none), and
    from then on the pace (not the calls in flight) answers them; it rises by a
    sixty-fourth a second. One 429 among many answers, or 429s with nothing accepted (a
    closed quota), set no pace. Refusals that stay as many once paced do not follow the
    rate: pacing stops for the run."""
    clock = [100.0]
    monkeypatch.setattr(limits_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))

    async def go() -> None:
        limiter = EndpointLimiter(EndpointLimits(concurrency=32))
        limiter.on_success()
        for _ in range(3):
            limiter.on_rate_limit()  # the first burst: the calls in flight cut, no pace
        assert limiter.pace is None and limiter.limit == 24
        clock[0] += 1.0
        limiter.limit = 32
        for _ in range(80):
            limiter.on_success()
        limiter.on_rate_limit()  # one among 81: a stray refusal slows nothing
        assert limiter.pace is None and limiter.limit == 32
        for _ in range(9):
            limiter.on_rate_limit()  # ten of ninety: throttled
        assert limiter.pace == pytest.approx(0.9 * 80) and limiter.limit == 24
        assert limiter._requests is not None and limiter._requests.rate == pytest.approx(72)
        clock[0] += 1.5
        limiter.on_rate_limit()
        limiter.on_rate_limit()
        assert limiter.limit == 24  # paced: the calls in flight stay
        paces = []
        for _ in range(3):
            clock[0] += 1.0
            limiter.on_success()
            paces.append(limiter.pace)
        # (a pace rises only while it binds: below twice the answers of the last second)
        assert paces == [limiter.pace] * 3
        for _ in range(3):
            clock[0] += 1.0
            for _ in range(60):
                limiter.on_success()
        assert limiter.pace == pytest.approx(72 + 1.125 + 1.1426 + 1.1604, abs=1e-3)
        assert limiter.learned() == {
            "concurrency": str(limiter.limit),
            "pace": f"{limiter.pace:.6g}",
        }
        closed = EndpointLimiter(EndpointLimits(concurrency=8))
        for _ in range(20):
            closed.on_rate_limit()
        assert closed.pace is None and closed.limit == 6
        # refusing at random, a third of the answers: paced, then found not to follow
        randomly = EndpointLimiter(EndpointLimits(concurrency=16))
        paced = []
        for k in range(4 * 60):  # 60 answers a second, spread over it, for 4 s
            clock[0] += 1 / 60
            if k % 3:
                randomly.on_success()
            else:
                randomly.on_rate_limit()
            paced.append(randomly.pace)
        assert any(p is not None for p in paced)  # paced after its first whole second
        assert randomly.pace is None and not randomly.pacing and randomly._requests is None
        cut = randomly.limit
        for _ in range(60):  # judged random: its refusals slow nothing any more
            clock[0] += 1 / 60
            randomly.on_rate_limit()
        assert randomly.limit == cut and randomly.learned() == {}

    asyncio.run(go())
