"""Bias bounds in simulation: observed violation rate against delta, and signal kept.

Simulated Likert-10 judges with known sensitivity (a neighbour moves a score by a
known number of points with a known probability, plus seeded +-1 jitter) are
measured on m = 30 items, certified for (tau, delta) and released; then neighbours
(one perturbed item) and noise are drawn many times, and the share of draws where the
two releases are more than tau apart is counted, at the noise ceiling sigma_max.
Utility is at the default sigma = sigma_max / 2: Kendall's tau of 5 model means,
Pearson of the items. A second table replays the reference implementation's choices
(as described in docs/bounds.md: point estimate of Delta, no range step, batch-mean
centre without its shift term, tau in raw units against a normalised Delta), one at a
time and all together, on the same judges.

    python benchmarks/bounds_validation.py [--quick] [--backend ray]

A third table is a validation that can fail: a certificate forced onto the Markov
path (a calm judge measured on m = 3,000 items), neighbours that move more items than
the certificate assumed, and a judge deployed more sensitive than the one measured.
The last two must show violations far above delta: that is the check's power.
Violation rates carry a 95% interval clustered by measurement (the draws of one
measurement share its certificate).

A fourth table takes units of different sizes, with a judge and a check written apart
from the simulation above (eigenjury.testing.unit_sizes): replies of 2 items are calm,
the rare replies of 12 items flip every verdict they feed. A profile is measured on m
replies, a score file of 100 small and 5 large replies is released through `bound
apply`'s own code, and the neighbours edit one large reply, one small one, or any one.

Every (judge, d, tau, delta, choices) cell is an independent simulation: the cells run
as a sweep over forked processes, or as Ray tasks with `--backend ray`.
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from _common import environment, table, timed
from eigenjury.bounds.simulation import (
    OURS,
    REFERENCE_CHOICES,
    CheckResult,
    Choices,
    SimulatedJudge,
    check,
    make_items,
)
from eigenjury.engine.backends import task_map
from eigenjury.stats.abb import estimate_sensitivity
from eigenjury.testing.unit_sizes import UnitSizeJudge, violations, write_score_file

JUDGES = {
    "frequent small (10%, +3, jitter 20%)": SimulatedJudge(rate=0.1, points=3, jitter=0.2),
    "rare large (3%, +4, no jitter)": SimulatedJudge(rate=0.03, points=4, jitter=0.0),
    "jitter only (0%, jitter 30%)": SimulatedJudge(rate=0.0, points=0, jitter=0.3),
}
CALM, TOP, LOUD = (
    SimulatedJudge(rate=0.01, points=1, jitter=0.0),  # 1%, +1
    SimulatedJudge(rate=1.0, points=9, jitter=0.0),  # always to the top of the scale
    SimulatedJudge(rate=0.6, points=6, jitter=0.0),  # 60%, +6
)


@dataclass(frozen=True)
class PowerRow:
    """A row that must hold (violations <= delta) or must fail: a neighbour moving more
    items than assumed, or a deployed judge louder than the one measured."""

    label: str
    measured: SimulatedJudge
    m: int
    tau: float
    assumed_k: int = 1
    true_k: int = 1
    deployed: SimulatedJudge | None = None
    delta: float = 0.05

    @property
    def must_hold(self) -> bool:
        return self.true_k <= self.assumed_k and self.deployed is None


POWER = [
    PowerRow("Markov path: a calm judge (1%, +1) measured on m = 3,000", CALM, 3000, 0.1),
    PowerRow("true k 20, certificate assumes 1 (judge: always to the top)", TOP, 30, 0.3,
             true_k=20),
    PowerRow("true k 20, certificate assumes 20 (judge: always to the top)", TOP, 30, 1.5,
             assumed_k=20, true_k=20),
    PowerRow("Markov path, deployed judge (60%, +6) louder than the calm one measured", CALM,
             3000, 0.1, deployed=LOUD),
]  # fmt: skip
GRID = [(0.1, 0.05), (0.1, 0.01), (0.3, 0.05), (0.3, 0.01), (0.5, 0.01), (1.0, 0.01)]


def row(judge: str, dim: int, result: CheckResult) -> list[object]:
    feasible = result.feasible_share > 0
    return [
        judge,
        dim,
        result.choices,
        result.tau,
        result.delta,
        _rate(result) if feasible else "-",
        "yes" if result.violation_rate <= result.delta else "**no**",
        f"{result.feasible_share:.2f}",
        f"{result.alpha:.3f}" if feasible else "-",
        f"{result.sigma_max:.4f}" if feasible else "-",
        f"{result.kendall_models:.3f}" if feasible else "-",
        f"{result.pearson_items:.3f}" if feasible else "-",
        f"{result.kendall_models_truth:.3f}" if feasible else "-",
        f"{result.pearson_items_truth:.3f}" if feasible else "-",
    ]


def _rate(result: CheckResult) -> str:
    """The violation rate and its 95% interval, clustered by measurement."""
    low = max(result.violation_rate - 1.96 * result.violation_se, 0.0)
    high = result.violation_rate + 1.96 * result.violation_se
    return f"{result.violation_rate:.4f} [{low:.4f}, {high:.4f}]"


HEADERS = [
    "judge",
    "d",
    "choices",
    "tau",
    "delta",
    "violation rate [95%]",
    "<= delta",
    "feasible",
    "alpha",
    "sigma_max",
    "Kendall (models)",
    "Pearson (items)",
    "Kendall vs truth",
    "Pearson vs truth",
]


Cell = tuple[str, int, float, float, Choices, int, int]


def run_cell(cell: Cell) -> list[object]:
    """One simulation of the sweep (module-level, so it can travel to a worker)."""
    name, dim, tau, delta, choices, measurements, draws = cell
    result = check(JUDGES[name], tau=tau, delta=delta, dim=dim, choices=choices,
                   measurements=measurements, draws=draws, seed=7)  # fmt: skip
    return row(name, dim, result)


PowerCell = tuple[int, int, int]
PAYOFF_DELTAS = (0.05, 0.01)


def payoff_rows() -> list[list[object]]:
    """For each judge, the measured units at which its measurement first decides a
    certificate (beats the range step), at bound apply's defaults (a fifth of delta for
    the upper bound, half the rest for the Markov step), from its per-item squared
    changes on 20,000 items."""
    rng = np.random.default_rng(3)
    quality, _ = make_items(20_000, 5, rng)
    rows: list[list[object]] = []
    for name, judge in {**JUDGES, "calm (1%, +1, no jitter)": CALM}.items():
        original = judge.scale.normalise(judge.judge(quality, rng))
        moved = judge.scale.normalise(judge.neighbour(quality, rng))
        for delta in PAYOFF_DELTAS:
            markov = 0.5 * 0.8 * delta
            needed = [
                estimate_sensitivity(
                    original, moved, 1 - 0.2 * delta, method=method
                ).units_to_decide(markov)
                for method in ("kl+bernstein", "kl")
            ]
            square = float(np.mean((original - moved) ** 2))
            rows.append([name, delta, f"{square:.5f}", f"{markov:g}",
                         *(f"{n:,}" if n is not None else "never" for n in needed)])  # fmt: skip
    return rows


def run_power(cell: PowerCell) -> list[object]:
    """One row of the validation that can fail."""
    index, measurements, draws = cell
    power = POWER[index]
    result = check(
        power.measured, tau=power.tau, delta=power.delta, dim=200, m=power.m,
        measurements=measurements, draws=draws, assumed_k=power.assumed_k,
        true_k=power.true_k, deployed=power.deployed, seed=7,
    )  # fmt: skip
    held = result.violation_rate <= power.delta
    return [
        power.label,
        power.m,
        power.assumed_k,
        power.true_k,
        power.tau,
        power.delta,
        _rate(result) if result.feasible_share else "-",
        f"{result.markov_share:.2f}",
        "holds" if power.must_hold else "must fail",
        "as expected" if held == power.must_hold else "**NOT as expected**",
    ]


@dataclass(frozen=True)
class UnitSizeRow:
    """Replies of 2 items, and a share `large_share` of 12 items whose edit flips every
    verdict they feed (with probability `flip`); the score file has 100 small replies
    and `large_units` large."""

    label: str
    large_share: float
    large_units: int
    m: int
    tau: float
    delta: float
    flip: float = 1.0


UNIT_SIZES = [
    UnitSizeRow("1 in 1,000 replies of 12 items", 0.001, 5, 3000, 0.5, 0.05),
    UnitSizeRow("1 in 1,000 replies of 12 items", 0.001, 5, 6000, 0.5, 0.05),
    UnitSizeRow("1 in 5,000 replies of 12 items", 0.0002, 5, 20000, 1.0, 0.01),
    UnitSizeRow("control: every reply of 2 items", 0.0, 0, 3000, 0.5, 0.05),
    UnitSizeRow("control: 1 in 10 replies of 12 items, none moves", 0.1, 5, 6000, 0.5, 0.05,
                flip=0.0),
]  # fmt: skip
UnitSizeCell = tuple[int, int, int]


def run_unit_sizes(cell: UnitSizeCell) -> list[object]:
    """One row of the units-of-different-sizes table."""
    index, measurements, draws = cell
    spec = UNIT_SIZES[index]
    judge = UnitSizeJudge(small=2, large=12, large_share=spec.large_share, flip=spec.flip)
    with tempfile.TemporaryDirectory() as folder:
        scores = write_score_file(
            Path(folder) / "scores.csv", judge, 100, spec.large_units, np.random.default_rng(1)
        )
        found = violations(
            judge, scores, m=spec.m, tau=spec.tau, delta=spec.delta,
            measurements=measurements, draws=draws, seed=7,
        )  # fmt: skip

    def rate(kind: str) -> str:
        if kind not in found.rate:
            return "-"
        low, high = found.interval(kind)
        mark = "" if found.rate[kind] <= spec.delta else " **above delta**"
        return f"{found.rate[kind]:.4f} [{low:.4f}, {high:.4f}]{mark}"

    steps = found.bias_bounds
    return [
        spec.label, spec.m, spec.tau, spec.delta, rate("large reply"), rate("small reply"),
        rate("any reply"), f"{steps['markov']} / {steps['range']}", f"{found.alpha:.3f}",
        f"{found.sigma_max:.4f}",
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--backend", choices=("local", "ray"), default="local")
    args = parser.parse_args()
    measurements, draws = (4, 200) if args.quick else (40, 1000)
    sweep = task_map(args.backend)
    print(environment())
    print(f"m = 30 items measured; {measurements} measurements x {draws} neighbour/noise draws\n")

    def grid() -> list[list[object]]:
        cells: list[Cell] = [
            (name, dim, tau, delta, OURS, measurements, draws)
            for name in JUDGES
            for dim in (20, 500)
            for tau, delta in GRID
        ]
        return sweep(run_cell, cells)

    seconds, rows = timed(grid)
    print("### Violation rate and utility across tau and delta (eigenjury)\n")
    print(table(HEADERS, rows))
    print(f"\n({seconds:.1f} s)\n")

    def compare() -> list[list[object]]:
        cells: list[Cell] = [
            (name, dim, tau, delta, choices, measurements, draws)
            for name in list(JUDGES)[:2]
            for dim in (20, 500)
            for tau, delta in ((0.1, 0.05), (0.5, 0.01))
            for choices in (OURS, *REFERENCE_CHOICES)
        ]
        return sweep(run_cell, cells)

    seconds, rows = timed(compare)
    print("### The reference implementation's choices on the same judges\n")
    print(table(HEADERS, rows))
    print(f"\n({seconds:.1f} s)\n")

    def power() -> list[list[object]]:
        return sweep(run_power, [(i, measurements, draws) for i in range(len(POWER))])

    seconds, rows = timed(payoff_rows)
    print("### When the measured Delta first decides a certificate\n")
    print(table(["judge", "delta", "mean squared change per item", "Markov share of delta",
                 "units (kl+bernstein)", "units (kl)"], rows))  # fmt: skip
    print(f"\n({seconds:.1f} s)\n")

    seconds, rows = timed(power)
    print("### A validation that can fail (d = 200)\n")
    headers = ["row", "m", "assumed k", "true k", "tau", "delta", "violation rate [95%]",
               "Markov share", "the bound", "result"]  # fmt: skip
    print(table(headers, rows))
    print(f"\n({seconds:.1f} s)\n")

    def unit_sizes() -> list[list[object]]:
        cells = [(i, measurements, draws) for i in range(len(UNIT_SIZES))]
        return sweep(run_unit_sizes, cells)

    seconds, rows = timed(unit_sizes)
    print("### Units of different sizes (2 and 12 items; score file: 100 small replies, "
          "5 large)\n")  # fmt: skip
    headers = ["replies", "m", "tau", "delta", "large reply edited [95%]",
               "small reply edited", "any reply edited", "Markov / range",
               "alpha", "sigma_max"]  # fmt: skip
    print(table(headers, rows))
    print(f"\n({seconds:.1f} s)")


if __name__ == "__main__":
    main()
