"""`eigenjury agreement`: how well each judge of a verdict file agrees with a reference
judge (humans, a trusted panel), with its biases, each with a bootstrap interval."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import (
    MAX_ROUNDS,
    add_ci_option,
    add_judgment_options,
    bounded,
    check_output,
    read_judgments,
    seed,
)
from eigenjury.errors import InputError

if TYPE_CHECKING:
    from eigenjury.peer.record import AgreementTable
    from eigenjury.stats.verdicts import VerdictTable


def register(commands: Any) -> None:
    agreement = commands.add_parser(
        "agreement",
        help="agreement of every judge with a reference judge's majority, kappa and biases",
        description="For every judge of a verdict file (CSV, JSONL or Parquet), on the "
        "comparisons it shares with the reference judges: agreement with their majority "
        "(ties are a third outcome), Cohen's kappa, the share of pairs whose outcome flips "
        "with the order, first-slot bias and preference for the longer reply (when lengths "
        "or texts are present), each with a scenario-bootstrap interval.",
    )
    agreement.add_argument("verdicts", type=Path, help="verdict file")
    agreement.add_argument(
        "--reference",
        action="append",
        required=True,
        metavar="JUDGE",
        help="a reference judge; repeat for several (their majority is the reference). A "
        "name with commas is one judge where the verdicts have a judge of that name; "
        "otherwise it is split at its commas (the older form: --reference a,b)",
    )
    agreement.add_argument(
        "--bootstrap",
        type=bounded(int, 0, MAX_ROUNDS),
        default=1000,
        help="scenario-bootstrap rounds for intervals (0: none; default 1000; at most "
        f"{MAX_ROUNDS:,})",
    )
    add_ci_option(agreement)
    agreement.add_argument("--seed", type=seed, default=0)
    add_judgment_options(agreement)
    agreement.add_argument("--out", type=Path, help="write the table as a JSON record here")
    agreement.set_defaults(handler=agreement_command)


def agreement_table(
    table: VerdictTable,
    references: Sequence[str],
    *,
    bootstrap: int,
    ci: float,
    seed: int,
    path: Path,
    option: str = "--reference",
) -> AgreementTable:
    """The agreement table of the verdicts read from `path` against the `references`
    given by `option`, once per judge (see `named_judges`; rounds already checked
    against `ci`); a reference the data cannot support is an InputError."""
    from eigenjury.peer.record import AgreementTable
    from eigenjury.stats.judge_agreement import judge_agreement
    from eigenjury.stats.verdicts import DataError

    names = named_judges(references, table.models)
    try:
        result = judge_agreement(table, names, bootstrap=bootstrap, ci=ci, seed=seed)
    except DataError as exc:
        raise InputError(str(exc), path=path, field=option) from None
    return AgreementTable.model_validate(result.record())


def named_judges(values: Sequence[str], names: Sequence[str]) -> list[str]:
    """The judges an option repeated once per judge names. A value that is one of the
    verdicts' `names` is that judge, commas and all ("Smith, J."); any other value is
    split at its commas, the older form of naming several at once ("a,b")."""
    known = set(names)
    judges: list[str] = []
    for value in values:
        if value in known or "," not in value:
            judges.append(value)
        else:
            judges.extend(part.strip() for part in value.split(","))
    return judges


def agreement_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.peer.record import JudgeAgreementRecord
    from eigenjury.records import now, write_record
    from eigenjury.reports.agreement import print_agreement
    from eigenjury.stats.bootstrap import rounds_problem

    problem = rounds_problem(args.bootstrap, args.ci)
    if problem:
        raise InputError(problem, field="--bootstrap")
    if args.out:
        check_output(args.out, {"verdict file": args.verdicts})
    table = read_judgments(args)
    record = JudgeAgreementRecord(
        created=now(),
        source=str(args.verdicts),
        agreement=agreement_table(
            table,
            args.reference,
            bootstrap=args.bootstrap,
            ci=args.ci,
            seed=args.seed,
            path=args.verdicts,
        ),
    )
    print_agreement(console, record.agreement)
    if args.out:
        write_record(args.out, record)
        console.print(f"wrote {escape(str(args.out))}", highlight=False)
    return 0
