"""Soft verdicts against hard ones at equal judge calls, in simulation.

Calibrated judges: each judge call gives the judge's label probabilities (tie, first,
second) from the low-rank BTD model, and its hard verdict is one draw from them
(`simulate_verdicts(..., soft=True)`: both come from one simulation, so the two fits
at a budget see the same calls). Reply quality varies by scenario (`scenario_noise`
logits per reply): without it a soft verdict would be the model's exact probability,
noiseless, and one call per cell would recover the truth.

Two populations: like the demo (4 models, every scenario all 4 as evaluees and 4
judges drawn from them, 48 calls a scenario) and like a study (8 models, groups of 4,
one judge per scenario, 12 calls a scenario); tie propensity 0.5 and position bias 0.5
(typical, varying by judge); each seed draws its own population and verdicts. Scores:
Kendall tau of the fitted trust against the population's true trust (the true Elo
ordering), and the Elo RMSE against what the fit converges to (under scenario noise
the ratings shrink towards 1500, for soft and hard verdicts alike: both have the same
expected counts), a soft fit to `REFERENCE_CALLS` calls of the same population.

    python benchmarks/soft_verdicts.py [--quick] [--repeat 24] [--noise 0.5 1.0]
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace

import numpy as np
from scipy.stats import kendalltau

from _common import environment, table
from adaptive_design import calls_to_reach
from eigenjury.engine.backends import task_map
from eigenjury.stats import PeerRanking, VerdictTable, make_population, simulate_verdicts

REFERENCE_CALLS = 1_000_000


@dataclass(frozen=True)
class Setting:
    """A population's size and design, and the budgets it is run at."""

    name: str
    models: int
    group_size: int
    judges_per_scenario: int
    scenarios: tuple[int, ...]  # the budgets, in scenarios

    @property
    def calls_per_scenario(self) -> int:
        return self.judges_per_scenario * self.group_size * (self.group_size - 1)


SETTINGS = (
    Setting("demo-like", 4, 4, 4, (1, 2, 5, 10, 20, 40)),
    Setting("study-like", 8, 4, 1, (16, 32, 64, 128, 256, 512)),
)


def fit(verdicts: VerdictTable) -> PeerRanking:
    return PeerRanking(bootstrap=0, restarts=2, seed=0).fit(verdicts)


def one_population(job: tuple[Setting, float, int]) -> dict[str, np.ndarray]:
    """Per budget: (tau, Elo RMSE) of the hard and the soft fit, for population `seed`."""
    setting, noise, seed = job
    population = make_population(setting.models, 2, tie=0.5, position_bias=0.5, seed=seed)

    def simulate(scenarios: int, data_seed: int) -> VerdictTable:
        return simulate_verdicts(
            population,
            n_scenarios=scenarios,
            group_size=setting.group_size,
            judges_per_scenario=setting.judges_per_scenario,
            scenario_noise=noise,
            soft=True,
            seed=data_seed,
        )

    limit = fit(simulate(REFERENCE_CALLS // setting.calls_per_scenario, 10_000 + seed)).elo_
    truth = population.trust()
    out = {
        "hard": np.empty((len(setting.scenarios), 2)),
        "soft": np.empty((len(setting.scenarios), 2)),
    }
    for b, scenarios in enumerate(setting.scenarios):
        soft = simulate(scenarios, seed)
        for name, verdicts in (("soft", soft), ("hard", replace(soft, probs=None))):
            ranking = fit(verdicts)
            tau = kendalltau(truth, ranking.trust_).statistic
            out[name][b] = tau, np.sqrt(np.mean((ranking.elo_ - limit) ** 2))
    out["shrink"] = np.array([np.max(np.abs(population.elo() - limit))])
    return out


def mean_se(values: np.ndarray) -> str:
    return f"{np.mean(values):.3f} ± {np.std(values, ddof=1) / np.sqrt(len(values)):.3f}"


def fewer_calls(calls: list[int], soft: np.ndarray, hard: np.ndarray) -> list[str]:
    """Per budget N: N over the calls soft verdicts need to reach what hard verdicts
    reach at N (`soft` and `hard` increase with calls; log-linear interpolation); a
    bound where soft verdicts pass it at the smallest budget, '-' where never."""
    out = []
    for n, target in zip(calls, hard, strict=True):
        needed = calls_to_reach(calls, list(soft), float(target))
        if needed is None:
            out.append("-")
        elif soft[0] > target:
            out.append(f"≥ {n / calls[0]:.1f}x")
        else:
            out.append(f"{n / needed:.1f}x")
    return out


def typical(ratios: list[str]) -> str:
    """The median of the interpolated ratios (bounds and '-' left out)."""
    exact = [float(r[:-1]) for r in ratios if r[0].isdigit()]
    return f"{np.median(exact):.1f} (median of {len(exact)})" if exact else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=40, help="populations (seeds) a point")
    parser.add_argument("--seed", type=int, default=0, help="the first population's seed")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.5, 1.0])
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    sweep = task_map(args.backend)
    rows, headline, shrink = [], [], []
    for setting in SETTINGS:
        for noise in args.noise:
            jobs = [(setting, noise, args.seed + k) for k in range(repeat)]
            done = sweep(one_population, jobs)
            hard = np.stack([d["hard"] for d in done])  # (seeds, budgets, tau / rmse)
            soft = np.stack([d["soft"] for d in done])
            shrink.append(max(float(d["shrink"][0]) for d in done))
            calls = [s * setting.calls_per_scenario for s in setting.scenarios]
            by_tau = fewer_calls(calls, soft[:, :, 0].mean(axis=0), hard[:, :, 0].mean(axis=0))
            by_rmse = fewer_calls(  # a smaller error is better: negated, it increases
                calls, -np.median(soft[:, :, 1], axis=0), -np.median(hard[:, :, 1], axis=0)
            )
            for b, n in enumerate(calls):
                rows.append(
                    [
                        setting.name,
                        noise,
                        f"{n:,}",
                        mean_se(hard[:, b, 0]),
                        mean_se(soft[:, b, 0]),
                        mean_se(soft[:, b, 0] - hard[:, b, 0]),
                        by_tau[b],
                        f"{np.median(hard[:, b, 1]):.1f}",
                        f"{np.median(soft[:, b, 1]):.1f}",
                        by_rmse[b],
                    ]
                )
            headline.append(
                f"- {setting.name}, scenario noise {noise:g}: soft verdicts reach the mean "
                f"tau hard verdicts reach at N calls with N / {typical(by_tau)} calls; the "
                f"median Elo RMSE with N / {typical(by_rmse)}"
            )
    print(f"# soft vs hard verdicts at equal judge calls: {repeat} populations a point\n")
    print(environment())
    print(
        f"\nElo RMSE against a soft fit to {REFERENCE_CALLS:,} calls of each population "
        f"(at most {max(shrink):.0f} Elo from the population's own Elo)\n"
    )
    print(
        table(
            [
                "population",
                "scenario noise",
                "judge calls",
                "tau, hard",
                "tau, soft",
                "soft - hard (paired)",
                "fewer calls (tau)",
                "Elo RMSE, hard (median)",
                "Elo RMSE, soft (median)",
                "fewer calls (RMSE)",
            ],
            rows,
        )
    )
    print()
    print("\n".join(headline))


if __name__ == "__main__":
    main()
