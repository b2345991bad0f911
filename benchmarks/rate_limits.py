"""The engine against a server that throttles at a rate it does not tell (issue 31's
adaptive limits; BENCHMARKS.md section 25).

The in-repo test server answers in 50 ms plus 2 ms for every other request in flight,
and refuses with a 429 (Retry-After 1 s) any request beyond R accepted in the last
second, sending no x-ratelimit headers: the client must find R. The same stream of
distinct calls runs with fixed settings too high (64 in flight, not adapting) and too
low (4 in flight), with the engine's default adaptive limits starting from 64, then a
second adaptive run on the first one's store (starting from the limits it kept), and
one against the server stating R in OpenAI's x-ratelimit headers. The server's counts
are sampled every second: after the first `--settle` seconds, the answered requests
per second against R, and the share of requests refused.

    python benchmarks/rate_limits.py [--rate 100] [--seconds 90] [--settle 30]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import tempfile
import threading
import time
from pathlib import Path

from _common import environment, table
from eigenjury.engine import Call, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.testing.server import FaultServer, ServerThread, Throttle

RETRY = RetryPolicy(max_attempts=30, timeout_s=30.0, backoff_s=0.5, backoff_max_s=10.0)


def sampled(server: FaultServer, stop: threading.Event) -> list[tuple[float, int, int]]:
    """(seconds, requests, refused) every second until `stop`, in a thread of its own."""
    samples: list[tuple[float, int, int]] = []

    def sample() -> None:
        start = time.monotonic()
        while not stop.wait(1.0):
            samples.append((time.monotonic() - start, server.requests, server.throttled))

    threading.Thread(target=sample, daemon=True).start()
    return samples


def run(url: str, limits: EndpointLimits, calls: int, store: Path, prefix: str) -> float:
    """Seconds the engine takes for `calls` distinct calls (every one must succeed)."""
    spec = ModelSpec.parse(f"openai-compatible:test@{url}")

    async def go() -> float:
        async with Engine(Store(store), limits=limits, retry=RETRY, progress=False) as engine:
            requests = (
                Call(spec, ChatRequest.chat(("user", f"{prefix}: question {k}")), role="judge")
                for k in range(calls)
            )
            start = time.perf_counter()
            async with contextlib.aclosing(engine.stream(requests, ordered=False)) as results:
                failed = [r async for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"{len(failed)} calls failed: {failed[0].error_message}")
            return time.perf_counter() - start

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="R: requests a second")
    parser.add_argument("--seconds", type=float, default=90.0, help="each run's length at R")
    parser.add_argument("--settle", type=float, default=30.0)
    args = parser.parse_args()
    calls = int(args.rate * args.seconds)
    adaptive = EndpointLimits(concurrency=64)
    # (limits, whether the server states R in x-ratelimit headers, the store used)
    settings = {
        "fixed, too high (64 in flight)": (
            EndpointLimits(concurrency=64, adaptive=False),
            False,
            "a",
        ),
        "fixed, too low (4 in flight)": (EndpointLimits(concurrency=4, adaptive=False), False, "b"),
        "adaptive (default), from 64": (adaptive, False, "c"),
        "adaptive, a second run (from what the first kept)": (adaptive, False, "c"),
        "adaptive, the server states R (headers)": (adaptive, True, "d"),
    }
    rows = []
    ports = {store: free_port() for _, _, store in settings.values()}  # one endpoint a store
    with tempfile.TemporaryDirectory() as tmp:
        for name, (limits, headers, store) in settings.items():
            throttle = Throttle(
                args.rate, per_in_flight_s=0.002, retry_after_s=1.0, headers=headers
            )
            stop = threading.Event()
            with ServerThread(latency_s=0.05, throttle=throttle, port=ports[store]) as server:
                samples = sampled(server, stop)
                # distinct calls in every run: a second run on a store sends anew
                wall = run(server.base_url, limits, calls, Path(tmp) / f"{store}.sqlite", name)
                stop.set()
                total, refused = server.requests, server.throttled
            rows.append(row(name, samples, args, wall, calls, refused, total))
    print(environment("aiohttp"))
    print(f"R = {args.rate:g} requests/s, {calls:,} calls per run, after {args.settle:g} s:")
    columns = ["settings", "seconds", "calls/s", "refused (all)"]
    print(table([*columns, "answered/s after", "refused after"], rows))


def free_port() -> int:
    """A port nothing listens on now (the same endpoint for a second run on a store)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def row(
    name: str,
    samples: list[tuple[float, int, int]],
    args: argparse.Namespace,
    wall: float,
    calls: int,
    refused: int,
    total: int,
) -> list[str]:
    later = [s for s in samples if s[0] > args.settle]
    if len(later) >= 2:
        (t0, r0, f0), (t1, r1, f1) = later[0], later[-1]
        answered = ((r1 - r0) - (f1 - f0)) / (t1 - t0)
        share = (f1 - f0) / max(1, r1 - r0)
        after = [f"{answered:.0f} ({answered / args.rate:.2f} R)", f"{share:.1%}"]
    else:
        after = ["(done before)", "-"]
    return [name, f"{wall:.1f}", f"{calls / wall:.0f}", f"{refused / total:.1%}", *after]


if __name__ == "__main__":
    main()
