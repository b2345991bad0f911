"""The `eigenjury` command: the subcommands of `eigenjury.commands`, assembled.

Every user mistake ends with a located message on stderr and exit status 2, never a
traceback; results are written atomically so an interrupted run leaves no torn file.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from eigenjury import __version__
from eigenjury.commands import COMMANDS
from eigenjury.errors import InputError, Interrupted
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eigenjury",
        description="Trustworthy LLM judging: peer ranking, contract juries and bias bounds.",
    )
    parser.add_argument("--version", action="version", version=f"eigenjury {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # soft_wrap: messages stay on one line, whole, for logs and grep; tables still fit.
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, 120)  # logs and pipes: keep tables readable
    errors = Console(stderr=True, soft_wrap=True)
    try:
        status: int = args.handler(args, console)
        return status
    except InputError as exc:  # user text (names, paths, install hints) is never markup
        errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return EXIT_USAGE
    except OSError as exc:  # unwritable output, a directory where a file is expected, ...
        where = f"{exc.filename}: " if exc.filename else ""
        errors.print(
            f"[bold red]error:[/] {escape(f'{where}{exc.strerror or exc}')}", highlight=False
        )
        return EXIT_USAGE
    except Interrupted as exc:
        errors.print(
            f"interrupted: finished calls are in {escape(str(exc.store))}; rerun the same "
            "command to send only the rest",
            highlight=False,
        )
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:
        errors.print("interrupted; everything finished so far is kept")
        return EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
