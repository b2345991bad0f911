"""Every error a user can see, in one tree: the CLI prints any of them as one located
line, without a traceback, and exits with its `exit_code`.

    EigenjuryError                 root: `kind` and `exit_code`
    ├── InputError                 exit 2: bad input, located (path, line, row, column, field)
    │   ├── SpecError              models/spec.py: a model spec that cannot be used
    │   ├── StoreError             engine/store.py: the call store cannot be opened or written
    │   └── DataError              stats/verdicts.py: verdicts that cannot be fitted (a ValueError)
    │       ├── SettingError       stats/consensus.py: a setting the verdicts cannot take
    │       └── TruthError         peer/fitting.py: a truth that does not describe the verdicts
    └── ProviderError              models/errors.py, exit 1: a model call failed (`retryable`)
        ├── AuthError, BadRequestError (ContextLengthError), RateLimitError, ServerError,
        │   CallTimeoutError, ConnectionFailedError, MalformedResponseError,
        │   BatchExpiredError, BudgetExhaustedError
        └── WorkerLostError        integrations/ray_backend.py
    Interrupted (KeyboardInterrupt)  exit 130, 143 on SIGTERM: what finished is kept

Interrupted stays outside the root on purpose: Ctrl-C must pass every `except
Exception`. An error raised where the input is not known (the statistics do not know
the file their verdicts came from) gets its location on the way out, through
`located`; no error is caught to be raised as another kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Self

from eigenjury.exit_codes import EXIT_INTERRUPTED, EXIT_SOME_FAILED, EXIT_USAGE


class EigenjuryError(Exception):
    """The root of every error eigenjury shows a user."""

    kind: ClassVar[str] = "error"
    exit_code: ClassVar[int] = EXIT_SOME_FAILED


class InputError(EigenjuryError):
    """Bad input from the user. The CLI prints it and exits with status 2.

    `where` names the place (file, line or row, column or config field) so the user can go to it.
    """

    kind = "input"
    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        row: int | None = None,
        column: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.row = row
        self.column = column
        self.field = field

    @property
    def where(self) -> str:
        parts = []
        if self.path is not None:
            parts.append(self.path)
        if self.line is not None:
            parts.append(f"line {self.line}")
        if self.row is not None:
            parts.append(f"row {self.row}")
        if self.column is not None:
            parts.append(f"column '{self.column}'")
        if self.field is not None:
            parts.append(f"field '{self.field}'")
        return ", ".join(parts)

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message

    def locate(self, path: str | Path | None = None, field: str | None = None) -> Self:
        """Fill in the file and field where the error does not name them yet."""
        if self.path is None and path is not None:
            self.path = str(path)
        if self.field is None and field is not None:
            self.field = field
        return self

    def explain(self, context: str | None = None, hint: str | None = None) -> Self:
        """Say what was being done (`context: message`) and what to do (`message; hint`)."""
        if context:
            self.message = f"{context}: {self.message}"
        if hint:
            self.message = f"{self.message}; {hint}"
        return self


@contextmanager
def located(
    path: str | Path | None = None,
    *,
    field: str | None = None,
    context: str | None = None,
    hint: str | None = None,
) -> Iterator[None]:
    """Inside: an InputError that does not say where it comes from gets `path` and
    `field` (verdicts refused by the statistics are named by the file they came from),
    and, if given, what was being done and what to do."""
    try:
        yield
    except InputError as exc:
        exc.locate(path, field).explain(context, hint)
        raise


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run of model calls; everything finished is in `store`, so the
    CLI says where, and that rerunning sends only the rest."""

    kind: ClassVar[str] = "interrupted"
    exit_code: ClassVar[int] = EXIT_INTERRUPTED

    def __init__(self, store: Path) -> None:
        super().__init__(str(store))
        self.store = store
