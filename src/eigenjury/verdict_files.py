"""Read and write verdict files (CSV, JSONL, Parquet) with errors that point at the bad cell.

A verdict file has the columns scenario, judge, first, second, verdict and
optionally criterion. Verdict values are 0 (tie), 1 (first better), 2 (second
better). Every problem is reported with the file, the line (or Parquet row) and the
column, and what to do about it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eigenjury.errors import InputError
from eigenjury.files import json_kind, pyarrow, read_csv, read_json_lines, text_value
from eigenjury.stats.verdicts import VerdictTable

REQUIRED = ("scenario", "judge", "first", "second", "verdict")
OPTIONAL = ("criterion",)
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_MISSING = {"", "nan", "null", "none", "na", "n/a"}
Location = tuple[str, int]  # ("line" | "row", number)


def file_format(path: Path) -> str:
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(
            f"unknown file type '{path.suffix or '(none)'}'; use .csv, .jsonl or .parquet",
            path=path,
        )
    return fmt


def read_verdicts(path: str | Path, *, criterion: str | None = None) -> VerdictTable:
    """Load and validate a verdict file.

    With a criterion column, each judgment's C criterion rows share weight 1; with
    `criterion`, only that criterion's rows are kept.
    """
    path = Path(path)
    fmt = file_format(path)
    if not path.is_file():
        raise InputError("no such file", path=path)
    rows = {"csv": _csv_rows, "jsonl": _jsonl_rows, "parquet": _parquet_rows}[fmt](path)
    columns: dict[str, list[Any]] = {c: [] for c in (*REQUIRED, *OPTIONAL)}
    has_criterion: bool | None = None
    for where, record in rows:
        if has_criterion is None:
            has_criterion = "criterion" in record
        _check_record(path, where, record, has_criterion)
        for name in REQUIRED[:4]:
            columns[name].append(str(record[name]).strip())
        columns["verdict"].append(_parse_verdict(path, where, record["verdict"]))
        if has_criterion:
            columns["criterion"].append(str(record["criterion"]).strip())
    if not columns["verdict"]:
        raise InputError(
            "the file has no verdicts; expected rows with " + ", ".join(REQUIRED), path=path
        )
    if criterion is not None:
        if not has_criterion:
            raise InputError(
                f"--criterion {criterion!r} was given but the file has no criterion column",
                path=path,
            )
        keep = np.asarray(columns["criterion"]) == criterion
        if not keep.any():
            present = ", ".join(sorted(set(columns["criterion"]))[:10])
            raise InputError(f"no rows have criterion {criterion!r}; present: {present}", path=path)
        columns = {k: list(np.asarray(v, dtype=object)[keep]) for k, v in columns.items() if v}
        has_criterion = False
    return VerdictTable.from_columns(
        columns["scenario"],
        columns["judge"],
        columns["first"],
        columns["second"],
        columns["verdict"],
        criterion=columns["criterion"] if has_criterion else None,
    )


def _columns(
    table: VerdictTable, criterion: Sequence[str] | None
) -> tuple[list[str], dict[str, Any]]:
    """The file's column names, in order, and their values."""
    models = np.asarray(table.models, dtype=object)
    scenarios = np.asarray(table.scenarios, dtype=object)
    columns: dict[str, Any] = {
        "scenario": scenarios[table.scenario],
        "judge": models[table.judge],
        "first": models[table.first],
        "second": models[table.second],
        "verdict": table.verdict.tolist(),
    }
    if criterion is not None:
        columns["criterion"] = list(criterion)
    return [c for c in (*REQUIRED, *OPTIONAL) if c in columns], columns


def verdicts_csv(table: VerdictTable, *, criterion: Sequence[str] | None = None) -> str:
    """A verdict table as the text of a CSV verdict file (see `write_verdicts`)."""
    names, columns = _columns(table, criterion)
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow(names)
    writer.writerows(zip(*(columns[c] for c in names), strict=True))
    return text.getvalue()


def write_verdicts(
    table: VerdictTable, path: str | Path, *, criterion: Sequence[str] | None = None
) -> None:
    """Write a verdict table in the format its suffix names (with a criterion column
    when `criterion` labels the rows, so that `read_verdicts` restores their weights),
    atomically: a reader never sees a half-written file."""
    target = Path(path)
    fmt = file_format(target)
    path = target.with_name(f".{target.name}.tmp{target.suffix}")
    if fmt == "csv":
        path.write_text(verdicts_csv(table, criterion=criterion), encoding="utf-8")
        os.replace(path, target)
        return
    names, columns = _columns(table, criterion)
    if fmt == "jsonl":
        with path.open("w", encoding="utf-8") as f:
            for row in zip(*(columns[c] for c in names), strict=True):
                f.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
    else:
        pa, pq = pyarrow(target)
        pq.write_table(pa.table({c: list(columns[c]) for c in names}), path)
    os.replace(path, target)


def _check_record(path: Path, where: Location, record: Mapping[str, Any], criterion: bool) -> None:
    kind, number = where
    loc: dict[str, Any] = {"path": path, kind: number}
    for name in (*REQUIRED, *(("criterion",) if criterion else ())):
        if name not in record:
            raise InputError(f"missing field '{name}'", **loc)
        if _is_missing(record[name]):
            raise InputError(
                f"missing value ({record[name]!r}); every verdict needs a value here",
                column=name,
                **loc,
            )
    for name in (*REQUIRED[:4], *(("criterion",) if criterion else ())):
        if text_value(record[name]) is None:
            kind = json_kind(record[name])
            raise InputError(f"expected a name (text), got {kind}", column=name, **loc)
    if str(record["first"]).strip() == str(record["second"]).strip():
        raise InputError(
            f"first and second are both '{record['first']}'; a verdict compares two different "
            "evaluees",
            **loc,
        )


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return isinstance(value, str) and value.strip().lower() in _MISSING


def _parse_verdict(path: Path, where: Location, value: Any) -> int:
    parsed: float | None = None
    if isinstance(value, bool):
        parsed = None
    elif isinstance(value, int | float):
        parsed = float(value)
    elif isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            parsed = None
    if parsed not in (0.0, 1.0, 2.0):
        raise InputError(
            f"verdict {value!r} is not 0 (tie), 1 (first better) or 2 (second better)",
            column="verdict",
            path=path,
            line=where[1] if where[0] == "line" else None,
            row=where[1] if where[0] == "row" else None,
        )
    return int(parsed)


_NEEDS = "a verdict file needs scenario, judge, first, second, verdict (criterion optional)"


def _check_header(path: Path, found: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in found]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; found {', '.join(found) or 'none'}; {_NEEDS}",
            path=path,
        )


def _csv_rows(path: Path) -> Iterator[tuple[Location, dict[str, Any]]]:
    for line, row in read_csv(path, REQUIRED, _NEEDS):
        yield ("line", line), row


def _jsonl_rows(path: Path) -> Iterator[tuple[Location, dict[str, Any]]]:
    for number, record in read_json_lines(path, needs=" with fields " + ", ".join(REQUIRED)):
        yield ("line", number), record


def _parquet_rows(path: Path) -> Iterator[tuple[Location, dict[str, Any]]]:
    _, pq = pyarrow(path)
    try:
        data = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several unrelated types for bad files
        raise InputError(f"not a readable Parquet file ({exc})", path=path) from None
    _check_header(path, list(data.column_names))
    names = [c for c in (*REQUIRED, *OPTIONAL) if c in data.column_names]
    values = [data.column(c).to_pylist() for c in names]
    for number, row in enumerate(zip(*values, strict=True), start=1):
        yield ("row", number), dict(zip(names, row, strict=True))
