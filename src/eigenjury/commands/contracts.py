"""`eigenjury grade`, `eigenjury juries compare` and `eigenjury contracts ...`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import (
    add_ci_option,
    add_engine_options,
    add_verdict_format_option,
    bounded,
    check_output,
    engine_settings,
    plan_first,
    seed,
    store_path,
)
from eigenjury.errors import InputError
from eigenjury.files import check_output_folder, scratch_file

if TYPE_CHECKING:
    from eigenjury.contracts.bundle import ContractSource
    from eigenjury.contracts.jury import Jury
    from eigenjury.contracts.run import Answers
    from eigenjury.models.verdict_format import VerdictFormat


def register(commands: Any) -> None:
    """`grade`, `juries compare` and `contracts ...`: expert criteria graded by juries."""
    declare_grade(commands)

    juries = commands.add_parser("juries", help="compare juries on the same submissions")
    juries_commands = juries.add_subparsers(dest="juries_command", required=True, metavar="COMMAND")
    declare_compare(juries_commands)

    contracts = commands.add_parser("contracts", help="check, convert and export contracts")
    contract_commands = contracts.add_subparsers(
        dest="contracts_command", required=True, metavar="COMMAND"
    )
    declare_check(contract_commands)
    declare_convert(contract_commands)
    declare_export_harbor(contract_commands)


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
        "--candidate",
        action="append",
        metavar="SPEC",
        help="model that answers the tasks (repeat); NAME=SPEC gives it a short name",
    )
    source.add_argument("--submissions", type=Path, help="JSONL: task_id, submission, candidate")
    parser.add_argument("--candidate-temperature", type=bounded(float, 0.0, 2.0), default=0.0)
    parser.add_argument("--candidate-max-tokens", type=bounded(int, 1), default=1024)
    _add_grader_timeout(parser)
    _add_juror_settings(parser)
    add_verdict_format_option(parser)
    add_engine_options(parser)


def _add_grader_timeout(parser: argparse.ArgumentParser) -> None:
    from eigenjury.contracts.sandbox import MAX_GRADER_TIMEOUT_S, PYTHON_GRADER_TIMEOUT_S

    parser.add_argument(
        "--grader-timeout",
        type=bounded(float, 0.0, MAX_GRADER_TIMEOUT_S, open_low=True),
        default=PYTHON_GRADER_TIMEOUT_S,
        metavar="SECONDS",
        help="time a python grader has for each submission (and to be imported) before it is "
        f"stopped and its criterion recorded as an error (default {PYTHON_GRADER_TIMEOUT_S:g})",
    )


def _add_juror_settings(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("jurors")
    group.add_argument("--juror-temperature", type=bounded(float, 0.0, 2.0), default=0.0)
    group.add_argument("--juror-seed", type=seed, default=0)
    group.add_argument("--juror-max-tokens", type=bounded(int, 1), default=1024)
    group.add_argument(
        "--batch-criteria",
        action="store_true",
        help="grade all of a task's criteria in one call per juror (cheaper; less independent)",
    )


def _load(args: argparse.Namespace, grader_timeout_s: float) -> ContractSource:
    """The contract, with its python graders imported in a child process (a wrong
    import path is reported before any model call is paid for)."""
    from eigenjury.contracts.bundle import load_contract
    from eigenjury.contracts.graders import check_python_graders
    from eigenjury.contracts.sandbox import GraderSandbox

    source = load_contract(args.contract)
    with GraderSandbox(grader_timeout_s) as sandbox:
        check_python_graders(source.contract, source.path, sandbox)
    return source


def _jury_if_needed(
    args: argparse.Namespace, source: ContractSource, verdict_format: VerdictFormat = "auto"
) -> Jury | None:
    """The --jury jurors; none given is fine where no criterion is graded by a jury."""
    from eigenjury.contracts.grading import require_jury

    jury = _jury(args, args.jury, verdict_format) if args.jury else None
    require_jury(source, jury)
    return jury


def _jury(
    args: argparse.Namespace, specs: list[str], verdict_format: VerdictFormat = "auto"
) -> Jury:
    """The jurors `specs` (each SPEC or NAME=SPEC) with the juror settings;
    `verdict_format` where the command has --verdict-format (an exported Harbor verifier
    asks as "auto")."""
    from eigenjury.contracts.jury import Jury
    from eigenjury.models.spec import named_spec

    named = [named_spec(s) for s in specs]
    return Jury.from_specs(
        [spec for _, spec in named],
        names=[name for name, _ in named],
        temperature=args.juror_temperature,
        seed=args.juror_seed,
        max_tokens=args.juror_max_tokens,
        batch_criteria=args.batch_criteria,
        verdict_format=verdict_format,
    )


def _warn(console: Console, warnings: list[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


def _answers(args: argparse.Namespace, source: ContractSource) -> Answers:
    """Given submissions, read now (before the store is opened: bad submissions leave
    nothing behind), or the candidates that will answer."""
    from eigenjury.contracts.run import Answers
    from eigenjury.contracts.submissions import read_submissions
    from eigenjury.models.spec import named_spec

    if args.submissions:
        return Answers(given=tuple(read_submissions(args.submissions, source.contract)))
    named = [named_spec(c) for c in args.candidate]
    return Answers(
        candidates=tuple(spec for _, spec in named),
        names=tuple(name or str(spec) for name, spec in named),
        temperature=args.candidate_temperature,
        max_tokens=args.candidate_max_tokens,
    )


def _check_out(args: argparse.Namespace, record_file: Path) -> None:
    """Before any call is paid for: the output folder can be made and the record
    written there, over no input."""
    check_output_folder(record_file.parent)
    inputs = {"submissions file": args.submissions, "store": store_path(args)}
    check_output(record_file, inputs)


def declare_grade(commands: Any) -> None:
    """`grade`: a contract's submissions graded, by a jury where needed."""
    grade = commands.add_parser(
        "grade",
        help="grade submissions against a contract with a jury of LLM judges",
        description="Grade each task's submission against its criteria: graders without a "
        "model (exact_match, regex, numeric, python) directly, llm_judge criteria by a jury "
        "(strict majority: a tie fails, an unreadable vote is not C). Submissions come from "
        "candidate models (--candidate) or a JSONL file (--submissions: task_id, submission, "
        "optional candidate). Writes results.json, trace.jsonl, tasks.csv, criteria.csv, "
        "judgements.csv and report.html. Exit status 1 when some results rest on failed calls "
        "(rerun to resume) or on python graders that failed to decide (each recorded as its "
        "criterion's error).",
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
        type=bounded(int, 1),
        default=1,
        help="escalate when this many flipped votes would change the outcome (default 1)",
    )
    grade.add_argument(
        "--undecided-margin",
        type=bounded(float, 0.0, 0.5),
        default=0.0,
        metavar="SHARE",
        help="mark a criterion undecided where its share of C votes lies within this of 1/2, and "
        "a task where such criteria could change whether it passes (default 0: exact ties)",
    )
    grade.add_argument("--out", type=Path, default=Path("eigenjury-grades"))
    grade.set_defaults(handler=grade_command)


def grade_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.contracts.record import JudgementLines
    from eigenjury.contracts.run import GradingInputs, run
    from eigenjury.engine.engine import Engine
    from eigenjury.engine.runner import run_engine
    from eigenjury.exit_codes import EXIT_SOME_FAILED
    from eigenjury.reports.accounting import print_accounting
    from eigenjury.reports.grading import outputs, print_summary
    from eigenjury.reports.output import write_outputs

    source = _load(args, args.grader_timeout)
    _warn(console, source.contract.warnings())
    jury = _jury_if_needed(args, source, args.verdict_format)
    escalate_to = _jury(args, args.escalate_to, args.verdict_format) if args.escalate_to else None
    for chosen in (jury, escalate_to):
        _warn(console, chosen.warnings(source.contract.repeats) if chosen is not None else [])
    if escalate_to is not None and jury is None:
        raise InputError("--escalate-to needs a first jury to escalate from (--jury SPEC)")
    _check_out(args, args.out / "results.json")
    inputs = GradingInputs(
        source,
        str(args.contract),
        _answers(args, source),
        jury,
        escalate_to=escalate_to,
        escalate_margin=args.escalate_margin,
        grader_timeout_s=args.grader_timeout,
        undecided_margin=args.undecided_margin,
    )
    out: Path = args.out
    settings = engine_settings(args)

    async def plan(engine: Engine) -> None:
        with scratch_file(out) as spill:  # the plan's trace: placeholders, thrown away
            await run(engine, inputs, JudgementLines(spill))

    files = _files(args, out / "results.json")
    if plan_first(args, console, settings, inputs.specs, plan, command="grade", files=files):
        return 0
    # each submission's votes go to disk as soon as it is graded, not held to the end
    with scratch_file(out) as spill:
        trace = JudgementLines(spill)
        ran = run_engine(
            settings,
            inputs.specs,
            lambda engine: run(engine, inputs, trace),
            progress=args.progress,
        )
        record = ran.value.model_copy(update={"accounting": ran.accounting})
        write_outputs(out, outputs(record, source.contract))
    print_summary(console, record)
    print_accounting(console, ran.accounting)
    console.print(
        f"wrote {escape(str(out / 'results.json'))}, the trace (trace.jsonl, tasks.csv, "
        f"criteria.csv, judgements.csv) and {escape(str(out / 'report.html'))}"
    )
    if record.grader_errors:
        console.print(
            f"[yellow]warning:[/] {record.grader_errors} criterion grading(s) by python graders "
            "failed to decide and count as not passed (see 'error' in criteria.csv and "
            "trace.jsonl); mend the grader and rerun",
            highlight=False,
        )
    if record.incomplete:
        console.print(
            f"[yellow]warning:[/] {record.incomplete} submission(s) rest on failed calls or "
            "graders (see 'complete' and the trace); rerun the same command to try them again",
            highlight=False,
        )
        return EXIT_SOME_FAILED
    return 0


def _files(args: argparse.Namespace, output: Path | None) -> dict[str, Path | None]:
    """The files a plan must not be written over: the contract, the submissions, the
    output."""
    contract = Path(args.contract)
    return {
        "contract": contract if contract.is_file() else None,
        "submissions file": args.submissions,
        "output": output,
    }


def declare_compare(juries_commands: Any) -> None:
    """`juries compare`: two pools of jurors on the same submissions."""
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
    compare.add_argument("--cascade-margin", type=bounded(int, 1), default=1)
    compare.add_argument(
        "--rounds",
        type=bounded(int, 1, 100_000),  # each round resamples every submission in memory
        default=1000,
        help="bootstrap rounds (at most 100000)",
    )
    add_ci_option(compare)
    compare.add_argument("--seed", type=seed, default=0)
    compare.add_argument("--out", type=Path, help="write comparison.json and both pools' traces")
    compare.set_defaults(handler=compare_command)


def compare_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.contracts.record import JudgementLines
    from eigenjury.contracts.run import ComparisonInputs, compare
    from eigenjury.engine.engine import Engine
    from eigenjury.engine.runner import run_engine
    from eigenjury.exit_codes import EXIT_SOME_FAILED
    from eigenjury.reports.accounting import print_accounting
    from eigenjury.reports.grading import (
        comparison_outputs,
        outputs,
        print_comparison,
        print_verdicts,
    )
    from eigenjury.reports.output import write_outputs

    source = _load(args, args.grader_timeout)
    _warn(console, source.contract.warnings())
    if args.out:
        _check_out(args, args.out / "comparison.json")
    inputs = ComparisonInputs(
        source,
        str(args.contract),
        _answers(args, source),
        _jury(args, args.pool_a, args.verdict_format),
        _jury(args, args.pool_b, args.verdict_format),
        margin=args.cascade_margin,
        rounds=args.rounds,
        ci=args.ci,
        seed=args.seed,
        grader_timeout_s=args.grader_timeout,
    )
    for jury in (inputs.pool_a, inputs.pool_b):
        _warn(console, jury.warnings(source.contract.repeats))
    near = args.out if args.out else store_path(args)
    settings = engine_settings(args)

    async def plan(engine: Engine) -> None:
        with scratch_file(near) as spill_a, scratch_file(near) as spill_b:
            await compare(engine, inputs, (JudgementLines(spill_a), JudgementLines(spill_b)))

    files = _files(args, args.out / "comparison.json" if args.out else None)
    if plan_first(
        args, console, settings, inputs.specs, plan, command="juries compare", files=files
    ):
        return 0
    with scratch_file(near) as spill_a, scratch_file(near) as spill_b:
        traces = (JudgementLines(spill_a), JudgementLines(spill_b))
        ran = run_engine(
            settings,
            inputs.specs,
            lambda engine: compare(engine, inputs, traces),
            progress=args.progress,
        )
        record = ran.value.record.model_copy(update={"accounting": ran.accounting})
        if args.out:
            write_outputs(args.out, comparison_outputs(record))
            for name, pool in (("pool_a", ran.value.pool_a), ("pool_b", ran.value.pool_b)):
                write_outputs(args.out / name, outputs(pool, source.contract))
    print_comparison(console, record)
    print_verdicts(console, ran.value.pool_a, "Pool A verdicts")
    print_verdicts(console, ran.value.pool_b, "Pool B verdicts")
    print_accounting(console, ran.accounting)
    if args.out:
        console.print(
            f"wrote {escape(str(args.out / 'comparison.json'))}, "
            f"{escape(str(args.out / 'report.html'))} and each pool's grading"
        )
    if record.incomplete_submissions:
        console.print(
            f"[yellow]warning:[/] {record.incomplete_submissions} graded submission(s) rest on "
            "failed calls or graders; rerun to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def declare_check(contract_commands: Any) -> None:
    """`contracts check`: a contract validated, its python graders tried."""
    check = contract_commands.add_parser(
        "check",
        help="validate a contract and list its warnings",
        description="Validate a contract, list its warnings, and run each python grader once "
        "on an empty submission: a grader that cannot be imported, raises, exits, hangs or "
        "returns something other than a bool or a number is an error (exit status 2).",
    )
    check.add_argument("contract")
    _add_grader_timeout(check)
    check.set_defaults(handler=check_command)


def check_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.contracts.bundle import load_contract
    from eigenjury.contracts.graders import check_python_graders, try_python_graders
    from eigenjury.contracts.sandbox import GraderSandbox

    source = load_contract(args.contract)
    contract = source.contract
    with GraderSandbox(args.grader_timeout) as sandbox:
        check_python_graders(contract, source.path, sandbox)
        problems = try_python_graders(contract, sandbox)
    if problems:
        raise InputError(
            "python grader(s) failed on an empty submission, so grading would record these "
            "criteria as errors: " + "; ".join(problems),
            path=source.path,
        )
    graders: dict[str, int] = {}
    for task in contract.tasks:
        for c in task.evaluation.criteria:
            graders[c.grader] = graders.get(c.grader, 0) + 1
    listed = ", ".join(f"{n} {g}" for g, n in sorted(graders.items()))
    console.print(f"{escape(str(source.path))}: {len(contract.tasks)} tasks; criteria: {listed}")
    _warn(console, contract.warnings())
    return 0


def declare_convert(contract_commands: Any) -> None:
    """`contracts convert`: a contract rewritten as a bundle, a YAML file or HealthBench
    JSONL, or a HealthBench rubric set read into one."""
    convert = contract_commands.add_parser(
        "convert",
        help="rewrite a contract as a bundle folder, a YAML file or HealthBench JSONL",
        description="Rewrite a contract (bundle folder, YAML file, or a HealthBench-format "
        "JSONL file of examples: prompt, rubrics, example_tags, ideal_completions_data, "
        "prompt_id) as a bundle folder, a .yaml file, or HealthBench JSONL (.jsonl). Reading "
        "HealthBench drops nothing: fields eigenjury does not interpret are kept and written "
        "back. Writing HealthBench refuses what it cannot hold (graders without a model, "
        "another scoring rule, reference files) and names what it leaves out.",
    )
    convert.add_argument("contract")
    convert.add_argument("out", type=Path, help="a folder (bundle), a .yaml or a .jsonl file")
    convert.add_argument(
        "--from",
        dest="source_format",
        choices=("contract", "healthbench"),
        help="what CONTRACT is (default: HealthBench for a .jsonl file, else a contract)",
    )
    convert.add_argument(
        "--pass-threshold",
        type=bounded(float, -1e6, 1e6),
        help="HealthBench: the score (0 to 100) a reply must reach to pass (default 100)",
    )
    convert.add_argument(
        "--show-ideal",
        action="store_true",
        help="HealthBench: show jurors each example's ideal completion, where it has one",
    )
    convert.set_defaults(handler=convert_command)


def convert_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.contracts.bundle import load_contract, write_bundle, write_yaml
    from eigenjury.contracts.healthbench import dropped, read_healthbench, write_healthbench
    from eigenjury.contracts.schema import DEFAULT_PASS_THRESHOLD

    where = Path(args.contract)
    healthbench = args.source_format == "healthbench" or (
        args.source_format is None and where.suffix.lower() == ".jsonl"
    )
    if not healthbench and (args.pass_threshold is not None or args.show_ideal):
        raise InputError("--pass-threshold and --show-ideal apply to a HealthBench file")
    if healthbench:
        threshold = DEFAULT_PASS_THRESHOLD if args.pass_threshold is None else args.pass_threshold
        source = read_healthbench(where, pass_threshold=threshold, show_ideal=args.show_ideal)
    else:
        source = load_contract(args.contract)
    out: Path = args.out
    if out.resolve() == source.path.resolve():
        raise InputError("this is the contract being converted; write it somewhere else", path=out)
    if out.suffix.lower() in (".yaml", ".yml"):
        write_yaml(source, out)
    elif out.suffix.lower() == ".jsonl":
        write_healthbench(source, out)
        _warn(console, dropped(source.contract))
    elif out.suffix:
        raise InputError(
            "write a contract to a folder (bundle), a .yaml file or a .jsonl file (HealthBench)",
            path=out,
        )
    else:
        write_bundle(source, out)
    console.print(f"wrote {escape(str(out))}")
    return 0


def declare_export_harbor(contract_commands: Any) -> None:
    """`contracts export-harbor`: one Harbor task per contract task."""
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
    harbor.add_argument("--verifier-timeout", type=bounded(float, 1.0), default=600.0)
    _add_juror_settings(harbor)
    harbor.set_defaults(handler=export_harbor_command)


def export_harbor_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.contracts.bundle import load_contract
    from eigenjury.integrations.harbor import export_harbor

    source = load_contract(args.contract)  # export_harbor imports its python graders
    folders = export_harbor(
        source, args.out, _jury_if_needed(args, source), timeout_s=args.verifier_timeout
    )
    console.print(f"wrote {len(folders)} Harbor task(s) to {escape(str(args.out))}")
    return 0
