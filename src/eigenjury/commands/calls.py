"""`eigenjury batch` and `eigenjury export`: chat requests through any model, and the store."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.markup import escape

from eigenjury.batch import batch_calls, read_requests, write_results
from eigenjury.engine import Budget, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.engine.backends import connect
from eigenjury.engine.engine import check_specs
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED
from eigenjury.files import blocking_file
from eigenjury.models import ModelSpec, PriceTable
from eigenjury.reports.accounting import print_accounting

T = TypeVar("T")


def engine_from_args(args: argparse.Namespace, specs: Sequence[ModelSpec] = ()) -> Engine:
    """The engine the options describe, for calls to `specs`. Every option and spec is
    checked before the store opens: a refused command leaves no store behind."""
    prices = PriceTable.from_file(args.prices) if args.prices else PriceTable()
    limits = EndpointLimits(concurrency=args.concurrency, rpm=args.rpm, tpm=args.tpm)
    budget = Budget(max_cost_usd=args.budget_usd, max_tokens=args.budget_tokens)
    check_specs(specs, prices, budget)
    backend, _ = connect(args.backend, args.ray_address)
    return Engine(
        Store(args.store),
        limits=limits,
        retry=RetryPolicy(max_attempts=args.max_attempts, timeout_s=args.timeout),
        budget=budget,
        prices=prices,
        retry_errors=args.retry_errors,
        progress=args.progress,
        backend=backend,
    )


def run_with_engine(
    engine: Engine,
    specs: Sequence[ModelSpec],
    work: Callable[[], Awaitable[T]],
    console: Console,
) -> T | None:
    """`work()` inside the engine, endpoints checked first; the store is closed after.
    None after Ctrl-C, when everything finished is already in the store."""

    async def run() -> T:
        async with engine:
            await engine.check_endpoints(specs)
            return await work()

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        console.print(
            f"interrupted: finished calls are in {escape(str(engine.store.path))}; rerun the "
            "same command to send only the rest"
        )
        return None
    finally:
        engine.store.close()
        if engine.backend is not None:  # made by engine_from_args for this command
            engine.backend.close()


def _same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, existing or still to be made (through links and
    hard links too)."""
    try:
        return a.resolve() == b.resolve() or a.samefile(b)
    except OSError:  # one of them is not there (yet): the names were compared
        return False


def check_output(out: Path, inputs: dict[str, Path]) -> None:
    """Refuse, before any call is made, an output path that is a folder or that would
    overwrite one of the command's inputs (named by what they are in `inputs`)."""
    if out.is_dir():
        raise InputError("this is a folder; give --out the path of a file to write", path=out)
    above = blocking_file(out.absolute().parent)
    if above is not None:
        raise InputError(
            f"{above} is a file, so nothing can be written under it; give --out another path",
            path=out,
        )
    for what, path in inputs.items():
        if _same_file(out, path):
            raise InputError(
                f"this is also the {what}: writing the results here would overwrite it; "
                "give --out another path",
                path=out,
            )


def batch(args: argparse.Namespace, console: Console) -> int:
    check_output(args.out, {"request file": args.requests, "store": args.store})
    lines = read_requests(args.requests)
    spec = ModelSpec.parse(args.model)
    engine = engine_from_args(args, [spec])
    calls = batch_calls(lines, spec)

    results = run_with_engine(engine, [spec], lambda: engine.run(calls), console)
    if results is None:
        return EXIT_INTERRUPTED
    write_results(args.out, lines, results)
    print_accounting(console, engine.accounting.record())
    failed = sum(not r.ok for r in results)
    console.print(f"wrote {len(results)} results to {escape(str(args.out))}")
    if failed:
        console.print(
            f"[yellow]warning:[/] {failed} request(s) ended in errors (see the 'error' field); "
            "rerun to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def export(args: argparse.Namespace, console: Console) -> int:
    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        raise InputError("export to a .jsonl or .parquet file", path=args.out)
    check_output(args.out, {"store": args.store})
    with Store(args.store, create=False) as store:
        n = store.export(args.out)
    console.print(f"wrote {n} results to {escape(str(args.out))}")
    return 0
