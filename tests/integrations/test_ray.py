"""The Ray backend on a local Ray instance (2 CPUs): the same results as the local
backend, limits in the endpoint actors, a killed worker replaced with nothing lost,
keys only through the runtime environment, bootstrap rounds as Ray tasks."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

if not os.environ.get("EIGENJURY_REQUIRE_RAY"):
    pytest.importorskip("ray", reason="the ray extra is not installed")
import ray

import peer_scripts  # noqa: F401  (registers the scripted population)
from batch_scripts import essence, read_results, write_requests
from eigenjury.cli import main
from eigenjury.engine import Call, CallResult, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.engine.backends import task_map
from eigenjury.errors import InputError
from eigenjury.integrations.ray_backend import RayBackend, init, map_rounds
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts
from eigenjury.testing.server import Faults, ServerThread
from peer_scripts import config

pytestmark = pytest.mark.ray
SECRET = "sk-ray-test-never-logged-7731"


@pytest.fixture(scope="module", autouse=True)
def cluster() -> Iterator[None]:
    """One local Ray instance for the module. Workers import the test helpers (scripted
    members are shipped to them by reference) from the tests folder."""
    here = Path(__file__).parent  # this module, and the helpers in tests/ above it
    saved = {k: os.environ.get(k) for k in ("PYTHONPATH", "OPENAI_COMPATIBLE_API_KEY")}
    paths = (str(here), str(here.parent), saved["PYTHONPATH"])
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ["OPENAI_COMPATIBLE_API_KEY"] = SECRET  # the workers inherit it
    init(num_cpus=2)
    yield
    ray.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def _batch(tmp_path: Path, base_url: str, backend: str, name: str) -> list[dict[str, Any]]:
    out = tmp_path / f"{name}.jsonl"
    code = main(
        [
            "batch", str(tmp_path / "req.jsonl"), "--model", f"openai-compatible:test@{base_url}",
            "--out", str(out), "--store", str(tmp_path / f"{name}.sqlite"), "--no-progress",
            "--timeout", "0.5", "--max-attempts", "20", "--concurrency", "16",
            "--backend", backend,
        ]
    )  # fmt: skip
    assert code == 0
    return read_results(out)


def test_batch_gives_the_same_results_with_both_backends(tmp_path: Path) -> None:
    write_requests(tmp_path / "req.jsonl", 120)
    with ServerThread(latency_s=0.01, faults=Faults.uniform(0.2, hang_s=2.0), seed=5) as server:
        on_ray = _batch(tmp_path, server.base_url, "ray", "ray")
        asked = server.stats()["requests"]
        again = _batch(tmp_path, server.base_url, "ray", "ray")  # the same store
        assert server.stats()["requests"] == asked  # cache hits never reach the cluster
        assert essence(again) == essence(on_ray) and all(r["cached"] for r in again)
        here = _batch(tmp_path, server.base_url, "local", "local")
        stats = server.stats()
    assert essence(on_ray) == essence(here)
    assert all(r["error"] is None for r in on_ray)
    assert stats["most_successes_for_one_request"] == 2  # each request: once per backend


def test_batch_on_a_scripted_model_is_the_same_on_both_backends(tmp_path: Path) -> None:
    write_requests(tmp_path / "req.jsonl", 50)
    rows = {}
    for backend in ("ray", "local"):
        out = tmp_path / f"{backend}.jsonl"
        args = ["batch", str(tmp_path / "req.jsonl"), "--model", "scripted:echo",
                "--out", str(out), "--store", str(tmp_path / f"{backend}.sqlite"),
                "--no-progress", "--backend", backend]  # fmt: skip
        assert main(args) == 0
        rows[backend] = essence(read_results(out))
    assert rows["ray"] == rows["local"]


@pytest.mark.slow
def test_the_driver_killed_with_sigkill_resumes_on_the_cluster(tmp_path: Path) -> None:
    """A `batch --backend ray` driver joined to the running cluster, killed mid-run, then
    rerun: the same output, and no committed call asked again."""
    requests = write_requests(tmp_path / "req.jsonl", 300)
    address = ray.get_runtime_context().gcs_address
    with ServerThread(latency_s=0.05) as server:

        def batch(out: Path) -> subprocess.Popen[bytes]:
            command = [
                sys.executable, "-m", "eigenjury", "batch", str(requests),
                "--model", f"openai-compatible:test@{server.base_url}", "--out", str(out),
                "--store", str(tmp_path / "s.sqlite"), "--concurrency", "8", "--no-progress",
                "--backend", "ray", "--ray-address", address,
            ]  # fmt: skip
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        process = batch(tmp_path / "first.jsonl")
        deadline = time.monotonic() + 120
        while server.stats()["successes"] < 60 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)
        with Store(tmp_path / "s.sqlite") as kept:
            committed = {json.loads(r.request)["messages"][-1][1] for r in kept if r.ok}
        before = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
        assert batch(tmp_path / "out.jsonl").wait(180) == 0
        after = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
    assert 0 < len(committed) < 300
    assert after == before, "a committed call was made again"
    rows = read_results(tmp_path / "out.jsonl")
    assert [r["text"] for r in rows] == [f"reply to: q {i}" for i in range(300)]


def test_rank_gives_the_same_leaderboard_with_both_backends(tmp_path: Path) -> None:
    records = {}
    for backend in ("ray", "local"):
        path = config(
            tmp_path / backend,
            scenarios={"limit": 12},
            engine={"concurrency": 8, "backend": backend},
            fit={"bootstrap": 20},
        )
        assert main(["rank", str(path), "--no-progress"]) == 0
        records[backend] = json.loads((tmp_path / backend / "run" / "results.json").read_text())
        verdicts = (tmp_path / backend / "run" / "verdicts.csv").read_text()
        records[backend]["verdicts"] = verdicts
    ray_models = {m["name"]: (m["elo"], m["elo_ci"]) for m in records["ray"]["models"]}
    local_models = {m["name"]: (m["elo"], m["elo_ci"]) for m in records["local"]["models"]}
    assert ray_models == local_models  # bootstrap rounds on Ray are the same rounds
    assert records["ray"]["verdicts"] == records["local"]["verdicts"]


def test_bootstrap_rounds_as_ray_tasks_equal_local_rounds() -> None:
    table = simulate_verdicts(make_population(5, 2, seed=1), n_scenarios=200, seed=2)
    here = PeerRanking(2, bootstrap=12, ci=0.8, seed=3, n_jobs=1).fit(table)
    there = PeerRanking(2, bootstrap=12, ci=0.8, seed=3, map_rounds=map_rounds).fit(table)
    np.testing.assert_array_equal(here.elo_ci_, there.elo_ci_)


def test_a_simulation_sweep_runs_as_ray_tasks_in_order() -> None:
    jobs = [(6, 2), (4, 3), (8, 1)]
    on_ray = task_map("ray")(_simulated_elo, jobs)
    here = task_map("local")(_simulated_elo, jobs)
    assert [list(x) for x in on_ray] == [list(x) for x in here]
    assert [len(x) for x in on_ray] == [6, 4, 8]


def _simulated_elo(job: tuple[int, int]) -> np.ndarray:
    models, seed = job
    table = simulate_verdicts(make_population(models, 2, seed=seed), n_scenarios=100, seed=seed)
    return PeerRanking(2, bootstrap=0, seed=seed).fit(table).elo_


def test_a_killed_worker_is_replaced_and_nothing_is_lost(tmp_path: Path) -> None:
    n, concurrency = 160, 8
    with ServerThread(latency_s=0.05) as server:
        spec = ModelSpec.parse(f"openai-compatible:test@{server.base_url}")
        calls = [Call(spec, ChatRequest.chat(("user", f"q {i}"))) for i in range(n)]
        backend = RayBackend()
        engine = Engine(
            Store(tmp_path / "s.sqlite"),
            backend=backend,
            limits=EndpointLimits(concurrency=concurrency),
            retry=RetryPolicy(max_attempts=5, timeout_s=5.0),
            progress=False,
        )
        pids: list[int] = []

        def kill_mid_run() -> None:
            while not backend.actors:
                time.sleep(0.05)
            [actor] = backend.actors.values()
            pids.append(ray.get(actor.pid.remote()))
            while server.stats()["successes"] < n // 4:
                time.sleep(0.02)
            os.kill(pids[0], signal.SIGKILL)
            while len(pids) == 1:  # until the restarted actor answers
                try:
                    pids.append(ray.get(actor.pid.remote()))
                except ray.exceptions.RayError:
                    time.sleep(0.1)

        killer = threading.Thread(target=kill_mid_run)
        killer.start()
        results = engine.run_sync(calls)
        killer.join()
        stats = server.stats()
    assert len(pids) == 2 and pids[0] != pids[1]  # killed, and replaced
    assert [r.completion.text for r in results] == [f"reply to: q {i}" for i in range(n)]  # type: ignore[union-attr]
    with Store(tmp_path / "s.sqlite") as store:
        assert store.counts() == {"ok": n}
    # only calls in flight when the worker died can have been made twice
    assert stats["successes"] <= n + concurrency
    assert stats["distinct_successes"] == n


def test_a_stream_of_calls_runs_on_ray(tmp_path: Path) -> None:
    """A generator of calls through `Engine.stream` with the Ray backend, read a window of
    64 calls ahead: every result in input order, each call made once, and a rerun all
    cache hits that never reach the cluster."""
    n = 400
    with ServerThread(latency_s=0.01) as server:
        spec = ModelSpec.parse(f"openai-compatible:test@{server.base_url}")
        backend = RayBackend()
        engine = Engine(
            Store(tmp_path / "s.sqlite"),
            backend=backend,
            limits=EndpointLimits(concurrency=8),
            progress=False,
            window=64,
        )

        async def stream() -> list[CallResult]:
            source = (Call(spec, ChatRequest.chat(("user", f"q {i}")), tag=i) for i in range(n))
            async with engine, contextlib.aclosing(engine.stream(source)) as results:
                return [result async for result in results]

        try:
            first = asyncio.run(stream())
            asked = server.stats()["requests"]
            again = asyncio.run(stream())
            stats = server.stats()
        finally:
            backend.close()
    assert [r.call.tag for r in first] == list(range(n)) == [r.call.tag for r in again]
    assert [r.completion.text for r in first] == [f"reply to: q {i}" for i in range(n)]  # type: ignore[union-attr]
    assert not any(r.cached for r in first) and all(r.cached for r in again)
    assert stats["requests"] == asked == n and stats["distinct_successes"] == n
    with Store(tmp_path / "s.sqlite") as store:
        assert store.counts() == {"ok": n}


def test_keys_reach_workers_only_through_their_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_requests(tmp_path / "req.jsonl", 10)
    with ServerThread(api_key=SECRET) as server:
        rows = _batch(tmp_path, server.base_url, "ray", "keyed")
        assert all(r["error"] is None for r in rows)  # the actor had the key
        # a key this process has but the workers were started without: a clear stop
        monkeypatch.setenv("EIGENJURY_LATE_KEY", "late")
        spec = {
            "spec": f"openai-compatible:late@{server.base_url}",
            "api_key_env": "EIGENJURY_LATE_KEY",
        }
        backend = RayBackend()
        engine = Engine(Store(tmp_path / "late.sqlite"), backend=backend, progress=False)
        with pytest.raises(InputError, match=r"EIGENJURY_LATE_KEY.*workers' environment"):
            engine.run_sync([Call(ModelSpec.from_value(spec), ChatRequest.chat(("user", "x")))])
    logs = Path(ray._private.worker.global_worker.node.get_session_dir_path()) / "logs"  # type: ignore[attr-defined]
    for path in [*logs.rglob("*"), *tmp_path.rglob("*")]:
        if path.is_file() and path.stat().st_size < 50_000_000:
            assert SECRET.encode() not in path.read_bytes(), path
