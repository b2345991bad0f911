"""`eigenjury grade`, `eigenjury juries compare` and `eigenjury contracts ...`."""

from __future__ import annotations

import argparse
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.calls import engine_from_args, run_with_engine
from eigenjury.contracts.bundle import ContractSource, load_contract, write_bundle, write_yaml
from eigenjury.contracts.compare import compare_pools
from eigenjury.contracts.graders import check_python_graders
from eigenjury.contracts.grading import (
    Submission,
    TaskResult,
    generate_submissions,
    grade,
    require_jury,
)
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.submissions import read_submissions
from eigenjury.contracts.trace import results_record, write_trace
from eigenjury.engine import Engine
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED
from eigenjury.files import write_json
from eigenjury.models.spec import ModelSpec
from eigenjury.reports.accounting import print_accounting
from eigenjury.reports.contracts import print_comparison, print_summary, write_report

T = TypeVar("T")


def _load(args: argparse.Namespace) -> ContractSource:
    """The contract, with its python graders imported (a wrong import path is reported
    before any model call is paid for)."""
    source = load_contract(args.contract)
    check_python_graders(source.contract, source.path)
    return source


def _jury_if_needed(args: argparse.Namespace, source: ContractSource) -> Jury | None:
    """The --jury jurors; none given is fine where no criterion is graded by a jury."""
    jury = _jury(args, args.jury) if args.jury else None
    require_jury(source, jury)
    return jury


def _jury(args: argparse.Namespace, specs: list[str]) -> Jury:
    return Jury.from_specs(
        specs,
        temperature=args.juror_temperature,
        seed=args.juror_seed,
        max_tokens=args.juror_max_tokens,
        batch_criteria=args.batch_criteria,
    )


def _warn(console: Console, warnings: list[str]) -> None:
    for w in warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


def _run(
    args: argparse.Namespace,
    console: Console,
    source: ContractSource,
    juries: list[Jury],
    work: Callable[[Engine, list[Submission]], Awaitable[T]],
) -> tuple[T, list[Submission], Engine] | None:
    """Make or read the submissions, then `work` on them, with one engine; None when
    interrupted (everything finished is in the store)."""
    candidates = [ModelSpec.parse(c) for c in args.candidate or []]
    specs = [*candidates, *(s for jury in juries for s in jury.specs)]
    # read before the store is opened: bad submissions leave nothing behind
    given = read_submissions(args.submissions, source.contract) if args.submissions else None
    engine = engine_from_args(args, specs)
    engine.prepare(specs)

    async def go() -> tuple[T, list[Submission]]:
        submissions = given or await generate_submissions(
            engine,
            source,
            candidates,
            temperature=args.candidate_temperature,
            max_tokens=args.candidate_max_tokens,
        )
        return await work(engine, submissions), submissions

    ran = run_with_engine(engine, specs, go, console)
    if ran is None:
        return None
    outcome, submissions = ran
    return outcome, submissions, engine


def grade_command(args: argparse.Namespace, console: Console) -> int:
    source = _load(args)
    warnings = source.contract.warnings()
    _warn(console, warnings)
    jury = _jury_if_needed(args, source)
    escalate_to = _jury(args, args.escalate_to) if args.escalate_to else None
    if escalate_to is not None and jury is None:
        raise InputError("--escalate-to needs a first jury to escalate from (--jury SPEC)")
    juries = [j for j in (jury, escalate_to) if j is not None]

    async def work(engine: Engine, submissions: list[Submission]) -> list[TaskResult]:
        return await grade(
            engine,
            source,
            submissions,
            jury,
            escalate_to=escalate_to,
            escalate_margin=args.escalate_margin,
        )

    ran = _run(args, console, source, juries, work)
    if ran is None:
        return EXIT_INTERRUPTED
    results, _, engine = ran
    record = results_record(
        results,
        contract=str(args.contract),
        jury=jury,
        escalate_to=escalate_to,
        escalate_margin=args.escalate_margin if escalate_to else None,
        warnings=warnings,
    )
    record["accounting"] = engine.session_accounting.record()
    out: Path = args.out
    write_json(out / "results.json", record)
    write_trace(out, results)
    write_report(out / "report.html", record, results)
    print_summary(console, record)
    print_accounting(console, record["accounting"])
    console.print(
        f"wrote {escape(str(out / 'results.json'))}, the trace (trace.jsonl, tasks.csv, "
        f"criteria.csv, judgements.csv) and {escape(str(out / 'report.html'))}"
    )
    incomplete = sum(not r.complete for r in results)
    if incomplete:
        console.print(
            f"[yellow]warning:[/] {incomplete} submission(s) rest on failed calls (see "
            "'complete' and the trace); rerun the same command to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def compare_command(args: argparse.Namespace, console: Console) -> int:
    source = _load(args)
    _warn(console, source.contract.warnings())
    pool_a, pool_b = _jury(args, args.pool_a), _jury(args, args.pool_b)

    async def work(
        engine: Engine, submissions: list[Submission]
    ) -> tuple[list[TaskResult], list[TaskResult]]:
        a = await grade(engine, source, submissions, pool_a)  # one engine run at a time
        return a, await grade(engine, source, submissions, pool_b)

    ran = _run(args, console, source, [pool_a, pool_b], work)
    if ran is None:
        return EXIT_INTERRUPTED
    (results_a, results_b), _, engine = ran
    record = compare_pools(
        results_a,
        results_b,
        pool_a,
        pool_b,
        margin=args.cascade_margin,
        rounds=args.rounds,
        ci=args.ci,
        seed=args.seed,
    )
    record["contract"] = str(args.contract)
    record["accounting"] = engine.session_accounting.record()
    incomplete = sum(not r.complete for r in (*results_a, *results_b))
    record["incomplete_submissions"] = incomplete
    print_comparison(console, record)
    print_accounting(console, record["accounting"])
    if args.out:
        write_json(args.out / "comparison.json", record)
        for name, results, jury in (("pool_a", results_a, pool_a), ("pool_b", results_b, pool_b)):
            folder = args.out / name
            rec = results_record(results, contract=str(args.contract), jury=jury)
            write_json(folder / "results.json", rec)
            write_trace(folder, results)
        console.print(f"wrote {escape(str(args.out / 'comparison.json'))} and each pool's trace")
    if incomplete:
        console.print(
            f"[yellow]warning:[/] {incomplete} graded submission(s) rest on failed calls; "
            "rerun to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def check_command(args: argparse.Namespace, console: Console) -> int:
    source = _load(args)
    contract = source.contract
    graders: dict[str, int] = {}
    for task in contract.tasks:
        for c in task.evaluation.criteria:
            graders[c.grader] = graders.get(c.grader, 0) + 1
    listed = ", ".join(f"{n} {g}" for g, n in sorted(graders.items()))
    console.print(f"{escape(str(source.path))}: {len(contract.tasks)} tasks; criteria: {listed}")
    _warn(console, contract.warnings())
    return 0


def convert_command(args: argparse.Namespace, console: Console) -> int:
    source = load_contract(args.contract)
    out: Path = args.out
    if out.resolve() == source.path.resolve():
        raise InputError("this is the contract being converted; write it somewhere else", path=out)
    if out.suffix.lower() in (".yaml", ".yml"):
        write_yaml(source, out)
    elif out.suffix:
        raise InputError("write a contract to a folder (bundle) or a .yaml file", path=out)
    else:
        write_bundle(source, out)
    console.print(f"wrote {escape(str(out))}")
    return 0


def export_harbor_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.integrations.harbor import export_harbor

    source = _load(args)
    folders = export_harbor(
        source, args.out, _jury_if_needed(args, source), timeout_s=args.verifier_timeout
    )
    console.print(f"wrote {len(folders)} Harbor task(s) to {escape(str(args.out))}")
    return 0
