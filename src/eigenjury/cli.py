"""The `eigenjury` command.

Every user mistake ends with a located message on stderr and exit status 2, never a
traceback; results are written atomically so an interrupted run leaves no torn file.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from eigenjury import __version__
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE

DEFAULT_STORE = Path(".eigenjury/store.sqlite")
VERDICT_FORMATS = (
    "csv",
    "jsonl",
    "parquet",
)  # = verdict_files.FORMATS values (importing it loads scipy)


def _bounded(
    kind: Callable[[str], Any],
    low: float | None = None,
    high: float | None = None,
    *,
    open_low: bool = False,
    open_high: bool = False,
) -> Callable[[str], Any]:
    """An argparse type that names the accepted range when a value falls outside it.

    NaN and infinities are refused whatever the range: no setting means them, and they
    would reach the results as NaN (and invalid JSON).
    """

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid {kind.__name__}") from None
        if value != value:  # NaN: every comparison below would be false
            raise argparse.ArgumentTypeError(f"{text!r} is not a number")
        if isinstance(value, float) and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
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


def _seed(text: str) -> int:
    """A random seed: a whole number from 0 up (numpy's generators refuse negative ones)."""
    try:
        value: int = _bounded(int, 0)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a seed; seeds are whole numbers from 0 up"
        ) from None
    return value


def _folds(text: str) -> int:
    """Cross-validation folds: 0 (none) or at least 2 (one fold leaves nothing to hold out)."""
    value: int = _bounded(int, 0)(text)
    if value == 1:
        raise argparse.ArgumentTypeError(
            "1 fold leaves no scenarios to hold out; use 0 (none) or at least 2"
        )
    return value


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
    sim.add_argument("--format", choices=VERDICT_FORMATS, default="csv")
    sim.add_argument(
        "--models",
        type=_bounded(int, 2, 1000),  # the true scores are a models x models matrix
        default=8,
        help="models in the population (2 to 1000; default 8)",
    )
    sim.add_argument(
        "--dim", type=_bounded(int, 1), default=2, help="latent dimension, at most --models"
    )
    sim.add_argument(
        "--scenarios",
        type=_bounded(int, 1),
        default=1000,
        help="scenarios (default 1000); a simulation writes at most 5,000,000 verdicts",
    )
    sim.add_argument(
        "--group-size",
        type=_bounded(int, 2),
        help="evaluees per scenario, all ordered pairs judged (default: 4, or --models if fewer)",
    )
    sim.add_argument("--judges-per-scenario", type=_bounded(int, 1), default=1)
    sim.add_argument(
        "--tie", type=_bounded(float, 0.0), default=0.5, help="typical tie propensity lambda"
    )
    sim.add_argument(
        "--position-bias",
        type=_bounded(float),
        default=0.3,
        help="typical first-slot log-odds advantage",
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
    sim.add_argument("--greenbeard-bonus", type=_bounded(float), default=2.0)
    sim.add_argument("--seed", type=_seed, default=0)
    sim.set_defaults(handler="peer:simulate")

    fit = commands.add_parser(
        "fit",
        help="fit the peer ranking (low-rank BTD, EigenTrust, Elo) to a verdict file",
        description="Fit a verdict file (CSV, JSONL or Parquet with columns scenario, judge, "
        "first, second, verdict; optional criterion) and print the leaderboard.",
    )
    fit.add_argument("verdicts", type=Path, help="verdict file")
    fit.add_argument(
        "--dim",
        type=_bounded(int, 1),
        default=2,
        help="latent dimension d, at most the number of models (default 2)",
    )
    fit.add_argument(
        "--bootstrap",
        type=_bounded(int, 0),
        default=200,
        help="scenario-bootstrap rounds for intervals (0: none; default 200; at least "
        "2 / (1 - ci), e.g. 40 for 95%%, so that each tail holds a draw)",
    )
    fit.add_argument(
        "--ci",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.95,
        help="interval coverage (default 0.95)",
    )
    fit.add_argument("--seed", type=_seed, default=0)
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
        help="L2 penalty on lenses and dispositions, per verdict (default: the estimator's, 1e-6)",
    )
    fit.add_argument(
        "--restarts", type=_bounded(int, 1), help="seeded starts of the non-convex fit (default: 4)"
    )
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
    fit.add_argument("--anchor-value", type=_bounded(float), default=1500.0)
    fit.add_argument("--criterion", help="fit only the rows of this criterion")
    fit.add_argument(
        "--jobs",
        type=_bounded(int, 1),
        default=None,
        help="processes for the bootstrap (default: all cores)",
    )
    fit.add_argument(
        "--cv",
        type=_folds,
        default=0,
        help="also report held-out log-likelihood over this many scenario folds, 0 (none) "
        "or at least 2 (compare across --dim to choose it)",
    )
    fit.add_argument(
        "--truth",
        type=Path,
        help="truth.json from `eigenjury simulate`: report recovery and coverage",
    )
    fit.add_argument("--out", type=Path, help="write the full result as JSON here")
    add_backend_options(fit.add_argument_group("cluster (bootstrap rounds as Ray tasks)"))
    fit.set_defaults(handler="peer:fit")

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
    rank.add_argument("--no-progress", dest="progress", action="store_false")
    rank.set_defaults(handler="peer:rank")

    demo = commands.add_parser(
        "demo",
        help="the offline demo: four local personas rank each other (a few minutes on CPU)",
        description="Run `rank` on the bundled demo config: personas on the two bundled "
        "local models (SmolLM2-135M, Gemma-3-270M) judge each other against the kindness "
        "constitution, with no network. Needs the local extra.",
    )
    demo.add_argument(
        "--out",
        type=Path,
        default=Path("eigenjury-demo"),
        help="output folder (default: eigenjury-demo)",
    )
    demo.add_argument("--no-progress", dest="progress", action="store_false")
    demo.set_defaults(handler="peer:demo")

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
    batch.set_defaults(handler="calls:batch")

    export = commands.add_parser(
        "export", help="write every stored call result to JSONL or Parquet"
    )
    export.add_argument("out", type=Path, help="output file (.jsonl or .parquet)")
    export.add_argument("--store", type=Path, default=DEFAULT_STORE)
    export.set_defaults(handler="calls:export")
    add_contract_commands(commands)
    add_bound_commands(commands)
    return parser


def add_contract_commands(commands: Any) -> None:
    """`grade`, `juries compare` and `contracts ...`: expert criteria graded by juries."""
    grade = commands.add_parser(
        "grade",
        help="grade submissions against a contract with a jury of LLM judges",
        description="Grade each task's submission against its criteria: graders without a "
        "model (exact_match, regex, numeric, python) directly, llm_judge criteria by a jury "
        "(strict majority: a tie fails, an unreadable vote is not C). Submissions come from "
        "candidate models (--candidate) or a JSONL file (--submissions: task_id, submission, "
        "optional candidate). Writes results.json, trace.jsonl, tasks.csv, criteria.csv, "
        "judgements.csv and report.html. Exit status 1 when some results rest on failed calls "
        "(rerun to resume).",
    )
    grade.add_argument("contract", help="bundle folder, YAML file, or a bundled contract name")
    _add_jury_options(
        grade,
        "--jury",
        "juror model spec (repeat for each juror); needed when some criterion is llm_judge",
        required=False,
    )
    grade.add_argument(
        "--escalate-to",
        action="append",
        metavar="SPEC",
        help="cascade: a larger jury (repeat for each juror) that regrades criteria the first "
        "jury split on or could not read",
    )
    grade.add_argument(
        "--escalate-margin",
        type=_bounded(int, 1),
        default=1,
        help="escalate when this many flipped votes would change the outcome (default 1)",
    )
    grade.add_argument("--out", type=Path, default=Path("eigenjury-grades"))
    grade.set_defaults(handler="contracts:grade_command")

    juries = commands.add_parser("juries", help="compare juries on the same submissions")
    juries_commands = juries.add_subparsers(dest="juries_command", required=True, metavar="COMMAND")
    compare = juries_commands.add_parser(
        "compare",
        help="how far a cheap jury diverges from an expensive one, and what a cascade saves",
        description="Grade the same submissions with two pools of jurors and report "
        "criterion-level majority agreement, each pool's split rate, the Pearson correlation "
        "and identity of task scores, cost, juror time and output tokens per criterion, and "
        "the cascade (pool A first, escalating to pool B), with bootstrap intervals over "
        "submissions.",
    )
    compare.add_argument("contract", help="bundle folder, YAML file, or a bundled contract name")
    _add_jury_options(compare, "--pool-a", "juror of pool A, the one to try first (repeat)")
    compare.add_argument(
        "--pool-b", action="append", required=True, metavar="SPEC", help="juror of pool B (repeat)"
    )
    compare.add_argument("--cascade-margin", type=_bounded(int, 1), default=1)
    compare.add_argument(
        "--rounds",
        type=_bounded(int, 1, 100_000),  # each round resamples every submission in memory
        default=1000,
        help="bootstrap rounds (at most 100000)",
    )
    compare.add_argument(
        "--ci", type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True), default=0.95
    )
    compare.add_argument("--seed", type=_seed, default=0)
    compare.add_argument("--out", type=Path, help="write comparison.json and both pools' traces")
    compare.set_defaults(handler="contracts:compare_command")

    contracts = commands.add_parser("contracts", help="check, convert and export contracts")
    contract_commands = contracts.add_subparsers(
        dest="contracts_command", required=True, metavar="COMMAND"
    )
    check = contract_commands.add_parser("check", help="validate a contract and list its warnings")
    check.add_argument("contract")
    check.set_defaults(handler="contracts:check_command")
    convert = contract_commands.add_parser(
        "convert", help="rewrite a contract as a bundle folder or a single YAML file"
    )
    convert.add_argument("contract")
    convert.add_argument("out", type=Path, help="a folder (bundle) or a .yaml file")
    convert.set_defaults(handler="contracts:convert_command")
    harbor = contract_commands.add_parser(
        "export-harbor",
        help="one Harbor task directory per task, verified by eigenjury's grading core",
        description="Write a Harbor task per contract task (task.toml, instruction.md, "
        "environment/Dockerfile, tests/test.sh and its data). The verifier grades the agent's "
        "/app/answer.txt with the given jury and writes /logs/verifier/reward.json. API keys "
        "reach it only through [verifier.env] references to your environment.",
    )
    harbor.add_argument("contract")
    harbor.add_argument("out", type=Path)
    harbor.add_argument(
        "--jury",
        action="append",
        default=[],
        metavar="SPEC",
        help="juror model spec (repeat); needed when some criterion is llm_judge",
    )
    harbor.add_argument("--verifier-timeout", type=_bounded(float, 1.0), default=600.0)
    _add_juror_settings(harbor)
    harbor.set_defaults(handler="contracts:export_harbor_command")


def _add_jury_options(
    parser: argparse.ArgumentParser, flag: str, help_text: str, *, required: bool = True
) -> None:
    """Jurors, where submissions come from, and the engine. Jurors not `required`: the
    handler asks for them only when some criterion is graded by a jury."""
    parser.add_argument(
        flag, action="append", default=[], required=required, metavar="SPEC", help=help_text
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--candidate", action="append", metavar="SPEC", help="model that answers the tasks (repeat)"
    )
    source.add_argument("--submissions", type=Path, help="JSONL: task_id, submission, candidate")
    parser.add_argument("--candidate-temperature", type=_bounded(float, 0.0, 2.0), default=0.0)
    parser.add_argument("--candidate-max-tokens", type=_bounded(int, 1), default=1024)
    _add_juror_settings(parser)
    add_engine_options(parser)


def _add_juror_settings(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("jurors")
    group.add_argument("--juror-temperature", type=_bounded(float, 0.0, 2.0), default=0.0)
    group.add_argument("--juror-seed", type=_seed, default=0)
    group.add_argument("--juror-max-tokens", type=_bounded(int, 1), default=1024)
    group.add_argument(
        "--batch-criteria",
        action="store_true",
        help="grade all of a task's criteria in one call per juror (cheaper; less independent)",
    )


BOUND_GENERATORS = "formatting,markdown,verbosity,position,paraphrase,identity"
BOUND_SCALES = ("unit", "likert5", "likert10", "pairwise5", "verdict", "percent")


def _centre(text: str) -> str:
    """'batch-mean' or a number in [0, 1] (kept as text; the handler converts it)."""
    if text != "batch-mean":
        _bounded(float, 0.0, 1.0)(text)
    return text


def _bound_options(parser: argparse.ArgumentParser) -> None:
    """How tau and delta are spent: shared by `bound apply` and `bound certify`."""
    parser.add_argument(
        "--tau",
        type=_bounded(float, 0.0, open_low=True),
        required=True,
        help="the bound on ||M(D) - M(D')||_2, in [0, 1] score units",
    )
    parser.add_argument(
        "--delta",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        required=True,
        help="the allowed probability of exceeding tau",
    )
    parser.add_argument(
        "--alpha",
        type=_bounded(float, 0.0, 1.0, open_low=True),
        help="fixed shrinkage (default: the largest feasible one)",
    )
    parser.add_argument(
        "--centre",
        type=_centre,
        default="0.5",
        help="shrinkage centre in [0, 1] fixed before seeing the data (default 0.5, the scale "
        "midpoint), or 'batch-mean' (its shift is added to the sensitivity)",
    )
    parser.add_argument(
        "--k",
        type=_bounded(int, 1),
        default=1,
        help="items a neighbour perturbs (default 1)",
    )
    parser.add_argument(
        "--delta-split",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.5,
        help="share of the Markov step in what delta leaves after the sensitivity bound "
        "(the rest: the noise tail; default 0.5)",
    )
    parser.add_argument(
        "--noise-share",
        type=_bounded(float, 0.0, 1.0, open_high=True),
        default=0.5,
        help="share of tau kept for noise when choosing alpha (default 0.5)",
    )
    parser.add_argument(
        "--min-alpha",
        type=_bounded(float, 0.0, 1.0, open_low=True),
        default=0.1,
        help="smallest shrinkage accepted: released scores keep at least this share of "
        "their spread (default 0.1)",
    )
    parser.add_argument(
        "--range-bound",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also bound a k-item change by sqrt(k) and use it where it leaves more room "
        "(default on)",
    )


def add_bound_commands(commands: Any) -> None:
    bound = commands.add_parser(
        "bound",
        help="bias-bounded evaluation: measure a judge's sensitivity, certify, debias",
        description="Bias-bounded evaluation (A-BB): measure how far meaning-preserving "
        "perturbations move a judge, then release scores with a certified (tau, delta) "
        "bound on how far such perturbations can move them. See docs/bounds.md.",
    )
    steps = bound.add_subparsers(dest="step", required=True, metavar="STEP")

    measure = steps.add_parser(
        "measure",
        help="measure a judge's sensitivity to neighbours on a dataset (writes a profile)",
        description="Sample m items of a JSONL dataset (id, prompt, and response or "
        "response_a + response_b), judge them, perturb each with every generator, re-judge "
        "only the perturbed items, and write the RMS sensitivity per generator with an "
        "upper confidence bound. Identity neighbours (another seed) measure the judge's "
        "intrinsic jitter.",
    )
    measure.add_argument("dataset", type=Path, help="JSONL dataset")
    measure.add_argument("--judge", required=True, help="judge model spec")
    measure.add_argument(
        "--generators",
        default="formatting,markdown,verbosity,identity",
        help=f"comma-separated, from {BOUND_GENERATORS} (default "
        "formatting,markdown,verbosity,identity)",
    )
    measure.add_argument("--paraphraser", help="model spec for the paraphrase neighbour")
    measure.add_argument(
        "--m", type=_bounded(int, 1), default=50, help="items sampled (default 50)"
    )
    measure.add_argument("--seed", type=_seed, default=0)
    measure.add_argument(
        "--confidence",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.95,
        help="level of the reported upper bound (apply recomputes it for its delta)",
    )
    measure.add_argument(
        "--method",
        choices=("kl", "hoeffding", "bootstrap"),
        default="kl",
        help="upper confidence bound on Delta (default kl: Chernoff-Hoeffding, valid at any m)",
    )
    measure.add_argument(
        "--temperature",
        type=_bounded(float, 0.0, 2.0),
        default=0.0,
        help="judge temperature (default 0)",
    )
    measure.add_argument("--max-tokens", type=_bounded(int, 1))
    measure.add_argument("--out", type=Path, required=True, help="profile JSON to write")
    add_engine_options(measure)
    measure.set_defaults(handler="bounds:measure")

    apply = steps.add_parser(
        "apply",
        help="debias a score file under a certified (tau, delta) bound",
        description="Shrink and noise a score file (CSV/JSONL with item, score, optional "
        "model and criterion; a peer verdict file; or a contracts results.json) so that "
        "perturbations measured in PROFILE move the released score vector by more than "
        "tau with probability at most delta. Writes debiased.csv and certificate.json.",
    )
    apply.add_argument("scores", type=Path, help="score file")
    apply.add_argument("--profile", type=Path, required=True, help="from `bound measure`")
    apply.add_argument("--out", type=Path, required=True, help="output folder")
    scale = apply.add_mutually_exclusive_group()
    scale.add_argument("--scale", choices=BOUND_SCALES, help="raw range of a score file")
    scale.add_argument("--range", type=_bounded(float), nargs=2, metavar=("LOW", "HIGH"))
    apply.add_argument(
        "--level",
        choices=("task", "criterion"),
        default="task",
        help="contracts results: task scores or criterion pass values",
    )
    apply.add_argument(
        "--sigma",
        type=_bounded(float, 0.0),
        help="noise level, up to sigma_max (default sigma_max / 2)",
    )
    apply.add_argument("--seed", type=_seed, default=0)
    apply.add_argument(
        "--generators", help="the profile's generators to bound against (default: all)"
    )
    apply.add_argument(
        "--confidence-share",
        type=_bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.2,
        help="share of delta for the upper confidence bound on Delta (default 0.2)",
    )
    apply.add_argument("--method", choices=("kl", "hoeffding", "bootstrap"))
    _bound_options(apply)
    apply.set_defaults(handler="bounds:apply")

    certify = steps.add_parser(
        "certify",
        help="print the certificate for a sensitivity and a dimension (JSON)",
        description="Compute feasibility, alpha, sigma_max and the threshold for a known "
        "sensitivity Delta (in [0, 1] units) and d items. Exit status 2 when infeasible, "
        "with the smallest feasible tau.",
    )
    certify.add_argument(
        "--sensitivity",
        type=_bounded(float, 0.0),
        required=True,
        help="RMS sensitivity Delta (or its upper bound) in [0, 1] units",
    )
    certify.add_argument("--dim", type=_bounded(int, 1), required=True, help="items d")
    certify.add_argument(
        "--delta-sensitivity",
        type=_bounded(float, 0.0),
        default=0.0,
        help="the part of delta already spent on an upper bound given as --sensitivity",
    )
    _bound_options(certify)
    certify.set_defaults(handler="bounds:certify")


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
    add_backend_options(group)


def add_backend_options(group: Any) -> None:
    group.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where calls run: here (default) or on a Ray cluster (the ray extra)",
    )
    group.add_argument("--ray-address", help="a Ray cluster to join (default: start a local one)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # soft_wrap: messages stay on one line, whole, for logs and grep; tables still fit.
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, 120)  # logs and pipes: keep tables readable
    errors = Console(stderr=True, soft_wrap=True)
    module, name = args.handler.split(":")
    try:
        # Handlers load their own dependencies: `eigenjury batch` never imports scipy.
        commands = importlib.import_module(f"eigenjury.commands.{module}")
        handler: Callable[[argparse.Namespace, Console], int] = getattr(commands, name)
        return handler(args, console)
    except InputError as exc:  # user text (names, paths, install hints) is never markup
        errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return EXIT_USAGE
    except OSError as exc:  # unwritable output, a directory where a file is expected, ...
        where = f"{exc.filename}: " if exc.filename else ""
        errors.print(
            f"[bold red]error:[/] {escape(f'{where}{exc.strerror or exc}')}", highlight=False
        )
        return EXIT_USAGE
    except KeyboardInterrupt:
        errors.print("interrupted; everything finished so far is kept")
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
