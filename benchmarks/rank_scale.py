"""A rank run of up to a million scripted comparisons: peak memory and time.

`eigenjury rank` on a population of 10 scripted members (design "all": every member
judges every ordered pair of members on each scenario, its own included: 10 x 10 x 9 =
900 comparisons a scenario) with as many scenarios as the comparisons asked for need.
Members carry a hidden quality; evaluees sign their replies with it and judges draw
each verdict from a Bradley-Terry model of the two qualities, seeded by the request, so
the run is reproducible and its ranking can be checked against the truth. The constitution is one
short criterion and reflections are off, so each comparison prompt is about 600 bytes.

Each size runs in a fresh process with a fresh store and output folder; peak resident
memory is the child's (os.wait4), wall time the process's. Run twice, the
second time from the store (every call a cache hit).

    python benchmarks/rank_scale.py [--comparisons 1000000 100000] [--bootstrap 50]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from _common import environment, table

MEMBERS = 10
PER_SCENARIO = MEMBERS * MEMBERS * (MEMBERS - 1)  # judges x ordered pairs

CHILD = """
import hashlib, math, random, re, sys
from eigenjury.cli import main
from eigenjury.models.providers.scripted import register_script

QUALITY = re.compile(r"\\[quality (-?[\\d.]+)\\]")
REPLY = re.compile(r"Reply ([AB]):\\n<reply>\\n(.*?)\\n</reply>", re.S)

def truth(request):
    system = request.messages[0].content if request.messages[0].role == "system" else ""
    if "Someone has come to you" in system:
        return f"Advice [quality {QUALITY.search(system).group(1)}]."
    replies = dict(REPLY.findall(request.messages[-1].content))
    a, b = (math.exp(float(QUALITY.search(replies[x]).group(1))) for x in "AB")
    seed = hashlib.sha256(repr(request.identity()).encode()).digest()[:8]
    u = random.Random(int.from_bytes(seed, "big")).random()
    return "<verdict>" + ("A" if u < a / (a + b) else "B") + "</verdict>"

register_script("bench-truth", truth)
sys.exit(main(sys.argv[1:]))
"""


def write_config(folder: Path, comparisons: int, bootstrap: int) -> Path:
    scenarios = max(1, round(comparisons / PER_SCENARIO))
    with (folder / "scenarios.jsonl").open("w") as f:
        for i in range(scenarios):
            f.write(json.dumps({"id": f"s{i}", "text": f"Scenario {i}: what should I do?"}) + "\n")
    config = {
        "name": "rank at scale",
        "population": [
            {"name": f"m{i}", "model": "scripted:bench-truth", "persona": f"[quality {i / 3:.2f}]"}
            for i in range(MEMBERS)
        ],
        "constitution": {"title": "Short", "criteria": ["Prefer the more helpful reply."]},
        "scenarios": {"source": "scenarios.jsonl"},
        "sampling": {"design": "all"},
        "judging": {"reflections": False, "ties": False},
        "fit": {"bootstrap": bootstrap, "style": "none"},
        "engine": {"store": "store.sqlite", "concurrency": 64},
    }
    path = folder / "rank.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_once(config: Path) -> tuple[float, float, int]:
    """(seconds, peak RSS in MB, exit status) of one `eigenjury rank` in a child."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "rank", str(config), "--no-progress"],
        cwd=config.parent,
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - start, usage.ru_maxrss / 1024, child.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--comparisons", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--bootstrap", type=int, default=50)
    args = parser.parse_args()
    print(environment())
    rows = []
    for n in args.comparisons:
        with tempfile.TemporaryDirectory() as tmp:
            config = write_config(Path(tmp), n, args.bootstrap)
            for label in ("fresh", "from the store"):
                seconds, peak, status = run_once(config)
                results = json.loads((Path(tmp) / "eigenjury-run" / "results.json").read_text())
                elo = [m["elo"] for m in sorted(results["models"], key=lambda m: m["name"])]
                ordered = all(a < b for a, b in itertools.pairwise(elo))
                disk = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file())
                rows.append(
                    [
                        f"{results['run']['comparisons']:,}",
                        label,
                        f"{seconds:.0f}",
                        f"{peak:.0f}",
                        f"{disk / 2**20:.0f}",
                        "yes" if ordered and status == 0 else f"no (exit {status})",
                    ]
                )
                print(rows[-1], flush=True)
    print(table(["comparisons", "run", "seconds", "peak RSS MB", "files MB", "true order"], rows))


if __name__ == "__main__":
    main()
