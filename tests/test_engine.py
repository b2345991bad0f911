"""The engine under faults, limits, budgets, interruption, and with secrets about."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from eigenjury.engine import Budget, Call, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.models import ChatRequest, ModelSpec, Price, PriceTable
from eigenjury.models.providers.scripted import ScriptedProvider
from eigenjury.testing.server import Faults, FaultServer

FAST_RETRY = RetryPolicy(max_attempts=10, timeout_s=0.5, backoff_s=0.01, backoff_max_s=0.05)


def calls_for(spec: ModelSpec, n: int, prefix: str = "q") -> list[Call]:
    return [Call(spec, ChatRequest.chat(("user", f"{prefix} {i}")), role="judge") for i in range(n)]


def serve(test: Callable[[str, FaultServer], Awaitable[Any]], **options: Any) -> Any:
    async def go() -> Any:
        server = FaultServer(**options)
        base = await server.start()
        try:
            return await test(base, server)
        finally:
            await server.stop()

    return asyncio.run(go())


def test_thirty_percent_faults_of_every_kind(tmp_path: Path) -> None:
    """Every request ends answered or recorded as an error; none is answered twice."""

    async def go(base: str, server: FaultServer) -> Any:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        calls = calls_for(spec, 400)
        async with Engine(
            Store(tmp_path / "s.sqlite"),
            retry=FAST_RETRY,
            progress=False,
            limits=EndpointLimits(concurrency=32),
        ) as engine:
            first = await engine.run(calls)
            sent = server.requests
            again = await engine.run(calls)
            return first, again, sent, engine.accounting.record()

    first, again, sent, record = serve(
        go, latency_s=0.01, faults=Faults.uniform(0.3, hang_s=3.0), seed=3
    )
    assert all(r.ok or r.error_kind for r in first)
    ok = [r for r in first if r.ok]
    assert len(ok) >= 390  # 10 attempts at 30% faults: all but a handful succeed
    assert all(
        r.completion.text == f"reply to: q {i}"  # type: ignore[union-attr]
        for i, r in enumerate(first)
        if r.ok
    )
    assert sent > 400  # faults were really served and retried
    assert record["total"]["cached"] == 400 and record["total"]["calls"] == 400
    assert [r.completion for r in again] == [r.completion for r in first]


def test_no_successful_call_is_made_twice(tmp_path: Path) -> None:
    async def go(base: str, server: FaultServer) -> dict[str, int]:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        async with Engine(Store(tmp_path / "s.sqlite"), retry=FAST_RETRY, progress=False) as e:
            await e.run(calls_for(spec, 200))
            await e.run(calls_for(spec, 250))  # 200 cached, 50 new
        return server.stats()

    stats = serve(go, faults=Faults.uniform(0.3, hang_s=3.0), seed=4)
    assert stats["most_successes_for_one_request"] == 1
    assert stats["distinct_successes"] == stats["successes"] <= 250


def test_errors_are_stored_as_errors_and_retried_next_time(tmp_path: Path) -> None:
    spec = ModelSpec.parse("scripted:echo")
    broken = ScriptedProvider("echo", failure_rate=1.0, failure_kinds=("bad_request",))
    store = Store(tmp_path / "s.sqlite")
    engine = Engine(store, providers={str(spec): broken}, retry=FAST_RETRY, progress=False)
    results = engine.run_sync(calls_for(spec, 5))
    assert all(r.error_kind == "bad_request" and r.attempts == 1 for r in results)
    assert broken.calls == 5  # not retryable: one attempt each
    stored = store.get(results[0].key)
    assert stored is not None and stored.completion is None and stored.error_kind == "bad_request"
    healed = ScriptedProvider("echo")
    results = Engine(store, providers={str(spec): healed}, progress=False).run_sync(
        calls_for(spec, 5)
    )
    assert all(r.ok for r in results) and healed.calls == 5
    kept = Engine(store, providers={str(spec): broken}, retry_errors=False, progress=False)
    assert all(r.ok and r.cached for r in kept.run_sync(calls_for(spec, 5)))


def test_timeouts_and_attempt_counts(tmp_path: Path) -> None:
    async def go(base: str, server: FaultServer) -> Any:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        policy = RetryPolicy(max_attempts=3, timeout_s=0.2, backoff_s=0.01)
        async with Engine(Store(tmp_path / "s.sqlite"), retry=policy, progress=False) as e:
            return await e.run(calls_for(spec, 3)), server.requests

    results, requests = serve(go, faults=Faults(hang=1.0, hang_s=5.0))
    assert all(r.error_kind == "timeout" and r.attempts == 3 for r in results)
    assert requests == 9


def test_rate_limits_hold(tmp_path: Path) -> None:
    spec = ModelSpec.parse("scripted:echo")
    engine = Engine(
        Store(tmp_path / "s.sqlite"), progress=False, limits=EndpointLimits(concurrency=50, rpm=600)
    )  # 10 per second
    start = time.monotonic()
    engine.run_sync(calls_for(spec, 25))
    # a bucket of one second's worth (10) may go at once; the other 15 take 1.5 s
    assert time.monotonic() - start >= 1.4


def test_concurrency_backs_off_on_429(tmp_path: Path) -> None:
    async def go(base: str, server: FaultServer) -> Any:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        async with Engine(
            Store(tmp_path / "s.sqlite"),
            retry=FAST_RETRY,
            progress=False,
            limits=EndpointLimits(concurrency=32),
        ) as engine:
            results = await engine.run(calls_for(spec, 60))
            return results, engine.limiters[base.rstrip("/")]

    results, limiter = serve(go, faults=Faults(rate_limit=0.5, retry_after_s=0.01), seed=1)
    assert all(r.ok for r in results)
    assert limiter.rate_limited > 0 and limiter.limit < 32


@pytest.mark.parametrize("cap", ["tokens", "cost"])
def test_budget_cap_stops_at_the_cap(tmp_path: Path, cap: str) -> None:
    spec = ModelSpec.parse("scripted:echo")
    prices = PriceTable({"scripted:echo": Price(1_000_000.0, 1_000_000.0)})  # $1 a token
    budget = Budget(max_tokens=100) if cap == "tokens" else Budget(max_cost_usd=100.0)
    calls = [Call(spec, ChatRequest.chat(("user", f"q {i}"), max_tokens=5)) for i in range(40)]
    engine = Engine(
        Store(tmp_path / "s.sqlite"),
        budget=budget,
        prices=prices,
        progress=False,
        limits=EndpointLimits(concurrency=4),
    )
    results = engine.run_sync(calls)
    total = engine.accounting.record()["total"]
    spent = total["cost_usd"] if cap == "cost" else total["input_tokens"] + total["output_tokens"]
    made = [r for r in results if r.ok]
    skipped = [r for r in results if r.error_kind == "budget"]
    assert made and skipped and len(made) + len(skipped) == 40
    assert spent <= 100  # never over the cap ...
    assert spent >= 100 - 2 * 9  # ... and stopped only when the next calls could not fit
    assert engine.store.counts() == {"ok": len(made)}  # skipped calls are not stored


def test_interrupted_run_keeps_finished_calls(tmp_path: Path) -> None:
    spec = ModelSpec.parse("scripted:echo")
    slow = ScriptedProvider("echo", latency_s=0.05)
    store = Store(tmp_path / "s.sqlite")

    async def interrupted() -> None:
        engine = Engine(
            store,
            providers={str(spec): slow},
            progress=False,
            limits=EndpointLimits(concurrency=4),
            flush_s=0.01,
        )
        task = asyncio.create_task(engine.run(calls_for(spec, 200)))
        await asyncio.sleep(0.6)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(interrupted())
    kept = store.counts().get("ok", 0)
    assert 10 < kept < 200
    fresh = ScriptedProvider("echo")
    results = Engine(store, providers={str(spec): fresh}, progress=False).run_sync(
        calls_for(spec, 200)
    )
    assert all(r.ok for r in results)
    assert fresh.calls == 200 - kept  # finished calls were not made again
    assert sum(slow.successes.values()) - kept <= 4  # only calls in flight were lost


def test_secrets_never_reach_store_exports_or_messages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "sk-planted-9f8e7d6c5b4a"
    monkeypatch.setenv("PLANTED_KEY", secret)

    async def go(base: str, server: FaultServer) -> Any:
        good = ModelSpec.from_value(
            {"spec": f"openai-compatible:ok@{base}", "api_key_env": "PLANTED_KEY"}
        )
        async with Engine(Store(tmp_path / "s.sqlite"), retry=FAST_RETRY) as e:
            return await e.run(calls_for(good, 20)), e

    server_key = "something-else"  # the server rejects ours and quotes it back
    results, engine = serve(go, api_key=server_key)
    assert all(r.error_kind == "auth" for r in results)
    engine.store.export(tmp_path / "export.jsonl")
    engine.store.close()
    out, err = capsys.readouterr()
    for path in (tmp_path / "s.sqlite", tmp_path / "export.jsonl"):
        assert secret.encode() not in path.read_bytes()
    for wal in tmp_path.glob("s.sqlite*"):
        assert secret.encode() not in wal.read_bytes()
    assert secret not in out + err + "".join(str(r.error_message) for r in results)
    assert os.environ["PLANTED_KEY"] == secret


def test_duplicate_calls_in_one_run_are_made_once(tmp_path: Path) -> None:
    spec = ModelSpec.parse("scripted:echo")
    provider = ScriptedProvider("echo")
    calls = calls_for(spec, 3) * 2
    engine = Engine(Store(tmp_path / "s.sqlite"), providers={str(spec): provider}, progress=False)
    results = engine.run_sync(calls)
    assert provider.calls == 3
    assert (
        [r.completion.text for r in results[:3]]
        == [  # type: ignore[union-attr]
            r.completion.text
            for r in results[3:]  # type: ignore[union-attr]
        ]
    )
    assert [r.call for r in results] == calls


def test_models_at_one_endpoint_share_one_pooled_session(tmp_path: Path) -> None:
    async def go(base: str, server: FaultServer) -> Any:
        specs = [ModelSpec.parse(f"openai-compatible:{m}@{base}") for m in ("a", "b")]
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False) as engine:
            results = await engine.run([c for s in specs for c in calls_for(s, 5)])
            return results, len(engine.caller._sessions)

    results, sessions = serve(go)
    assert all(r.ok for r in results) and sessions == 1


def test_progress_degrades_to_plain_lines() -> None:
    import io

    from rich.console import Console

    from eigenjury.engine.accounting import Tally
    from eigenjury.engine.progress import RunProgress

    stream = io.StringIO()
    progress = RunProgress(
        10, console=Console(file=stream, force_terminal=False), plain_every_s=0.0
    )
    tally = Tally()
    tally.calls, tally.cached, tally.input_tokens = 4, 1, 1000
    progress.update(tally)
    progress.close(tally)
    lines = stream.getvalue().splitlines()
    assert lines and all("4/10 done, 1 cached, 0 errors, 1,000 tokens" in x for x in lines)
    assert "\x1b[" not in stream.getvalue()  # no terminal control codes in a log


def test_one_engine_runs_again_on_a_new_event_loop(tmp_path: Path) -> None:
    """Limiters hold asyncio locks, which belong to one loop: a second `run_sync` (a new
    loop) must not reuse them, even when the first run had to wait on them."""
    spec = ModelSpec.parse("scripted:echo")
    limits = EndpointLimits(concurrency=4, rpm=60_000)
    engine = Engine(Store(tmp_path / "s.sqlite"), limits=limits, progress=False)
    first = engine.run_sync(calls_for(spec, 200))
    again = engine.run_sync(
        [Call(spec, ChatRequest.chat(("user", f"more {i}"))) for i in range(200)]
    )
    assert all(r.ok for r in first + again)
