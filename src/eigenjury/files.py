"""Small file helpers shared by commands."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from eigenjury.errors import InputError

M = TypeVar("M", bound=BaseModel)


def write_text(path: Path, text: str) -> None:
    """Write atomically: a reader never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def validation_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as "field 'x.y': what is wrong"."""
    error = exc.errors()[0]
    if error["type"] == "json_invalid":
        return f"not valid JSON ({error['msg']})"
    field = ".".join(str(part) for part in error["loc"]) or "(line)"
    more = len(exc.errors()) - 1
    extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"field '{field}': {error['msg']}{extra}"


def read_jsonl(path: Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """(line number, record) for every non-blank line of a JSONL file, each validated as
    `model`; the first bad line is an InputError naming the file, line and field."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    with path.open(encoding="utf-8-sig") as f:
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                yield number, model.model_validate_json(text)
            except ValidationError as exc:
                raise InputError(validation_problem(exc), path=path, line=number) from None
