"""The `eigenjury` command: the subcommands of `eigenjury.commands`, assembled.

Every user mistake ends with a located message on stderr and exit status 2, never a
traceback; results are written atomically so an interrupted run leaves no torn file.
SIGTERM (a scheduler, a timeout, `kill`) stops a command as Ctrl-C does: what finished
is committed, temporary files are removed, the command says where things are and
exits 143 (130 for Ctrl-C).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from types import FrameType

from rich.console import Console
from rich.markup import escape

from eigenjury._version import __version__
from eigenjury.commands import COMMANDS
from eigenjury.errors import EigenjuryError, Interrupted
from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE


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


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """While the block runs, SIGTERM does what Ctrl-C does at that moment (asyncio's
    handler while an event loop runs: the work is cancelled and commits what finished;
    KeyboardInterrupt otherwise). Yields the signals received, so the caller can tell a
    SIGTERM from a Ctrl-C. (Signals reach only the main thread; elsewhere nothing
    changes.)"""
    received: list[int] = []

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if not callable(handler):  # Ctrl-C ignored or left to the system: stop here
            raise KeyboardInterrupt
        handler(signal.SIGINT, frame)

    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


# glibc's mallopt parameter for the size from which blocks are mapped, not heaped.
_M_MMAP_THRESHOLD = -3


def large_blocks_given_back() -> None:
    """glibc serves blocks of a freed large block's size from its heap from then on
    (its threshold for mapping them rises with each such free, up to 32 MB), and freed
    heap memory stays with the process: reading 2e7 verdicts a chunk at a time left
    0.6 GB of freed chunks resident, a third of the peak. A fixed threshold of 1 MiB
    keeps blocks of that size and more mapped, and given back when freed. Other C
    libraries (musl, macOS) are left as they are."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only)
        libc.mallopt(_M_MMAP_THRESHOLD, 1 << 20)
    except (OSError, AttributeError):
        return


def main(argv: Sequence[str] | None = None) -> int:
    large_blocks_given_back()
    args = build_parser().parse_args(argv)
    # soft_wrap: messages stay on one line, whole, for logs and grep; tables still fit.
    console = Console(soft_wrap=True)
    if not console.is_terminal:
        console.width = max(console.width, 120)  # logs and pipes: keep tables readable
    errors = Console(stderr=True, soft_wrap=True)
    with sigterm_as_ctrl_c() as terminated:
        try:
            status: int = args.handler(args, console)
            return status
        except EigenjuryError as exc:  # user text (names, paths, hints) is never markup
            errors.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
            return exc.exit_code
        except OSError as exc:  # unwritable output, a directory where a file is expected, ...
            where = f"{exc.filename}: " if exc.filename else ""
            errors.print(
                f"[bold red]error:[/] {escape(f'{where}{exc.strerror or exc}')}", highlight=False
            )
            return EXIT_USAGE
        except KeyboardInterrupt as exc:
            stopped = "terminated (SIGTERM)" if terminated else "interrupted"
            if isinstance(exc, Interrupted):
                errors.print(
                    f"{stopped}: finished calls are in {escape(str(exc.store))}; rerun the "
                    "same command to send only the rest",
                    highlight=False,
                )
            else:
                errors.print(f"{stopped}; everything finished so far is kept", highlight=False)
            return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
