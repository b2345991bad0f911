"""Small file helpers shared by commands."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterator, Sequence
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


PARQUET_HINT = "reading or writing Parquet needs pyarrow: pip install 'eigenjury[parquet]'"


def pyarrow(path: Path) -> tuple[Any, Any]:
    """pyarrow and pyarrow.parquet (the `parquet` extra), or an InputError saying so."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(PARQUET_HINT, path=path) from None
    return pa, pq


def validation_problem(exc: ValidationError) -> str:
    """The first problem pydantic found, as "field 'x.y': what is wrong"."""
    error = exc.errors()[0]
    if error["type"] == "json_invalid":
        return f"not valid JSON ({error['msg']})"
    field = ".".join(str(part) for part in error["loc"]) or "(line)"
    more = len(exc.errors()) - 1
    extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return f"field '{field}': {error['msg']}{extra}"


NOT_TEXT = "not UTF-8 text; expected a text file"


def read_text(path: Path) -> str:
    """A user's text file, or an InputError naming it (missing, or not UTF-8 text)."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except UnicodeDecodeError:
        raise InputError(NOT_TEXT, path=path) from None


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of a user's text file."""
    if not path.is_file():
        raise InputError("no such file", path=path)
    number = 0
    try:
        with path.open(encoding="utf-8-sig") as f:
            for number, text in enumerate(f, start=1):
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise InputError(NOT_TEXT, path=path, line=number + 1) from None


def read_json_lines(path: Path, *, needs: str = "") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line of a JSONL file."""
    for number, text in lines(path):
        yield number, json_object(text, path, number, needs=needs)


def read_jsonl(path: Path, model: type[M]) -> Iterator[tuple[int, M]]:
    """(line number, record) for every non-blank line of a JSONL file, each validated as
    `model`; the first bad line is an InputError naming the file, line and field."""
    for number, text in lines(path):
        try:
            yield number, model.model_validate_json(text)
        except ValidationError as exc:
            raise InputError(validation_problem(exc), path=path, line=number) from None


def read_csv(
    path: Path, required: Sequence[str], what: str
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for every non-blank row of a CSV file with a header; missing
    required columns, ragged rows and unreadable CSV are InputErrors naming the line.
    `what` says what such a file needs, for the messages."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        try:
            header = [h.strip() for h in next(reader)]
        except UnicodeDecodeError:
            raise InputError(NOT_TEXT, path=path, line=1) from None
        except StopIteration:
            raise InputError(
                f"the file is empty; expected a header line naming {', '.join(required)}",
                path=path,
            ) from None
        except csv.Error as exc:
            raise InputError(f"not readable as CSV ({exc})", path=path, line=1) from None
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(
                f"missing column(s) {', '.join(missing)}; found {', '.join(header) or 'none'}; "
                f"{what}",
                path=path,
                line=1,
            )
        try:
            for fields in reader:
                if not any(x.strip() for x in fields):
                    continue
                if len(fields) != len(header):
                    raise InputError(
                        f"{len(fields)} fields where the header has {len(header)}",
                        path=path,
                        line=reader.line_num,
                    )
                yield reader.line_num, dict(zip(header, fields, strict=True))
        except csv.Error as exc:
            raise InputError(
                f"not readable as CSV ({exc})", path=path, line=reader.line_num
            ) from None
        except UnicodeDecodeError:
            raise InputError(NOT_TEXT, path=path, line=reader.line_num + 1) from None


def json_object(text: str, path: Path, line: int, *, needs: str = "") -> dict[str, Any]:
    """One JSONL line as an object, or an InputError naming the file and line."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON ({exc.msg} at character {exc.colno})", path=path, line=line
        ) from None
    if not isinstance(record, dict):
        raise InputError(f"each line must be a JSON object{needs}", path=path, line=line)
    return record
