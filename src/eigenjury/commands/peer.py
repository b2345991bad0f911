"""`eigenjury simulate`, `fit`, `rank`, `style-check` and `demo`: peer ranking from the
command line. Each command's options are declared beside its handler, which parses
them, calls peer (and stats), and prints through reports."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import (
    MAX_ROUNDS,
    add_backend_options,
    add_ci_option,
    add_judgment_options,
    add_plan_options,
    bounded,
    check_output,
    check_plan_file,
    folds,
    prior_scales,
    read_judgments,
    seed,
    show_plan,
    style_features,
)
from eigenjury.errors import InputError, located
from eigenjury.files import check_output_folder, json_output
from eigenjury.peer.settings import MAX_ANCHOR_VALUE, FitSettings, anchor_value_problem, setting_key

if TYPE_CHECKING:
    from eigenjury.peer.run import RankRun
    from eigenjury.verdict_files import Collapse, Features

VERDICT_FORMATS = ("csv", "jsonl", "parquet")  # = verdict_files.FORMATS (importing it loads scipy)
SEED_HELP = (
    "one seed for every random choice of the run (scenarios, design, sampling, fit), in "
    "place of the config's seeds"
)


def register(commands: Any) -> None:
    declare_simulate(commands)
    declare_fit(commands)
    declare_rank(commands)
    declare_judge(commands)
    declare_style_check(commands)
    declare_demo(commands)
    declare_export_leaderboard(commands)


def declare_simulate(commands: Any) -> None:
    """`simulate`: synthetic verdicts and their truth."""
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
    sim.add_argument("--format", choices=VERDICT_FORMATS, default="csv")
    sim.add_argument(
        "--models",
        type=bounded(int, 2, 1000),  # the true scores are a models x models matrix
        default=8,
        help="models in the population (2 to 1000; default 8)",
    )
    sim.add_argument(
        "--dim", type=bounded(int, 1), default=2, help="latent dimension, at most --models"
    )
    sim.add_argument(
        "--scenarios",
        type=bounded(int, 1),
        default=1000,
        help="scenarios (default 1000); a simulation writes at most 5,000,000 verdicts",
    )
    sim.add_argument(
        "--group-size",
        type=bounded(int, 2),
        help="evaluees per scenario, all ordered pairs judged (default: 4, or --models if fewer)",
    )
    sim.add_argument("--judges-per-scenario", type=bounded(int, 1), default=1)
    sim.add_argument(
        "--tie", type=bounded(float, 0.0), default=0.5, help="typical tie propensity lambda"
    )
    sim.add_argument(
        "--position-bias",
        type=bounded(float),
        default=0.3,
        help="typical first-slot log-odds advantage",
    )
    sim.add_argument(
        "--judge-noise",
        type=bounded(float, 0.0),
        default=0.5,
        help="spread of judge lenses around the consensus lens",
    )
    sim.add_argument(
        "--scenario-noise",
        type=bounded(float, 0.0),
        default=0.0,
        help="per-scenario noise on response quality (correlates verdicts)",
    )
    sim.add_argument(
        "--greenbeard",
        type=bounded(int, 0),
        default=0,
        help="size of a clique whose members favour each other",
    )
    sim.add_argument("--greenbeard-bonus", type=bounded(float), default=2.0)
    sim.add_argument(
        "--verbosity",
        type=bounded(float, 0.0, 5.0),
        default=0.0,
        help="spread of the models' mean log reply length; with it the replies' lengths "
        "are written as first_length and second_length (default 0: no lengths)",
    )
    sim.add_argument(
        "--style-effect",
        type=bounded(float, -20.0, 20.0),
        default=0.0,
        help="what judges add to a reply's win log-odds per unit of normalised length "
        "difference, (a - b) / (a + b) (needs --verbosity; for style control)",
    )
    sim.add_argument(
        "--soft",
        action="store_true",
        help="calibrated judges: write each verdict's label probabilities too (p_first, "
        "p_second, p_tie: soft verdicts, which `fit` counts as fractional verdicts); the "
        "verdicts are the same draws as without --soft",
    )
    sim.add_argument("--seed", type=seed, default=0)
    sim.set_defaults(handler=simulate_command)


DEFAULT_GROUP_SIZE = 4  # the EigenBench design: 4 evaluees, 12 ordered pairs per scenario
# What a simulation may hold in memory: about 200 bytes a verdict while it is drawn (1 GB
# at the cap), and one random number per scenario and model to draw the groups.
MAX_SIMULATED_VERDICTS = 5_000_000
MAX_SIMULATED_DRAWS = 20_000_000


def simulate_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.peer.record import SimulatedDesign, TruthRecord
    from eigenjury.peer.simulation import simulate
    from eigenjury.records import write_record
    from eigenjury.reports.simulation import print_truth
    from eigenjury.stats.simulate import make_population
    from eigenjury.verdict_files import write_verdicts

    group_size = _simulated_group_size(args)
    population = make_population(
        args.models,
        args.dim,
        tie=args.tie,
        position_bias=args.position_bias,
        judge_noise=args.judge_noise,
        greenbeard=args.greenbeard,
        greenbeard_bonus=args.greenbeard_bonus,
        verbosity=args.verbosity,
        style_effect=args.style_effect,
        seed=args.seed,
    )
    design = SimulatedDesign(
        scenarios=args.scenarios,
        group_size=group_size,
        judges_per_scenario=args.judges_per_scenario,
        scenario_noise=args.scenario_noise,
        seed=args.seed,
        soft=args.soft or None,
    )
    check_output_folder(args.out)
    simulation = simulate(population, design)
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = {"csv": ".csv", "jsonl": ".jsonl", "parquet": ".parquet"}[args.format]
    verdicts_path = args.out / f"verdicts{suffix}"
    truth_path = args.out / TruthRecord.FILE
    write_verdicts(simulation.table, verdicts_path)
    write_record(truth_path, simulation.truth)
    print_truth(console, simulation.truth)
    console.print(
        f"wrote {len(simulation.table)} {'soft ' if args.soft else ''}verdicts to "
        f"{escape(str(verdicts_path))} and the truth to {escape(str(truth_path))}",
        highlight=False,
    )
    return 0


def _simulated_group_size(args: argparse.Namespace) -> int:
    """The evaluees per scenario, once the options are known to fit together and the
    draw to fit in memory."""
    group_size: int = args.group_size or min(DEFAULT_GROUP_SIZE, args.models)
    if group_size > args.models:
        raise InputError(f"--group-size {group_size} exceeds --models {args.models}")
    if args.greenbeard > args.models:
        raise InputError(f"--greenbeard {args.greenbeard} exceeds --models {args.models}")
    if args.style_effect and not args.verbosity:
        raise InputError(
            "--style-effect needs --verbosity > 0: without it every reply has the same length",
            field="--style-effect",
        )
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
    return group_size


def declare_fit(commands: Any) -> None:
    """`fit`: the leaderboard of a verdict file. Every FitSettings key is an option
    (underscores as hyphens), given or left to FitSettings' default."""
    fit = commands.add_parser(
        "fit",
        help="fit the peer ranking (low-rank BTD, EigenTrust, Elo) to a verdict file",
        description="Fit a verdict file (CSV, JSONL or Parquet with columns scenario, judge, "
        "first, second, verdict; optional criterion) and print the leaderboard.",
    )
    fit.add_argument("verdicts", type=Path, help="verdict file")
    fit.add_argument(
        "--dim",
        type=bounded(int, 1),
        help="latent dimension d, at most the number of models (default 2)",
    )
    fit.add_argument(
        "--bootstrap",
        type=bounded(int, 0),
        help="scenario-bootstrap rounds for intervals (0: none; default 200; at least "
        "2 / (1 - ci), e.g. 40 for 95%%, so that each tail holds a draw)",
    )
    add_ci_option(fit)
    fit.add_argument(
        "--interval",
        choices=("percentile", "bca", "sandwich"),
        help="intervals: percentile (default), or bias-corrected and accelerated (from 100 "
        "rounds and 20 scenarios; corrects a bias the draws repeat, which they do where the "
        "model fits the verdicts, and adds noise where it does not), or sandwich (the "
        "cluster-robust covariance of the one fit, --bootstrap draws from it, no refits)",
    )
    fit.add_argument("--seed", type=seed)
    fit.add_argument(
        "--exclude-self",
        action="store_true",
        default=None,
        help="drop verdicts where the judge is an evaluee (even without it, a judge's "
        "verdicts on itself buy it no trust: they go to its self-preference)",
    )
    fit.add_argument(
        "--exclude-judge",
        dest="exclude_judges",
        action="append",
        metavar="JUDGE",
        help="leave out this judge's verdicts; it stays an evaluee (repeat for more; see "
        "what a judge that favours one model moves)",
    )
    fit.add_argument(
        "--no-self-preference",
        dest="self_preference",
        action="store_false",
        default=None,
        help="do not fit each judge's preference for its own replies (the EigenBench "
        "model, where a judge's verdicts on itself move its own trust)",
    )
    fit.add_argument(
        "--prior",
        type=prior_scales,
        metavar="CONSENSUS,JUDGE,SELF|none",
        help="the prior on the judges' scores, as standard deviations in logits: of the "
        "consensus, of each judge around it, and of a judge's self-preference (default "
        "4,2,20); none: maximum likelihood, where a perfect record's score is set by --l2",
    )
    fit.add_argument(
        "--no-position-bias",
        dest="position_bias",
        action="store_false",
        default=None,
        help="do not fit per-judge first-slot bias",
    )
    fit.add_argument(
        "--style",
        type=style_features,
        metavar="FEATURE[,FEATURE...]|none",
        help="style control: hold these reply features equal (any feature the file has "
        "as first_<f>/second_<f> or <f>_a/<f>_b columns; length, headers, lists and bold "
        "also from reply texts); default: those four where the file has them; none: off",
    )
    fit.add_argument(
        "--style-per-judge",
        action="store_true",
        default=None,
        help="one style coefficient per judge and feature (which judge is most swayed)",
    )
    fit.add_argument(
        "--l2",
        type=bounded(float, 0.0),
        help="L2 penalty on lenses and dispositions, per verdict: picks one factorisation "
        "of the same scores (default: the estimator's, 1e-6)",
    )
    fit.add_argument(
        "--restarts", type=bounded(int, 1), help="seeded starts of the non-convex fit (default: 4)"
    )
    fit.add_argument(
        "--damping",
        type=bounded(float, 0.0, 1.0),
        help="EigenTrust damping a in t = (1 - a) t T + a p, toward the pre-trust p: the "
        "external judges' consensus, uniform without external judges (default: 0 without "
        "external judges, 0.5 with external and peer judges, 1 with external judges only)",
    )
    fit.add_argument(
        "--external-weight",
        action="append",
        metavar="JUDGE=WEIGHT",
        help="weight of an external judge (one never judged) in the pre-trust; repeatable; "
        "default 1 each, 0 allowed",
    )
    fit.add_argument(
        "--anchor",
        help="'uniform' (uniform trust = 1500), 'mean', or a model name",
    )
    fit.add_argument(
        "--anchor-value",
        type=anchor_value,
        help=f"the Elo the anchor is given (default 1500; at most {MAX_ANCHOR_VALUE:g} either "
        "way, so that Elo values keep differences far finer than the 0.01 points that tie)",
    )
    add_judgment_options(fit)
    fit.add_argument(
        "--jobs",
        type=bounded(int, 1),
        help="processes for the bootstrap (default: all cores)",
    )
    fit.add_argument(
        "--cv",
        type=folds,
        help="also report held-out log-likelihood over this many scenario folds, 0 (none) "
        "or at least 2 (compare across --dim to choose it)",
    )
    fit.add_argument(
        "--strong-weight",
        type=bounded(float, 0.0),
        help="graded verdicts (a strength column): how many verdicts a strong one (A>>B, "
        "B>>A) counts as (default 3, as Arena-Hard)",
    )
    fit.add_argument(
        "--truth",
        type=Path,
        help="truth.json from `eigenjury simulate`: report recovery and coverage",
    )
    fit.add_argument(
        "--agreement",
        action="append",
        metavar="JUDGE",
        help="also report every judge's agreement with the majority of these reference "
        "judges, one per --agreement (as `eigenjury agreement --reference`, with the "
        "--bootstrap rounds)",
    )
    fit.add_argument("--out", type=Path, help="write the full result as JSON here")
    add_backend_options(fit.add_argument_group("cluster (bootstrap rounds as Ray tasks)"))
    fit.set_defaults(handler=fit_command)


def fit_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.engine.backends import connect
    from eigenjury.peer.agreement import agreement_table
    from eigenjury.peer.fitting import TruthError, fit_verdicts
    from eigenjury.peer.simulation import read_truth
    from eigenjury.records import write_record
    from eigenjury.reports.ranking import print_summary
    from eigenjury.stats.bootstrap import rounds_problem
    from eigenjury.stats.consensus import SettingError
    from eigenjury.stats.verdicts import DataError

    settings = fit_settings(args)
    problem = rounds_problem(settings.bootstrap, settings.ci)
    if problem:
        raise InputError(problem, field="--bootstrap")
    if args.out:
        args.out = json_output(args.out)
        inputs = {"verdict file": args.verdicts, "truth file": args.truth}
        check_output(args.out, inputs)
    table = read_judgments(
        args,
        *_reading(settings, agreement=args.agreement is not None),
        strong_weight=settings.strong_weight,
    )
    agreement = None
    if args.agreement is not None:  # before the fit: a bad reference stops the command at once
        with located(args.verdicts, field="--agreement"):
            agreement = agreement_table(
                table,
                args.agreement,
                bootstrap=settings.bootstrap,
                ci=settings.ci,
                seed=settings.seed,
            )
    truth = read_truth(args.truth, table.models) if args.truth else None
    _, map_rounds = connect(args.backend, args.ray_address)
    try:
        record = fit_verdicts(
            table, settings, source=str(args.verdicts), map_rounds=map_rounds, truth=truth
        )
    except TruthError as exc:
        exc.locate(args.truth)
        raise
    except SettingError as exc:
        exc.locate(args.verdicts, _option(exc.setting))
        raise
    except DataError as exc:
        exc.locate(args.verdicts)
        raise
    record.agreement = agreement
    print_summary(console, record)
    if args.out:
        write_record(args.out, record)
        console.print(f"wrote {escape(str(args.out))}", highlight=False)
    return 0


def fit_settings(args: argparse.Namespace) -> FitSettings:
    """The FitSettings of `fit`'s options: those given, FitSettings' defaults for the rest."""
    given = {k: getattr(args, k) for k in FitSettings.model_fields if getattr(args, k) is not None}
    if args.external_weight is not None:
        given["external_weight"] = parse_external_weights(args.external_weight)
    return FitSettings.model_validate(given)


def _reading(settings: FitSettings, *, agreement: bool) -> tuple[Collapse, Features]:
    """What the fit reads of the file: a point fit needs only the counts; intervals and
    folds, the scenarios; agreement, the rows. The default style control reads the
    features the file has; agreement reads the lengths where it can, for the
    longer-reply preference."""
    needs: Collapse = (
        "rows" if agreement else "scenarios" if settings.bootstrap or settings.cv else "cells"
    )
    if isinstance(settings.style, list):
        return needs, settings.style
    return needs, "available" if settings.style == "default" or agreement else None


def _option(setting: str) -> str | None:
    """The `fit` option of an estimator setting the verdicts refused."""
    key = setting_key(setting)
    if key not in FitSettings.model_fields:
        return None
    return _SINGULAR.get(key, f"--{key.replace('_', '-')}")


# Options given once per value, named in the singular.
_SINGULAR = {"exclude_judges": "--exclude-judge"}


def anchor_value(text: str) -> float:
    """An Elo for the anchor: finite, and small enough that Elo values near it are
    resolved far more finely than the Elo within which models tie."""
    value: float = bounded(float)(text)
    problem = anchor_value_problem(value, text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return value


def parse_external_weights(texts: list[str]) -> dict[str, float] | None:
    """`--external-weight JUDGE=WEIGHT` values by judge (None when none is given). Split
    on the last '=': names may contain one, numbers never do."""
    weights: dict[str, float] = {}
    for text in texts:
        name, sep, value = text.rpartition("=")
        if not sep or not name:
            raise InputError(f"{text!r} is not JUDGE=WEIGHT", field="--external-weight")
        try:
            weight = bounded(float, 0.0)(value)
        except argparse.ArgumentTypeError as exc:
            raise InputError(
                f"the weight of '{name}' must be a number >= 0: {exc}", field="--external-weight"
            ) from None
        if name in weights:
            raise InputError(f"'{name}' is weighted twice", field="--external-weight")
        weights[name] = weight
    return weights or None


def declare_rank(commands: Any) -> None:
    """`rank`: collect a config's verdicts and fit them."""
    rank = commands.add_parser(
        "rank",
        help="collect peer judgments for a population and fit the leaderboard",
        description="Run a peer-ranking config (YAML): evaluees answer scenarios in "
        "character, judges compare pairs of answers against the constitution in both "
        "orders, and the verdicts are fitted (low-rank BTD, EigenTrust, Elo). Writes "
        "results.json, verdicts.csv, transcripts.jsonl and report.html. Everything goes "
        "through the store: rerun to resume or after adding members.",
    )
    rank.add_argument("config", type=Path, help="run config (YAML)")
    rank.add_argument("--out", type=Path, help="output folder (default: the config's output)")
    rank.add_argument("--seed", type=seed, help=SEED_HELP)
    rank.add_argument("--no-progress", dest="progress", action="store_false")
    add_plan_options(rank)
    rank.set_defaults(handler=rank_command)


def rank_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.jobs import plan_rank, run_rank

    if args.plan is not None:
        check_plan_file(args.plan, {"config": args.config})
        show_plan(console, plan_rank(args.config, out=args.out, seed=args.seed), args.plan)
        return 0
    run = run_rank(args.config, out=args.out, progress=args.progress, seed=args.seed, go=args.go)
    return _report(run, console)


def declare_judge(commands: Any) -> None:
    """`judge`: answers people already hold, ranked by judges, with no config."""
    judge = commands.add_parser(
        "judge",
        help="rank answers you already have (Arena-Hard, AlpacaEval, FastChat, a table) by "
        "LLM judges, against a baseline or each other",
        description="Every model in the answer files is a member; its answers are read, "
        "never generated. The judges (not ranked) compare pairs of answers in both orders "
        "against the constitution (default: helpfulness), and the verdicts are fitted as "
        "a rank run's are. With --baseline, each model is compared with the baseline "
        "(Arena-Hard's design); without it, every pair. The config is written to the "
        "output folder (config.yaml): edit it and rerun it with `eigenjury rank`. "
        "Everything goes through the store: rerun to resume.",
    )
    judge.add_argument(
        "answers",
        type=Path,
        nargs="+",
        help="answer files or folders: an Arena-Hard folder (question.jsonl, model_answer/) "
        "or answer .jsonl, an AlpacaEval .json, FastChat answers, an Inspect log (.eval), "
        "or a table (.csv, .jsonl, .parquet) of question_id, model, answer",
    )
    judge.add_argument(
        "--judge",
        dest="judges",
        action="append",
        required=True,
        metavar="SPEC",
        help="a judge (repeat for a panel); NAME=SPEC gives it a short name",
    )
    judge.add_argument("--baseline", help="the model every other is compared with")
    judge.add_argument(
        "--design",
        choices=("baseline", "all", "random-groups", "balanced"),
        help="which pairs are judged (default: baseline with --baseline, else all)",
    )
    judge.add_argument(
        "--questions", type=Path, help="the questions (JSONL or CSV: id, text), where the "
        "answer files do not carry them",
    )  # fmt: skip
    judge.add_argument(
        "--constitution",
        help="bundled name or YAML file of what the judges look for (default: helpfulness)",
    )
    judge.add_argument("--limit", type=bounded(int, 1), help="judge a stable subset of questions")
    judge.add_argument(
        "--reflections",
        action="store_true",
        help="judges first write a note on each answer, as EigenBench does (one more call "
        "per answer and judge; default: off, as Arena-Hard)",
    )
    judge.add_argument("--bootstrap", type=bounded(int, 0), help="bootstrap rounds (default 200)")
    judge.add_argument("--out", type=Path, default=Path("eigenjury-judge"), help="output folder")
    judge.add_argument("--seed", type=seed, help=SEED_HELP)
    judge.add_argument("--no-progress", dest="progress", action="store_false")
    add_plan_options(judge, go=False)
    judge.set_defaults(handler=judge_command)


def judge_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.jobs import plan_judge, run_judge

    options = {
        "baseline": args.baseline,
        "design": args.design,
        "questions": args.questions,
        "constitution": args.constitution,
        "limit": args.limit,
        "reflections": args.reflections,
        "bootstrap": args.bootstrap,
        "seed": args.seed,
    }
    if args.plan is not None:
        check_plan_file(args.plan, {f"answers {a}": a for a in args.answers})
        plan = plan_judge(args.answers, args.judges, out=args.out, **options)
        show_plan(console, plan, args.plan)
        return 0
    run = run_judge(args.answers, args.judges, out=args.out, progress=args.progress, **options)
    return _report(run, console)


def declare_style_check(commands: Any) -> None:
    """`style-check`: the judges' taste for length, measured on a rank run."""
    check = commands.add_parser(
        "style-check",
        help="measure each judge's taste for length on same-content edits of a rank run's "
        "replies, beside the run's fitted length coefficient",
        description="Style control holds length equal and assumes length reaches the "
        "verdicts only through the judges' taste; where longer replies really are better, "
        "it removes that substance too. This check makes a sample of a finished rank run's "
        "replies longer with neutral filler sentences (same content), has every judge of "
        "the run compare each with itself unchanged, in both orders, through the run's own "
        "prompts and verdict reading (cached in the store, accounted, resumable), and "
        "reports each judge's taste in the fitted coefficient's units beside it, and the "
        "leaderboard with the coefficient held at the measured taste. Writes "
        "style-check.json and style-check-transcripts.jsonl.",
    )
    check.add_argument("run", type=Path, help="the output folder of a `rank` run")
    check.add_argument(
        "--config",
        type=Path,
        help="the config the run was made with (default: the one its results.json names)",
    )
    check.add_argument(
        "--replies",
        type=bounded(int, 1),
        default=50,
        help="replies to lengthen, sampled from the run's (default 50; every judge compares "
        "each in both orders: 2 x replies x judges comparisons)",
    )
    check.add_argument(
        "--difference",
        type=bounded(float, 0.01, 0.9),
        help="the normalised length difference (a - b) / (a + b) each edit aims at (default: "
        "one standard deviation of the run's, at most 0.5)",
    )
    check.add_argument(
        "--bootstrap",
        type=bounded(int, 0, MAX_ROUNDS),
        default=500,
        help="bootstrap rounds over the edited replies for the intervals (default 500; at "
        f"most {MAX_ROUNDS:,})",
    )
    check.add_argument("--seed", type=seed, default=0, help="seeds the sample and the filler")
    check.add_argument(
        "--out", type=Path, help="folder for style-check.json (default: the run's folder)"
    )
    check.add_argument("--no-progress", dest="progress", action="store_false")
    add_plan_options(check, go=False)
    check.set_defaults(handler=style_check_command)


def style_check_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.engine.runner import budgets_of, plan_run, run_engine
    from eigenjury.exit_codes import EXIT_SOME_FAILED
    from eigenjury.peer.run import member_error
    from eigenjury.peer.style_check import CheckSettings, assemble, collect, prepare_check
    from eigenjury.records import LinesFile
    from eigenjury.reports.output import Outputs, write_outputs
    from eigenjury.reports.style_check import print_style_check

    settings = CheckSettings(
        replies=args.replies, target=args.difference, seed=args.seed, rounds=args.bootstrap
    )
    check = prepare_check(args.run, args.config, settings)
    config = check.run.config
    out = args.out if args.out is not None else args.run
    check_output_folder(out)
    judges = [m.spec for m in config.population if m.judges]
    # the run's budgets for the models a style check calls: its judges
    engine = config.engine.model_copy(
        update={"budget_usd_by_model": budgets_of(config.engine.budget_usd_by_model, judges)}
    )
    if args.plan is not None:
        check_plan_file(args.plan, {"output": out / "style-check.json"})
        plan = plan_run(
            engine,
            judges,
            lambda engine: collect(engine, check),
            command="style-check",
            base=check.run.path.parent,
        )
        show_plan(console, plan, args.plan)
        return 0
    with LinesFile(out / "style-check-transcripts.jsonl") as transcripts:
        ran = run_engine(
            engine,
            judges,
            lambda engine: collect(engine, check, transcripts),
            base=check.run.path.parent,
            progress=args.progress,
            describe=member_error(check.run),
        )
        record = assemble(check, ran.value)
        write_outputs(out, Outputs(record, files={"style-check-transcripts.jsonl": transcripts}))
    print_style_check(console, record)
    console.print(f"wrote {escape(str(out / record.FILE))}", highlight=False)
    return EXIT_SOME_FAILED if record.failures else 0


def declare_demo(commands: Any) -> None:
    """`demo`: `rank` on the bundled offline demo config."""
    demo = commands.add_parser(
        "demo",
        help="the offline demo: four local personas ranked for kindness (about 100 s on 2 "
        "CPU cores)",
        description="Run `rank` on the bundled demo config: a warm and a cold persona on "
        "each of the two bundled local models (SmolLM2-135M, Gemma-3-270M) are ranked "
        "against the kindness constitution by the SmolLM2 personas, with no network. "
        "Needs the local extra.",
    )
    demo.add_argument("--seed", type=seed, help=SEED_HELP)
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("eigenjury-demo"),
        help="output folder (default: eigenjury-demo)",
    )
    demo.add_argument("--no-progress", dest="progress", action="store_false")
    add_plan_options(demo, go=False)
    demo.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace, console: Console) -> int:
    from importlib import resources

    from eigenjury.jobs import plan_rank, run_rank

    config = resources.files("eigenjury") / "data" / "configs" / "demo.yaml"
    with resources.as_file(config) as path:
        if args.plan is not None:
            check_plan_file(args.plan, {})
            show_plan(console, plan_rank(path, out=args.out, seed=args.seed), args.plan)
            return 0
        run = run_rank(path, out=args.out, progress=args.progress, seed=args.seed)
    return _report(run, console)


def _report(run: RankRun, console: Console) -> int:
    from eigenjury.reports.output import REPORT
    from eigenjury.reports.ranking import print_summary

    print_summary(console, run.record)
    console.print(f"report: {escape(str(run.out / REPORT))}", highlight=False)
    return 0


LEADERBOARD_SUFFIXES = {".md": "md", ".csv": "csv"}


def declare_export_leaderboard(commands: Any) -> None:
    """`export-leaderboard`: a ranking's leaderboard as Markdown or CSV."""
    export = commands.add_parser(
        "export-leaderboard",
        help="write a ranking's leaderboard as a Markdown or CSV table",
        description="The leaderboard of a `rank`, `demo` or `fit` result (its results.json, "
        "or the run folder holding it) as a plain table: Markdown to read or paste, with "
        "the notes that qualify the numbers under it; CSV for other programs, with the "
        "values as the record holds them.",
    )
    export.add_argument("result", type=Path, help="results.json, or a run folder holding one")
    export.add_argument(
        "--format",
        choices=("md", "csv"),
        help="table format (default: by the --out suffix, .md or .csv; md without --out)",
    )
    export.add_argument("--out", type=Path, help="file to write (default: print it)")
    export.set_defaults(handler=export_leaderboard_command)


def export_leaderboard_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.files import write_text
    from eigenjury.peer.record import RankingRecord
    from eigenjury.records import read_record
    from eigenjury.reports.ranking.leaderboard import leaderboard_text

    source: Path = args.result
    if source.is_dir():
        source = source / RankingRecord.FILE
    form = args.format
    if args.out is not None:
        check_output(args.out, {"result": source})
        implied = LEADERBOARD_SUFFIXES.get(args.out.suffix.lower())
        if implied is None or (form is not None and form != implied):
            wanted = form or "md"
            raise InputError(
                f"a {'Markdown' if wanted == 'md' else 'CSV'} table goes in a .{wanted} file; "
                f"give --out a name such as {args.out.with_suffix('.' + wanted).name}",
                path=args.out,
            )
        form = implied
    text = leaderboard_text(read_record(source, RankingRecord), form or "md")
    if args.out is None:
        console.file.write(text)
        return 0
    write_text(args.out, text)
    console.print(f"wrote {escape(str(args.out))}", highlight=False)
    return 0
