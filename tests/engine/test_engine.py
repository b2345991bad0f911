"""The engine under faults, limits, budgets, interruption, and with secrets about."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import time
import types
import urllib.request
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from eigenjury.engine import Budget, Call, CallResult, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.engine import limits as limits_module
from eigenjury.errors import InputError
from eigenjury.models import ChatRequest, ModelSpec, Price, PriceTable
from eigenjury.models.providers.scripted import ScriptedProvider, register_script
from eigenjury.testing.server import Faults, FaultServer, ServerThread

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
    # A client timeout under 3 s but far above a loaded machine's answer time: a reply
    # the server sends after the client gave up would count as a second success.
    retry = dataclasses.replace(FAST_RETRY, timeout_s=2.0)

    async def go(base: str, server: FaultServer) -> dict[str, int]:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        async with Engine(Store(tmp_path / "s.sqlite"), retry=retry, progress=False) as e:
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


def test_concurrency_adapts_on_the_servers_timescale(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 429 cuts the limit by a quarter, once a second however many come; successes
    raise it by a sixteenth (at least one) at most once a second, a second after a cut,
    never past the configured concurrency; with `adaptive` off it never moves."""
    clock = [100.0]
    monkeypatch.setattr(limits_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    limiter = limits_module.EndpointLimiter(EndpointLimits(concurrency=64))
    for _ in range(20):  # one burst
        limiter.on_rate_limit()
    assert (limiter.limit, limiter.rate_limited) == (48, 20)
    for _ in range(100):
        limiter.on_success()
    assert limiter.limit == 48  # not within the second of the cut
    clock[0] += 1.0
    limiter.on_rate_limit()
    limiter.on_rate_limit()  # (one 429 alone in its second is a stray one: no cut)
    assert limiter.limit == 36
    limits: list[int] = []
    for _ in range(8):
        clock[0] += 1.0
        for _ in range(50):
            limiter.on_success()
        limits.append(limiter.limit)
    assert limits == [38, 40, 42, 44, 46, 48, 51, 54]
    small = limits_module.EndpointLimiter(EndpointLimits(concurrency=3))
    for _ in range(4):
        small.on_rate_limit()
        small.on_rate_limit()
        clock[0] += 1.0
    assert small.limit == 1  # never below one
    for _ in range(5):
        clock[0] += 1.0
        small.on_success()
    assert small.limit == 3  # back to the configured concurrency, not past it
    fixed = limits_module.EndpointLimiter(EndpointLimits(concurrency=64, adaptive=False))
    fixed.on_rate_limit()
    assert fixed.limit == 64 and fixed.rate_limited == 1


def test_the_test_server_throttles_beyond_its_rate_and_says_so_in_headers() -> None:
    """The throttling the adaptive limits are measured against: within one second, the
    first `rate` requests are answered and the rest refused with a 429, each answer
    carrying OpenAI's x-ratelimit headers; a second later the window admits again."""
    import aiohttp

    from eigenjury.testing.server import Throttle

    throttle = Throttle(rate=20, retry_after_s=0.5, headers=True)

    async def go(base: str, server: FaultServer) -> Any:
        body = {"model": "test", "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as session:

            async def ask() -> tuple[int, dict[str, str]]:
                async with session.post(f"{base}/chat/completions", json=body) as response:
                    await response.read()
                    return response.status, dict(response.headers)

            burst = await asyncio.gather(*(ask() for _ in range(50)))
            await asyncio.sleep(1.05)
            later = await ask()
        return burst, later, server.stats()

    burst, later, stats = serve(go, throttle=throttle)
    statuses = [status for status, _ in burst]
    assert statuses.count(200) == 20 and statuses.count(429) == 30
    assert stats["throttled"] == 30 and later[0] == 200
    refused = next(headers for status, headers in burst if status == 429)
    assert refused["Retry-After"] == "0.5"
    assert refused["x-ratelimit-limit-requests"] == "1200"
    assert refused["x-ratelimit-remaining-requests"] == "0"
    assert refused["x-ratelimit-reset-requests"].endswith("s")
    assert later[1]["x-ratelimit-remaining-requests"] == "19"


def test_the_throttle_admits_by_a_sliding_second() -> None:
    from eigenjury.testing.server import Throttle

    throttle = Throttle(rate=3)
    admitted = [throttle.admit(t) for t in (0.0, 0.1, 0.2, 0.3, 0.99)]
    assert admitted == [True, True, True, False, False]
    assert throttle.admit(1.0) and not throttle.admit(1.05) and throttle.admit(1.15)


def test_the_throttled_server_answers_slower_the_more_requests_are_in_flight() -> None:
    """Eight requests held until all are in flight, then let go: each takes 7 x 0.05 s
    more than one alone would (a lower bound: load on this machine only adds)."""
    import aiohttp

    from eigenjury.testing.server import Throttle

    async def go(base: str, server: FaultServer) -> float:
        body = {"model": "test", "messages": [{"role": "user", "content": "hi"}]}
        async with aiohttp.ClientSession() as session:

            async def ask() -> int:
                async with session.post(f"{base}/chat/completions", json=body) as response:
                    return response.status

            server.hold()
            asked = asyncio.gather(*(ask() for _ in range(8)))
            while server.held < 8:
                await asyncio.sleep(0.01)
            start = time.monotonic()
            server.release()
            assert await asked == [200] * 8
            return time.monotonic() - start

    assert serve(go, throttle=Throttle(rate=1000, per_in_flight_s=0.05)) >= 0.35


async def streamed(engine: Engine, calls: Iterator[Call]) -> list[CallResult]:
    async with engine, contextlib.aclosing(engine.stream(calls)) as results:
        return [result async for result in results]


@pytest.mark.parametrize("cap", ["tokens", "cost"])
@pytest.mark.parametrize("source", ["list", "stream"])
def test_budget_cap_stops_at_the_cap(tmp_path: Path, cap: str, source: str) -> None:
    spec = ModelSpec.parse("scripted:echo")
    prices = PriceTable({"scripted:echo": Price(1_000_000.0, 1_000_000.0)})  # $1 a token
    budget = Budget(max_tokens=100) if cap == "tokens" else Budget(max_cost_usd=100.0)
    calls = (Call(spec, ChatRequest.chat(("user", f"q {i}"), max_tokens=5)) for i in range(40))
    engine = Engine(
        Store(tmp_path / "s.sqlite"),
        budget=budget,
        prices=prices,
        progress=False,
        limits=EndpointLimits(concurrency=4),
    )
    if source == "list":
        results = engine.run_sync(list(calls))
    else:
        results = asyncio.run(streamed(engine, calls))
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


@pytest.mark.parametrize("terminal", [False, True])
def test_a_stream_longer_than_announced_shows_counts_without_an_end(terminal: bool) -> None:
    """Repairs and a cascade's second jury add calls to a stream announced with its
    first calls: past the total, the display counts on rather than showing 15/10."""
    import io

    from rich.console import Console

    from eigenjury.engine.accounting import Tally
    from eigenjury.engine.progress import RunProgress

    stream = io.StringIO()
    console = Console(file=stream, force_terminal=terminal, width=200)
    progress = RunProgress(10, console=console, plain_every_s=0.0)
    tally = Tally()
    tally.calls = 15
    progress.update(tally)
    progress.close(tally)
    assert progress.total is None
    assert "15 done" in stream.getvalue() and "/10" not in stream.getvalue()


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


def _closed_port_base() -> str:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_dead_endpoint_is_given_up_on_quickly_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With the default retry policy, every call to a closed port would retry 6 times
    with backoff (minutes); after DEAD_AFTER connection failures in a row the rest end
    at once as connection errors, not stored, so a rerun sends them."""
    base = _closed_port_base()
    spec = ModelSpec.parse(f"openai-compatible:m@{base}")
    engine = Engine(Store(tmp_path / "s.sqlite"), progress=False)  # default retries
    start = time.monotonic()
    results = engine.run_sync(calls_for(spec, 40))
    assert time.monotonic() - start < 5
    assert all(r.error_kind == "connection" for r in results)
    not_sent = [r for r in results if r.attempts == 0]
    assert not_sent and all(
        "connection failures in a row" in str(r.error_message) for r in not_sent
    )
    assert engine.store.counts() == {"error": 40 - len(not_sent)}  # only calls made are stored
    lines = [x for x in capsys.readouterr().err.splitlines() if "stopped calling" in x]
    assert len(lines) == 1 and base in lines[0]


def test_an_answering_server_is_never_given_up_on(tmp_path: Path) -> None:
    """Errors with an answer (HTTP 500) break any run of connection failures."""

    async def go(base: str, server: FaultServer) -> Any:
        spec = ModelSpec.parse(f"openai-compatible:test@{base}")
        async with Engine(Store(tmp_path / "s.sqlite"), retry=FAST_RETRY, progress=False) as e:
            return await e.run(calls_for(spec, 30))

    results = serve(go, faults=Faults(server_error=1.0))
    assert all(r.error_kind == "server" and r.attempts == FAST_RETRY.max_attempts for r in results)


def _text(request: ChatRequest) -> str:
    return request.messages[-1].content


def test_a_result_the_store_cannot_hold_never_costs_the_others(tmp_path: Path) -> None:
    """A reply the store cannot encode (a lone surrogate) is an error of its own; the
    other results of its batch are committed, and a rerun makes only that call again."""
    register_script("half-pair", lambda r: "bad \ud800" if "q 3" in _text(r) else "fine")
    spec = ModelSpec.parse("scripted:half-pair")
    engine = Engine(Store(tmp_path / "s.sqlite"), progress=False)
    results = engine.run_sync(calls_for(spec, 8))
    assert [r.error_kind for r in results] == [None] * 3 + ["store"] + [None] * 4
    assert "could not be saved in the store" in str(results[3].error_message)
    assert engine.store.counts() == {"ok": 7}
    again = engine.run_sync(calls_for(spec, 8))
    assert [r.cached for r in again] == [True] * 3 + [False] + [True] * 4


def test_a_sample_the_store_cannot_hold_is_refused_before_any_call() -> None:
    spec = ModelSpec.parse("scripted:echo")
    for sample in (2**63, -1):
        with pytest.raises(InputError, match="sample must be a whole number from 0 to 2"):
            Call(spec, ChatRequest.chat(("user", "hi")), sample=sample)


@pytest.mark.parametrize("limits", [{"rpm": 1e-300}, {"tpm": 1e-300}, {"rpm": float("nan")}])
def test_rates_that_cannot_make_progress_are_refused(limits: dict[str, float]) -> None:
    with pytest.raises(InputError, match="at least 1/60"):
        EndpointLimits(**limits)


def test_a_call_far_over_its_token_estimate_delays_the_next_by_one_bucket_at_most(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock, slept = [0.0], []

    async def sleep(seconds: float) -> None:  # time passes without waiting for it
        slept.append(seconds)
        clock[0] += seconds

    fake_asyncio = types.ModuleType("asyncio")
    fake_asyncio.__dict__.update(asyncio.__dict__, sleep=sleep)
    monkeypatch.setattr(limits_module, "asyncio", fake_asyncio)
    monkeypatch.setattr(limits_module, "time", types.SimpleNamespace(monotonic=lambda: clock[0]))
    bucket = limits_module.TokenBucket(6000)  # 100 tokens a second
    bucket.refund(-1e12)  # a reply a trillion tokens longer than estimated
    asyncio.run(bucket.take(50))
    assert sum(slept) <= 2.0  # not 1e10 seconds of silence


def test_a_request_that_is_not_valid_unicode_stops_the_run_at_it(tmp_path: Path) -> None:
    """Like a bad line of a file: the calls before it are made and kept, none after it."""
    spec = ModelSpec.parse("scripted:echo")
    provider = ScriptedProvider("echo")
    store = Store(tmp_path / "s.sqlite")
    engine = Engine(store, providers={str(spec): provider}, progress=False)
    bad = Call(spec, ChatRequest.chat(("user", "half \ud800 a pair")))
    calls = [*calls_for(spec, 3), bad, *calls_for(spec, 100)[3:]]
    with pytest.raises(InputError, match="not valid Unicode"):
        engine.run_sync(calls)
    assert provider.calls == 3
    assert store.counts() == {"ok": 3}


def test_the_test_server_holds_requests_until_released() -> None:
    """What the signal tests rely on: after `hold(after=1)` the server answers one
    request, keeps the later ones waiting (counted in `held`) whatever the time, and
    answers them on `release()`; both are called from the test's thread."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})

    def ask(url: str) -> int:
        request = urllib.request.Request(
            url, data=body.encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status)

    with ServerThread() as server, ThreadPoolExecutor(2) as pool:
        url = server.base_url + "/chat/completions"
        server.hold(after=1)
        assert ask(url) == 200
        waiting = [pool.submit(ask, url) for _ in range(2)]
        deadline = time.monotonic() + 60
        while server.held < 2:
            assert time.monotonic() < deadline, "the requests were never held"
            time.sleep(0.01)
        time.sleep(0.2)
        assert not any(future.done() for future in waiting) and server.held == 2
        server.release()
        assert [future.result(60) for future in waiting] == [200, 200]
        assert server.held == 0 and server.successes_by_prompt["reply to: hi"] == 3
