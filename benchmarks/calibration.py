"""Coverage of the bootstrap Elo intervals against simulated truth, with clustered verdicts.

For each setting (models, scenarios, scenario noise): K datasets from one fixed
population, each fitted with `PeerRanking(bootstrap=B)` twice, once resampling
scenarios (the cluster bootstrap eigenjury runs) and once resampling verdict rows
(each row made its own scenario, which ignores that verdicts of one scenario share its
replies). Scenario noise draws each reply's quality per scenario, so the verdicts of
one scenario are correlated; at 0 they are independent given the design. The scenario
draws also give a BCa interval (stats.bootstrap.bca_interval, its acceleration from a
group jackknife of the same statistic, taken through the `map_rounds` hook). The
sandwich interval (`interval="sandwich"`: the cluster-robust covariance of one fit,
clustered by scenario, as many draws from it as rounds) needs no refit.

The truth is what the fit converges to: under scenario noise the verdict probabilities
average over the noise and the ratings shrink towards 1500, so each (models, noise)
gets a reference fit to `TRUTH_SCENARIOS` scenarios. The intervals of one dataset share
its draws: coverage is averaged per dataset first, and its standard error is taken
over datasets.

    python benchmarks/calibration.py [--quick] [--backend ray]

The datasets are independent simulations: they run as a sweep over forked processes
(each fit then bootstraps in its own process), or as Ray tasks with `--backend ray`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from _common import environment, table
from eigenjury.engine.backends import task_map
from eigenjury.stats import (
    PeerRanking,
    ScenarioCounts,
    VerdictTable,
    make_population,
    simulate_verdicts,
)
from eigenjury.stats.bootstrap import (
    Statistic,
    bca_interval,
    group_jackknife,
    percentile_interval,
    run_rounds,
)
from eigenjury.stats.verdicts import FloatArray

SETTINGS = [  # (models, scenarios, scenario noise)
    (8, 300, 0.0),
    (10, 2000, 0.0),
    (8, 1000, 0.0),
    (8, 1000, 0.5),
    (8, 1000, 1.0),
    (8, 300, 1.0),
    (8, 3000, 1.0),
]
QUICK_SETTINGS = [(8, 300, 0.0), (8, 300, 1.0)]
INTERVALS = (
    "scenarios, percentile",
    "scenarios, BCa",
    "scenarios, sandwich",
    "rows, percentile",
)
POPULATION_SEED = 11
TRUTH_SCENARIOS = 200_000


def reference_elo(n_models: int, noise: float) -> np.ndarray:
    """The Elo a fit to endless data converges to (a fit to TRUTH_SCENARIOS scenarios)."""
    population = make_population(n_models, 2, seed=POPULATION_SEED)
    verdicts = simulate_verdicts(
        population, n_scenarios=TRUTH_SCENARIOS, scenario_noise=noise, seed=999
    )
    return PeerRanking(bootstrap=0, restarts=2, seed=0).fit(verdicts).elo_


def rows_as_scenarios(verdicts: VerdictTable) -> VerdictTable:
    """The same verdicts, each row its own scenario: a scenario bootstrap then resamples rows."""
    n = len(verdicts)
    return replace(verdicts, scenario=np.arange(n), scenarios=tuple(map(str, range(n))))


class JackknifeToo:
    """Runs the bootstrap rounds in this process and keeps the group jackknife of the
    same statistic (the refit PeerRanking bootstraps), for BCa."""

    jackknife: dict[str, FloatArray]

    def __call__(
        self, data: ScenarioCounts, statistic: Statistic, seeds: Sequence[np.random.SeedSequence]
    ) -> list[dict[str, FloatArray]]:
        self.jackknife = group_jackknife(data, statistic)
        return run_rounds(data, statistic, seeds)


def one_dataset(
    job: tuple[int, int, float, int, int, np.ndarray],
) -> dict[str, tuple[float, float]]:
    """Per interval: the share of dataset k's intervals containing the truth, and
    their mean width."""
    n_models, n_scenarios, noise, k, rounds, truth = job
    population = make_population(n_models, 2, seed=POPULATION_SEED)
    verdicts = simulate_verdicts(
        population, n_scenarios=n_scenarios, scenario_noise=noise, seed=100 + k
    )
    jackknife = JackknifeToo()
    scenarios = PeerRanking(bootstrap=rounds, restarts=2, seed=k, map_rounds=jackknife)
    rows = PeerRanking(bootstrap=rounds, restarts=2, seed=k, n_jobs=1)
    sandwich = PeerRanking(bootstrap=rounds, restarts=2, seed=k, interval="sandwich")
    scenarios.fit(verdicts)
    rows.fit(rows_as_scenarios(verdicts))
    sandwich.fit(verdicts)
    draws = scenarios.bootstrap_["elo"]
    intervals = [
        percentile_interval(draws),
        bca_interval(draws, scenarios.elo_, jackknife.jackknife["elo"]),
        (sandwich.elo_ci_[:, 0], sandwich.elo_ci_[:, 1]),
        percentile_interval(rows.bootstrap_["elo"]),
    ]
    out = {}
    for name, (low, high) in zip(INTERVALS, intervals, strict=True):
        inside = (low <= truth) & (truth <= high)
        out[name] = (float(np.mean(inside)), float(np.mean(high - low)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--datasets", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    sweep = task_map(args.backend)
    settings = QUICK_SETTINGS if args.quick else SETTINGS
    datasets, rounds = (4, 40) if args.quick else (args.datasets, args.rounds)
    truths = {(m, noise): reference_elo(m, noise) for m, _, noise in settings}
    rows = []
    for n_models, n_scenarios, noise in settings:
        truth = truths[n_models, noise]
        jobs = [(n_models, n_scenarios, noise, k, rounds, truth) for k in range(datasets)]
        done = sweep(one_dataset, jobs)
        for interval in INTERVALS:
            coverage = np.array([d[interval][0] for d in done])
            width = np.mean([d[interval][1] for d in done])
            se = np.std(coverage, ddof=1) / np.sqrt(datasets)
            rows.append(
                [
                    n_models,
                    n_scenarios,
                    noise,
                    interval,
                    f"{np.mean(coverage):.3f} ± {se:.3f}",
                    f"{width:.1f}",
                ]
            )
    model_truth = {m: make_population(m, 2, seed=POPULATION_SEED).elo() for m, _, _ in settings}
    shrink = max(np.max(np.abs(truths[key] - model_truth[key[0]])) for key in truths)
    print(f"# calibration: {datasets} datasets a setting, {rounds} bootstrap rounds\n")
    print(environment())
    print(
        f"\ntruth: a fit to {TRUTH_SCENARIOS:,} scenarios per (models, noise); "
        f"at most {shrink:.1f} Elo from the population's own Elo\n"
    )
    print(
        table(
            [
                "models",
                "scenarios",
                "scenario noise",
                "resampled, interval",
                "coverage of 95% (± s.e. over datasets)",
                "mean width (Elo)",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
