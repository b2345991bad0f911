"""llama-cpp-python's own OpenAI-compatible server on a bundled model, for the tests and
benchmarks of served judges (needs the `server` extra).

It loads the model on the CPU path the local provider would take on this machine
(models.providers.local_cpu): llama.cpp's fast path kills the server where it kills
the local provider's probe (AMX under KVM), so the server runs through this module,
`python -m eigenjury.testing.llama_server on|off SERVER_ARGS...`, with extra buffer
types on or off."""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from eigenjury.models.providers.local_cpu import model_params, use_extra_buffers
from eigenjury.processes import die_with_parent

START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(model: Path, *, n_ctx: int = 2048, threads: int = 2) -> Iterator[str]:
    """The server on a free loopback port, `threads` CPU threads and an `n_ctx`-token
    context; yields its /v1 base URL once it answers, and stops it afterwards."""
    port = free_port()
    path = "on" if use_extra_buffers(model) else "off"
    command = [sys.executable, "-m", __name__, path, "--model", str(model)]
    command += ["--n_ctx", str(n_ctx), "--n_threads", str(threads)]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    base = f"http://127.0.0.1:{port}/v1"
    with tempfile.TemporaryFile() as log:  # (a pipe left unread would fill and stall it)
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=log,
            preexec_fn=functools.partial(die_with_parent, os.getpid()),  # never orphaned
        )
        try:
            _wait_until_up(base, process, log)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_until_up(base: str, process: subprocess.Popen[bytes], log: IO[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/models", timeout=2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log.seek(0)
                tail = log.read().decode("utf-8", "replace")[-600:]
                raise RuntimeError(f"llama-cpp-python's server did not start:\n{tail}") from None
            time.sleep(0.25)


if __name__ == "__main__":
    from llama_cpp.server.__main__ import main

    choice = sys.argv.pop(1)
    with model_params(extra_buffers=choice == "on"):
        main()  # type: ignore[no-untyped-call]
