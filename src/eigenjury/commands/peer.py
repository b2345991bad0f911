"""`eigenjury simulate`, `fit`, `rank` and `demo`: peer ranking from the command line."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.commands.calls import check_output
from eigenjury.engine.backends import connect
from eigenjury.errors import InputError
from eigenjury.files import load_json, read_text, write_json
from eigenjury.reports.leaderboard import print_leaderboard, ranking_record
from eigenjury.stats.bootstrap import rounds_problem
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.elo import to_elo
from eigenjury.stats.simulate import Population, make_population, recovery, simulate_verdicts
from eigenjury.stats.verdicts import DataError
from eigenjury.verdict_files import read_verdicts, write_verdicts

DEFAULT_GROUP_SIZE = 4  # the EigenBench design: 4 evaluees, 12 ordered pairs per scenario
# What a simulation may hold in memory: about 200 bytes a verdict while it is drawn (1 GB
# at the cap), and one random number per scenario and model to draw the groups.
MAX_SIMULATED_VERDICTS = 5_000_000
MAX_SIMULATED_DRAWS = 20_000_000


def simulate(args: argparse.Namespace, console: Console) -> int:
    group_size = args.group_size or min(DEFAULT_GROUP_SIZE, args.models)
    if group_size > args.models:
        raise InputError(f"--group-size {group_size} exceeds --models {args.models}")
    if args.greenbeard > args.models:
        raise InputError(f"--greenbeard {args.greenbeard} exceeds --models {args.models}")
    if args.dim > args.models:  # scores of m models have rank at most m
        raise InputError(
            f"--dim {args.dim} exceeds --models {args.models}; the latent dimension is at "
            "most the number of models"
        )
    pairs = group_size * (group_size - 1)
    verdicts = args.scenarios * args.judges_per_scenario * pairs
    if verdicts > MAX_SIMULATED_VERDICTS:
        raise InputError(
            f"--scenarios {args.scenarios} x --judges-per-scenario {args.judges_per_scenario} "
            f"x {pairs} ordered pairs a group make {verdicts:,} verdicts, more than the "
            f"{MAX_SIMULATED_VERDICTS:,} a simulation may write; use fewer"
        )
    if args.scenarios * args.models > MAX_SIMULATED_DRAWS:
        raise InputError(
            f"--scenarios {args.scenarios} x --models {args.models} is more than "
            f"{MAX_SIMULATED_DRAWS:,} (the groups are drawn from one random number per "
            "scenario and model); use fewer scenarios or models"
        )
    population = make_population(
        args.models,
        args.dim,
        tie=args.tie,
        position_bias=args.position_bias,
        judge_noise=args.judge_noise,
        greenbeard=args.greenbeard,
        greenbeard_bonus=args.greenbeard_bonus,
        seed=args.seed,
    )
    table = simulate_verdicts(
        population,
        n_scenarios=args.scenarios,
        group_size=group_size,
        judges_per_scenario=args.judges_per_scenario,
        scenario_noise=args.scenario_noise,
        seed=args.seed + 1,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}[args.format]
    verdicts_path = args.out / f"verdicts{suffix}"
    write_verdicts(table, verdicts_path)
    trust, elo = population.trust(), population.elo()
    truth = {
        "population": population.to_dict(),
        "design": {
            "scenarios": args.scenarios,
            "group_size": group_size,
            "judges_per_scenario": args.judges_per_scenario,
            "scenario_noise": args.scenario_noise,
            "seed": args.seed,
        },
        "trust": trust.tolist(),
        "elo": elo.tolist(),
    }
    write_json(args.out / "truth.json", truth)
    shown = Table(title="Simulated population (truth)", title_justify="left")
    for col in ("model", "true Elo", "true trust", "tie propensity", "position bias"):
        shown.add_column(col, justify="left" if col == "model" else "right")
    for i in np.argsort(-elo):
        name = population.models[i] + (" (greenbeard)" if population.greenbeard[i] else "")
        shown.add_row(
            name,
            f"{elo[i]:.0f}",
            f"{trust[i]:.4f}",
            f"{population.tie_propensity[i]:.2f}",
            f"{population.position_bias[i]:+.2f}",
        )
    console.print(shown)
    console.print(
        f"wrote {len(table)} verdicts to {escape(str(verdicts_path))} and the truth to "
        f"{escape(str(args.out / 'truth.json'))}",
        highlight=False,
    )
    return 0


def fit(args: argparse.Namespace, console: Console) -> int:
    problem = rounds_problem(args.bootstrap, args.ci)
    if problem:
        raise InputError(problem, field="--bootstrap")
    if args.out:
        inputs = {"verdict file": args.verdicts, "truth file": args.truth}
        check_output(args.out, {what: path for what, path in inputs.items() if path})
    table = read_verdicts(args.verdicts, criterion=args.criterion)
    truth = read_truth(args.truth, table.models) if args.truth else None
    tuning = {k: getattr(args, k) for k in ("l2", "restarts") if getattr(args, k) is not None}
    _, map_rounds = connect(args.backend, args.ray_address)
    ranking = PeerRanking(
        args.dim,
        **tuning,
        position_bias=args.position_bias,
        exclude_self=args.exclude_self,
        damping=args.damping,
        anchor=args.anchor,
        anchor_value=args.anchor_value,
        bootstrap=args.bootstrap,
        ci=args.ci,
        seed=args.seed,
        n_jobs=args.jobs,
        map_rounds=map_rounds,
        cv=args.cv,
    )
    try:
        ranking.fit(table)
    except DataError as exc:
        raise InputError(str(exc), path=args.verdicts) from None
    record = ranking_record(ranking, source=str(args.verdicts))
    if truth is not None:
        order = [truth.models.index(m) for m in ranking.models_]
        true_trust = truth.trust(exclude_self=args.exclude_self)[order]
        true_elo = to_elo(true_trust, anchor=ranking.anchor_index_, value=args.anchor_value)
        record["truth_recovery"] = recovery(
            true_trust,
            ranking.trust_,
            true_elo,
            ranking.elo_,
            ranking.elo_ci_ if args.bootstrap else None,
        )
    print_leaderboard(console, record)
    if truth is not None:
        rec = record["truth_recovery"]
        tau = rec["kendall_tau"]
        shown = "undefined (a ranking is constant)" if tau is None else f"{tau:.3f}"
        line = (
            f"against the truth: Kendall tau {shown}, "
            f"largest Elo error {rec['max_abs_elo_error']:.1f}"
        )
        if "elo_ci_coverage" in rec:
            line += f", {rec['elo_ci_coverage']:.0%} of true Elo inside their intervals"
        console.print(line, highlight=False)
    if args.out:
        write_json(args.out, record)
        console.print(f"wrote {escape(str(args.out))}", highlight=False)
    return 0


def read_truth(path: Path, models: tuple[str, ...]) -> Population:
    data = load_json(read_text(path), path)
    try:
        if not isinstance(data, dict) or "population" not in data:
            raise ValueError("no population in it")
        population = Population.from_dict(data["population"])
    except ValueError as exc:
        raise InputError(
            f"not a truth file written by `eigenjury simulate` ({exc})", path=path
        ) from None
    if set(models) != set(population.models):
        unknown = sorted(set(models) ^ set(population.models))
        raise InputError(
            "the verdicts and the truth describe different populations (differing: "
            f"{', '.join(unknown[:5])}); recovery needs the same models in both",
            path=path,
        )
    return population


def rank(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.peer.run import rank as run_rank

    return _report(run_rank(args.config, out=args.out, progress=args.progress), console)


def demo(args: argparse.Namespace, console: Console) -> int:
    from importlib import resources

    from eigenjury.peer.run import rank as run_rank

    config = resources.files("eigenjury") / "data" / "configs" / "demo.yaml"
    with resources.as_file(config) as path:
        run = run_rank(path, out=args.out, progress=args.progress)
    return _report(run, console)


def _report(run: Any, console: Console) -> int:
    from eigenjury.reports.accounting import print_accounting

    record = run.record
    print_leaderboard(console, record)
    summary = record["run"]
    failures = summary["failures"]
    console.print(
        f"{summary['verdicts']} verdicts from {summary['comparisons']} comparisons"
        + (
            f"; not usable: {escape(', '.join(f'{k} {v}' for k, v in failures.items()))}"
            if failures
            else ""
        )
        + (f"; {summary['repaired']} repaired" if summary["repaired"] else ""),
        highlight=False,
    )
    consistency = summary["order_consistency"]
    if consistency:
        console.print(
            "order consistency (same model wins both orders): "
            + escape(", ".join(f"{j} {v['consistent']:.0%}" for j, v in consistency.items())),
            highlight=False,
        )
    if "objective" in record:
        obj = record["objective"]
        console.print(
            f"objective check on {obj['questions']} questions: Kendall tau between Elo and true "
            f"accuracy {obj['kendall_tau_elo_vs_accuracy']}; accuracy "
            + escape(", ".join(f"{n} {a:.0%}" for n, a in obj["accuracy"].items())),
            highlight=False,
        )
    if "greenbeard" in record:
        g = record["greenbeard"]
        for label in ("with_self_judgments", "without_self_judgments"):
            clique, others = (
                "-" if v is None else f"{v:+.1f}"
                for v in (g[label]["mean_shift_greenbeards"], g[label]["mean_shift_others"])
            )
            console.print(
                f"greenbeard Elo shift ({label.replace('_', ' ')}): clique {clique}, "
                f"others {others}",
                highlight=False,
            )
    print_accounting(console, summary["accounting"])
    console.print(f"report: {escape(str(run.out / 'report.html'))}", highlight=False)
    return 0
