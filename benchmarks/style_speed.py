"""Style-controlled fits: the pair solver (Newton over (judge, pair) groups) against
L-BFGS-B on every cell, side by side, on peer data and on arena battles.

Peer: 6 models that judge each other, 2,400 scenarios of 4 replies (28,800 verdicts),
one length feature with a planted effect; `PeerRanking(style=("length",),
bootstrap=200)` end to end (point fits, uncontrolled fit, 200 scenario-bootstrap
rounds, judge-signal check), and the same without style as the floor. Arena: one
crowd judging 60 models in random battles, 4 style features with planted effects, 20%
ties; the point fit `PeerRanking(dim=1, position_bias=False, style=..., bootstrap=0)`
and, with --arena-rounds, a bootstrap over battles. Runs alternate between solvers.
Point fits must agree to 0.01 Elo (else the script stops); bootstrap rounds whose fits
differ are counted and refitted to say which solver reached the lower objective.

    python benchmarks/style_speed.py [--repeat 2] [--battles 200000] [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from _common import environment, spread, table
from eigenjury.stats import PeerRanking, make_population, simulate_verdicts
from eigenjury.stats.bootstrap import resample_weights
from eigenjury.stats.verdicts import ReplyFeatures, VerdictTable

FEATURES = ("length", "headers", "lists", "bold")
BETA = np.array([0.25, 0.04, 0.06, 0.03])
SOLVERS = ("lbfgs", "auto")
AGREE = 0.01  # Elo


def peer_table(scenarios: int, seed: int) -> VerdictTable:
    population = make_population(6, 2, verbosity=0.5, style_effect=0.4, seed=seed)
    return simulate_verdicts(population, n_scenarios=scenarios, seed=seed + 1)


def arena_table(battles: int, models: int, seed: int) -> VerdictTable:
    """One crowd (the last model, an external judge), random pairs in random order,
    style habits per model and a planted style effect; Davidson ties (nu 0.6)."""
    rng = np.random.default_rng(seed)
    strength = rng.normal(0.0, 0.8, models)
    log_length = np.log(350.0) + 0.25 * strength + rng.normal(0.0, 0.35, models)
    rates = rng.gamma(1.0, (1.5, 4.0, 3.0), size=(models, 3))
    a = rng.integers(models, size=battles)
    b = (a + 1 + rng.integers(models - 1, size=battles)) % models

    def replies(model: np.ndarray) -> np.ndarray:
        length = np.rint(np.exp(log_length[model] + rng.normal(0.0, 0.5, len(model))))
        return np.column_stack([np.maximum(length, 1.0), rng.poisson(rates[model])])

    first, second = replies(a), replies(b)
    total = np.abs(first) + np.abs(second)
    diff = np.where(total > 0, (first - second) / np.where(total > 0, total, 1.0), 0.0)
    half = 0.5 * (strength[a] - strength[b] + (diff / diff.std(axis=0)) @ BETA)
    logits = np.column_stack([np.full(battles, np.log(0.6)), half, -half])
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    cumulative = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    verdict = np.minimum((rng.random(battles)[:, None] > cumulative).sum(axis=1), 2)
    return VerdictTable(
        scenario=np.arange(battles),
        judge=np.full(battles, models),
        first=a,
        second=b,
        verdict=verdict,
        models=(*(f"model-{i:02d}" for i in range(models)), "crowd"),
        scenarios=tuple(f"b{i}" for i in range(battles)),
        weight=np.ones(battles),
        features=ReplyFeatures(FEATURES, first, second),
    )


def measure(
    name: str, make: Callable[[str], PeerRanking], table_: VerdictTable, repeat: int
) -> list[list[object]]:
    """Seconds per solver (alternating), and the largest differences between them."""
    seconds: dict[str, list[float]] = {s: [] for s in SOLVERS}
    fits: dict[str, PeerRanking] = {}
    for _ in range(repeat):
        for solver in SOLVERS:
            start = time.perf_counter()
            fits[solver] = make(solver).fit(table_)
            seconds[solver].append(time.perf_counter() - start)
    old, new = fits["lbfgs"], fits["auto"]
    elo = float(np.max(np.abs(old.elo_ - new.elo_)))
    if elo > AGREE:
        raise SystemExit(f"{name}: the solvers' point fits disagree by {elo:.3g} Elo")
    ci, apart = 0.0, "-"
    if hasattr(old, "elo_ci_"):
        ci = float(np.max(np.abs(old.elo_ci_ - new.elo_ci_)))
        apart = rounds_apart(old, new)
    ratio = np.median(seconds["lbfgs"]) / np.median(seconds["auto"])
    return [
        [name, solver, spread(seconds[solver]), f"{fits[solver].btd_.n_iter_}"]
        + ([f"{ratio:.2f}", f"{elo:.2g}", f"{ci:.2g}", apart] if solver == "auto" else [""] * 4)
        for solver in SOLVERS
    ]


def rounds_apart(old: PeerRanking, new: PeerRanking) -> str:
    """How many bootstrap rounds the solvers fitted to different optima (Elo apart by
    more than AGREE), and in how many of them the pair solver's has the lower
    objective: the likelihood is not convex, and from one warm start two solvers may
    end in different optima. Those rounds are refitted here to compare."""
    differ = np.flatnonzero(
        np.max(np.abs(old.bootstrap_["elo"] - new.bootstrap_["elo"]), 1) > AGREE
    )
    if differ.size == 0:
        return "0"
    data = old._scenario_counts
    seeds = np.random.SeedSequence(old.seed).spawn(old.bootstrap)
    lower = 0
    for r in differ:
        counts = data.counts(resample_weights(data.n_scenarios, seeds[r]))
        objective = {
            fit.solver: replace(fit._statistic, init=fit.btd_.params_).fit(counts).objective_
            for fit in (old, new)
        }
        lower += objective["auto"] < objective["lbfgs"]
    return f"{differ.size} (pair solver lower in {lower})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--scenarios", type=int, default=2400)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--battles", type=int, default=200_000)
    parser.add_argument("--models", type=int, default=60)
    parser.add_argument("--arena-rounds", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args()
    if args.quick:
        args.scenarios, args.rounds, args.battles, args.repeat = 300, 40, 20_000, 1
    peer = peer_table(args.scenarios, args.seed)
    arena = arena_table(args.battles, args.models, args.seed)
    rows = measure(
        f"peer, {len(peer.judge):,} verdicts, {args.rounds} rounds",
        lambda solver: PeerRanking(
            style=("length",), bootstrap=args.rounds, n_jobs=args.jobs, seed=0, solver=solver
        ),
        peer,
        args.repeat,
    )
    start = time.perf_counter()
    PeerRanking(bootstrap=args.rounds, n_jobs=args.jobs, seed=0).fit(peer)
    plain = time.perf_counter() - start
    rows += measure(
        f"arena, {args.battles:,} battles, 4 features, point fit",
        lambda solver: PeerRanking(
            dim=1, position_bias=False, style=FEATURES, bootstrap=0, solver=solver
        ),
        arena,
        args.repeat,
    )
    if args.arena_rounds:
        rows += measure(
            f"arena, {args.battles:,} battles, {args.arena_rounds} rounds",
            lambda solver: PeerRanking(
                dim=1,
                position_bias=False,
                style=FEATURES,
                bootstrap=args.arena_rounds,
                n_jobs=args.jobs,
                seed=0,
                solver=solver,
            ),
            arena,
            args.repeat,
        )
    print(f"# style-controlled fits, pair solver against L-BFGS-B (n_jobs {args.jobs})\n")
    print(environment())
    print()
    headers = ["data", "solver", "seconds (best / median)", "iterations (last fit)"]
    headers += ["speed-up (median)", "max abs dElo", "max abs d interval end", "rounds apart"]
    print(table(headers, rows))
    print(f"\npeer data without style control, same rounds: {plain:.2f} s (once)")


if __name__ == "__main__":
    main()
