"""The Ray backend against the local one, and the driver's ceilings.

Measured side by side, interleaved and repeated (best / median seconds):

- throughput against the in-repo test server (its own process, L = 50 ms) at equal total
  concurrency C: `Engine(store)` and `Engine(store, backend=RayBackend())` on N distinct
  calls, as rate / (C / L);
- the driver's ceiling: the same with a zero-latency scripted provider (no network), so
  the rate is what the driver can dispatch, receive and commit per second;
- `Store.put_many` alone (batches of 256): the store's write ceiling;
- bootstrap rounds of a peer-ranking fit: forked processes against Ray tasks.

    python benchmarks/scale_out.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from functools import partial
from pathlib import Path

from _common import environment, spread, table, timed
from eigenjury.engine import Call, EndpointLimits, Engine, Store
from eigenjury.integrations.ray_backend import RayBackend, init, map_rounds
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts
from engine_throughput import make_calls, put_batches, store_rows, test_server

LATENCY = 0.05


def run(calls: list[Call], concurrency: int, backend: RayBackend | None) -> None:
    with tempfile.TemporaryDirectory() as d:
        engine = Engine(
            Store(Path(d) / "s.sqlite"),
            limits=EndpointLimits(concurrency=concurrency, adaptive=False),
            progress=False,
            backend=backend,
        )
        results = engine.run_sync(calls)
        engine.store.close()
    assert all(r.ok for r in results), "a call failed"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    n, repeats = (400, 1) if args.quick else (4000, 3)
    init(num_cpus=2)
    cluster = RayBackend()  # actors start on first use and stay (measured apart below)
    print(environment("ray", "aiohttp"))
    rows = []
    with test_server(LATENCY) as server:
        for concurrency in (16, 64):
            times: dict[str, list[float]] = {"local": [], "ray": []}
            for r in range(repeats):
                for name in ("local", "ray"):  # interleaved
                    calls = make_calls(server, n, f"{name}-{concurrency}-{r}")
                    backend = cluster if name == "ray" else None
                    times[name].append(timed(partial(run, calls, concurrency, backend))[0])
            for name, t in times.items():
                rate = n / statistics.median(t)
                rows.append([f"test server, L = 50 ms, C = {concurrency}", name, spread(t),
                             f"{rate:,.0f}", f"{rate / (concurrency / LATENCY):.3f}"])  # fmt: skip
    echo = ModelSpec.parse("scripted:echo")
    times = {"local": [], "ray": []}
    for r in range(repeats):
        for name in ("local", "ray"):
            calls = [Call(echo, ChatRequest.chat(("user", f"{name} {r} {i}"))) for i in range(n)]
            backend = cluster if name == "ray" else None
            times[name].append(timed(partial(run, calls, 256, backend))[0])
    for name, t in times.items():
        rows.append(["no latency (driver ceiling), C = 256", name, spread(t),
                     f"{n / statistics.median(t):,.0f}", "-"])  # fmt: skip
    start = []
    for r in range(repeats):  # a fresh actor: what the first call to an endpoint waits for
        fresh = RayBackend()
        calls = [Call(echo, ChatRequest.chat(("user", f"first {r}")))]
        start.append(timed(partial(run, calls, 1, fresh))[0])
        fresh.close()
    rows.append(["one call to a new endpoint (actor start)", "ray", spread(start), "-", "-"])
    with test_server(0.0) as server:
        batches = [store_rows(256, server) for _ in range(n // 256 or 1)]
    with tempfile.TemporaryDirectory() as d:
        put = [timed(partial(put_batches, Store(Path(d) / f"{k}.sqlite"), batches))[0]
               for k in range(repeats)]  # fmt: skip
    written = sum(len(b) for b in batches)
    rows.append(["Store.put_many, batches of 256", "store", spread(put),
                 f"{written / statistics.median(put):,.0f}", "-"])  # fmt: skip
    print(f"{n} calls per run, {repeats} runs per variant; rate = calls (or rows) per second")
    print(table(["workload", "backend", "seconds", "rate / s", "rate / (C/L)"], rows))

    verdicts = simulate_verdicts(make_population(20, 2, seed=1), n_scenarios=20000, seed=2)
    boot = {"forked processes": [], "Ray tasks": []}
    for _ in range(repeats):
        boot["forked processes"].append(
            timed(lambda: PeerRanking(2, bootstrap=100, seed=3).fit(verdicts))[0]
        )
        boot["Ray tasks"].append(
            timed(
                lambda: PeerRanking(2, bootstrap=100, seed=3, map_rounds=map_rounds).fit(verdicts)
            )[0]
        )
    print(f"\nfit with 100 bootstrap rounds, 20 models, {len(verdicts):,} verdicts (2 CPUs)")
    print(table(["rounds run by", "seconds"], [[k, spread(v)] for k, v in boot.items()]))


if __name__ == "__main__":
    main()
