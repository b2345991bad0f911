"""`eigenjury batch` and `eigenjury export`: chat requests through any model, and the store."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

from rich.console import Console

from eigenjury.batch import batch_calls, read_requests, write_results
from eigenjury.engine import Budget, EndpointLimits, Engine, RetryPolicy, Store
from eigenjury.engine.backends import connect
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED
from eigenjury.models import ModelSpec, PriceTable
from eigenjury.reports.accounting import print_accounting

T = TypeVar("T")


def engine_from_args(args: argparse.Namespace) -> Engine:
    prices = PriceTable.from_file(args.prices) if args.prices else PriceTable()
    backend, _ = connect(args.backend, args.ray_address)
    return Engine(
        Store(args.store),
        limits=EndpointLimits(concurrency=args.concurrency, rpm=args.rpm, tpm=args.tpm),
        retry=RetryPolicy(max_attempts=args.max_attempts, timeout_s=args.timeout),
        budget=Budget(max_cost_usd=args.budget_usd, max_tokens=args.budget_tokens),
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
            f"interrupted: finished calls are in {engine.store.path}; rerun the same command "
            "to send only the rest"
        )
        return None
    finally:
        engine.store.close()
        if engine.backend is not None:  # made by engine_from_args for this command
            engine.backend.close()


def batch(args: argparse.Namespace, console: Console) -> int:
    lines = read_requests(args.requests)
    spec = ModelSpec.parse(args.model)
    engine = engine_from_args(args)
    calls = batch_calls(lines, spec)
    engine.prepare([spec])

    results = run_with_engine(engine, [spec], lambda: engine.run(calls), console)
    if results is None:
        return EXIT_INTERRUPTED
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


def export(args: argparse.Namespace, console: Console) -> int:
    if not args.store.is_file():
        raise InputError("no such store", path=args.store)
    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        raise InputError("export to a .jsonl or .parquet file", path=args.out)
    with Store(args.store) as store:
        n = store.export(args.out)
    console.print(f"wrote {n} results to {args.out}")
    return 0
