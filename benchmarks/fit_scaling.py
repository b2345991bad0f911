"""Fit time against the number of verdicts: the collapse grows, the fit should not.

N = 20 models, d = 2, random groups of 4 with one judge per scenario (12 verdicts
per scenario). For each size: the collapse `ScenarioCounts.from_table`, the default
fit (4 restarts), one cold start, and one warm start on a scenario resample from the
full fit (what each bootstrap round does). Timings are interleaved across sizes and repeated; cells
show 'best / median' seconds.

    python benchmarks/fit_scaling.py [--quick]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from _common import environment, spread, table, timed
from eigenjury.stats import LowRankBTD, ScenarioCounts, make_population, simulate_verdicts
from eigenjury.stats.bootstrap import resample_weights

PER_SCENARIO = 12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6, 10**7]
    repeat = 1 if args.quick else args.repeat

    population = make_population(20, 2, seed=args.seed)
    tables = {}
    for size in sizes:
        n_scenarios = math.ceil(size / PER_SCENARIO)
        tables[size] = simulate_verdicts(population, n_scenarios=n_scenarios, seed=args.seed + 1)

    collapse: dict[int, list[float]] = {s: [] for s in sizes}
    kinds = ("default", "cold", "warm")
    fits: dict[str, dict[int, list[float]]] = {k: {s: [] for s in sizes} for k in kinds}
    data: dict[int, ScenarioCounts] = {}
    models: dict[int, LowRankBTD] = {}
    warm: dict[int, LowRankBTD] = {}
    seed = np.random.SeedSequence(args.seed)
    for _ in range(repeat):
        for size in sizes:
            seconds, data[size] = timed(lambda s=size: ScenarioCounts.from_table(tables[s]))
            collapse[size].append(seconds)
            counts = data[size].counts()
            seconds, models[size] = timed(lambda c=counts: LowRankBTD(2).fit(c))
            fits["default"][size].append(seconds)
            seconds, _ = timed(lambda c=counts: LowRankBTD(2, restarts=1).fit(c))
            fits["cold"][size].append(seconds)
            resampled = data[size].counts(resample_weights(data[size].n_scenarios, seed))
            init = models[size].params_
            seconds, warm[size] = timed(lambda c=resampled, p=init: LowRankBTD(2).fit(c, init=p))
            fits["warm"][size].append(seconds)

    rows = []
    for size in sizes:
        model = models[size]
        spread_loss = np.ptp(model.restart_losses_)
        rows.append(
            [
                f"{len(tables[size]):,}",
                f"{model.n_cells_:,}",
                spread(collapse[size]),
                spread(fits["default"][size]),
                spread(fits["cold"][size]),
                spread(fits["warm"][size]),
                model.n_iter_,
                model.converged_,
                f"{model.n_agreeing_starts_}/4, {spread_loss:.1e}",
                warm[size].n_iter_,
                warm[size].converged_,
            ]
        )
    print(f"# fit scaling (N = 20, d = 2, best / median of {repeat} s)\n")
    print(environment())
    print()
    print(
        table(
            [
                "verdicts",
                "cells",
                "collapse s",
                "fit s (4 restarts)",
                "fit s (1 start)",
                "warm fit s",
                "iter",
                "converged",
                "starts agreeing, loss spread",
                "warm iter",
                "warm conv",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
