"""`eigenjury view`: a local, read-only web app over run folders."""

from __future__ import annotations

import argparse
import errno
import socket
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from eigenjury.commands.options import bounded
from eigenjury.errors import InputError


def register(commands: Any) -> None:
    view = commands.add_parser(
        "view",
        help="explore run folders in a local web app",
        description="Serve a local, read-only web app over the eigenjury runs found under "
        "PATH (searched recursively): runs and their comparison, leaderboards, judges, "
        "transcripts, grading votes, jury comparisons and bound certificates. Prints its "
        "URL on the first line, then serves until Ctrl-C. Exit status 2 for bad input "
        "(no runs found, only damaged records, a port in use).",
    )
    view.add_argument(
        "paths",
        nargs="*",
        type=Path,
        default=[Path()],
        metavar="PATH",
        help="run folders or record files (default: the current folder)",
    )
    view.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only)",
    )
    view.add_argument(
        "--port",
        type=bounded(int, 0, 65535),
        default=0,
        help="port to listen on (default 0: any free port)",
    )
    view.set_defaults(handler=view_command)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or an InputError saying why not."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise InputError(f"cannot listen on {host!r}: {exc.strerror}", field="--host") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InputError(
                f"port {port} on {host} is in use; pick another with --port or use --port 0"
            ) from None
        raise InputError(f"cannot listen on {host} port {port}: {exc.strerror}") from None
    return sock


def url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def view_command(args: argparse.Namespace, console: Console) -> int:
    from aiohttp import web

    from eigenjury.records import Found
    from eigenjury.view.server import load_catalogue, make_app

    errors = Console(stderr=True, soft_wrap=True)

    def skipped(damaged: Found) -> None:
        errors.print(f"[yellow]skipped:[/] {escape(str(damaged.problem))}", highlight=False)

    catalogue = load_catalogue(args.paths, skipped)
    sock = listen(args.host, args.port)
    print(url(sock), flush=True)  # first line: scripts and tests read the address here
    found = len(catalogue.runs)
    errors.print(f"serving {found} run{'s' * (found != 1)}; Ctrl-C to stop", highlight=False)
    try:
        web.run_app(make_app(catalogue, args.host), sock=sock, print=None, access_log=None)
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    return 0
