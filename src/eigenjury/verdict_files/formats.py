"""The file formats a verdict file may have: CSV, JSONL, a JSON array of objects,
Parquet, or a folder of Parquet files (a dataset). Each is opened as its layout and
batches of rows in pyarrow, with a way to say where a row is (the line, or the row),
so that a problem found in a whole column still names its place in the file."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from eigenjury.errors import InputError
from eigenjury.files import (
    check_file,
    check_text_file,
    csv_header,
    json_kind,
    json_object,
    lines,
    load_json,
    read_csv,
    read_json_lines,
    read_text,
)
from eigenjury.verdict_files.conventions import METADATA, NEEDS, Layout, file_layout

FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
READ_FORMATS = {**FORMATS, ".json": "json"}  # a JSON array is read, never written
Locate = Callable[[int], dict[str, Any]]  # a row's index in its batch -> InputError place


def file_format(path: Path) -> str:
    """The format `write_verdicts` writes for this suffix."""
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(
            f"unknown file type '{path.suffix or '(none)'}'; use .csv, .jsonl or .parquet",
            path=path,
        )
    return fmt


@dataclass(frozen=True)
class Source:
    """An opened file: what is read from it, and batches of rows."""

    path: Path
    layout: Layout
    batches: Iterator[tuple[Any, Locate]]  # (pyarrow Table or RecordBatch, where its rows are)
    skip_blank: bool = False  # CSV rows blank in every column read are skipped


def open_source(path: Path, requested: tuple[str, ...] | None, batch_rows: int) -> Source:
    """The file at `path` opened, for the features `requested` (None: those it offers);
    Parquet is read `batch_rows` rows at a time."""
    if path.is_dir():
        return _parquet(path, requested, batch_rows)
    fmt = READ_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(
            f"unknown file type '{path.suffix or '(none)'}'; use .csv, .jsonl, .json or "
            ".parquet, or a folder of Parquet files",
            path=path,
        )
    if fmt == "parquet":
        check_file(path)
        return _parquet(path, requested, batch_rows)
    check_text_file(path)
    return {"csv": _csv, "jsonl": _jsonl, "json": _json}[fmt](path, requested)


def _metadata_fields(value: Any) -> list[str]:
    """The fields of a first row's METADATA object (JSON)."""
    return list(value) if isinstance(value, dict) else []


def _csv(path: Path, requested: tuple[str, ...] | None) -> Source:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with path.open(newline="", encoding="utf-8-sig") as f:
        header = csv_header(csv.reader(f), path, NEEDS)
    layout = file_layout(path, header, (), requested, line=1)
    columns = layout.columns
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns, column_types={c: pa.string() for c in columns}
            ),
        )
    except pa.ArrowException:  # ragged rows, bad UTF-8, ...: the row reader says where
        return _csv_rows(path, layout)
    return Source(path, layout, iter([(table, partial(_csv_line, path))]), True)


def _csv_line(path: Path, index: int) -> dict[str, Any]:
    """Where the row `index` (0-based, as pyarrow counts: empty lines skipped) of a CSV
    file is. Only errors need this, so the file is read again."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        next(reader)
        rows = (reader.line_num for fields in reader if fields)
        return {"path": path, "line": next(line for i, line in enumerate(rows) if i == index)}


def _csv_rows(path: Path, layout: Layout) -> Source:
    """A CSV file pyarrow could not parse, read row by row: the row reader names the
    line of a ragged row or of bytes that are not UTF-8, and reads what it accepts."""
    numbers: list[int] = []
    values: dict[str, list[Any]] = {c: [] for c in layout.columns}
    for line, row in read_csv(path, layout.convention.required, NEEDS):
        numbers.append(line)
        for c in layout.columns:
            values[c].append(row[c])
    return _python_source(path, layout, values, lambda i: {"path": path, "line": numbers[i]})


def _jsonl(path: Path, requested: tuple[str, ...] | None) -> Source:
    import pyarrow as pa
    import pyarrow.json as pajson

    first = next(((n, json_object(text, path, n)) for n, text in lines(path)), None)
    if first is None:
        raise InputError(f"the file has no verdicts; {NEEDS}", path=path)
    number, record = first
    metadata = _metadata_fields(record.get(METADATA))
    layout = file_layout(path, list(record), metadata, requested, line=number)
    columns = layout.columns
    schema = pa.schema([(c, _json_type(c, record[c], layout)) for c in columns])
    try:
        table = pajson.read_json(
            path,
            read_options=pajson.ReadOptions(block_size=1 << 24),
            parse_options=pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
    except pa.ArrowException:  # bad JSON, or a column whose type changes: read by line
        numbers: list[int] = []
        values: dict[str, list[Any]] = {c: [] for c in columns}
        for line, row in read_json_lines(path, needs=f" ({NEEDS})"):
            numbers.append(line)
            for c in columns:
                values[c].append(row.get(c))
        return _python_source(path, layout, values, lambda i: {"path": path, "line": numbers[i]})
    return Source(path, layout, iter([(table, partial(_jsonl_line, path))]))


def _json_type(column: str, value: Any, layout: Layout) -> Any:
    """The pyarrow type for a JSONL column, from its value on the first line."""
    import pyarrow as pa

    if column == METADATA and isinstance(value, dict):
        return pa.array([value]).type
    if column in layout.numeric() or isinstance(value, float):
        return pa.float64()
    if isinstance(value, bool):
        return pa.bool_()
    return pa.int64() if isinstance(value, int) else pa.string()


def _jsonl_line(path: Path, index: int) -> dict[str, Any]:
    """Where the object `index` (0-based; blank lines skipped) of a JSONL file is."""
    return {"path": path, "line": next(n for i, (n, _) in enumerate(lines(path)) if i == index)}


def _json(path: Path, requested: tuple[str, ...] | None) -> Source:
    data = load_json(read_text(path), path)
    if not isinstance(data, list):
        raise InputError(
            f"expected a JSON array of objects, one per verdict or battle, not {json_kind(data)}",
            path=path,
        )
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            raise InputError(
                f"expected an object (one verdict or battle), not {json_kind(item)}",
                path=path,
                row=i + 1,
            )
    if not data:
        raise InputError(f"the file has no verdicts; {NEEDS}", path=path)
    metadata = _metadata_fields(data[0].get(METADATA))
    layout = file_layout(path, list(data[0]), metadata, requested, row=1)
    values = {c: [item.get(c) for item in data] for c in layout.columns}
    return _python_source(path, layout, values, lambda i: {"path": path, "row": i + 1})


def _python_source(
    path: Path, layout: Layout, values: dict[str, list[Any]], locate: Locate
) -> Source:
    """Columns of Python values (JSON or CSV read without pyarrow) as one batch."""
    import pyarrow as pa

    c = layout.convention
    names = (c.scenario, c.judge, c.first, c.second, "criterion")
    table = pa.table({x: _python_column(v, x, x in names, locate) for x, v in values.items()})
    return Source(path, layout, iter([(table, locate)]))


def _python_column(values: list[Any], column: str, name: bool, locate: Locate) -> Any:
    """A pyarrow array of JSON values; where their types are mixed (as JSON allows),
    or a whole number does not fit in 64 bits, numbers become text (read as numbers
    where numbers are wanted) and a list, object or true/false is refused in a name
    column."""
    import pyarrow as pa

    try:
        return pa.array(values)
    except (pa.ArrowException, OverflowError):
        pass
    texts: list[str | None] = []
    for i, value in enumerate(values):
        if value is None or isinstance(value, str):
            texts.append(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            texts.append(str(value))
        elif name:
            raise InputError(
                f"expected a name (text), got {json_kind(value)}", column=column, **locate(i)
            )
        else:
            texts.append(json.dumps(value))
    return pa.array(texts, pa.string())


def _parquet(path: Path, requested: tuple[str, ...] | None, batch_rows: int) -> Source:
    import pyarrow as pa
    import pyarrow.dataset as ds

    what = "Parquet dataset (a folder of Parquet files)" if path.is_dir() else "Parquet file"
    try:
        dataset = ds.dataset(path, format="parquet")
        schema = dataset.schema
    except (pa.ArrowException, OSError) as exc:
        raise InputError(f"not a readable {what} ({exc})", path=path) from None
    kind = schema.field(METADATA).type if METADATA in schema.names else None
    metadata = [f.name for f in kind] if kind is not None and pa.types.is_struct(kind) else []
    layout = file_layout(path, schema.names, metadata, requested)
    columns = layout.columns

    def batches() -> Iterator[tuple[Any, Locate]]:
        for fragment in dataset.get_fragments():
            where = Path(fragment.path)
            done = 0
            try:
                for batch in fragment.to_batches(
                    schema=schema, columns=columns, batch_size=batch_rows
                ):
                    yield batch, partial(_parquet_row, where, done)
                    done += batch.num_rows
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"not a readable Parquet file ({exc})", path=where) from None

    return Source(path, layout, batches())


def _parquet_row(path: Path, before: int, index: int) -> dict[str, Any]:
    return {"path": path, "row": before + index + 1}
