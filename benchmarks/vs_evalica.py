"""Plain Bradley-Terry and Davidson on 200 models x 1.6 M battles: eigenjury vs evalica, choix.

Battles are simulated from Davidson's model with known strengths (N(0, 1)), pairs
uniform over distinct models, tie parameter NU. Every timing starts from the same
integer arrays (first, second, verdict: 0 tie, 1 first wins, 2 second wins) and
includes each library's own data conversion; eigenjury's includes the collapse to
counts. evalica gets its fastest accepted form: numpy xs/ys with a prebuilt index
(skipping its label discovery) and winners as a list (it rejects a numpy array).
Ties count as half wins everywhere except choix's list form, which has no weights,
so ties are dropped there. Timings are interleaved and repeated (best / median s).
Agreement: correlation of each library's log-strengths with eigenjury's BT (same
ties-as-half-wins estimand), and recovery of the true strengths (the slope shows the
scale: ties as half wins shrink it, Davidson's model is the one simulated).

    python benchmarks/vs_evalica.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable
from typing import Any

import choix
import evalica
import numpy as np
import pandas as pd
from scipy.stats import pearsonr, spearmanr

from _common import environment, spread, table, timed
from eigenjury.stats import BradleyTerry, Davidson, VerdictCounts, pair_counts

NU = 0.8  # Davidson tie parameter of the simulation


def simulate(m: int, n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    strength = rng.standard_normal(m)
    first = rng.integers(m, size=n)
    second = (first + 1 + rng.integers(m - 1, size=n)) % m  # uniform over the others
    s1, s2 = strength[first], strength[second]
    p_first, p_second = np.exp(s1), np.exp(s2)
    p_tie = NU * np.exp(0.5 * (s1 + s2))
    u = rng.random(n) * (p_first + p_second + p_tie)
    verdict = np.where(u < p_tie, 0, np.where(u < p_tie + p_first, 1, 2))
    return strength - strength.mean(), first, second, verdict


def davidson_counts(
    first: np.ndarray, second: np.ndarray, verdict: np.ndarray, m: int
) -> VerdictCounts:
    """One judge; one cell per ordered (first, second) pair that occurs."""
    n = np.bincount((first * m + second) * 3 + verdict, minlength=3 * m * m).reshape(-1, 3)
    key = np.flatnonzero(n.sum(axis=1))
    first_c, second_c = np.divmod(key, m)
    return VerdictCounts(
        np.zeros(len(key), np.int64),
        first_c,
        second_c,
        n[key].astype(np.float64),
        tuple(f"m{i}" for i in range(m)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    m, n = (50, 100_000) if args.quick else (200, 1_600_000)
    repeat = 1 if args.quick else args.repeat
    truth, first, second, verdict = simulate(m, n, args.seed)
    index = pd.Index(range(m))
    evalica_iterations: list[int] = []

    def eigenjury_bt() -> np.ndarray:
        wins, ties = pair_counts(first, second, verdict, m)
        return BradleyTerry().fit(wins, ties).strength_

    def eigenjury_davidson() -> np.ndarray:
        return Davidson().fit(davidson_counts(first, second, verdict, m)).strength_

    def evalica_bt() -> np.ndarray:
        result = evalica.bradley_terry(first, second, verdict.tolist(), index=index)
        evalica_iterations.append(result.iterations)
        return np.log(result.scores.reindex(index).to_numpy())

    def choix_dense() -> np.ndarray:
        won = np.bincount(first * m + second, verdict == 1, minlength=m * m)
        won += np.bincount(second * m + first, verdict == 2, minlength=m * m)
        tied = np.bincount(first * m + second, verdict == 0, minlength=m * m).reshape(m, m)
        return choix.ilsr_pairwise_dense(won.reshape(m, m) + 0.5 * (tied + tied.T))

    def choix_list() -> np.ndarray:
        decided = verdict > 0
        winner = np.where(verdict == 1, first, second)[decided]
        loser = np.where(verdict == 1, second, first)[decided]
        return choix.ilsr_pairwise(m, list(zip(winner.tolist(), loser.tolist(), strict=True)))

    methods: dict[str, Callable[[], np.ndarray]] = {
        "eigenjury BradleyTerry (pair_counts + Newton)": eigenjury_bt,
        "eigenjury Davidson (counts + L-BFGS)": eigenjury_davidson,
        "evalica.bradley_terry (Rust)": evalica_bt,
        "choix.ilsr_pairwise_dense (numpy counts)": choix_dense,
        "choix.ilsr_pairwise (tuples, ties dropped)": choix_list,
    }
    times: dict[str, list[float]] = {k: [] for k in methods}
    scores: dict[str, np.ndarray] = {}
    for r in range(repeat):
        for name, fn in methods.items():
            if name.startswith("choix.ilsr_pairwise (") and r >= 2:
                continue  # pure-Python loop over battles: two runs are enough
            seconds, result = timed(fn)
            times[name].append(seconds)
            scores[name] = result - result.mean()

    reference = scores["eigenjury BradleyTerry (pair_counts + Newton)"]
    base = statistics.median(times["eigenjury BradleyTerry (pair_counts + Newton)"])
    rows: list[list[Any]] = []
    for name in methods:
        s = scores[name]
        rows.append(
            [
                name,
                spread(times[name]),
                f"{statistics.median(times[name]) / base:.1f}",
                f"{pearsonr(s, reference).statistic:.6f}",
                f"{spearmanr(s, reference).statistic:.6f}",
                f"{np.max(np.abs(s - reference)):.2g}",
                f"{pearsonr(s, truth).statistic:.4f}",
                f"{spearmanr(s, truth).statistic:.4f}",
                f"{np.polyfit(truth, s, 1)[0]:.3f}",
            ]
        )
    ties = float(np.mean(verdict == 0))
    print(
        f"# Bradley-Terry / Davidson: {m} models, {n:,} battles ({ties:.0%} ties), "
        f"best / median of {repeat}\n"
    )
    print(environment("evalica", "choix"))
    print(f"\nevalica iterations: {evalica_iterations[-1]} (limit 100, tolerance 1e-6)\n")
    print(
        table(
            [
                "method",
                "seconds",
                "time / eigenjury BT",
                "Pearson vs eigenjury BT",
                "Spearman vs eigenjury BT",
                "max abs diff (log scale)",
                "Pearson vs truth",
                "Spearman vs truth",
                "slope vs truth",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
