"""What the safe choice of llama.cpp CPU code paths costs: the bundled models with
extra buffer types (weight repacking, AMX where present) against llama.cpp's plain
kernels, and the one-time probe that chooses between them.

Each measurement runs in its own process (a model loads once per process), with the
path forced by EIGENJURY_LLAMA_EXTRA_BUFFERS; paths alternate within each repeat. The
workloads are eigenjury's own: a judge call scored over three labels after a prompt of
about 400 tokens (no prefix shared between calls), and free generation of 64 tokens.

    python benchmarks/local_cpu_paths.py [--repeats 3] [--calls 8] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import environment, table

MODELS = ("smollm2-135m", "gemma3-270m")
PATHS = ("on", "off")


def child(model: str, calls: int) -> dict[str, float]:
    """Load time, judge calls per second and generated tokens per second, in this process."""
    from eigenjury.models import ChatRequest, ModelSpec
    from eigenjury.models.factory import make_provider

    provider = make_provider(ModelSpec.parse(f"local:{model}"))

    def run(request: ChatRequest) -> tuple[float, int]:
        start = time.perf_counter()
        completion = asyncio.run(provider.generate(request))
        return time.perf_counter() - start, completion.usage.output_tokens

    load_s, _ = run(ChatRequest.chat(("user", "Hi."), max_tokens=1))
    judge_s = 0.0
    for i in range(calls):
        story = " ".join(
            f"Step {i}.{k}: the helper listens, then answers kindly." for k in range(40)
        )
        request = ChatRequest.chat(
            ("system", "Compare two replies for kindness. Answer 1, 2 or 0 for a tie."),
            ("user", f"Scenario {i}. {story}\nReply 1: sure.\nReply 2: no."),
            choices=("0", "1", "2"),
        )
        judge_s += run(request)[0]
    generate_s, tokens = run(
        ChatRequest.chat(("user", "Tell a short story about a lighthouse."), max_tokens=64)
    )
    return {
        "load_s": load_s,
        "judge_calls_per_s": calls / judge_s,
        "tokens_per_s": tokens / generate_s,
    }


def measure(model: str, path: str, calls: int, cache: str) -> dict[str, float]:
    env = {**os.environ, "EIGENJURY_LLAMA_EXTRA_BUFFERS": path, "EIGENJURY_CACHE_DIR": cache}
    done = subprocess.run(
        [sys.executable, __file__, "--child", model, "--calls", str(calls)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def probe_seconds(model: str, repeats: int) -> float:
    """Median seconds of the one-time probe of the fast path, in a child process."""
    from eigenjury.models.providers.local import model_path
    from eigenjury.models.providers.local_cpu import run_probe

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        assert run_probe(model_path(model), extra_buffers=True).ok
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=8)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.calls)))
        return
    if args.quick:
        args.repeats, args.calls = 1, 2
    print(environment("llama-cpp-python"))
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for model in MODELS:
            runs: dict[str, list[dict[str, float]]] = {p: [] for p in PATHS}
            for _ in range(args.repeats):
                for path in PATHS:
                    runs[path].append(measure(model, path, args.calls, cache))
            median = {
                p: {k: statistics.median(r[k] for r in runs[p]) for k in runs[p][0]} for p in PATHS
            }
            for path in PATHS:
                m = median[path]
                rows.append([model, path, m["load_s"], m["judge_calls_per_s"], m["tokens_per_s"]])
            on, off = median["on"], median["off"]
            rows.append(
                [
                    model,
                    "off / on",
                    off["load_s"] / on["load_s"],
                    off["judge_calls_per_s"] / on["judge_calls_per_s"],
                    off["tokens_per_s"] / on["tokens_per_s"],
                ]
            )
            rows.append([model, "probe (s, once)", probe_seconds(model, args.repeats), "", ""])
    print(
        table(["model", "extra buffers", "load (s)", "judge calls/s", "generated tokens/s"], rows)
    )
    print(f"medians of {args.repeats} processes per path, {args.calls} judge calls each")


if __name__ == "__main__":
    main()
