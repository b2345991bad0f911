"""Small file helpers shared by commands."""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from eigenjury.errors import InputError

M = TypeVar("M", bound=BaseModel)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[Path]:
    """A temporary file beside `path` for the block to write; it replaces `path` only
    when the block succeeds and is removed on any failure, so a reader never sees a
    half-written file and nothing is left behind. A folder at `path`, or a place that
    cannot be written, is an InputError naming `path` (never the temporary file)."""
    if path.is_dir():
        raise InputError("this is a folder; give the path of a file to write", path=path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, path)
    except OSError as exc:
        _remove(tmp)
        raise InputError(f"cannot write this file ({exc.strerror or exc})", path=path) from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: Path) -> None:
    """Remove our temporary file if it is there (never a folder that took its name)."""
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def blocking_file(folder: Path) -> Path | None:
    """The file at `folder` or above it that keeps the folder from being made, if any
    (found without making anything)."""
    for place in (folder, *folder.parents):
        if place.exists():
            return None if place.is_dir() else place
    return None


def write_text(path: Path, text: str) -> None:
    """Write atomically: a reader never sees a half-written file."""
    with atomic_writer(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


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


NOT_TEXT = "not UTF-8 text; expected a text file"


def not_text(path: Path) -> InputError:
    """NOT_TEXT at the first byte of `path` that is not UTF-8: its line, and where in it.
    (A decoder reading in blocks cannot say, so the bytes are read again line by line.)"""
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return InputError(
                    f"{NOT_TEXT} (byte {exc.start + 1} of the line, 0x{raw[exc.start]:02x}, "
                    "is not UTF-8)",
                    path=path,
                    line=number,
                )
    return InputError(NOT_TEXT, path=path)


def check_file(path: Path) -> None:
    """An InputError naming `path` unless it is a file to read."""
    if path.is_dir():
        raise InputError("this is a folder; give the path of a file", path=path)
    if not path.is_file():
        raise InputError("no such file", path=path)


# Encodings other than UTF-8 that editors save text in: name, bytes per unit, byte-order
# mark, byte order. UTF-32 first: its little-endian mark begins with UTF-16's.
_WIDE_ENCODINGS = (
    ("UTF-32", 4, codecs.BOM_UTF32_LE, "little"),
    ("UTF-32", 4, codecs.BOM_UTF32_BE, "big"),
    ("UTF-16", 2, codecs.BOM_UTF16_LE, "little"),
    ("UTF-16", 2, codecs.BOM_UTF16_BE, "big"),
)
_SNIFF_BYTES = 4096


def check_text_file(path: Path) -> None:
    """An InputError naming `path` unless it is a file to read as UTF-8 text: text in
    UTF-16 or UTF-32, with a byte-order mark or without one, is named as such (without
    a mark its ASCII characters would read as UTF-8 with a NUL after each, and messages
    would print them)."""
    check_file(path)
    with path.open("rb") as f:
        start = f.read(_SNIFF_BYTES)
    encoding = _wide_text(start)
    if encoding is not None:
        raise InputError(
            f"this is {encoding} text; eigenjury reads UTF-8: save it as UTF-8 (in most "
            "editors: Save As, encoding UTF-8)",
            path=path,
        )


def _wide_text(start: bytes) -> str | None:
    """ "UTF-16" or "UTF-32" where the file's first bytes `start` read as such text, else
    None. The files read here are CSV, JSON, YAML and TOML, mostly ASCII punctuation and
    names: so with a byte-order mark, half the characters must be ASCII; without one,
    three in four (a NUL beside most characters is no accident then)."""
    for name, width, mark, order in _WIDE_ENCODINGS:
        marked = start.startswith(mark)
        if not marked and b"\x00" not in start:
            continue
        body = start[len(mark) :] if marked else start
        units = [
            int.from_bytes(body[i : i + width], order)  # type: ignore[arg-type]
            for i in range(0, len(body) - len(body) % width, width)
        ]
        ascii_units = sum(0 < unit < 128 for unit in units)
        if units and ascii_units >= (0.5 if marked else 0.75) * len(units):
            return name
    return None


def read_text(path: Path) -> str:
    """A user's text file, or an InputError naming it (missing, or not UTF-8 text)."""
    check_text_file(path)
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise not_text(path) from None


def lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every non-blank line of a user's text file."""
    check_text_file(path)
    try:
        with path.open(encoding="utf-8-sig") as f:
            for number, text in enumerate(f, start=1):
                if text.strip():
                    yield number, text
    except UnicodeDecodeError:
        raise not_text(path) from None


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
    check_text_file(path)
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = csv_header(reader, path, what)
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
            raise not_text(path) from None


def csv_header(reader: Any, path: Path, what: str) -> list[str]:
    """The column names (stripped) on the first line of a CSV file that `reader` reads;
    an empty file or an unreadable first line is an InputError saying what the file
    needs (`what`), and so is a name given to two columns (which of them is meant is
    not clear; columns without a name, as spreadsheets leave at the end, may repeat)."""
    try:
        header = [h.strip() for h in next(reader)]
    except UnicodeDecodeError:
        raise not_text(path) from None
    except StopIteration:
        raise InputError(f"the file is empty; {what}", path=path) from None
    except csv.Error as exc:
        raise InputError(f"not readable as CSV ({exc})", path=path, line=1) from None
    for i, name in enumerate(header):
        if name and name in header[:i]:
            first = header.index(name) + 1
            raise InputError(
                f"two columns are named {name!r} (columns {first} and {i + 1}); which one is "
                "meant is not clear: rename or remove one",
                path=path,
                line=1,
                column=name,
            )
    return header


TOO_DEEP = "nested too deeply to read (more than a few hundred levels of [ or {)"
TOO_LONG_NUMBER = (
    f"holds a whole number of more than {sys.get_int_max_str_digits()} digits, which is "
    "not read; no value in these files needs one"
)


class _DuplicateKeyError(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _distinct_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's keys and values, refusing a key given twice (json keeps the last)."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKeyError(key)
            seen.add(key)
    return data


def load_json(text: str, path: Path, line: int | None = None) -> Any:
    """JSON text (a file, or one line of one) as data, or an InputError naming the place.
    An object that gives one key twice is refused: which value is meant is not clear."""
    try:
        return json.loads(text, object_pairs_hook=_distinct_keys)
    except _DuplicateKeyError as exc:
        raise InputError(
            f"the key {exc.key!r} appears twice in one object; which value is meant is not "
            "clear: keep one",
            path=path,
            line=line,
        ) from None
    except json.JSONDecodeError as exc:
        at = f"character {exc.colno}" if line is not None else f"line {exc.lineno}"
        raise InputError(f"not valid JSON ({exc.msg} at {at})", path=path, line=line) from None
    except RecursionError:
        raise InputError(TOO_DEEP, path=path, line=line) from None
    except ValueError:  # a whole number of thousands of digits (Python will not read it)
        raise InputError(TOO_LONG_NUMBER, path=path, line=line) from None


def text_value(value: Any, *, numbers: bool = True) -> str | None:
    """A JSON (or YAML) value as stripped text: a string, or a number written bare where
    `numbers`; None for a list, an object, true/false or null, which str() would turn
    into text nobody wrote."""
    if isinstance(value, str):
        return value.strip()
    if numbers and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return None


def json_kind(value: Any) -> str:
    """What a JSON (or YAML) value is, in a user's words: 'a list', 'an object', ..."""
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if value is None:
        return "null"
    return "a number" if isinstance(value, int | float) else "text"


def json_object(text: str, path: Path, line: int, *, needs: str = "") -> dict[str, Any]:
    """One JSONL line as an object, or an InputError naming the file and line."""
    record = load_json(text, path, line)
    if not isinstance(record, dict):
        raise InputError(f"each line must be a JSON object{needs}", path=path, line=line)
    return record
