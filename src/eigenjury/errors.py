"""User-facing input errors: located, with what to do, shown without a traceback."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """Bad input from the user. The CLI prints it and exits with status 2.

    `where` names the place (file, line or row, column or config field) so the user can go to it.
    """

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


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run of model calls; everything finished is in `store`, so the
    CLI says where, and that rerunning sends only the rest."""

    def __init__(self, store: Path) -> None:
        super().__init__(str(store))
        self.store = store
