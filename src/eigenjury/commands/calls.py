"""`eigenjury batch` and `eigenjury export`: chat requests through any model, and the store."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import (
    add_engine_options,
    check_output,
    engine_settings,
    plan_first,
    store_path,
)
from eigenjury.engine.settings import DEFAULT_STORE_SAID
from eigenjury.errors import InputError
from eigenjury.exit_codes import EXIT_SOME_FAILED


def register(commands: Any) -> None:
    batch = commands.add_parser(
        "batch",
        help="run a JSONL file of chat requests through a model, cached and resumable",
        description="Run chat requests (one JSON object a line: id, messages, optional "
        "temperature, max_tokens, top_p, seed, stop, sample) through any model. Every "
        "result is committed to the store before it is used: rerun the same command after "
        "a crash, Ctrl-C or SIGTERM and only what is missing is sent. The file is read as "
        "the calls go out and results are written as they finish, so memory does not grow "
        "with the file; a bad line stops the run there, keeping every result before it. "
        "--out is written whole when the run ends, by one run at a time (another run "
        "writing it is refused). Exit status 0 when every request succeeded, 1 when some "
        "ended in errors (they are in the output), 2 for bad input, 130 after Ctrl-C, 143 "
        "after SIGTERM.",
    )
    batch.add_argument("requests", type=Path, help="JSONL file of requests")
    batch.add_argument("--model", required=True, help="model spec, e.g. openai:gpt-4o-mini")
    batch.add_argument("--out", type=Path, required=True, help="JSONL file of results")
    batch.add_argument(
        "--order",
        choices=("input", "completion"),
        default="input",
        help="order of the result lines: that of the request file (default), or as the "
        "calls finish (each line carries its request's id)",
    )
    add_engine_options(batch)
    batch.set_defaults(handler=batch_command)

    export = commands.add_parser(
        "export", help="write every stored call result to JSONL or Parquet"
    )
    export.add_argument("out", type=Path, help="output file (.jsonl or .parquet)")
    export.add_argument(
        "--store",
        type=Path,
        help=f"the store to export (default {DEFAULT_STORE_SAID}, shared by every command)",
    )
    export.set_defaults(handler=export_command)


def batch_command(args: argparse.Namespace, console: Console) -> int:
    import contextlib
    import itertools

    from eigenjury.batch import Written, batch_calls, write_results
    from eigenjury.engine.engine import Engine
    from eigenjury.engine.runner import run_engine
    from eigenjury.files import OutputFile
    from eigenjury.models import ModelSpec
    from eigenjury.reports.accounting import print_accounting

    check_output(args.out, {"request file": args.requests, "store": store_path(args)})
    spec = ModelSpec.parse(args.model)
    settings = engine_settings(args)
    requests = batch_calls(args.requests, spec)
    # the first line read now: an empty file or a bad first line is refused before the
    # store opens; the rest is read as the engine takes calls
    calls = itertools.chain([next(requests)], requests)

    async def every_call(engine: Engine) -> None:  # the plan: the whole file, read again
        stream = engine.stream(batch_calls(args.requests, spec), ordered=False)
        async with contextlib.aclosing(stream) as results:
            async for _ in results:
                pass

    files = {"request file": args.requests, "output": args.out}
    if plan_first(args, console, settings, [spec], every_call, command="batch", files=files):
        return 0

    # the output is taken before the store opens: a second batch writing it is refused
    # before it spends anything
    with OutputFile(args.out) as out:

        async def work(engine: Engine) -> Written:
            stream = engine.stream(calls, ordered=args.order == "input")
            async with contextlib.aclosing(stream) as results:
                return await write_results(out, results)

        ran = run_engine(settings, [spec], work, progress=args.progress)
        out.commit()
    written = ran.value
    print_accounting(console, ran.accounting)
    console.print(f"wrote {written.results} results to {escape(str(args.out))}")
    if written.failed:
        console.print(
            f"[yellow]warning:[/] {written.failed} request(s) ended in errors (see the 'error' "
            "field); rerun to try them again"
        )
        return EXIT_SOME_FAILED
    return 0


def export_command(args: argparse.Namespace, console: Console) -> int:
    from eigenjury.engine.store import Store, adopt_directory_store

    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        raise InputError("export to a .jsonl or .parquet file", path=args.out)
    store = store_path(args)
    check_output(args.out, {"store": store})
    if args.store is None:
        adopt_directory_store(store)
    with Store(store, create=False) as opened:
        n = opened.export(args.out)
    console.print(f"wrote {n} results to {escape(str(args.out))}")
    return 0
