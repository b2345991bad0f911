"""Coverage of the scenario-bootstrap Elo intervals against simulated truth.

For each setting: K datasets from one fixed population, each fitted with
`PeerRanking(bootstrap=B)`; the share of nominal 95% Elo intervals that contain the
true Elo, and their mean width.

    python benchmarks/calibration.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np

from _common import environment, table
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts

SETTINGS = [(6, 600), (8, 300), (10, 2000)]  # (models, scenarios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--datasets", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    datasets, rounds = (3, 20) if args.quick else (args.datasets, args.rounds)
    rows = []
    for n_models, n_scenarios in SETTINGS:
        population = make_population(n_models, 2, seed=11)
        truth = population.elo()
        inside, widths = [], []
        for k in range(datasets):
            verdicts = simulate_verdicts(population, n_scenarios=n_scenarios, seed=100 + k)
            ranking = PeerRanking(bootstrap=rounds, restarts=2, seed=k).fit(verdicts)
            low, high = ranking.elo_ci_[:, 0], ranking.elo_ci_[:, 1]
            inside.append((low <= truth) & (truth <= high))
            widths.append(np.mean(high - low))
        coverage = float(np.mean(inside))
        se = np.sqrt(coverage * (1 - coverage) / np.size(inside))
        rows.append(
            [
                n_models,
                n_scenarios,
                n_scenarios * 12,
                np.size(inside),
                f"{coverage:.3f} ± {se:.3f}",
                f"{np.mean(widths):.1f}",
            ]
        )
    print(f"# calibration: {datasets} datasets a setting, {rounds} bootstrap rounds\n")
    print(environment())
    print()
    print(
        table(
            ["models", "scenarios", "verdicts", "intervals", "coverage of 95%", "mean width (Elo)"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
