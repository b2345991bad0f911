"""Engine throughput against a local test server: achieved rate / Little's-law limit C/L.

The in-repo test server (`python -m eigenjury.testing.server`) runs in its own process
on 127.0.0.1, so client and server share neither an event loop nor a GIL. Variants,
interleaved and repeated (best / median seconds):

- engine, L = 50 ms: `Engine(Store(fresh), limits=EndpointLimits(concurrency=C))` on
  N distinct calls; then the same calls again on the same store (all cache hits);
- no engine: the same provider, N calls under asyncio.gather and Semaphore(C): the floor
  set by aiohttp, the server and the machine;
- engine and no engine, L = 0: the client is CPU-bound, so its time per call is overhead;
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
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import environment, spread, table, timed_cpu
from eigenjury.engine import Call, EndpointLimits, Engine, Store, StoredResult, request_key
from eigenjury.engine.store import canonical_json
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage, make_provider


@dataclass(frozen=True)
class Server:
    url: str
    pid: int

    def cpu(self) -> float:
        """CPU seconds the server process has used (Linux /proc)."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def test_server(latency: float) -> Iterator[Server]:
    """The test server in a child process on 127.0.0.1 (a free port)."""
    args = ["--host", "127.0.0.1", "--port", "0", "--latency", str(latency)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "eigenjury.testing.server", *args], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("serving on http://127.0.0.1:"):
            raise RuntimeError(f"test server did not start: {line!r}")
        yield Server(line.split()[-1], proc.pid)
    finally:
        proc.terminate()
        proc.wait(10)


def make_calls(server: Server, n: int, tag: str) -> list[Call]:
    spec = ModelSpec.parse(f"openai-compatible:test@{server.url}")
    return [Call(spec, ChatRequest.chat(("user", f"q {tag} {i}"))) for i in range(n)]


def run_engine(store: Store, calls: list[Call], concurrency: int) -> list[float]:
    """Latencies (seconds) of the calls sent, as the provider measured them."""
    engine = Engine(store, limits=EndpointLimits(concurrency=concurrency), progress=False)
    results = engine.run_sync(calls)
    bad = [r.error_message for r in results if not r.ok]
    assert not bad, bad[:3]
    return [r.completion.latency_s for r in results if r.completion and not r.cached]


def run_sequential(calls: list[Call]) -> list[float]:
    async def loop() -> list[float]:
        provider = make_provider(calls[0].spec)
        try:
            return [(await provider.generate(call.request)).latency_s for call in calls]
        finally:
            await provider.aclose()

    return asyncio.run(loop())


def run_gathered(calls: list[Call], concurrency: int) -> list[float]:
    """The HTTP floor: the same provider, no engine, asyncio.gather under a semaphore."""

    async def gather() -> list[float]:
        provider, slots = make_provider(calls[0].spec), asyncio.Semaphore(concurrency)

        async def one(call: Call) -> float:
            async with slots:
                return (await provider.generate(call.request)).latency_s

        try:
            return await asyncio.gather(*(one(call) for call in calls))
        finally:
            await provider.aclose()

    return asyncio.run(gather())


def inspect_runner(server: Server, concurrency: int) -> Callable[[int, str], list[float]] | None:
    try:
        from inspect_ai.model import GenerateConfig, get_model
    except ImportError:
        return None

    def run(n: int, tag: str) -> list[float]:
        async def gather() -> list[float]:
            config = GenerateConfig(max_connections=concurrency, max_retries=0)
            model = get_model(
                "openai-api/test/test",
                base_url=server.url,
                api_key="x",
                config=config,
                memoize=False,
            )
            async with model:
                outs = await asyncio.gather(
                    *(model.generate(f"q {tag} {i}", cache=False) for i in range(n))
                )
            assert all(o.completion.startswith("reply to") for o in outs), outs[0]
            return [o.time or 0.0 for o in outs]

        return asyncio.run(gather())

    return run


def store_rows(n: int, server: Server) -> list[StoredResult]:
    """Results as the engine builds them (`Engine._stored`)."""
    spec = ModelSpec.parse(f"openai-compatible:test@{server.url}")
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


def put_batches(store: Store, batches: list[list[StoredResult]]) -> list[float]:
    for batch in batches:
        store.put_many(batch)
    return []


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
    runs: dict[str, list[tuple[float, float, float, float]]] = {}  # wall, CPU, server CPU, lat
    counts: dict[str, int] = {}

    def record(
        name: str, count: int, server: Server, fn: Callable[..., list[float]], *a: Any
    ) -> None:
        served = server.cpu()
        wall, cpu, latencies = timed_cpu(lambda: fn(*a))
        latency = statistics.mean(latencies) if latencies else math.nan
        runs.setdefault(name, []).append((wall, cpu, server.cpu() - served, latency))
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
            record("engine", n, slow, run_engine, store, calls, C)
            record("cached", n, slow, run_engine, store, calls, C)
            store.close()
            record("gathered", n, slow, run_gathered, make_calls(slow, n, f"g{r}"), C)
            if inspect_run is not None:
                record("inspect", n, slow, inspect_run, n, f"r{r}")
            record("sequential", n_seq, slow, run_sequential, make_calls(slow, n_seq, f"s{r}"))
            store = Store(Path(tmp, f"fast{r}.sqlite"))
            record("engine L=0", n, fast, run_engine, store, make_calls(fast, n, f"f{r}"), C)
            store.close()
            record("gathered L=0", n, fast, run_gathered, make_calls(fast, n, f"h{r}"), C)
            rows = store_rows(n, fast)
            store = Store(Path(tmp, f"put{r}.sqlite"))
            batches = [rows[i : i + 256] for i in range(0, len(rows), 256)]
            record("put_many", n, fast, put_batches, store, batches)
            store.close()

    labels = {
        "engine": f"eigenjury Engine, C = {C}",
        "cached": "eigenjury Engine, same calls again (all cache hits)",
        "gathered": f"no engine: provider.generate, gather + Semaphore({C})",
        "inspect": f"Inspect AI generate, max_connections = {C}",
        "sequential": "sequential provider.generate loop",
        "engine L=0": f"eigenjury Engine, C = {C}, server L = 0",
        "gathered L=0": f"no engine: provider.generate, gather + Semaphore({C}), L = 0",
        "put_many": "Store.put_many, batches of 256 (no HTTP)",
    }
    rate: dict[str, float] = {}
    out = []
    for name, label in labels.items():
        if name not in runs:
            continue
        count = counts[name]
        walls = [w for w, *_ in runs[name]]
        wall, cpu, server_cpu, latency = (
            statistics.median(x) for x in zip(*runs[name], strict=True)
        )
        rate[name] = count / wall
        ideal = count * L / (1 if name == "sequential" else C)  # time if every call took L
        waits = name in ("engine", "gathered", "inspect", "sequential")
        out.append(
            [
                label,
                f"{count:,}",
                spread(walls),
                f"{rate[name]:,.0f}",
                f"{rate[name] / limit:.3f}" if waits and name != "sequential" else "",
                f"{1 - ideal / wall:.1%}" if waits else "",
                "" if math.isnan(latency) else f"{latency * 1e3:.1f}",
                f"{cpu / count * 1e6:,.0f}",
                f"{server_cpu / count * 1e6:,.0f}" if name not in ("cached", "put_many") else "",
            ]
        )
    print(
        f"# engine throughput: N = {n:,} calls, C = {C}, L = {L * 1e3:g} ms unless said, "
        f"C/L = {limit:,.0f} calls/s (best / median of {repeat})\n"
    )
    print(environment("aiohttp", "inspect_ai", "openai", "httpx"))
    print()
    headers = [
        "variant",
        "calls",
        "wall s",
        "calls/s (median)",
        "rate / (C/L)",
        "share of wall not server latency",
        "mean latency seen, ms",
        "client CPU us / call",
        "server CPU us / call",
    ]
    print(table(headers, out))
    print(f"\nengine vs sequential: {rate['engine'] / rate['sequential']:.1f}x calls/s")
    if "inspect" in rate:
        print(f"engine vs Inspect AI: {rate['engine'] / rate['inspect']:.2f}x calls/s")


if __name__ == "__main__":
    main()
