"""`eigenjury bound measure | apply | certify`: bias-bounded evaluation (A-BB)."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import (
    add_engine_options,
    add_verdict_format_option,
    bounded,
    check_output,
    engine_settings,
    seed,
)
from eigenjury.errors import InputError, located
from eigenjury.exit_codes import EXIT_SOME_FAILED, EXIT_USAGE
from eigenjury.files import check_output_folder, json_output

# = stats.abb.BOUND_METHODS, the default first (importing it would load scipy)
METHODS = ("kl+bernstein", "kl", "bernstein", "hoeffding", "bootstrap")

if TYPE_CHECKING:
    from eigenjury.bounds.scores import Scale
    from eigenjury.stats.abb import Centre

BOUND_GENERATORS = "formatting,markdown,verbosity,position,paraphrase,identity"
BOUND_SCALES = ("unit", "likert5", "likert10", "pairwise5", "verdict", "percent")


def register(commands: Any) -> None:
    """`bound measure`, `bound apply` and `bound certify`: the steps of A-BB."""
    bound = commands.add_parser(
        "bound",
        help="bias-bounded evaluation: measure a judge's sensitivity, certify, release "
        "shrunk and noised scores",
        description="Bias-bounded evaluation (A-BB): measure how far meaning-preserving "
        "perturbations move a judge, then release scores, shrunk and noised, with a "
        "certified (tau, delta) bound on how far such perturbations can move them. The "
        "release does not remove the judge's bias. See docs/bounds.md.",
    )
    steps = bound.add_subparsers(dest="step", required=True, metavar="STEP")

    declare_measure(steps)
    declare_apply(steps)
    declare_certify(steps)


def _centre_option(text: str) -> str:
    """'batch-mean' or a number in [0, 1] (kept as text; the handler converts it)."""
    if text != "batch-mean":
        bounded(float, 0.0, 1.0)(text)
    return text


def _bound_options(parser: argparse.ArgumentParser) -> None:
    """How tau and delta are spent: shared by `bound apply` and `bound certify`."""
    parser.add_argument(
        "--tau",
        type=bounded(float, 0.0, open_low=True),
        required=True,
        help="the bound on ||M(D) - M(D')||_2, in [0, 1] score units",
    )
    parser.add_argument(
        "--delta",
        type=bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        required=True,
        help="the allowed probability of exceeding tau",
    )
    parser.add_argument(
        "--alpha",
        type=bounded(float, 0.0, 1.0, open_low=True),
        help="fixed shrinkage (default: the largest feasible one)",
    )
    parser.add_argument(
        "--centre",
        type=_centre_option,
        default="0.5",
        help="shrinkage centre in [0, 1] fixed before seeing the data (default 0.5, the scale "
        "midpoint), or 'batch-mean' (its shift is added to the sensitivity)",
    )
    parser.add_argument(
        "--k",
        type=bounded(int, 1),
        help="items a neighbour perturbs (apply: default and least, the most items one "
        "edited reply, submission or score-file unit feeds; certify: default 1)",
    )
    parser.add_argument(
        "--delta-split",
        type=bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.5,
        help="share of the Markov step in what delta leaves after the sensitivity bound "
        "(the rest: the noise tail; default 0.5)",
    )
    parser.add_argument(
        "--noise-share",
        type=bounded(float, 0.0, 1.0, open_high=True),
        default=0.5,
        help="share of tau kept for noise when choosing alpha (default 0.5)",
    )
    parser.add_argument(
        "--min-alpha",
        type=bounded(float, 0.0, 1.0, open_low=True),
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


def _generators(text: str, *, allowed: tuple[str, ...] | None = None) -> tuple[str, ...]:
    from eigenjury.bounds.neighbours import GENERATOR_NAMES

    allowed = GENERATOR_NAMES if allowed is None else allowed
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise InputError(
            f"unknown generator {unknown[0]!r}" if unknown else "no generators given",
            field="--generators",
        )
    return names


def _centre(value: str) -> Centre:
    from eigenjury.stats.abb import BATCH_MEAN

    return BATCH_MEAN if value == BATCH_MEAN else float(value)


def declare_measure(steps: Any) -> None:
    """`bound measure`: a judge's sensitivity to neighbours, as a profile."""
    measure = steps.add_parser(
        "measure",
        help="measure a judge's sensitivity to neighbours on a dataset (writes a profile)",
        description="Sample m replies of a JSONL dataset (id, prompt, and response or "
        "response_a + response_b), judge the items showing them, edit each reply with every "
        "generator (in every item showing it), re-judge only the perturbed items, and write "
        "the RMS sensitivity per generator with an "
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
        "--m",
        type=bounded(int, 1),
        default=50,
        help="replies sampled (default 50); a reply is edited in every item showing it",
    )
    measure.add_argument("--seed", type=seed, default=0)
    measure.add_argument(
        "--confidence",
        type=bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.95,
        help="level of the reported upper bound (apply recomputes it for its delta)",
    )
    measure.add_argument(
        "--method",
        choices=METHODS,
        default=METHODS[0],
        help="upper confidence bound on Delta (default kl+bernstein: the smaller of the "
        "Chernoff-Hoeffding and empirical Bernstein bounds, each at half the error; valid "
        "at any m)",
    )
    measure.add_argument(
        "--temperature",
        type=bounded(float, 0.0, 2.0),
        default=0.0,
        help="judge temperature (default 0)",
    )
    measure.add_argument("--max-tokens", type=bounded(int, 1))
    add_verdict_format_option(measure)
    measure.add_argument("--out", type=Path, required=True, help="profile JSON to write")
    add_engine_options(measure)
    measure.set_defaults(handler=measure_command)


def measure_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.bounds import measure_sensitivity
    from eigenjury.bounds.judges import JudgeProtocol
    from eigenjury.bounds.measure import MeasureInputs, MeasureSettings, read_dataset
    from eigenjury.bounds.neighbours import LOCAL_GENERATORS, PARAPHRASE, Paraphraser
    from eigenjury.commands.options import plan_first, store_path
    from eigenjury.engine.engine import Engine
    from eigenjury.engine.runner import run_engine
    from eigenjury.models.spec import ModelSpec
    from eigenjury.reports.bounds import failures_text, print_profile
    from eigenjury.reports.output import Outputs, write_outputs

    store = store_path(args)
    args.out = json_output(args.out)
    check_output(args.out, {"dataset": args.dataset, "store": store})
    items = read_dataset(args.dataset)
    generators = _generators(args.generators)
    pairwise = items[0].pairwise
    for name in generators:
        if name in LOCAL_GENERATORS and LOCAL_GENERATORS[name].pairwise_only and not pairwise:
            raise InputError(
                f"the {name} neighbour needs pairwise items (response_a and response_b)",
                path=args.dataset,
            )
    if PARAPHRASE in generators and not (args.paraphraser or "").strip():
        raise InputError("the paraphrase neighbour needs --paraphraser MODEL")
    judge = ModelSpec.parse(args.judge)
    paraphraser = ModelSpec.parse(args.paraphraser) if args.paraphraser else None
    settings = MeasureSettings(
        judge=judge,
        protocol=JudgeProtocol(
            "pairwise" if pairwise else "single",
            temperature=args.temperature,
            max_tokens=args.max_tokens,
        ),
        generators=generators,
        m=args.m,
        seed=args.seed,
        confidence=args.confidence,
        method=args.method,
        paraphraser=paraphraser if PARAPHRASE in generators else None,
        paraphrase=Paraphraser(max_tokens=args.max_tokens),
        verdict_format=args.verdict_format,
    )
    inputs = MeasureInputs(items, str(args.dataset), settings)
    specs = [judge, *([settings.paraphraser] if settings.paraphraser else [])]
    engine = engine_settings(args)

    async def plan(engine: Engine) -> None:
        await measure_sensitivity(engine, inputs)

    files = {"dataset": args.dataset, "output": args.out}
    if plan_first(args, console, engine, specs, plan, command="bound measure", files=files):
        return 0
    profile = run_engine(
        engine,
        specs,
        lambda engine: measure_sensitivity(engine, inputs),
        progress=args.progress,
    ).value
    if profile.usable:  # an unusable profile must not replace a good one from an earlier run
        write_outputs(args.out.parent, Outputs(profile, record_file=args.out.name))
    print_profile(console, profile)
    failed = failures_text(profile)
    replies = (
        f"the judge's replies are kept in the store {store} (read them with "
        f"`eigenjury export replies.jsonl --store {store}`)"
    )
    rerun = (
        f"{profile.failed_calls} call(s) were not made or failed (a budget stop, or the "
        "model erring); rerun the same command: it sends only what is missing"
    )
    if not profile.usable:
        then = (
            rerun if profile.failed_calls else "rerun once the judge answers in the expected format"
        )
        message = (
            f"no judgment could be read ({failed}), so nothing was measured and {args.out} "
            f"was not written; {replies}; {then}"
        )
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] {escape(message)}", highlight=False
        )
        return EXIT_SOME_FAILED
    if failed:
        warning = f"some judgments are missing and left out ({failed}); {replies}"
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    console.print(f"wrote the profile to {escape(str(args.out))}")
    if profile.failed_calls:
        console.print(f"[yellow]warning:[/] {escape(rerun)}")
        return EXIT_SOME_FAILED
    return 0


def _scale(args: argparse.Namespace) -> Scale | None:
    from eigenjury.bounds.scores import SCALES, Scale

    if args.range is not None:
        low, high = args.range
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InputError(f"--range {low:g} {high:g}: LOW must be below HIGH, both finite")
        return Scale("range", low, high)
    return None if args.scale is None else SCALES[args.scale]


# The smallest share of delta the bound on Delta may get: its confidence is
# 1 - (share x delta), and below this it cannot be told apart from 1 in floating point.
MIN_CONFIDENCE_MISS = 1e-12


def declare_apply(steps: Any) -> None:
    """`bound apply`: a score file released under a certified (tau, delta) bound."""
    apply = steps.add_parser(
        "apply",
        help="release a score file, shrunk and noised, under a certified (tau, delta) bound",
        description="Shrink and noise a score file (CSV/JSONL with item, score, optional "
        "model, criterion and unit; a peer verdict file; or a contracts results.json) so that "
        "perturbations measured in PROFILE move the released score vector by more than "
        "tau with probability at most delta, for a neighbour editing one unit of any one "
        "size. The judge's bias relative to the signal stays what it was. Writes "
        "released.csv, certificate.json and report.html.",
    )
    apply.add_argument("scores", type=Path, help="score file")
    apply.add_argument("--profile", type=Path, required=True, help="from `bound measure`")
    apply.add_argument("--out", type=Path, required=True, help="output folder")
    scale = apply.add_mutually_exclusive_group()
    scale.add_argument("--scale", choices=BOUND_SCALES, help="raw range of a score file")
    scale.add_argument("--range", type=bounded(float), nargs=2, metavar=("LOW", "HIGH"))
    apply.add_argument(
        "--level",
        choices=("task", "criterion"),
        default="task",
        help="contracts results: task scores or criterion pass values",
    )
    apply.add_argument(
        "--sigma",
        type=bounded(float, 0.0),
        help="noise level, up to sigma_max (default sigma_max / 2)",
    )
    apply.add_argument("--seed", type=seed, default=0)
    apply.add_argument(
        "--generators", help="the profile's generators to bound against (default: all)"
    )
    apply.add_argument(
        "--confidence-share",
        type=bounded(float, 0.0, 1.0, open_low=True, open_high=True),
        default=0.2,
        help="share of delta for the upper confidence bound on Delta (default 0.2)",
    )
    apply.add_argument("--method", choices=METHODS)
    _bound_options(apply)
    apply.set_defaults(handler=apply_command)


def apply_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.bounds.apply import ReleaseSettings, release
    from eigenjury.bounds.record import read_profile
    from eigenjury.bounds.scores import read_scores
    from eigenjury.reports.bounds import (
        OLD_RELEASED,
        RELEASED,
        certificate_outputs,
        print_certificate,
    )
    from eigenjury.reports.output import write_outputs

    miss = args.confidence_share * args.delta
    if miss < MIN_CONFIDENCE_MISS:
        raise InputError(
            f"--confidence-share x --delta is {miss:.3g}; it must be at least "
            f"{MIN_CONFIDENCE_MISS:g} (the bound on Delta holds with confidence 1 minus it)"
        )
    _check_out_folder(args)
    profile = read_profile(args.profile)
    scores = read_scores(args.scores, scale=_scale(args), level=args.level)
    settings = ReleaseSettings(
        tau=args.tau,
        delta=args.delta,
        sigma=args.sigma,
        seed=args.seed,
        alpha=args.alpha,
        centre=_centre(args.centre),
        neighbour_size=args.k,
        delta_split=args.delta_split,
        confidence_share=args.confidence_share,
        noise_share=args.noise_share,
        min_alpha=args.min_alpha,
        range_bound=args.range_bound,
        generators=None
        if args.generators is None
        else _generators(args.generators, allowed=tuple(profile.generators)),
        method=args.method,
    )
    with located(args.profile):  # the profile cannot support this target
        result = release(scores, profile, settings)
    written = write_outputs(args.out, certificate_outputs(result, scores))
    print_certificate(console, result.certificate)
    names = ", ".join(path.name for path in written)
    console.print(f"wrote {escape(names)} to {escape(str(args.out))}")
    if (args.out / OLD_RELEASED).exists():
        stale = (
            f"{args.out / OLD_RELEASED} is an earlier release (under its old name), not "
            f"this one: this one is {RELEASED}"
        )
        console.print(f"[yellow]warning:[/] {escape(stale)}")
    return 0


def _check_out_folder(args: argparse.Namespace) -> None:
    """Refuse, before reading anything, an --out that is a file or whose outputs would
    overwrite an input (such as an earlier released.csv given as the score file)."""
    from eigenjury.bounds.record import BoundCertificate
    from eigenjury.reports.bounds import RELEASED
    from eigenjury.reports.output import REPORT

    names = (RELEASED, BoundCertificate.FILE, REPORT)
    check_output_folder(args.out)
    for name in names:
        check_output(args.out / name, {"score file": args.scores, "profile": args.profile})


def declare_certify(steps: Any) -> None:
    """`bound certify`: the certificate for a known sensitivity and dimension."""
    certify = steps.add_parser(
        "certify",
        help="print the certificate for a sensitivity and a dimension (JSON)",
        description="Compute feasibility, alpha, sigma_max and the threshold for a known "
        "sensitivity Delta (in [0, 1] units) and d items. Exit status 2 when infeasible, "
        "with the smallest feasible tau.",
    )
    certify.add_argument(
        "--sensitivity",
        type=bounded(float, 0.0),
        required=True,
        help="RMS sensitivity Delta (or its upper bound) in [0, 1] units",
    )
    certify.add_argument("--dim", type=bounded(int, 1), required=True, help="items d")
    certify.add_argument(
        "--delta-sensitivity",
        type=bounded(float, 0.0),
        default=0.0,
        help="the part of delta already spent on an upper bound given as --sensitivity",
    )
    _bound_options(certify)
    certify.set_defaults(handler=certify_command)


def certify_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.stats.abb import certify

    k = 1 if args.k is None else args.k
    if k > args.dim:
        raise InputError(f"--k {k} exceeds --dim {args.dim}: a neighbour perturbs at most d items")
    try:
        cert = certify(
            args.tau,
            args.delta,
            args.sensitivity,
            args.dim,
            alpha=args.alpha,
            delta_split=args.delta_split,
            delta_sensitivity=args.delta_sensitivity,
            neighbour_size=k,
            range_bound=args.range_bound,
            centre=_centre(args.centre),
            noise_share=args.noise_share,
            min_alpha=args.min_alpha,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print(json.dumps(cert.to_dict(), indent=2))
    stderr = Console(stderr=True, soft_wrap=True)
    for warning in cert.weaknesses():
        stderr.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if not cert.feasible:
        stderr.print(f"[bold red]error:[/] {escape(cert.explain())}", highlight=False)
        return EXIT_USAGE
    return 0
