"""`eigenjury agreement`: how well each judge of a verdict file agrees with a reference
judge (humans, a trusted panel), with its biases, each with a bootstrap interval
(computed by peer.agreement)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

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
from eigenjury.errors import InputError, located
from eigenjury.files import json_output


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


def agreement_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.peer.agreement import agreement_table
    from eigenjury.peer.record import JudgeAgreementRecord
    from eigenjury.records import now, write_record
    from eigenjury.reports.agreement import print_agreement
    from eigenjury.stats.bootstrap import rounds_problem

    problem = rounds_problem(args.bootstrap, args.ci)
    if problem:
        raise InputError(problem, field="--bootstrap")
    if args.out:
        args.out = json_output(args.out)
        check_output(args.out, {"verdict file": args.verdicts})
    table = read_judgments(args)
    with located(args.verdicts, field="--reference"):
        agreement = agreement_table(
            table, args.reference, bootstrap=args.bootstrap, ci=args.ci, seed=args.seed
        )
    record = JudgeAgreementRecord(created=now(), source=str(args.verdicts), agreement=agreement)
    print_agreement(console, record.agreement)
    if args.out:
        write_record(args.out, record)
        console.print(f"wrote {escape(str(args.out))}", highlight=False)
    return 0
