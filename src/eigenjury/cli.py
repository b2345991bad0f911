"""The `eigenjury` command.

Every user mistake ends with a located message on stderr and exit status 2, never a
traceback; results are written atomically so an interrupted run leaves no torn file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from eigenjury import __version__
from eigenjury.batch import batch_calls, read_requests, write_results
from eigenjury.engine import Budget, CallResult, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.errors import InputError
from eigenjury.models import ModelSpec, PriceTable
from eigenjury.reports.accounting import print_accounting
from eigenjury.reports.leaderboard import print_leaderboard, ranking_record
from eigenjury.stats.btd import DEFAULT_L2, DEFAULT_RESTARTS
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.elo import to_elo
from eigenjury.stats.simulate import Population, make_population, recovery, simulate_verdicts
from eigenjury.stats.verdicts import DataError
from eigenjury.verdict_files import FORMATS, read_verdicts, write_verdicts

EXIT_USAGE = 2
EXIT_SOME_FAILED = 1
EXIT_INTERRUPTED = 130
DEFAULT_STORE = Path(".eigenjury/store.sqlite")


def _bounded(
    kind: Callable[[str], Any],
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> Callable[[str], Any]:
    """An argparse type that names the accepted range when a value falls outside it."""

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        too_low = low is not None and (value <= low if open_low else value < low)
        too_high = high is not None and (value >= high if open_high else value > high)
        if too_low or too_high:
            lo = "(" if open_low else "["
            hi = ")" if open_high else "]"
            raise argparse.ArgumentTypeError(
                f"{text} is outside {lo}{'-inf' if low is None else low}, "
                f"{'inf' if high is None else high}{hi}"
            )
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eigenjury",
        description="Trustworthy LLM judging: peer ranking, contract juries and bias bounds.",
    )
    parser.add_argument("--version", action="version", version=f"eigenjury {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sim = commands.add_parser(
        "simulate",
        help="write synthetic verdicts and their ground truth from a known population",
        description="Simulate peer-ranking verdicts (random-groups design) from a known "
        "low-rank BTD population, to check the method before spending money.",
    )
    sim.add_argument(
        "--out",
        type=Path,
        default=Path("eigenjury-sim"),
        help="output directory (default: eigenjury-sim)",
    )
    sim.add_argument("--format", choices=sorted(set(FORMATS.values())), default="csv")
    sim.add_argument("--models", type=_bounded(int, 2), default=8)
    sim.add_argument("--dim", type=_bounded(int, 1), default=2)
    sim.add_argument("--scenarios", type=_bounded(int, 1), default=1000)
    sim.add_argument(
        "--group-size",
        type=_bounded(int, 2),
        default=4,
        help="evaluees per scenario (all ordered pairs are judged)",
    )
    sim.add_argument("--judges-per-scenario", type=_bounded(int, 1), default=1)
    sim.add_argument(
        "--tie", type=_bounded(float, 0.0), default=0.5, help="typical tie propensity lambda"
    )
    sim.add_argument(
        "--position-bias", type=float, default=0.3, help="typical first-slot log-odds advantage"
    )
    sim.add_argument(
        "--judge-noise",
        type=_bounded(float, 0.0),
        default=0.5,
        help="spread of judge lenses around the consensus lens",
    )
    sim.add_argument(
        "--scenario-noise",
        type=_bounded(float, 0.0),
        default=0.0,
        help="per-scenario noise on response quality (correlates verdicts)",
    )
    sim.add_argument(
        "--greenbeard",
        type=_bounded(int, 0),
        default=0,
        help="size of a clique whose members favour each other",
    )
    sim.add_argument("--greenbeard-bonus", type=float, default=2.0)
    sim.add_argument("--seed", type=int, default=0)
    sim.set_defaults(handler=_simulate)

    fit = commands.add_parser(
        "fit",
        help="fit the peer ranking (low-rank BTD, EigenTrust, Elo) to a verdict file",
        description="Fit a verdict file (CSV, JSONL or Parquet with columns scenario, judge, "
        "first, second, verdict; optional criterion) and print the leaderboard.",
    )
    fit.add_argument("verdicts", type=Path, help="verdict file")
    fit.add_argument("--dim", type=_bounded(int, 1), default=2, help="latent dimension d")
    fit.add_argument(
        "--bootstrap",
        type=_bounded(int, 0),
        default=200,
        help="scenario-bootstrap rounds for intervals (0: none; default 200)",
    )
    fit.add_argument(
        "--ci",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.95,
        help="interval coverage (default 0.95)",
    )
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument(
        "--exclude-self",
        action="store_true",
        help="drop verdicts where the judge is an evaluee; no self-trust",
    )
    fit.add_argument(
        "--no-position-bias",
        dest="position_bias",
        action="store_false",
        help="do not fit per-judge first-slot bias",
    )
    fit.add_argument(
        "--l2",
        type=_bounded(float, 0.0),
        default=DEFAULT_L2,
        help=f"L2 penalty on lenses and dispositions, per verdict (default {DEFAULT_L2:g})",
    )
    fit.add_argument("--restarts", type=_bounded(int, 1), default=DEFAULT_RESTARTS)
    fit.add_argument(
        "--damping",
        type=_bounded(float, 0.0, 1.0, open_high=True),
        default=0.0,
        help="EigenTrust damping toward uniform pre-trust",
    )
    fit.add_argument(
        "--anchor",
        default="uniform",
        help="'uniform' (uniform trust = 1500), 'mean', or a model name",
    )
    fit.add_argument("--anchor-value", type=float, default=1500.0)
    fit.add_argument("--criterion", help="fit only the rows of this criterion")
    fit.add_argument(
        "--jobs",
        type=_bounded(int, 1),
        default=None,
        help="processes for the bootstrap (default: all cores)",
    )
    fit.add_argument(
        "--cv",
        type=_bounded(int, 0),
        default=0,
        help="also report held-out log-likelihood over this many scenario folds "
        "(compare across --dim to choose it)",
    )
    fit.add_argument(
        "--truth",
        type=Path,
        help="truth.json from `eigenjury simulate`: report recovery and coverage",
    )
    fit.add_argument("--out", type=Path, help="write the full result as JSON here")
    fit.set_defaults(handler=_fit)

    batch = commands.add_parser(
        "batch",
        help="run a JSONL file of chat requests through a model, cached and resumable",
        description="Run chat requests (one JSON object a line: id, messages, optional "
        "temperature, max_tokens, top_p, seed, stop, sample) through any model. Every "
        "result is committed to the store before it is used: rerun the same command after "
        "a crash or Ctrl-C and only what is missing is sent. Exit status 0 when every "
        "request succeeded, 1 when some ended in errors (they are in the output), 2 for "
        "bad input.",
    )
    batch.add_argument("requests", type=Path, help="JSONL file of requests")
    batch.add_argument("--model", required=True, help="model spec, e.g. openai:gpt-4o-mini")
    batch.add_argument("--out", type=Path, required=True, help="JSONL file of results")
    add_engine_options(batch)
    batch.set_defaults(handler=_batch)

    export = commands.add_parser(
        "export", help="write every stored call result to JSONL or Parquet"
    )
    export.add_argument("out", type=Path, help="output file (.jsonl or .parquet)")
    export.add_argument("--store", type=Path, default=DEFAULT_STORE)
    export.set_defaults(handler=_export)
    return parser


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """The engine's knobs, shared by every command that calls models."""
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--store",
        type=Path,
        default=DEFAULT_STORE,
        help=f"SQLite store of call results (default {DEFAULT_STORE})",
    )
    group.add_argument(
        "--concurrency",
        type=_bounded(int, 1),
        default=16,
        help="calls in flight per endpoint (default 16; halved on 429)",
    )
    group.add_argument(
        "--rpm", type=_bounded(float, 0.0, open_low=True), help="requests per minute per endpoint"
    )
    group.add_argument(
        "--tpm", type=_bounded(float, 0.0, open_low=True), help="tokens per minute per endpoint"
    )
    group.add_argument(
        "--timeout",
        type=_bounded(float, 0.0, open_low=True),
        default=120.0,
        help="seconds per attempt (default 120)",
    )
    group.add_argument("--max-attempts", type=_bounded(int, 1), default=6)
    group.add_argument(
        "--budget-usd",
        type=_bounded(float, 0.0),
        help="stop sending calls before spending more than this",
    )
    group.add_argument(
        "--budget-tokens",
        type=_bounded(int, 0),
        help="stop sending calls before using more tokens than this",
    )
    group.add_argument(
        "--prices", type=Path, help="price table (TOML or JSON) extending the built-in one"
    )
    group.add_argument(
        "--no-retry-errors",
        dest="retry_errors",
        action="store_false",
        help="reuse stored errors instead of trying those calls again",
    )
    group.add_argument("--no-progress", dest="progress", action="store_false")


def engine_from_args(args: argparse.Namespace) -> Engine:
    prices = PriceTable.from_file(args.prices) if args.prices else PriceTable()
    return Engine(
        Store(args.store),
        limits=EndpointLimits(concurrency=args.concurrency, rpm=args.rpm, tpm=args.tpm),
        retry=RetryPolicy(max_attempts=args.max_attempts, timeout_s=args.timeout),
        budget=Budget(max_cost_usd=args.budget_usd, max_tokens=args.budget_tokens),
        prices=prices,
        retry_errors=args.retry_errors,
        progress=args.progress,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # soft_wrap: messages stay on one line, whole, for logs and grep; tables still fit.
    console = Console(soft_wrap=True)
    errors = Console(stderr=True, soft_wrap=True)
    try:
        handler: Callable[[argparse.Namespace, Console], int] = args.handler
        return handler(args, console)
    except (InputError, DataError) as exc:
        errors.print(f"[bold red]error:[/] {exc}", highlight=False, markup=True)
        return EXIT_USAGE
    except OSError as exc:  # unwritable output, a directory where a file is expected, ...
        where = f"{exc.filename}: " if exc.filename else ""
        errors.print(f"[bold red]error:[/] {where}{exc.strerror or exc}", highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        errors.print("interrupted; everything finished so far is kept")
        return EXIT_INTERRUPTED


def _simulate(args: argparse.Namespace, console: Console) -> int:
    if args.group_size > args.models:
        raise InputError(f"--group-size {args.group_size} exceeds --models {args.models}")
    if args.greenbeard > args.models:
        raise InputError(f"--greenbeard {args.greenbeard} exceeds --models {args.models}")
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
        group_size=args.group_size,
        judges_per_scenario=args.judges_per_scenario,
        scenario_noise=args.scenario_noise,
        seed=args.seed + 1,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}[args.format]
    verdicts_path = args.out / f"verdicts{suffix}"
    tmp = verdicts_path.with_name(f".{verdicts_path.name}.tmp{suffix}")
    write_verdicts(table, tmp)
    os.replace(tmp, verdicts_path)
    trust, elo = population.trust(), population.elo()
    truth = {
        "population": population.to_dict(),
        "design": {
            "scenarios": args.scenarios,
            "group_size": args.group_size,
            "judges_per_scenario": args.judges_per_scenario,
            "scenario_noise": args.scenario_noise,
            "seed": args.seed,
        },
        "trust": trust.tolist(),
        "elo": elo.tolist(),
    }
    _write_json(args.out / "truth.json", truth)
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
        f"wrote {len(table)} verdicts to {verdicts_path} and the truth to {args.out / 'truth.json'}"
    )
    return 0


def _fit(args: argparse.Namespace, console: Console) -> int:
    table = read_verdicts(args.verdicts, criterion=args.criterion)
    truth = _read_truth(args.truth, table.models) if args.truth else None
    ranking = PeerRanking(
        args.dim,
        l2=args.l2,
        position_bias=args.position_bias,
        restarts=args.restarts,
        exclude_self=args.exclude_self,
        damping=args.damping,
        anchor=args.anchor,
        anchor_value=args.anchor_value,
        bootstrap=args.bootstrap,
        ci=args.ci,
        seed=args.seed,
        n_jobs=args.jobs,
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
        line = (
            f"against the truth: Kendall tau {rec['kendall_tau']:.3f}, "
            f"largest Elo error {rec['max_abs_elo_error']:.1f}"
        )
        if "elo_ci_coverage" in rec:
            line += f", {rec['elo_ci_coverage']:.0%} of true Elo inside their intervals"
        console.print(line)
    if args.out:
        _write_json(args.out, record)
        console.print(f"wrote {args.out}")
    return 0


def _batch(args: argparse.Namespace, console: Console) -> int:
    lines = read_requests(args.requests)
    spec = ModelSpec.parse(args.model)
    engine = engine_from_args(args)
    calls = batch_calls(lines, spec)
    engine.prepare([spec])

    async def run() -> list[CallResult]:
        async with engine:
            await engine.check_endpoints([spec])
            return await engine.run(calls)

    try:
        results = asyncio.run(run())
    except KeyboardInterrupt:
        console.print(
            f"interrupted: finished calls are in {args.store}; rerun the same command to "
            "send only the rest"
        )
        return EXIT_INTERRUPTED
    finally:
        engine.store.close()
    write_results(args.out, lines, results)
    print_accounting(console, engine.accounting.record())
    failed = sum(not r.ok for r in results)
    console.print(f"wrote {len(results)} results to {args.out}")
    if failed:
        console.print(
            f"[yellow]warning:[/] {failed} request(s) ended in errors (see the 'error' field); "
            "rerun to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def _export(args: argparse.Namespace, console: Console) -> int:
    if not args.store.is_file():
        raise InputError("no such store", path=args.store)
    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        raise InputError("export to a .jsonl or .parquet file", path=args.out)
    with Store(args.store) as store:
        n = store.export(args.out)
    console.print(f"wrote {n} results to {args.out}")
    return 0


def _read_truth(path: Path, models: tuple[str, ...]) -> Population:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        population = Population.from_dict(data["population"])
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
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


def _write_json(path: Path, data: Any) -> None:
    """Write atomically: a reader never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
