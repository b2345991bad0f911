"""Cluster-bootstrap speed: 200 rounds for N = 20 on 1e6 verdicts, 2 processes vs 1.

`PeerRanking(bootstrap=200, n_jobs=...)` on the random-groups design (83,334
scenarios x 12 verdicts). `fit_seconds_` covers collapse, checks and the 4-restart
fit; `bootstrap_seconds_` the 200 warm-started refits over scenario resamples.
Runs alternate between n_jobs values and are repeated (best / median seconds).

    python benchmarks/bootstrap_speed.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics

from _common import environment, spread, table
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    verdicts_target, rounds, repeat = (
        (100_000, 40, 1) if args.quick else (1_000_000, args.rounds, args.repeat)
    )
    population = make_population(20, 2, seed=args.seed)
    verdicts = simulate_verdicts(
        population, n_scenarios=math.ceil(verdicts_target / 12), seed=args.seed + 1
    )
    jobs = (2, 1)
    fit_s: dict[int, list[float]] = {j: [] for j in jobs}
    boot_s: dict[int, list[float]] = {j: [] for j in jobs}
    converged: dict[int, float] = {}
    for _ in range(repeat):
        for n_jobs in jobs:
            ranking = PeerRanking(bootstrap=rounds, n_jobs=n_jobs, seed=args.seed).fit(verdicts)
            fit_s[n_jobs].append(ranking.fit_seconds_)
            boot_s[n_jobs].append(ranking.bootstrap_seconds_)
            converged[n_jobs] = ranking.bootstrap_converged_
    rows = []
    for n_jobs in jobs:
        per_round = statistics.median(boot_s[n_jobs]) / rounds * 1e3
        speedup = statistics.median(boot_s[1]) / statistics.median(boot_s[n_jobs])
        rows.append(
            [
                n_jobs,
                spread(fit_s[n_jobs]),
                spread(boot_s[n_jobs]),
                f"{per_round:.0f}",
                f"{speedup:.2f}",
                f"{converged[n_jobs]:.0%}",
            ]
        )
    print(
        f"# bootstrap: N = 20, {len(verdicts):,} verdicts, {rounds} rounds "
        f"(best / median of {repeat})\n"
    )
    print(environment())
    print()
    print(
        table(
            [
                "n_jobs",
                "fit s",
                "bootstrap s",
                "ms / round (median)",
                "speed-up vs n_jobs=1",
                "rounds converged",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
