"""Coverage of the scenario-bootstrap Elo intervals against simulated truth.

For each setting: K datasets from one fixed population, each fitted with
`PeerRanking(bootstrap=B)`; the share of nominal 95% Elo intervals that contain the
true Elo, and their mean width.

    python benchmarks/calibration.py [--quick] [--backend ray]

The datasets are independent simulations: they run as a sweep over forked processes
(each fit then bootstraps in its own process), or as Ray tasks with `--backend ray`.
"""

from __future__ import annotations

import argparse

import numpy as np

from _common import environment, table
from eigenjury.engine.backends import task_map
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts

SETTINGS = [(6, 600), (8, 300), (10, 2000)]  # (models, scenarios)


def one_dataset(job: tuple[int, int, int, int]) -> tuple[np.ndarray, float]:
    """Which true Elo values dataset k's intervals contain, and their mean width."""
    n_models, n_scenarios, k, rounds = job
    population = make_population(n_models, 2, seed=11)
    truth = population.elo()
    verdicts = simulate_verdicts(population, n_scenarios=n_scenarios, seed=100 + k)
    ranking = PeerRanking(bootstrap=rounds, restarts=2, seed=k, n_jobs=1).fit(verdicts)
    low, high = ranking.elo_ci_[:, 0], ranking.elo_ci_[:, 1]
    return (low <= truth) & (truth <= high), float(np.mean(high - low))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--datasets", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    sweep = task_map(args.backend)
    datasets, rounds = (3, 40) if args.quick else (args.datasets, args.rounds)
    rows = []
    for n_models, n_scenarios in SETTINGS:
        done = sweep(one_dataset, [(n_models, n_scenarios, k, rounds) for k in range(datasets)])
        inside = [contained for contained, _ in done]
        widths = [width for _, width in done]
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
