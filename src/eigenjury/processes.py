"""Child processes that never outlive the command that started them.

A command killed with SIGKILL (or SIGTERM, by a scheduler or a timeout) cannot stop its
children itself. Forked workers would then live on under PID 1 for good, each holding
its copy of the parent's memory, because the pipes they wait on are held open by one
another. So every child asks the kernel to kill it when its parent dies (Linux:
prctl(PR_SET_PDEATHSIG); elsewhere a thread that watches the parent), and checks it
was not orphaned before it could ask. (The kernel's signal follows the thread that
started the child; a pool lives within one call of that thread, and a server within
one `with` block, so that thread outlives them.)
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_WATCH_S = 0.5  # how often a child without prctl looks at its parent
# libc, loaded here in the parent: a child between fork and exec should not load it
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform == "linux" else None


def die_with_parent(parent: int) -> None:
    """Make this process (a child of `parent`, forked or between fork and exec) die
    with its parent: SIGKILL from the kernel on Linux (it lasts across exec), a watching
    thread elsewhere. If the parent is already gone, exit now."""
    if _LIBC is None or _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        threading.Thread(target=_watch, args=(parent,), daemon=True).start()
    if os.getppid() != parent:  # orphaned before the request took effect
        os._exit(1)


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_WATCH_S)
    os._exit(1)


def _start_worker(parent: int, start: Callable[..., None] | None, args: tuple[Any, ...]) -> None:
    """Every pool worker's start: it dies with its parent; Ctrl-C (sent by a terminal to
    the whole process group) and SIGTERM are the parent's to handle, which stops the
    workers itself (worker_pool)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not the command's handler (cli.main)
    if start is not None:
        start(*args)


@contextlib.contextmanager
def worker_pool(
    jobs: int | None,
    start: Callable[..., None] | None = None,
    args: tuple[Any, ...] = (),
) -> Iterator[ProcessPoolExecutor]:
    """`jobs` worker processes (None: one per core), forked on Linux (they start in
    milliseconds and share memory copy-on-write) and spawned elsewhere, each running
    `start(*args)` first. They die with this process; and when the block is left by an
    exception (Ctrl-C, SIGTERM, an error) they are killed at once instead of finishing
    the work already queued."""
    pool = ProcessPoolExecutor(
        jobs,
        mp_context=get_context("fork" if sys.platform == "linux" else "spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(), start, args),
    )
    try:
        yield pool
    except BaseException:
        workers = list(pool._processes.values())  # (shutdown forgets them)
        for worker in workers:
            worker.kill()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
