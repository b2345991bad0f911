"""A provider batch of the largest size against the same calls made live (issue 31's
batch APIs; BENCHMARKS.md section 27).

The in-repo test server runs in a process of its own, answering as a model writes
(`--reply-words 60`) and ending each batch as soon as it is polled. `--calls` distinct
calls (prompts of about 400 characters, max_tokens 120) go, each case in a fresh
process and on a fresh store: live at 64 in flight, then through the batch-api
backend as one OpenAI batch and as one Anthropic batch. Per case: the wall time from
the first call to the last result committed, the calls a second, the process's peak
memory (ru_maxrss) and the dollars (every model priced at $2.50 / $10.00 per million
tokens), against the live run's.

    python benchmarks/batch_api.py [--calls 50000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import environment, table

CASE = r"""
import json, os, resource, sys, time
from eigenjury.engine import Call, EndpointLimits, Engine, Store
from eigenjury.engine.batch_api import BatchApiBackend
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.prices import Price, PriceTable

url, how, n, store = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
provider = "anthropic" if how == "anthropic" else "openai"
spec = ModelSpec.parse(f"{provider}:m1@{url}")
words = "the quick brown fox jumps over the lazy dog and keeps on running " * 6
calls = [Call(spec, ChatRequest.chat(("user", f"{i}: {words}"), max_tokens=120))
         for i in range(n)]
backend = None if how == "live" else BatchApiBackend(poll_s=0.2, gather_s=0.2, first_poll_s=0.1)
engine = Engine(Store(store), backend=backend, limits=EndpointLimits(concurrency=64),
                prices=PriceTable({f"{provider}:m1": Price(2.5, 10.0)}), progress=False)
start = time.perf_counter()
results = engine.run_sync(calls)
wall = time.perf_counter() - start
assert all(r.ok for r in results), [r.error_message for r in results if not r.ok][:3]
print(json.dumps({"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "usd": sum(r.completion.cost_usd for r in results)}))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    args = parser.parse_args()
    port = free_port()
    env = {**os.environ, "OPENAI_API_KEY": "sk-bench", "ANTHROPIC_API_KEY": "sk-bench"}
    server = subprocess.Popen(
        [sys.executable, "-m", "eigenjury.testing.server", "--port", str(port),
         "--reply-words", "60"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None and "serving" in server.stdout.readline()
    url = f"http://127.0.0.1:{port}/v1"
    rows, live = [], None
    try:
        with tempfile.TemporaryDirectory() as folder:
            for how in ("live", "openai", "anthropic"):
                done = subprocess.run(
                    [sys.executable, "-c", CASE, url, how, str(args.calls),
                     str(Path(folder) / f"{how}.sqlite")],
                    env=env, capture_output=True, text=True,
                )  # fmt: skip
                if done.returncode != 0:
                    raise SystemExit(f"the {how} case failed:\n{done.stderr}")
                got = json.loads(done.stdout.splitlines()[-1])
                live = live or got
                name = "live, 64 in flight" if how == "live" else f"batch-api, one {how} batch"
                rows.append((
                    name, f"{got['wall']:.1f}", f"{args.calls / got['wall']:,.0f}",
                    f"{got['rss_mb']:.0f}", f"{got['usd']:.2f}",
                    f"{got['usd'] / live['usd']:.3f}",
                ))  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)
    print(environment())
    print(f"{args.calls:,} calls; peak memory of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")  # fmt: skip
    print(table(("case", "seconds", "calls/s", "peak MB", "USD", "USD / live"), rows))


if __name__ == "__main__":
    main()
