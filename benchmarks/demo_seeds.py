"""`eigenjury demo` across seeds: is its leaderboard a finding, and how long does it take?

Runs `eigenjury demo --seed N` for each seed in a fresh folder (so a fresh store: every
call is made, none is cached) and reports, per seed, each member's Elo with its 95%
interval, whether both warm personas rank above both cold ones, whether the top
member's interval is disjoint from the bottom member's, and the wall time.

    python benchmarks/demo_seeds.py                 # seeds 0-4, ~13 min on 2 cores
    python benchmarks/demo_seeds.py --seeds 0 1     # a subset
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run(seed: int, folder: Path) -> tuple[dict[str, object], float]:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "eigenjury", "demo", "--seed", str(seed), "--no-progress"],
        cwd=folder,
        # the store is per user since 0.3.3: a folder of its own keeps every call uncached
        env={**os.environ, "EIGENJURY_DATA_DIR": str(folder / "data")},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - start
    return json.loads((folder / "eigenjury-demo" / "results.json").read_text()), wall


def summary(seed: int, record: dict[str, object], wall: float) -> str:
    models = record["models"]
    assert isinstance(models, list)
    warm = [m["rank"] for m in models if m["name"].startswith("warm")]
    cold = [m["rank"] for m in models if m["name"].startswith("cold")]
    top, bottom = models[0], models[-1]
    disjoint = top["elo_ci"][0] > bottom["elo_ci"][1]
    board = "; ".join(
        f"{m['name']} {m['elo']:.0f} [{m['elo_ci'][0]:.0f}, {m['elo_ci'][1]:.0f}]" for m in models
    )
    return (
        f"| {seed} | {board} | {'yes' if max(warm) < min(cold) else 'no'} | "
        f"{'yes' if disjoint else 'no'} | {wall:.0f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    args = parser.parse_args()
    print(
        "| seed | leaderboard: Elo [95% interval] | both warm above both cold | top and "
        "bottom intervals disjoint | wall time |"
    )
    print("|---|---|---|---|---|")
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            record, wall = run(seed, Path(folder))
        print(summary(seed, record, wall), flush=True)


if __name__ == "__main__":
    main()
