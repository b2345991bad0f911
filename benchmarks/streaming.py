"""Streaming: memory and speed at any number of calls (BENCHMARKS.md section 17).

Measured side by side in one run:

- `eigenjury batch` on the scripted echo model (no network) for 1e4 to 2e6 requests,
  each run in a process of its own, `python -m eigenjury batch REQ --model
  scripted:echo --out OUT --store FRESH --no-progress`: peak resident memory (the
  child's ru_maxrss, from os.wait4), wall seconds and calls/s; then the same command
  again on the same store, every call a cache hit; and the store's size per call.
  The request files are written to a temporary folder first.
- Time to first dispatch at 1e6 calls: from the start of `Engine.stream` (or
  `Engine.run`) to the first `provider.generate`, which a provider double records; for
  a generator of calls (made as they are read), and for a list built up front (its
  building not counted) through `stream` and through `run`; and `run` of the engine
  before streaming (engine.py of commit af57ddf~1, loaded from git as a module of its
  own) on the same list.
- Throughput against the test server in its own process (as engine_throughput.py):
  C = 64, L = 50 ms, 5,000 distinct calls into a fresh store, then the same calls
  again (all cache hits): this engine's `run` on a list and `stream` on a generator,
  and the engine before streaming, interleaved, best / median of 3; rate / (C/L).
- With --rank, a rank run of 1e6 scripted comparisons set up as
  benchmarks/rank_scale.py sets it up: seconds and peak resident memory.

    python benchmarks/streaming.py [--quick] [--rank]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from _common import ROOT, environment, spread, table
from eigenjury.engine import Call, EndpointLimits, Engine, Store
from eigenjury.models import ChatRequest, Completion, ModelSpec, Usage
from engine_throughput import Server, test_server
from rank_scale import run_once, write_config

OLD_COMMIT = "af57ddf~1"  # the engine before streaming
SCRIPTED = ModelSpec.parse("scripted:echo")


def load_old_engine(folder: Path) -> ModuleType:
    """engine.py as it was before streaming, as a module of its own (it imports today's
    store, caller and limits, which kept their interfaces)."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{OLD_COMMIT}:src/eigenjury/engine/engine.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = folder / "old_engine.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("eigenjury_old_engine", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def load() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


# --- eigenjury batch: peak memory, time, store size ---------------------------------


def write_requests(path: Path, n: int) -> None:
    with path.open("w") as f:
        for i in range(n):
            f.write(f'{{"id": "r{i}", "messages": [{{"role": "user", "content": "q {i}"}}]}}\n')


def run_batch(requests: Path, out: Path, store: Path) -> tuple[float, float]:
    """Wall seconds and peak resident MB of one `eigenjury batch` process."""
    command = [sys.executable, "-m", "eigenjury", "batch", str(requests), "--model",
               "scripted:echo", "--out", str(out), "--store", str(store),
               "--no-progress"]  # fmt: skip
    log = out.with_suffix(".log")
    with log.open("w") as printed:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=printed, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"eigenjury batch exited with {process.returncode}: {log.read_text()}")
    return wall, usage.ru_maxrss / 1024  # KB on Linux


def lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def batch_rows(sizes: list[int], tmp: Path) -> tuple[list[list[Any]], dict[int, float]]:
    rows, peaks = [], {}
    for n in sizes:
        requests = tmp / f"req{n}.jsonl"
        write_requests(requests, n)
        store = tmp / f"s{n}.sqlite"
        for kind in ("fresh", "cache hits"):
            before = load()
            wall, peak = run_batch(requests, tmp / "out.jsonl", store)
            assert lines(tmp / "out.jsonl") == n
            size = sum(p.stat().st_size for p in tmp.glob(f"s{n}.sqlite*"))
            rows.append([f"{n:,}", kind, f"{peak:,.0f}", f"{wall:.1f}", f"{n / wall:,.0f}",
                         f"{size / n:,.0f}", f"{before:.1f}"])  # fmt: skip
            if kind == "fresh":
                peaks[n] = peak
        requests.unlink()
        for path in tmp.glob(f"s{n}.sqlite*"):
            path.unlink()
    return rows, peaks


# --- time to first dispatch ------------------------------------------------------


class FirstCall:
    """A provider that records when it is first called."""

    def __init__(self) -> None:
        self.first: float | None = None

    async def generate(self, request: ChatRequest) -> Completion:
        if self.first is None:
            self.first = time.perf_counter()
        return Completion("echo", "stop", Usage(2, 1))

    async def aclose(self) -> None:
        return None


def scripted_calls(n: int, call: Callable[..., Any] = Call) -> Iterator[Any]:
    return (call(SCRIPTED, ChatRequest.chat(("user", f"q {i}"))) for i in range(n))


async def first_dispatch(engine_class: Any, how: str, source: Any, store: Path) -> float:
    """Seconds from the start of the stream (or run) to the first provider call; the run
    is then stopped (what finished is committed)."""
    provider = FirstCall()
    engine = engine_class(Store(store), providers={str(SCRIPTED): provider}, progress=False)
    async with engine:
        start = time.perf_counter()
        if how == "stream":
            async with contextlib.aclosing(engine.stream(source)) as results:
                async for _ in results:
                    break
        else:
            task = asyncio.create_task(engine.run(source))
            while provider.first is None:
                await asyncio.sleep(0.001)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    engine.store.close()
    assert provider.first is not None
    return provider.first - start


def first_dispatch_rows(n: int, repeat: int, old: ModuleType, tmp: Path) -> list[list[Any]]:
    built = list(scripted_calls(n))
    built_old = list(scripted_calls(n, old.Call))
    variants: dict[str, Callable[[Path], float]] = {
        "this engine: stream(generator)": lambda store: asyncio.run(
            first_dispatch(Engine, "stream", scripted_calls(n), store)
        ),
        "this engine: stream(list built before)": lambda store: asyncio.run(
            first_dispatch(Engine, "stream", built, store)
        ),
        "this engine: run(list built before)": lambda store: asyncio.run(
            first_dispatch(Engine, "run", built, store)
        ),
        "engine before streaming: run(list built before)": lambda store: asyncio.run(
            first_dispatch(old.Engine, "run", built_old, store)
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(repeat):
        for name, measure in variants.items():
            store = tmp / f"first{r}.sqlite"
            times[name].append(measure(store))
            for path in tmp.glob(f"first{r}.sqlite*"):
                path.unlink()
    return [[name, f"{n:,}", spread(t), f"{statistics.median(t):.3f}"] for name, t in times.items()]


# --- throughput against the test server -------------------------------------------


def server_calls(server: Server, n: int, tag: str, call: Callable[..., Any] = Call) -> list[Any]:
    spec = ModelSpec.parse(f"openai-compatible:test@{server.url}")
    return [call(spec, ChatRequest.chat(("user", f"q {tag} {i}"))) for i in range(n)]


def stream_all(engine: Engine, calls: list[Call]) -> list[Any]:
    async def go() -> list[Any]:
        async with engine, contextlib.aclosing(engine.stream(iter(calls))) as results:
            return [result async for result in results]

    return asyncio.run(go())


RUN, STREAM, BEFORE = (
    "this engine: run(list)",
    "this engine: stream(generator)",
    "engine before streaming: run(list)",
)


def throughput_rows(
    server: Server,
    n: int,
    concurrency: int,
    latency: float,
    repeat: int,
    old: ModuleType,
    tmp: Path,
) -> tuple[list[list[Any]], dict[str, float]]:
    limits = EndpointLimits(concurrency=concurrency)

    def runner(name: str, store: Store) -> Callable[[list[Any]], list[Any]]:
        """A new engine on `store`, as a new command would make."""
        if name == BEFORE:
            return old.Engine(store, limits=limits, progress=False).run_sync  # type: ignore[no-any-return]
        engine = Engine(store, limits=limits, progress=False)
        return engine.run_sync if name == RUN else lambda calls: stream_all(engine, calls)

    def calls(name: str, tag: str, count: int) -> list[Any]:
        return server_calls(server, count, tag, old.Call if name == BEFORE else Call)

    names = [RUN, STREAM, BEFORE]
    walls: dict[tuple[str, str], list[float]] = {}
    for v, name in enumerate(names):  # warm up: connections, first use of each path
        runner(name, Store(tmp / f"warm{v}.sqlite"))(calls(name, f"warm {v}", 200))
        walls[(name, "fresh")], walls[(name, "cache hits")] = [], []
    for r in range(repeat):
        for name in names[r % 3 :] + names[: r % 3]:  # interleaved, each first in turn
            store = Store(tmp / f"tp{r}-{names.index(name)}.sqlite")
            made = calls(name, f"r{r} {name}", n)
            for kind in ("fresh", "cache hits"):
                start = time.perf_counter()
                results = runner(name, store)(made)
                walls[(name, kind)].append(time.perf_counter() - start)
                assert all(res.ok and res.cached == (kind == "cache hits") for res in results)
            store.close()
    limit = concurrency / latency
    rows, rate = [], {}
    for (name, kind), times in walls.items():
        rate[f"{name}, {kind}"] = n / statistics.median(times)
        ratio = f"{rate[f'{name}, {kind}'] / limit:.3f}" if kind == "fresh" else ""
        rows.append([name, kind, f"{n:,}", spread(times), f"{n / statistics.median(times):,.0f}",
                     ratio])  # fmt: skip
    return rows, rate


# --- a rank run of 1e6 scripted comparisons ---------------------------------------


def rank_run(comparisons: int, tmp: Path) -> list[Any]:
    """One fresh `eigenjury rank` of `comparisons` scripted comparisons as
    benchmarks/rank_scale.py runs it: seconds, peak resident MB and exit status. Off
    unless --rank (minutes)."""
    folder = tmp / "rank"
    folder.mkdir()
    seconds, peak, status = run_once(write_config(folder, comparisons, bootstrap=50))
    return [f"{comparisons:,}", f"{seconds:.0f}", f"{peak:,.0f}", status]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rank", action="store_true", help="also a rank run (the hook)")
    args = parser.parse_args()
    quick = args.quick
    sizes = [1000, 2000] if quick else [10**4, 2 * 10**4, 10**5, 2 * 10**5, 10**6, 2 * 10**6]
    n_first, repeat = (10**4, 1) if quick else (10**6, args.repeat)
    n_server, concurrency, latency = (300 if quick else 5000), 64, 0.05
    print("# streaming: memory and speed at any number of calls\n")
    print(environment("aiohttp"))
    print(f"\nstarted {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load():.2f}\n")
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        old = load_old_engine(tmp)
        rows, peaks = batch_rows(sizes, tmp)
        headers = ["requests", "run", "peak RSS MB", "wall s", "calls/s", "store bytes/call",
                   "load before"]  # fmt: skip
        print("## eigenjury batch, scripted:echo\n")
        print(table(headers, rows))
        small, large = peaks[sizes[1]], peaks[sizes[-1]]
        print(f"\npeak RSS at {sizes[-1]:,} / at {sizes[1]:,}: {large / small:.2f}x (fresh)\n")
        print(f"## time to first dispatch (best / median of {repeat})\n")
        first = first_dispatch_rows(n_first, repeat, old, tmp)
        print(table(["variant", "calls", "seconds", "median s"], first))
        print(f"\n## throughput: test server, C = {concurrency}, L = {latency * 1e3:g} ms\n")
        with test_server(latency) as server:
            through, rate = throughput_rows(
                server, n_server, concurrency, latency, repeat, old, tmp
            )
        headers = ["engine", "run", "calls", "wall s", "calls/s (median)", "rate / (C/L)"]
        print(table(headers, through))
        for kind in ("fresh", "cache hits"):
            new, streamed = rate[f"{RUN}, {kind}"], rate[f"{STREAM}, {kind}"]
            before = rate[f"{BEFORE}, {kind}"]
            print(f"\n{kind}: run / before {new / before:.3f}, stream / before "
                  f"{streamed / before:.3f}")  # fmt: skip
        if args.rank:
            print("\n## rank run, scripted comparisons (benchmarks/rank_scale.py)\n")
            row = rank_run(10**4 if quick else 10**6, tmp)
            print(table(["comparisons", "seconds", "peak RSS MB", "exit status"], [row]))
    print(f"\nended {time.strftime('%H:%M:%S', time.gmtime())} UTC, load {load():.2f}")


if __name__ == "__main__":
    main()
