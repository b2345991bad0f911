"""Engine.stream: results as they are committed, from calls read lazily a bounded window
ahead; order options, duplicates, bad input, interruption, kill -9 and memory."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from eigenjury.engine import Call, CallResult, EndpointLimits, Engine, Store
from eigenjury.errors import InputError
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage
from eigenjury.models.providers.scripted import ScriptedProvider
from eigenjury.testing.server import ServerThread

SPEC = ModelSpec.parse("scripted:echo")


def call(i: int, spec: ModelSpec = SPEC) -> Call:
    return Call(spec, ChatRequest.chat(("user", f"q {i}")), tag=i)


def calls(n: int, spec: ModelSpec = SPEC) -> Iterator[Call]:
    """A generator: the engine cannot know how many calls there are."""
    return (call(i, spec) for i in range(n))


def number(request: ChatRequest) -> int:
    return int(request.messages[-1].content.split()[-1])


class Staggered:
    """Replies "echo: q i" after a latency that depends on i, so calls finish out of the
    order they were sent in; `finished` is the order they finished in."""

    def __init__(self) -> None:
        self.calls = 0
        self.finished: list[int] = []

    async def generate(self, request: ChatRequest) -> Completion:
        self.calls += 1
        i = number(request)
        await asyncio.sleep(0.002 * ((7 * i) % 11))
        self.finished.append(i)
        return Completion(f"echo: q {i}", "stop", Usage(2, 3))

    async def aclose(self) -> None:
        return None


async def collect(engine: Engine, source: Any, **options: Any) -> list[CallResult]:
    async with contextlib.aclosing(engine.stream(source, **options)) as results:
        return [result async for result in results]


def stream_sync(engine: Engine, source: Any, **options: Any) -> list[CallResult]:
    async def go() -> list[CallResult]:
        async with engine:
            return await collect(engine, source, **options)

    return asyncio.run(go())


def engine_with(store: Store, provider: Any, **options: Any) -> Engine:
    return Engine(store, providers={str(SPEC): provider}, progress=False, **options)


def test_input_order_and_completion_order(tmp_path: Path) -> None:
    n = 80
    results = {}
    for ordered in (True, False):
        provider = Staggered()
        engine = engine_with(
            Store(tmp_path / f"{ordered}.sqlite"), provider, limits=EndpointLimits(concurrency=8)
        )
        results[ordered] = stream_sync(engine, calls(n), ordered=ordered)
        assert provider.calls == n
        assert provider.finished != list(range(n))  # the calls really finished out of order
    assert [r.call.tag for r in results[True]] == list(range(n))
    unordered = [r.call.tag for r in results[False]]
    assert unordered != list(range(n)) and sorted(unordered) == list(range(n))
    assert all(r.ok and not r.cached for r in results[True] + results[False])
    texts = {r.call.tag: r.completion.text for r in results[False]}  # type: ignore[union-attr]
    assert texts == {r.call.tag: r.completion.text for r in results[True]}  # type: ignore[union-attr]
    assert all(text == f"echo: q {i}" for i, text in texts.items())


@pytest.mark.parametrize("ordered", [True, False])
def test_the_window_bounds_how_far_calls_are_read_ahead(tmp_path: Path, ordered: bool) -> None:
    """The feeder takes a slot per call before reading the next, so at most `window`
    calls are read and not yet handed over, plus the one read while waiting for a slot."""
    window, n = 64, 600
    consumed, ahead = [0], [0]

    def watched() -> Iterator[Call]:
        for i in range(n):
            ahead[0] = max(ahead[0], i + 1 - consumed[0])
            yield call(i)

    async def go() -> None:
        engine = Engine(Store(tmp_path / "s.sqlite"), progress=False, window=window)
        async with engine, contextlib.aclosing(engine.stream(watched(), ordered=ordered)) as rs:
            async for _ in rs:
                consumed[0] += 1
                await asyncio.sleep(0.001)  # a slow consumer

    asyncio.run(go())
    assert consumed[0] == n
    assert window <= ahead[0] <= window + 1


class BadAt:
    """An iterator whose item k is bad (like a bad line of a file); it would go on past
    it if asked, and records every index it was asked for."""

    def __init__(self, n: int, bad: int | None) -> None:
        self.n, self.bad = n, bad
        self.asked: list[int] = []

    def __iter__(self) -> BadAt:
        return self

    def __next__(self) -> Call:
        i = len(self.asked)
        if i >= self.n:
            raise StopIteration
        self.asked.append(i)
        if i == self.bad:
            raise InputError("a bad request", line=i + 1)
        return call(i)


def test_a_bad_input_stops_reading_and_raises_after_every_result_before_it(
    tmp_path: Path,
) -> None:
    n, k = 3000, 2100
    store = Store(tmp_path / "s.sqlite")
    provider = ScriptedProvider("echo", latency_s=0.001)
    engine = engine_with(store, provider, limits=EndpointLimits(concurrency=16), window=256)
    seen: list[CallResult] = []
    bad = BadAt(n, k)

    async def go() -> None:
        async with engine, contextlib.aclosing(engine.stream(bad)) as results:
            async for result in results:
                seen.append(result)  # noqa: PERF401 (kept up to the error)

    with pytest.raises(InputError, match="a bad request") as raised:
        asyncio.run(go())
    assert raised.value.line == k + 1
    assert bad.asked == list(range(k + 1))  # nothing after the bad item was read
    assert [r.call.tag for r in seen] == list(range(k)) and all(r.ok for r in seen)
    assert provider.calls == k and store.counts() == {"ok": k}
    fixed = ScriptedProvider("echo")
    again = stream_sync(engine_with(store, fixed), BadAt(n, None))
    assert [r.call.tag for r in again] == list(range(n))
    assert fixed.calls == n - k  # the calls before the bad item are not made again
    assert [r.cached for r in again] == [True] * k + [False] * (n - k)
    assert store.counts() == {"ok": n}


def test_the_same_key_in_flight_is_one_call(tmp_path: Path) -> None:
    provider = ScriptedProvider("echo", latency_s=0.05)
    engine = engine_with(Store(tmp_path / "s.sqlite"), provider)
    results = stream_sync(engine, iter([call(1), call(2), call(1)]))
    assert provider.calls == 2
    assert [r.cached for r in results] == [False, False, True]
    assert results[0].completion == results[2].completion and results[0].key == results[2].key
    assert [r.call for r in results] == [call(1), call(2), call(1)]


@pytest.mark.parametrize("broken", [False, True])
def test_a_key_again_after_its_commit_is_a_cache_hit_and_an_error_is_not_resent(
    tmp_path: Path, broken: bool
) -> None:
    """With a window of one call, the second `q 0` is dispatched only after the first
    one's result was committed and handed over."""
    failing = ("bad_request",)  # not retryable: one attempt
    provider = ScriptedProvider("echo", failure_rate=float(broken), failure_kinds=failing)
    engine = engine_with(Store(tmp_path / "s.sqlite"), provider, window=1)
    handed = stream_sync(engine, iter([call(0), call(0), call(1)]))
    assert [r.cached for r in handed] == [False, True, False]
    assert provider.calls == 2  # q 0 once, q 1 once
    if broken:
        assert [r.error_kind for r in handed] == ["bad_request"] * 3
        assert handed[1].error_message == handed[0].error_message
    else:
        assert handed[1].completion == handed[0].completion


def test_an_async_source_that_waits_does_not_hold_back_the_calls_it_gave(
    tmp_path: Path,
) -> None:
    """A source that awaits the results of its own calls (the next round of an adaptive
    design) must see them: calls already read are dispatched while it waits. A feeder
    that kept its part-filled chunk until the source gave one more call would wait
    forever here (the 10 s timeout)."""
    handed: list[CallResult] = []
    engine = Engine(Store(tmp_path / "s.sqlite"), progress=False)

    async def source() -> AsyncIterator[Call]:
        yield call(0)
        while not handed:
            await asyncio.sleep(0.001)
        yield call(1)

    async def go() -> None:
        async with engine, contextlib.aclosing(engine.stream(source())) as results:
            async for result in results:
                handed.append(result)  # noqa: PERF401 (the source reads it)

    asyncio.run(asyncio.wait_for(go(), 10))
    assert [r.call.tag for r in handed] == [0, 1]


def test_an_async_generator_of_calls(tmp_path: Path) -> None:
    async def source() -> AsyncIterator[Call]:
        for i in range(300):
            if i % 50 == 0:
                await asyncio.sleep(0.01)  # an input that arrives in bursts
            yield call(i)

    provider = ScriptedProvider("echo")
    results = stream_sync(engine_with(Store(tmp_path / "s.sqlite"), provider), source())
    assert [r.call.tag for r in results] == list(range(300)) and provider.calls == 300
    assert all(r.completion.text == f"echo: q {i}" for i, r in enumerate(results))  # type: ignore[union-attr]


def test_interrupted_stream_keeps_every_finished_call(tmp_path: Path) -> None:
    slow = ScriptedProvider("echo", latency_s=0.05)
    store = Store(tmp_path / "s.sqlite")
    handed: list[CallResult] = []

    async def interrupted() -> None:
        engine = engine_with(store, slow, limits=EndpointLimits(concurrency=4), flush_s=0.01)

        async def consume() -> None:
            async with contextlib.aclosing(engine.stream(calls(200))) as results:
                async for result in results:
                    handed.append(result)  # noqa: PERF401 (kept up to the cancel)

        task = asyncio.create_task(consume())
        await asyncio.sleep(0.6)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await engine.aclose()

    asyncio.run(interrupted())
    kept = store.counts().get("ok", 0)
    assert 10 < kept < 200 and len(handed) <= kept
    assert all(store.get(r.key) is not None for r in handed)  # handed over only once committed
    assert sum(slow.successes.values()) - kept <= 4  # only the calls in flight were lost
    fresh = ScriptedProvider("echo")
    results = stream_sync(engine_with(store, fresh), calls(200))
    assert all(r.ok for r in results) and [r.call.tag for r in results] == list(range(200))
    assert fresh.calls == 200 - kept


def test_a_dead_endpoint_on_a_stream(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once this closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = ModelSpec.parse(f"openai-compatible:m@http://127.0.0.1:{port}/v1")
    engine = Engine(Store(tmp_path / "s.sqlite"), progress=False)  # default retries
    start = time.monotonic()
    results = stream_sync(engine, calls(300, spec), ordered=False)
    assert time.monotonic() - start < 5
    assert sorted(r.call.tag for r in results) == list(range(300))
    assert all(r.error_kind == "connection" for r in results)
    not_sent = [r for r in results if r.attempts == 0]
    assert len(not_sent) > 250  # given up on, not tried 300 times
    assert engine.store.counts() == {"error": 300 - len(not_sent)}


STREAM_SCRIPT = """
import asyncio, contextlib, sys
from eigenjury.engine import Call, EndpointLimits, Engine, Store
from eigenjury.models import ChatRequest, ModelSpec

url, store, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = ModelSpec.parse(f"openai-compatible:test@{url}")

async def main():
    engine = Engine(Store(store), limits=EndpointLimits(concurrency=16), batch_size=32,
                    progress=False)
    source = (Call(spec, ChatRequest.chat(("user", f"q {i}")), tag=i) for i in range(n))
    async with engine, contextlib.aclosing(engine.stream(source)) as results:
        async for result in results:
            assert result.ok and result.call.tag == int(result.completion.text.split()[-1])
            print(result.call.tag, flush=True)

asyncio.run(main())
"""


@pytest.mark.slow
def test_a_stream_killed_with_sigkill_resumes_repeating_only_calls_in_flight(
    tmp_path: Path,
) -> None:
    """A kill loses only calls not yet committed: the 16 being made, a commit under way
    (32 results at most) and the results queued behind it (fewer than another 32 at
    this rate); committed calls are never asked again."""
    n, store = 3000, tmp_path / "s.sqlite"
    with ServerThread(latency_s=0.02) as server:

        def stream(out: Path) -> subprocess.Popen[bytes]:
            command = [sys.executable, "-c", STREAM_SCRIPT, server.base_url, str(store), str(n)]
            with out.open("w") as printed:
                return subprocess.Popen(command, stdout=printed)

        process = stream(tmp_path / "first.txt")
        deadline = time.monotonic() + 120
        while server.stats()["successes"] < 1000 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        with Store(store) as kept:
            committed = {json.loads(r.request)["messages"][-1][1] for r in kept if r.ok}
        answered = set(server.successes_by_prompt)
        before = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
        assert stream(tmp_path / "again.txt").wait(120) == 0
        after = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
        repeated = [p for p, count in server.successes_by_prompt.items() if count > 1]
    assert 0 < len(committed) < n and len(answered) >= 1000
    assert after == before, "a committed call was made again"
    assert len(answered) - len(committed) <= 16 + 2 * 32
    assert len(repeated) == len(answered) - len(committed)
    printed = (tmp_path / "first.txt").read_text().split()
    assert printed == [str(i) for i in range(len(printed))] and len(printed) <= len(committed)
    assert (tmp_path / "again.txt").read_text().split() == [str(i) for i in range(n)]
    with Store(store) as done:
        assert done.counts() == {"ok": n}


MEMORY_SCRIPT = """
import asyncio, contextlib, json, os, sys
from eigenjury.engine import Call, Engine, Store
from eigenjury.models import ChatRequest, ModelSpec

store, n, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spec = ModelSpec.parse("scripted:echo")
page = os.sysconf("SC_PAGE_SIZE")

def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * page

async def main():
    engine = Engine(Store(store), progress=False)
    source = (Call(spec, ChatRequest.chat(("user", f"q {i}"))) for i in range(n))
    count, samples = 0, {}
    async with engine, contextlib.aclosing(engine.stream(source)) as results:
        async for result in results:
            count += 1
            if count % every == 0:
                samples[count] = rss()
    print(json.dumps({"count": count, "rss": samples}))

asyncio.run(main())
"""


@pytest.mark.slow
def test_a_million_calls_stream_in_flat_memory(tmp_path: Path) -> None:
    """Resident memory sampled every 50,000 results: after the first 100,000 (the
    window, caches and the store's pages are in place by then) it stays flat; one
    `Engine.run` of the same calls held about 3.2 KB per call (3 GB)."""
    n, every = 1_000_000, 50_000
    command = [sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path / "s.sqlite"), str(n), str(every)]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=600)
    report = json.loads(out.stdout)
    rss = {int(k): v for k, v in report["rss"].items()}
    assert report["count"] == n and sorted(rss) == list(range(every, n + 1, every))
    growth = max(rss.values()) - rss[100_000]
    assert growth < 20e6, f"grew {growth / 1e6:.0f} MB after 100,000 results: {rss}"
