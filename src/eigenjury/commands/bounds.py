"""`eigenjury bound measure | apply | certify`: bias-bounded evaluation (A-BB)."""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from eigenjury.bounds.judges import JudgeProtocol
from eigenjury.bounds.measure import MeasureSettings, Profile, read_dataset
from eigenjury.bounds.measure import measure as measure_judge
from eigenjury.bounds.neighbours import GENERATOR_NAMES, LOCAL_GENERATORS, PARAPHRASE, Paraphraser
from eigenjury.bounds.release import ReleaseSettings, release, release_record
from eigenjury.bounds.scores import SCALES, Scale, ScoreSet, read_scores
from eigenjury.commands.calls import check_output, engine_from_args, run_with_engine
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED, EXIT_USAGE
from eigenjury.files import write_json, write_text
from eigenjury.models.spec import ModelSpec
from eigenjury.reports.accounting import print_accounting
from eigenjury.stats.abb import BATCH_MEAN, Centre
from eigenjury.stats.abb import certify as certify_bound
from eigenjury.stats.verdicts import FloatArray


def _generators(text: str, *, allowed: tuple[str, ...] = GENERATOR_NAMES) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise InputError(
            f"unknown generator {unknown[0]!r}" if unknown else "no generators given",
            field="--generators",
        )
    return names


def _centre(value: str) -> Centre:
    return BATCH_MEAN if value == BATCH_MEAN else float(value)


def measure(args: argparse.Namespace, console: Console) -> int:
    check_output(args.out, {"dataset": args.dataset, "store": args.store})
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
    )
    specs = [judge, *([settings.paraphraser] if settings.paraphraser else [])]
    engine = engine_from_args(args, specs)
    engine.prepare(specs)

    profile = run_with_engine(
        engine,
        specs,
        lambda: measure_judge(engine, items, settings, dataset=str(args.dataset)),
        console,
    )
    if profile is None:
        return EXIT_INTERRUPTED
    usable = any(record.m for record in profile.generators.values())
    if usable:  # an unusable profile must not replace a good one from an earlier run
        write_json(args.out, profile.model_dump())
    table = Table(
        title=f"Sensitivity of {escape(profile.judge)} ({profile.protocol} judge, m = {profile.m})",
        title_justify="left",
    )
    for name in ("generator", "pairs", "Delta", "upper bound", "beyond jitter", "failures"):
        table.add_column(name, justify="left" if name in ("generator", "failures") else "right")
    for name, record in profile.generators.items():
        table.add_row(
            name,
            str(record.m),
            _fmt(record.estimate),
            f"{_fmt(record.upper_bound)} ({record.confidence:.0%})",
            _fmt(record.beyond_jitter),
            ", ".join(f"{k} {v}" for k, v in sorted(record.failures.items())) or "0",
        )
    console.print(table)
    if profile.accounting:
        print_accounting(console, profile.accounting)
    failed = _failures(profile)
    replies = (
        f"the judge's replies are kept in the store {args.store} (read them with "
        f"`eigenjury export replies.jsonl --store {args.store}`)"
    )
    rerun = (
        f"{profile.failed_calls} call(s) were not made or failed (a budget stop, or the "
        "model erring); rerun the same command: it sends only what is missing"
    )
    if not usable:
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


def _failures(profile: Profile) -> str:
    """What could not be judged: "unparsed 3 among the originals; error 2 among the
    neighbours" ("" when nothing failed)."""
    neighbours: dict[str, int] = {}
    for record in profile.generators.values():
        for kind, n in record.failures.items():
            neighbours[kind] = neighbours.get(kind, 0) + n
    return "; ".join(
        ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" among the {what}"
        for what, counts in (("originals", profile.original_failures), ("neighbours", neighbours))
        if counts
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _scale(args: argparse.Namespace) -> Scale | None:
    if args.range is not None:
        low, high = args.range
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise InputError(f"--range {low:g} {high:g}: LOW must be below HIGH, both finite")
        return Scale("range", low, high)
    return None if args.scale is None else SCALES[args.scale]


# The smallest share of delta the bound on Delta may get: its confidence is
# 1 - (share x delta), and below this it cannot be told apart from 1 in floating point.
MIN_CONFIDENCE_MISS = 1e-12


def apply(args: argparse.Namespace, console: Console) -> int:
    miss = args.confidence_share * args.delta
    if miss < MIN_CONFIDENCE_MISS:
        raise InputError(
            f"--confidence-share x --delta is {miss:.3g}; it must be at least "
            f"{MIN_CONFIDENCE_MISS:g} (the bound on Delta holds with confidence 1 minus it)"
        )
    _check_out_folder(args)
    profile = Profile.read(args.profile)
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
    try:
        result = release(scores, profile, settings)
    except InputError as exc:
        if exc.path is None and exc.field is None:
            exc.path = str(args.profile)  # the profile cannot support this target
        raise
    record = release_record(result, scores, profile, settings)
    args.out.mkdir(parents=True, exist_ok=True)
    _write_scores(args.out / "debiased.csv", scores, result.debiased)
    write_json(args.out / "certificate.json", record)
    cert = result.certificate
    console.print(
        f"certified: P[ ||M(D) - M(D')|| > {cert.tau:g} ] <= {cert.delta:g} for d = {cert.dim} "
        f"items (alpha {cert.alpha:.4f}, sigma {result.sigma:.4g} of sigma_max "
        f"{cert.sigma_max:.4g}, {cert.bias_bound} step)"
    )
    utility = record["utility"]["models"] or record["utility"]["items"]
    level = "model" if record["utility"]["models"] else "item"
    console.print(
        f"utility retained ({level} level): Pearson {_fmt(utility['pearson'])}, Spearman "
        f"{_fmt(utility['spearman'])}, Kendall {_fmt(utility['kendall'])}"
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    console.print(f"wrote debiased.csv and certificate.json to {escape(str(args.out))}")
    return 0


def _check_out_folder(args: argparse.Namespace) -> None:
    """Refuse, before reading anything, an --out that is a file or whose outputs would
    overwrite an input (such as an earlier debiased.csv given as the score file)."""
    if args.out.exists() and not args.out.is_dir():
        raise InputError(
            "this is a file; give --out a folder to write debiased.csv and certificate.json in",
            path=args.out,
        )
    for name in ("debiased.csv", "certificate.json"):
        check_output(args.out / name, {"score file": args.scores, "profile": args.profile})


def _write_scores(path: Path, scores: ScoreSet, debiased: FloatArray) -> None:
    """Per item: the raw and normalised score, and the released one in both units."""
    models = scores.item_models()
    normalised = scores.normalised
    raw_out = scores.scale.raw(debiased)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(
        ["item", "model", "criterion", "score", "normalised", "debiased", "debiased_raw"]
    )
    for i, item in enumerate(scores.items):
        writer.writerow(
            [
                item,
                models[i] or "",
                scores.criteria[i] or "",
                f"{scores.raw[i]:g}",
                f"{normalised[i]:.6g}",
                f"{debiased[i]:.6g}",
                f"{raw_out[i]:.6g}",
            ]
        )
    write_text(path, buffer.getvalue())


def certify(args: argparse.Namespace, console: Console) -> int:
    if args.k > args.dim:
        raise InputError(
            f"--k {args.k} exceeds --dim {args.dim}: a neighbour perturbs at most d items"
        )
    try:
        cert = certify_bound(
            args.tau,
            args.delta,
            args.sensitivity,
            args.dim,
            alpha=args.alpha,
            delta_split=args.delta_split,
            delta_sensitivity=args.delta_sensitivity,
            neighbour_size=args.k,
            range_bound=args.range_bound,
            centre=_centre(args.centre),
            noise_share=args.noise_share,
            min_alpha=args.min_alpha,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    print(json.dumps(cert.to_dict(), indent=2))
    if not cert.feasible:
        Console(stderr=True, soft_wrap=True).print(
            f"[bold red]error:[/] {escape(cert.explain())}", highlight=False
        )
        return EXIT_USAGE
    return 0
