"""What the judge-signal check (stats.informative.judge_signals) costs inside every
bootstrapped fit: on peer data, where every scenario feeds a measure, and on
arena-shaped data (one verdict a scenario), where none can and only the label shares
are read. Cells show 'best / median' seconds over the repeats.

    python benchmarks/judge_signals.py [--repeat 3]
"""

from __future__ import annotations

import argparse

import numpy as np

from _common import environment, spread, table, timed
from eigenjury.stats import make_population, simulate_verdicts
from eigenjury.stats.informative import judge_signals
from eigenjury.stats.verdicts import VerdictTable


def arena(n: int, models: int = 60, seed: int = 0) -> VerdictTable:
    """`n` battles, each its own scenario, voted on by one crowd judge."""
    rng = np.random.default_rng(seed)
    first = rng.integers(0, models, n)
    second = (first + rng.integers(1, models, n)) % models
    return VerdictTable(
        scenario=np.arange(n),
        judge=np.full(n, models),
        first=first,
        second=second,
        verdict=rng.integers(0, 3, n),
        models=tuple(f"m{i}" for i in range(models + 1)),
        scenarios=[str(i) for i in range(n)],
        weight=np.ones(n),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    population = make_population(6, 2, seed=1)
    cases = [
        (f"peer, {n:,} scenarios", simulate_verdicts(population, n_scenarios=n, seed=1))
        for n in (2_400, 20_000)
    ] + [(f"arena, {n:,} battles", arena(n)) for n in (200_000, 1_000_000)]
    rows = []
    for name, data in cases:
        times = [timed(lambda data=data: judge_signals(data))[0] for _ in range(args.repeat)]
        rows.append([name, f"{len(data):,}", spread(times)])
    print(environment())
    print(table(["data", "verdicts", "seconds"], rows))


if __name__ == "__main__":
    main()
