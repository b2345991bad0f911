"""Engine throughput against a local test server: achieved rate / Little's-law limit C/L.

The in-repo test server (`python -m eigenjury.testing.server`) runs in its own process
on 127.0.0.1, so client and server share neither an event loop nor a GIL. Variants,
interleaved and repeated (best / median seconds):

- engine, L = 50 ms: `Engine(Store(fresh), limits=EndpointLimits(concurrency=C))` on
  N distinct calls; then the same calls again on the same store (all cache hits);
- engine, L = 0: the client is CPU-bound, so wall and CPU per call are its overhead;
- store: `Store.put_many` of batches of 256 results, built as the engine builds them;
- sequential: `make_provider(spec)` then `await provider.generate(request)` in a loop
  (as the original EigenBench code calls models), 200 requests at L = 50 ms;
- Inspect AI (if installed): `get_model("openai-api/test/test", base_url=...)` with
  max_connections = C and N concurrent `generate` calls (asyncio.gather), cache off.

    python benchmarks/engine_throughput.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from _common import environment, spread, table, timed_cpu
from eigenjury.engine import Call, EndpointLimits, Engine, Store, StoredResult, request_key
from eigenjury.engine.store import canonical_json
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage, make_provider

# `python -m eigenjury.testing.server`, plus `usage.total_tokens` in its replies (as
# OpenAI sends): Inspect AI rejects a usage without it. Used for every variant alike.
SERVER = """
import eigenjury.testing.server as s
plain = s._chat_answer
def answer(body, empty):
    out = plain(body, empty)
    out["usage"]["total_tokens"] = sum(out["usage"].values())
    return out
s._chat_answer = answer
s.main()
"""


@contextlib.contextmanager
def test_server(latency: float) -> Iterator[str]:
    """The test server in a child process on 127.0.0.1 (a free port); yields its /v1 URL."""
    args = ["--host", "127.0.0.1", "--port", "0", "--latency", str(latency)]
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("serving on http://127.0.0.1:"):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield line.split()[-1]
    finally:
        proc.terminate()
        proc.wait(10)


def make_calls(base: str, n: int, tag: str) -> list[Call]:
    spec = ModelSpec.parse(f"openai-compatible:test@{base}")
    return [Call(spec, ChatRequest.chat(("user", f"q {tag} {i}"))) for i in range(n)]


def run_engine(store: Store, calls: list[Call], concurrency: int) -> None:
    engine = Engine(store, limits=EndpointLimits(concurrency=concurrency), progress=False)
    results = engine.run_sync(calls)
    bad = [r.error_message for r in results if not r.ok]
    assert not bad, bad[:3]


def run_sequential(calls: list[Call]) -> None:
    async def loop() -> None:
        provider = make_provider(calls[0].spec)
        try:
            for call in calls:
                await provider.generate(call.request)
        finally:
            await provider.aclose()

    asyncio.run(loop())


def inspect_runner(base: str, concurrency: int) -> Callable[[int, str], None] | None:
    try:
        from inspect_ai.model import GenerateConfig, get_model
    except ImportError:
        return None

    def run(n: int, tag: str) -> None:
        async def gather() -> None:
            config = GenerateConfig(max_connections=concurrency, max_retries=0)
            model = get_model(
                "openai-api/test/test", base_url=base, api_key="x", config=config, memoize=False
            )
            async with model:
                outs = await asyncio.gather(
                    *(model.generate(f"q {tag} {i}", cache=False) for i in range(n))
                )
            assert all(o.completion.startswith("reply to") for o in outs), outs[0]

        asyncio.run(gather())

    return run


def store_rows(n: int, base: str) -> list[StoredResult]:
    """Results as the engine builds them (`Engine._stored`)."""
    spec = ModelSpec.parse(f"openai-compatible:test@{base}")
    rows = []
    for i in range(n):
        request = ChatRequest.chat(("user", f"q {i}"))
        completion = Completion("reply to: q", "stop", Usage(2, 4), latency_s=0.05)
        rows.append(
            StoredResult(
                key=request_key(spec, request),
                spec=str(spec),
                request=canonical_json(request.identity()),
                sample=0,
                completion=completion,
                attempts=1,
                created_at=time.time(),
            )
        )
    return rows


def put_batches(store: Store, batches: list[list[StoredResult]]) -> None:
    for batch in batches:
        store.put_many(batch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--no-inspect", action="store_true")
    args = parser.parse_args()
    n, n_seq, repeat = (300, 40, 1) if args.quick else (args.requests, args.sequential, args.repeat)
    C, L = args.concurrency, args.latency
    limit = C / L  # Little's law: calls in flight / time per call
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    counts: dict[str, int] = {}

    def record(name: str, count: int, fn: Callable[..., object], *args: object) -> None:
        w, c, _ = timed_cpu(lambda: fn(*args))
        wall.setdefault(name, []).append(w)
        cpu.setdefault(name, []).append(c)
        counts[name] = count

    with (
        test_server(L) as slow,
        test_server(0.0) as fast,
        tempfile.TemporaryDirectory() as tmp,
    ):
        inspect_run = None if args.no_inspect else inspect_runner(slow, C)
        run_engine(Store(Path(tmp, "warm.sqlite")), make_calls(fast, 200, "warm"), C)
        if inspect_run is not None:
            inspect_run(200, "warm")
        for r in range(repeat):
            store = Store(Path(tmp, f"run{r}.sqlite"))
            calls = make_calls(slow, n, f"r{r}")
            record("engine", n, run_engine, store, calls, C)
            record("engine, all cached", n, run_engine, store, calls, C)
            store.close()
            if inspect_run is not None:
                record("inspect", n, inspect_run, n, f"r{r}")
            seq = make_calls(slow, n_seq, f"s{r}")
            record("sequential", n_seq, run_sequential, seq)
            store = Store(Path(tmp, f"fast{r}.sqlite"))
            calls = make_calls(fast, n, f"f{r}")
            record("engine, L = 0", n, run_engine, store, calls, C)
            store.close()
            rows = store_rows(n, fast)
            store = Store(Path(tmp, f"put{r}.sqlite"))
            batches = [rows[i : i + 256] for i in range(0, len(rows), 256)]
            record("put_many", n, put_batches, store, batches)
            store.close()

    def rate(name: str) -> float:
        return counts[name] / statistics.median(wall[name])

    labels = {
        "engine": f"eigenjury Engine, C = {C}, L = {L * 1e3:g} ms",
        "engine, all cached": "eigenjury Engine, same calls again (all cache hits)",
        "inspect": f"Inspect AI generate, max_connections = {C}, L = {L * 1e3:g} ms",
        "sequential": f"sequential provider.generate loop, L = {L * 1e3:g} ms",
        "engine, L = 0": f"eigenjury Engine, C = {C}, L = 0 (client CPU-bound)",
        "put_many": "Store.put_many, batches of 256 (no HTTP)",
    }
    rows_out = []
    for name, label in labels.items():
        if name not in wall:
            continue
        slow_variant = name in ("engine", "inspect", "sequential")
        ideal = counts[name] * L / (C if name != "sequential" else 1)
        med = statistics.median(wall[name])
        rows_out.append(
            [
                label,
                f"{counts[name]:,}",
                spread(wall[name]),
                f"{rate(name):,.0f}",
                f"{rate(name) / limit:.3f}" if slow_variant and name != "sequential" else "",
                f"{1 - ideal / med:.1%}" if slow_variant else "",
                f"{med / counts[name] * 1e6:,.0f}",
                f"{statistics.median(cpu[name]) / counts[name] * 1e6:,.0f}",
            ]
        )
    print(
        f"# engine throughput: N = {n:,} calls, C = {C}, L = {L * 1e3:g} ms, "
        f"C/L = {limit:,.0f} calls/s (best / median of {repeat})\n"
    )
    print(environment("aiohttp", "inspect_ai", "openai", "httpx"))
    print()
    print(
        table(
            [
                "variant",
                "calls",
                "wall s",
                "calls/s (median)",
                "rate / (C/L)",
                "share not server latency",
                "wall us / call",
                "client CPU us / call",
            ],
            rows_out,
        )
    )
    print(f"\nengine vs sequential: {rate('engine') / rate('sequential'):.1f}x calls/s")
    if "inspect" in wall:
        print(f"engine vs Inspect AI: {rate('engine') / rate('inspect'):.2f}x calls/s")


if __name__ == "__main__":
    main()
