"""Python graders run in a child process, so that no grader can stop or hang a run.

A `python` criterion names the user's function (`package.module:function`), called
with the submission, the task and the criterion. It runs in one child process per
sandbox (started on first need, reused, started again after a crash or a time-out),
never in the process that holds the run's results: a grader that loops forever is
stopped after `timeout_s`, one that calls `sys.exit` or crashes the interpreter ends
only its child, and its result is read in the child, so an object that cannot be
turned into a verdict never reaches the run. Each such failure is the criterion's
error (a message naming the grader and what it did), never a pass.

A grader's result is a bool or a finite number (non-zero passes), alone or as
`(value, reason)` with a text reason; anything else (None, a coroutine from an
`async def` function, a numpy array, another object) is refused.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import numbers
import os
import signal
import socket
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    from eigenjury.contracts.schema import Criterion, Task

# Per call of a grader (and per import of its module). Checks of a text take
# milliseconds; one that runs the submission's code may need longer: --grader-timeout.
PYTHON_GRADER_TIMEOUT_S = 10.0
MAX_GRADER_TIMEOUT_S = 86_400.0  # a day; far longer waits overflow the system's timers
_STOP_WAIT_S = 5.0  # for a killed child to be reaped
_START_WAIT_S = 120.0  # for a child to start (an interpreter and pydantic, on a busy machine)
# The child's first steps: the connection on the inherited socket, this process's import
# path (so the user's modules are found as here), then the loop. Not multiprocessing's
# spawn, which would run the parent's main script again in the child.
_BOOTSTRAP = (
    "import sys; from multiprocessing.connection import Connection; "
    "conn = Connection(int(sys.argv[1])); sys.path[:] = conn.recv(); "
    "from eigenjury.contracts.sandbox import serve; serve(conn)"
)


@dataclass(frozen=True)
class GraderOutcome:
    """What a grader decided, or why it could not: with `error`, the criterion fails
    and `explanation` is that error."""

    passed: bool
    explanation: str
    error: str | None = None


class GraderSandbox:
    """A child process that imports and calls python graders, one call at a time,
    each within `timeout_s`. Use it as a context manager (or `close` it): the child is
    also stopped when the sandbox is garbage-collected, at exit, and (on Linux) when
    the process that started it dies."""

    def __init__(self, timeout_s: float = PYTHON_GRADER_TIMEOUT_S) -> None:
        if not 0 < timeout_s <= MAX_GRADER_TIMEOUT_S:
            raise ValueError(f"timeout_s must be in (0, {MAX_GRADER_TIMEOUT_S:g}]: {timeout_s!r}")
        self.timeout_s = timeout_s
        self._lock = threading.Lock()  # one call at a time on the one pipe
        self._child: tuple[subprocess.Popen[bytes], Connection] | None = None
        self._imported: set[str] = set()  # graders the running child has imported
        self._finalizer: weakref.finalize[Any, GraderSandbox] | None = None

    def __enter__(self) -> GraderSandbox:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child (if one is running)."""
        with self._lock:
            self._stop()

    def load_problem(self, criterion: Criterion) -> str | None:
        """Why the criterion's function cannot be imported (None: it can), found in the
        child, so that importing the user's module runs none of its code here."""
        with self._lock:
            return self._import(criterion.prompt.strip())

    def grade(self, criterion: Criterion, submission: str, task: Task) -> GraderOutcome:
        """The criterion's function on `submission`: passed or not with its reason, or
        the error that kept it from deciding. Importing it (once per child) and calling
        it each have the time limit; starting the child does not count."""
        name = criterion.prompt.strip()
        with self._lock:
            problem = self._import(name)
            if problem is None:
                request = ("grade", name, submission, task, criterion)
                reply = self._ask(request, name, "grading this submission")
                if reply[0] != "error":
                    return GraderOutcome(bool(reply[1]), str(reply[2]))
                problem = reply[1]
        return GraderOutcome(False, problem, problem)

    def _import(self, name: str) -> str | None:
        if name in self._imported:
            return None
        reply = self._ask(("load", name), name, "importing it")
        if reply[0] == "error":
            return str(reply[1])
        self._imported.add(name)
        return None

    def _ask(self, request: tuple[Any, ...], name: str, doing: str) -> tuple[Any, ...]:
        """Send `request` to the child (started or restarted as needed) and wait for
        its reply within the time limit; a time-out or a dead child is an error reply."""
        try:
            process, conn = self._running()
            try:
                conn.send(request)
            except (OSError, ValueError):  # the child died while idle: once more, afresh
                self._stop()
                process, conn = self._running()
                conn.send(request)
        except _StartError as exc:
            return ("error", f"{name} could not be run: {exc}")
        try:
            if not conn.poll(self.timeout_s):
                self._stop()
                return (
                    "error",
                    f"{name} did not finish {doing} within {self.timeout_s:g} s and was "
                    "stopped (give it more time with --grader-timeout)",
                )
            reply: tuple[Any, ...] = conn.recv()
        except (EOFError, OSError):
            ended = _ended(process)
            self._stop()
            return (
                "error",
                f"{name} ended its process while {doing} ({ended}); a grader must return "
                "its result",
            )
        return reply

    def _running(self) -> tuple[subprocess.Popen[bytes], Connection]:
        """The child, started (and ready) if it was not running."""
        if self._child is not None and self._child[0].poll() is None:
            return self._child
        self._stop()
        ours, theirs = socket.socketpair()
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-c", _BOOTSTRAP, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stopped with what it started
            )
        conn = Connection(ours.detach())
        self._child, self._imported = (process, conn), set()
        self._finalizer = weakref.finalize(self, _stop_child, process, conn)
        try:
            conn.send(sys.path)
            if conn.poll(_START_WAIT_S) and conn.recv() == ("ready",):
                return self._child
        except (EOFError, OSError):
            pass
        ended = _ended(process) if process.poll() is not None else "it did not answer"
        self._stop()
        raise _StartError(f"the process for python graders did not start ({ended})")

    def _stop(self) -> None:
        if self._finalizer is not None:
            self._finalizer()  # stops the child, once
        self._child = self._finalizer = None


class _StartError(Exception):
    """The child could not be started (this machine, not the grader)."""


def _stop_child(process: subprocess.Popen[bytes], conn: Connection) -> None:
    """Kill the child and every process a grader started in its group, and reap it."""
    conn.close()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):  # never reaped: left to init
        process.wait(_STOP_WAIT_S)


def _ended(process: subprocess.Popen[bytes]) -> str:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(_STOP_WAIT_S)
    code = process.returncode
    if code is None:
        return "it stopped answering"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit status {code}"


# --- in the child ----------------------------------------------------------------------------


def serve(conn: Connection) -> None:
    """The child's loop: import and call graders as asked, one reply per request."""
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    import eigenjury.contracts.schema  # noqa: F401  (tasks and criteria arrive pickled)

    conn.send(("ready",))
    functions: dict[str, Callable[..., Any]] = {}
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):  # the parent closed the pipe, or is gone
            return
        name = request[1]
        try:
            function = functions.get(name) or _load(name)
            functions[name] = function
            reply: tuple[Any, ...] = ("ok",)
            if request[0] == "grade":
                reply = _call(function, name, *request[2:])
        except _GraderFailedError as exc:
            reply = ("error", str(exc))
        conn.send(reply)


class _GraderFailedError(Exception):
    """A grader that cannot be imported, or that failed to decide (the message says how)."""


def _load(name: str) -> Callable[..., Any]:
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:  # sys.exit in the module too
        raise _GraderFailedError(
            f"cannot import {module_name!r} ({_raised(exc)}); is it installed or on PYTHONPATH?"
        ) from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise _GraderFailedError(f"module {module_name!r} has no function {attribute!r}")
    return function  # type: ignore[no-any-return]


def _call(
    function: Callable[..., Any], name: str, submission: str, task: Task, criterion: Criterion
) -> tuple[str, bool, str]:
    """("result", passed, reason) of one call, or _GraderFailedError saying why there is none."""
    try:
        outcome = function(submission, task, criterion)
    except BaseException as exc:  # SystemExit too: the grader's
        raise _GraderFailedError(f"{name} {_raised(exc)}") from None
    try:
        if isinstance(outcome, tuple) and len(outcome) == 2:
            value, reason = outcome
            if reason is not None and not isinstance(reason, str):
                raise _GraderFailedError(
                    f"{name} returned a reason of type {_type(reason)}; the reason of "
                    "(value, reason) must be text"
                )
            passed = _verdict(value, name)
            return "result", passed, reason if reason is not None else f"{name} returned {value!r}"
        passed = _verdict(outcome, name)
        return "result", passed, f"{name} returned {outcome!r}"
    except _GraderFailedError:
        raise
    except BaseException as exc:  # a result whose methods raise
        raise _GraderFailedError(
            f"{name} returned a result that could not be read ({_raised(exc)})"
        ) from None


def _verdict(value: Any, name: str) -> bool:
    """Pass or fail from a grader's value: a bool, or a finite number (non-zero passes)."""
    if _is_coroutine(value):
        raise _GraderFailedError(
            f"{name} returned a coroutine: an `async def` grader is never run to its end; "
            "make it a plain `def` that returns a bool or a number"
        )
    numpy = sys.modules.get("numpy")
    if isinstance(value, bool) or (numpy is not None and isinstance(value, numpy.bool_)):
        return bool(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            raise _GraderFailedError(f"{name} returned NaN, which is neither a pass nor a fail")
        return number != 0.0
    raise _GraderFailedError(
        f"{name} returned {_type(value)}, not a bool or a number (return a bool, a "
        "number, or (bool, reason))"
    )


def _is_coroutine(value: Any) -> bool:
    import inspect

    if not inspect.isawaitable(value):
        return False
    close = getattr(value, "close", None)
    if callable(close):  # a coroutine never awaited: closed, without a warning
        with contextlib.suppress(BaseException):
            close()
    return True


def _raised(exc: BaseException) -> str:
    """What an exception says, in words, even where its own str() raises."""
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r}); a grader must return its result"
    try:
        text = str(exc)
    except BaseException:
        text = "(its message could not be shown)"
    return f"raised {type(exc).__name__}" + (f": {text}" if text else "")


def _type(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _die_with_parent() -> None:
    """On Linux, have the kernel kill this child when its parent dies (even by SIGKILL),
    so that a grader stuck in a loop never outlives the run."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
