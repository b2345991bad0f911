"""Read and write verdict files, column by column, with errors that point at the bad cell.

Two conventions are read, told apart by their columns (any other column is not read):

- a verdict table: scenario, judge, first, second, verdict (0 tie, 1 first better,
  2 second better), optionally criterion, and features of the two replies (style
  control's covariates; "length" is also agreement's longer reply): numeric columns
  first_<feature> and second_<feature>, or the texts first_text and second_text, which
  give the default features (eigenjury.reply_features); soft verdicts add the judge's
  label probabilities p_first, p_second and p_tie (all three or none), counted as
  fractional verdicts; with them the verdict column is optional;
- battles in the Chatbot Arena convention: model_a, model_b and winner (model_a,
  model_b, tie, or tie (bothbad) and both_bad: every tie kind is a tie), optionally
  judge (default: one judge named 'crowd'), question_id (the scenario; default: each
  battle its own), features as <feature>_a and <feature>_b, as the texts response_a and
  response_b (Kaggle's JSON lists of turns included), or in LMArena's conv_metadata
  (token counts and markdown counts per reply); Kaggle's arena-human-preference files
  give the winner as three 0/1 columns instead (winner_model_a, winner_model_b,
  winner_tie).

A feature's numeric columns win over the metadata, which wins over the texts.

Files are CSV, JSONL, a JSON array of objects, Parquet, or a folder of Parquet files
(a dataset). Reading is columnar (pyarrow): names are dictionary-encoded and every
check runs on whole columns, so a million rows cost no million Python steps. A problem
is reported with the file, the line (or Parquet row), the column and what to do.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal, get_args, overload

import numpy as np
from numpy.typing import NDArray

from eigenjury.errors import InputError
from eigenjury.files import (
    atomic_writer,
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
from eigenjury.names import MISSING_WORDS
from eigenjury.reply_features import DEFAULT_FEATURES, joined_turns, text_features
from eigenjury.stats.verdicts import (
    FIRST,
    PROBABILITY_TOLERANCE,
    SECOND,
    TIE,
    ReplyFeatures,
    VerdictTable,
    certain,
    label_probabilities,
    probability_problems,
    tally,
)

REQUIRED = ("scenario", "judge", "first", "second", "verdict")
OPTIONAL = ("criterion",)
# Soft verdicts: the judge's probability of each label, in the order written.
PROBABILITY_COLUMNS = ("p_first", "p_second", "p_tie")
_PROBABILITY_LABELS = (FIRST, SECOND, TIE)  # each column's label
# Label probabilities are written to this many significant digits: a rounding error
# far below the tolerance of the sum, and far below any sampling error of a fit.
PROBABILITY_DIGITS = 6
BATTLE_REQUIRED = ("model_a", "model_b", "winner")
# The Kaggle "arena-human-preference" form: the winner as three 0/1 columns.
ONE_HOT = ("winner_model_a", "winner_model_b", "winner_tie")
WINNERS = {
    "model_a": FIRST,
    "model_b": SECOND,
    "tie": TIE,
    "tie (bothbad)": TIE,
    "both_bad": TIE,  # LMArena's arena-human-preference-140k
}
CROWD = "crowd"  # the one judge of battles without a judge column
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
READ_FORMATS = {**FORMATS, ".json": "json"}  # a JSON array is read, never written
Collapse = Literal["rows", "scenarios", "cells"]
COLLAPSES: tuple[str, ...] = get_args(Collapse)
# Which reply features to read: "available" (the default features the file offers),
# None (none), or these names (each required).
Features = Literal["available"] | Sequence[str] | None
# LMArena's per-battle struct column, and its fields behind each default feature (a
# struct of counts is summed); "{}" is the side, a or b.
METADATA = "conv_metadata"
METADATA_FIELDS = {
    "length": "sum_assistant_{}_tokens",
    "headers": "header_count_{}",
    "lists": "list_count_{}",
    "bold": "bold_count_{}",
}
# Rows per Parquet batch (pyarrow's default row group): memory while streaming a
# dataset is a few times this.
BATCH_ROWS = 1 << 20
_SHOWN_CHARS = 60  # of a cell's value in a message
_NEEDS = (
    "a verdict file needs scenario, judge, first, second, verdict (criterion optional; "
    "p_first, p_second, p_tie for soft verdicts, which make verdict optional); "
    "a battle file (the Chatbot Arena convention) needs model_a, model_b, winner "
    "(judge and question_id optional), or winner_model_a, winner_model_b, winner_tie "
    "(0/1) for winner"
)

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
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


def read_verdicts(
    path: str | Path,
    *,
    criterion: str | None = None,
    collapse: Collapse = "rows",
    features: Features = "available",
) -> VerdictTable:
    """Load and validate a verdict or battle file (see the module docstring).

    With a criterion column, the C criterion rows of one judgment (scenario, judge,
    first, second) share weight 1; with `criterion`, only that criterion's rows are
    kept. `collapse` says what the caller needs, so that a huge Parquet dataset is read
    in memory proportional to what is kept: "rows", one table row per file row;
    "scenarios", rows equal in scenario, judge, first, second and verdict merged into
    one whose weight counts them (the same VerdictCounts and ScenarioCounts); "cells",
    also every row in one scenario (code 0; `scenarios` still lists the names), for
    callers that need the total counts only. With features read, rows are kept as they
    are. `features`: "available", each default feature where the file offers it (none
    offered: no features); None, no features (a fit without style control); or these
    names, each required (an InputError names what the file lacks). A missing or
    non-numeric feature value is an InputError. Soft verdicts (p_first, p_second, p_tie)
    are the table's `probs` in "rows" (a row without them: its verdict's one-hot);
    where rows are merged, each spreads its weight over the labels by its
    probabilities instead (fractional weights, no `probs`: the same counts). A JSON
    array is read with the standard library; Parquet is the fast path for huge files.
    """
    if collapse not in COLLAPSES:
        raise ValueError(f"collapse must be one of {', '.join(COLLAPSES)}, not {collapse!r}")
    source = _open(Path(path), _requested(features))
    reader = _Reader(source, criterion, collapse)
    for batch, locate in source.batches:
        reader.add(batch, locate)
    return reader.table()


class BattleNames(Sequence[str]):
    """The scenario names of battles without a question_id, each battle its own
    scenario: 'battle 1', 'battle 2', ..., made when asked for, so that a million
    battles cost no million strings."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> list[str]: ...
    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [f"battle {i + 1}" for i in range(*index.indices(self.n))]
        number = index + self.n if index < 0 else index
        if not 0 <= number < self.n:
            raise IndexError(index)
        return f"battle {number + 1}"


@dataclass(frozen=True)
class _Convention:
    """Which file column plays which part, and what the outcome column says."""

    noun: str  # what one row is: "verdict" or "battle"
    required: tuple[str, ...]
    scenario: str
    judge: str
    first: str
    second: str
    outcome: str
    pair: tuple[str, str]  # the two replies' columns of a feature ("{}": its name)
    not_features: frozenset[str]  # names whose column pair is something else
    texts: tuple[str, str]  # the replies themselves
    outcome_value: Callable[[Any], int]  # a value's verdict, or -1
    outcomes: str  # the values allowed, in words
    parts: tuple[str, ...] = ()  # columns whose values, joined by ",", are the outcome
    arena: bool = False  # texts may be JSON lists of turns; features may be in METADATA
    probabilities: tuple[str, ...] = ()  # soft verdicts: PROBABILITY_COLUMNS

    def columns(self, found: Sequence[str], features: dict[str, str]) -> list[str]:
        """The columns to read from a file that has `found`, for these features."""
        outcome = self.parts or (self.outcome,)
        roles = (
            self.scenario,
            self.judge,
            self.first,
            self.second,
            *outcome,
            "criterion",
            *self.probabilities,
        )
        columns = [c for c in roles if c in found]
        for name, source in features.items():
            wanted = {"columns": self.feature_columns(name), "metadata": (METADATA,)}
            columns += [c for c in wanted.get(source, self.texts) if c not in columns]
        return columns

    def feature_columns(self, name: str) -> tuple[str, str]:
        first, second = self.pair
        return first.format(name), second.format(name)

    def offered(self, found: Sequence[str], metadata: Collection[str]) -> dict[str, str]:
        """Every feature the file offers and where from: "columns", "metadata" or
        "texts" (the default features only), in that order of preference."""
        offered: dict[str, str] = {}
        present = set(found)
        first, second = self.pair
        head, tail = first.split("{}")
        for column in found:
            name = column[len(head) : len(column) - len(tail)]
            matches = column.startswith(head) and column.endswith(tail) and name
            if matches and name not in self.not_features and second.format(name) in present:
                offered[name] = "columns"
        fields = set(metadata) if self.arena else set()
        for name, field in METADATA_FIELDS.items():
            if name not in offered and {field.format("a"), field.format("b")} <= fields:
                offered[name] = "metadata"
        if all(c in present for c in self.texts):
            offered.update({n: "texts" for n in DEFAULT_FEATURES if n not in offered})
        return offered


def _verdict_value(value: Any) -> int:
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = value  # compared as it is: float() of a huge int overflows
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    return int(number) if number in (0.0, 1.0, 2.0) else -1


def _winner_value(value: Any) -> int:
    return WINNERS.get(value.strip().lower(), -1) if isinstance(value, str) else -1


def _one_hot_value(value: Any) -> int:
    """'1,0,0' (winner_model_a, winner_model_b, winner_tie) is 1; '0,0,1' a tie."""
    try:
        flags = [float(x) for x in value.split(",")]
    except (AttributeError, ValueError):
        return -1
    return (FIRST, SECOND, TIE)[flags.index(1.0)] if sorted(flags) == [0.0, 0.0, 1.0] else -1


_VERDICT_TABLE = _Convention(
    "verdict",
    REQUIRED,
    "scenario",
    "judge",
    "first",
    "second",
    "verdict",
    ("first_{}", "second_{}"),
    frozenset({"text"}),
    ("first_text", "second_text"),
    _verdict_value,
    "0 (tie), 1 (first better) or 2 (second better)",
)
_BATTLES = _Convention(
    "battle",
    BATTLE_REQUIRED,
    "question_id",
    "judge",
    "model_a",
    "model_b",
    "winner",
    ("{}_a", "{}_b"),
    frozenset({"model", "response", "winner_model", "conversation"}),
    ("response_a", "response_b"),
    _winner_value,
    "model_a, model_b, tie, tie (bothbad) or both_bad",
    arena=True,
)
_SOFT_VERDICTS = replace(
    _VERDICT_TABLE,
    required=(*REQUIRED[:4], *PROBABILITY_COLUMNS),
    probabilities=PROBABILITY_COLUMNS,
)
_ONE_HOT_BATTLES = replace(
    _BATTLES,
    required=(*BATTLE_REQUIRED[:2], *ONE_HOT),
    outcome=", ".join(ONE_HOT),
    outcome_value=_one_hot_value,
    outcomes="a single 1 among the three (0 elsewhere)",
    parts=ONE_HOT,
)


def _convention(path: Path, found: Sequence[str], **where: Any) -> _Convention:
    """The convention whose required columns the file has, or an InputError naming
    what the nearer one misses (a verdict table with some of the probability columns:
    the others)."""
    given = [c for c in PROBABILITY_COLUMNS if c in found]
    lacking = [c for c in PROBABILITY_COLUMNS if c not in found]
    if given and lacking and all(c in found for c in REQUIRED[:4]):
        raise InputError(
            f"missing column(s) {', '.join(lacking)}; found {', '.join(given)}: soft verdicts "
            f"need all three of {', '.join(PROBABILITY_COLUMNS)} (0 for a label the judge "
            "cannot give, such as p_tie without ties) or none",
            path=path,
            **where,
        )
    conventions: tuple[_Convention, ...] = (_VERDICT_TABLE, _BATTLES, _ONE_HOT_BATTLES)
    if given:
        conventions = (_SOFT_VERDICTS, *conventions)
    for convention in conventions:
        if all(c in found for c in convention.required):
            return convention
    nearest = max(conventions, key=lambda c: sum(x in found for x in c.required))
    missing = [c for c in nearest.required if c not in found]
    raise InputError(
        f"missing column(s) {', '.join(missing)}; found {', '.join(found) or 'none'}; {_NEEDS}",
        path=path,
        **where,
    )


def _requested(features: Features) -> tuple[str, ...] | None:
    """The feature names asked for; None: the default features the file offers."""
    if isinstance(features, str):
        if features != "available":
            raise ValueError(f"features must be 'available', None or names, not {features!r}")
        return None
    names = tuple(features or ())
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"feature(s) named twice: {', '.join(twice)}")
    return names


@dataclass(frozen=True)
class _Layout:
    """What is read from a file: its convention, each feature's source ("columns",
    "metadata" or "texts"), the columns, and whether the features were named (then a
    reply without a value is an error; else its features are unknown, NaN, and only a
    fit that controls for them refuses it)."""

    convention: _Convention
    features: dict[str, str]
    columns: list[str]
    named: bool = False

    def numeric(self) -> set[str]:
        """The feature and probability columns read, whose values are numbers."""
        c = self.convention
        pairs = [c.feature_columns(n) for n, s in self.features.items() if s == "columns"]
        return {x for pair in pairs for x in pair} | set(c.probabilities)


def _layout(
    path: Path,
    found: Sequence[str],
    metadata: Collection[str],
    requested: tuple[str, ...] | None,
    **where: Any,
) -> _Layout:
    """The layout of a file with the columns `found` (and these fields in METADATA), or
    an InputError naming a requested feature it does not offer and what that needs."""
    convention = _convention(path, found, **where)
    offered = convention.offered(found, metadata)
    if requested is None:
        features = {n: offered[n] for n in DEFAULT_FEATURES if n in offered}
    else:
        lacking = [n for n in requested if n not in offered]
        if lacking:
            needs = "; ".join(_feature_needs(convention, n) for n in lacking)
            raise InputError(
                f"{needs}; the file offers {', '.join(offered) or 'no features'}",
                path=path,
                **where,
            )
        features = {n: offered[n] for n in requested}
    return _Layout(convention, features, convention.columns(found, features), requested is not None)


def _feature_needs(convention: _Convention, name: str) -> str:
    """Why the file offers no feature `name`, and what would."""
    first, second = convention.feature_columns(name)
    if name in convention.not_features:
        return f"no style feature '{name}': {first} and {second} are not features"
    sources = [f"columns {first} and {second}"]
    if convention.arena and name in METADATA_FIELDS:
        field = METADATA_FIELDS[name]
        sources.append(f"{METADATA} with {field.format('a')} and {field.format('b')}")
    if name in DEFAULT_FEATURES:
        sources.append(f"the texts {convention.texts[0]} and {convention.texts[1]}")
    return f"no style feature '{name}': it needs {' or '.join(sources)}"


@dataclass(frozen=True)
class _Source:
    """An opened file: what is read from it, and batches of rows."""

    path: Path
    layout: _Layout
    batches: Iterator[tuple[Any, Locate]]  # (pyarrow Table or RecordBatch, where its rows are)
    skip_blank: bool = False  # CSV rows blank in every column read are skipped


def _open(path: Path, requested: tuple[str, ...] | None) -> _Source:
    if path.is_dir():
        return _parquet(path, requested)
    fmt = READ_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise InputError(
            f"unknown file type '{path.suffix or '(none)'}'; use .csv, .jsonl, .json or "
            ".parquet, or a folder of Parquet files",
            path=path,
        )
    (check_file if fmt == "parquet" else check_text_file)(path)
    return {"csv": _csv, "jsonl": _jsonl, "json": _json, "parquet": _parquet}[fmt](path, requested)


def _metadata_fields(value: Any) -> list[str]:
    """The fields of a first row's METADATA object (JSON)."""
    return list(value) if isinstance(value, dict) else []


def _csv(path: Path, requested: tuple[str, ...] | None) -> _Source:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with path.open(newline="", encoding="utf-8-sig") as f:
        header = csv_header(csv.reader(f), path, _NEEDS)
    layout = _layout(path, header, (), requested, line=1)
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
    return _Source(path, layout, iter([(table, partial(_csv_line, path))]), True)


def _csv_line(path: Path, index: int) -> dict[str, Any]:
    """Where the row `index` (0-based, as pyarrow counts: empty lines skipped) of a CSV
    file is. Only errors need this, so the file is read again."""
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        next(reader)
        rows = (reader.line_num for fields in reader if fields)
        return {"path": path, "line": next(line for i, line in enumerate(rows) if i == index)}


def _csv_rows(path: Path, layout: _Layout) -> _Source:
    """A CSV file pyarrow could not parse, read row by row: the row reader names the
    line of a ragged row or of bytes that are not UTF-8, and reads what it accepts."""
    numbers: list[int] = []
    values: dict[str, list[Any]] = {c: [] for c in layout.columns}
    for line, row in read_csv(path, layout.convention.required, _NEEDS):
        numbers.append(line)
        for c in layout.columns:
            values[c].append(row[c])
    return _python_source(path, layout, values, lambda i: {"path": path, "line": numbers[i]})


def _jsonl(path: Path, requested: tuple[str, ...] | None) -> _Source:
    import pyarrow as pa
    import pyarrow.json as pajson

    first = next(((n, json_object(text, path, n)) for n, text in lines(path)), None)
    if first is None:
        raise InputError(f"the file has no verdicts; {_NEEDS}", path=path)
    number, record = first
    metadata = _metadata_fields(record.get(METADATA))
    layout = _layout(path, list(record), metadata, requested, line=number)
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
        for line, row in read_json_lines(path, needs=f" ({_NEEDS})"):
            numbers.append(line)
            for c in columns:
                values[c].append(row.get(c))
        return _python_source(path, layout, values, lambda i: {"path": path, "line": numbers[i]})
    return _Source(path, layout, iter([(table, partial(_jsonl_line, path))]))


def _json_type(column: str, value: Any, layout: _Layout) -> Any:
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


def _json(path: Path, requested: tuple[str, ...] | None) -> _Source:
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
        raise InputError(f"the file has no verdicts; {_NEEDS}", path=path)
    metadata = _metadata_fields(data[0].get(METADATA))
    layout = _layout(path, list(data[0]), metadata, requested, row=1)
    values = {c: [item.get(c) for item in data] for c in layout.columns}
    return _python_source(path, layout, values, lambda i: {"path": path, "row": i + 1})


def _python_source(
    path: Path, layout: _Layout, values: dict[str, list[Any]], locate: Locate
) -> _Source:
    """Columns of Python values (JSON or CSV read without pyarrow) as one batch."""
    import pyarrow as pa

    c = layout.convention
    names = (c.scenario, c.judge, c.first, c.second, "criterion")
    table = pa.table({x: _python_column(v, x, x in names, locate) for x, v in values.items()})
    return _Source(path, layout, iter([(table, locate)]))


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


def _parquet(path: Path, requested: tuple[str, ...] | None) -> _Source:
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
    layout = _layout(path, schema.names, metadata, requested)
    columns = layout.columns

    def batches() -> Iterator[tuple[Any, Locate]]:
        for fragment in dataset.get_fragments():
            where = Path(fragment.path)
            done = 0
            try:
                for batch in fragment.to_batches(
                    schema=schema, columns=columns, batch_size=BATCH_ROWS
                ):
                    yield batch, partial(_parquet_row, where, done)
                    done += batch.num_rows
            except (pa.ArrowException, OSError) as exc:
                raise InputError(f"not a readable Parquet file ({exc})", path=where) from None

    return _Source(path, layout, batches())


def _parquet_row(path: Path, before: int, index: int) -> dict[str, Any]:
    return {"path": path, "row": before + index + 1}


@dataclass(frozen=True)
class _Coded:
    """One column of a batch, dictionary-encoded: row i holds values[codes[i]]."""

    codes: NDArray[np.integer[Any]]
    values: Any  # pyarrow Array of the distinct values (null included)
    texts: Any | None  # the values as trimmed text (None: not text, nor numbers)
    missing: BoolArray  # per value: null, NaN or text such as "", "NA", "null"
    blank: BoolArray  # per value: empty text

    def value(self, row: int) -> Any:
        return self.values[int(self.codes[row])].as_py()


def _code(column: Any) -> _Coded | None:
    """A column dictionary-encoded, or None where its type cannot be (lists, objects)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = _code_free(column)
    if pa.types.is_nested(array.type):
        return None
    encoded = pc.dictionary_encode(array, null_encoding="encode")
    values = encoded.dictionary
    texts = _texts(values)
    missing = pc.is_null(values)
    blank = np.zeros(len(values), dtype=bool)
    if texts is not None:  # NaN is written "nan"
        missing = pc.or_(missing, pc.is_in(pc.utf8_lower(texts), value_set=pa.array(MISSING_WORDS)))
        blank = _flags(pc.equal(texts, ""))
    codes = encoded.indices.to_numpy(zero_copy_only=False)  # int32: no copy
    return _Coded(codes, values, texts, _flags(missing), blank)


def _flags(mask: Any) -> BoolArray:
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(mask, True).to_numpy(zero_copy_only=False), dtype=bool)


def _is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _texts(values: Any) -> Any | None:
    """Values as trimmed text (numbers written out, as JSON names may be), or None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    numbers = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    if not (_is_text(kind) or pa.types.is_null(kind) or numbers):
        return None
    return pc.utf8_trim_whitespace(pc.cast(values, pa.string()))


def _kind(column: Any) -> str:
    """What a column's values are, in a user's words."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_boolean(kind):
        return "true/false"
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return "an object"
    return "a list" if pa.types.is_nested(kind) else f"values of type {kind}"


class _Names:
    """Names coded in order of first appearance, one namespace across batches. The
    names are kept as Arrow arrays and a batch's names are looked up among them in
    Arrow, unless the namespace is much larger than the batch's names (a dataset's
    millions of scenarios met a few thousand per batch): then in a Python dict."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []  # pyarrow string arrays, the names in code order
        self.size = 0
        self._index: dict[str, int] | None = None

    def codes(self, texts: Any) -> IntArray:
        """The code of each of `texts` (a pyarrow string array; null: -1), new names added."""
        import pyarrow as pa
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(texts)
        distinct = encoded.dictionary
        if not self.size:
            known = np.arange(len(distinct), dtype=np.int64)
            self.chunks, self.size = [distinct], len(distinct)
        elif 8 * len(distinct) >= self.size:
            found = pc.index_in(distinct, value_set=self.names())
            known = pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int64)
            new = known < 0
            if new.any():
                known[new] = self.size + np.arange(int(new.sum()))
                added = distinct.filter(pa.array(new))
                if self._index is not None:
                    self._index.update(zip(added.to_pylist(), known[new].tolist(), strict=True))
                self.chunks.append(added)
                self.size += len(added)
        else:
            index = self.index()
            known = np.fromiter(
                (index.setdefault(n, len(index)) for n in distinct.to_pylist()),
                np.int64,
                len(distinct),
            )
            new = known >= self.size
            if new.any():
                self.chunks.append(distinct.filter(pa.array(new)))
                self.size = len(index)
        rows = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
        return np.where(rows >= 0, np.append(known, -1)[rows], -1)

    def index(self) -> dict[str, int]:
        """Name -> code, built on first need and kept up to date."""
        if self._index is None:
            names = self.names().to_pylist()
            self._index = dict(zip(names, range(len(names)), strict=True))
        return self._index

    def names(self) -> Any:
        """All names, in code order, as one pyarrow array."""
        import pyarrow as pa

        if len(self.chunks) != 1:
            self.chunks = [
                pa.concat_arrays(self.chunks) if self.chunks else pa.array([], pa.string())
            ]
        return self.chunks[0]

    def add(self, name: str) -> int:
        import pyarrow as pa

        return int(self.codes(pa.array([name], pa.string()))[0])

    def code(self, name: str) -> int:
        """The code of `name`, or -2 (no row's code) where it is not one of the names."""
        import pyarrow.compute as pc

        code = pc.index(self.names(), name).as_py()
        return -2 if code < 0 else int(code)

    def ordered(self, used: BoolArray) -> tuple[tuple[str, ...], IntArray]:
        """The used names in sorted order, and each old code's new code."""
        import pyarrow as pa
        import pyarrow.compute as pc

        codes = np.flatnonzero(used)
        kept = self.names().take(pa.array(codes))
        order = pc.array_sort_indices(kept).to_numpy(zero_copy_only=False)
        new = np.full(self.size, -1, dtype=np.int64)
        new[codes[order]] = np.arange(len(codes))
        return tuple(kept.take(pa.array(order)).to_pylist()), new


_ROLES = ("judge", "first", "second")
# A problem found in a batch: (row, check order, message, column); the first row wins.
_Problem = tuple[int, int, str, str | None]


class _Reader:
    """Validates batches column by column and keeps their rows as codes."""

    def __init__(self, source: _Source, criterion: str | None, collapse: Collapse) -> None:
        self.path = source.path
        self.convention = c = source.layout.convention
        self.columns = source.layout.columns
        self.features = source.layout.features
        self.features_named = source.layout.named
        self.skip_blank = source.skip_blank
        self.criterion = criterion
        has_criterion = "criterion" in self.columns
        if criterion is not None and not has_criterion:
            raise InputError(
                f"--criterion {criterion!r} was given but the file has no criterion column",
                path=self.path,
            )
        self.weigh_judgments = has_criterion and criterion is None
        self.numbered = c.scenario not in self.columns  # battles without question_id
        self.soft = bool(c.probabilities)
        self.labelled = bool(c.parts) or c.outcome in self.columns  # a verdict column
        mode: str = collapse
        if mode == "cells" and self.weigh_judgments:
            mode = "scenarios"  # the weights need the judgments
        if self.features or (self.numbered and mode == "scenarios"):
            mode = "rows"  # nothing to merge
        self.cells = mode == "cells"
        self.rows = _Rows(merge=mode != "rows")
        self.models, self.scenarios, self.criteria = _Names(), _Names(), _Names()
        self.seen_scenarios = np.zeros(0, dtype=bool)  # cells: the scenarios kept
        self.read = 0  # rows that passed the checks
        self.kept = 0  # of which kept (criterion)

    def add(self, batch: Any, locate: Locate) -> None:
        """Check a batch (the first bad row is an InputError) and keep its rows."""
        if not batch.num_rows:
            return
        c = self.convention
        blank, codes, verdict, probs, replies = self._checked(batch, locate)
        keep = ~blank
        self.read += int(keep.sum())
        if self.criterion is not None:
            keep &= codes["criterion"] == self.criteria.code(self.criterion)
        every = bool(keep.all())

        def kept(values: NDArray[Any]) -> NDArray[Any]:
            return values if every else values[keep]

        part = {
            r: kept(codes[x]) for r, x in zip(_ROLES, (c.judge, c.first, c.second), strict=True)
        }
        part["verdict"] = kept(verdict)
        if replies is not None:
            part["first_features"], part["second_features"] = map(kept, replies)
        m = len(part["verdict"])
        if self.numbered:
            part["scenario"] = np.arange(self.kept, self.kept + m)
        else:
            part["scenario"] = kept(codes[c.scenario])
        if self.cells:
            if not self.numbered:
                used = np.bincount(part["scenario"], minlength=self.scenarios.size) > 0
                used[: len(self.seen_scenarios)] |= self.seen_scenarios
                self.seen_scenarios = used
            part["scenario"] = np.zeros(m, dtype=np.int64)
        part["count"] = np.ones(m)
        self.kept += m
        if probs is not None:
            part = self._soft(part, kept(probs))
        self.rows.add(part)

    def _soft(self, part: dict[str, NDArray[Any]], probs: FloatArray) -> dict[str, NDArray[Any]]:
        """Rows with their label probabilities: kept beside them, or, where rows are
        merged, spread into one row per label weighted by its probability, so that only
        equal labels merge and the counts are the same."""
        if not self.rows.merge:
            return {**part, "probs": probs}
        row, label = np.nonzero(probs)
        spread = {k: v[row] for k, v in part.items()}
        spread["verdict"], spread["count"] = label.astype(np.int64), probs[row, label]
        return spread

    def _checked(
        self, batch: Any, locate: Locate
    ) -> tuple[
        BoolArray,
        dict[str, IntArray],
        IntArray,
        FloatArray | None,
        tuple[FloatArray, FloatArray] | None,
    ]:
        """The batch's blank rows, each name column's codes, the verdicts, the label
        probabilities (soft verdicts) and the replies' features; every check runs on
        whole columns and the first bad row (in the file's order) is reported."""
        n = batch.num_rows
        c = self.convention
        names = [x for x in (c.scenario, c.judge, c.first, c.second) if x in self.columns]
        labels = [*names, *(["criterion"] if "criterion" in self.columns else [])]
        outcome = [c.outcome] if self.labelled else []
        columns = (*names, *outcome, *labels[len(names) :])
        coded = {x: _code(self._column(batch, x)) for x in columns}
        blank = np.zeros(n, dtype=bool)
        if self.skip_blank and all(x and x.blank.any() for x in coded.values()):
            blank = np.logical_and.reduce([x.blank[x.codes] for x in coded.values() if x])
        problems: list[_Problem] = []
        probs, soft = self._probabilities(batch, blank, problems) if self.soft else (None, blank)
        for rank, (column, col) in enumerate(coded.items()):
            skipped = soft if column == c.outcome else blank  # a soft verdict needs no label
            problems += self._missing(batch, column, col, skipped, rank)
        codes = {x: self._names(x, coded[x], n, problems) for x in labels}
        if c.judge not in self.columns:
            codes[c.judge] = self._crowd(codes[c.first], codes[c.second], blank, problems)
        first, second = codes[c.first], codes[c.second]
        same = _first_row((first == second) & (first >= 0) & ~blank)
        if same is not None:
            name = self.models.names()[int(first[same])].as_py()
            message = f"{c.first} and {c.second} are both '{name}'; "
            problems.append(
                (same, 20, message + f"a {c.noun} compares two different evaluees", None)
            )
        verdict = self._outcomes(coded.get(c.outcome), n, blank, problems)
        replies = self._replies(batch, blank, problems) if self.features else None
        if problems:
            row, _, problem, where = min(problems, key=lambda p: p[:2])
            raise InputError(problem, column=where, **locate(row))
        if probs is not None:
            col = coded.get(c.outcome)
            unlabelled = soft if col is None else soft & col.missing[col.codes]
            verdict[unlabelled] = np.argmax(probs[unlabelled], axis=1)  # ties: tie, first
            hard = ~soft
            probs[hard] = certain(verdict[hard])
        return blank, codes, verdict, probs, replies

    def _probabilities(
        self, batch: Any, blank: BoolArray, problems: list[_Problem]
    ) -> tuple[FloatArray, BoolArray]:
        """Each row's label probabilities (tie, first, second), renormalised to sum to 1,
        and where any is given (or the row is blank); a row without any is a hard
        verdict. A row with some but not all three, or values that are no distribution,
        is a problem."""
        n = batch.num_rows
        probs = np.empty((n, 3))
        missing = np.empty((n, 3), dtype=bool)
        for column, label in zip(PROBABILITY_COLUMNS, _PROBABILITY_LABELS, strict=True):
            array = _code_free(batch.column(column))
            probs[:, label], missing[:, label], wrong = _floats(array)
            row = _first_row(wrong & ~blank)
            if row is not None:
                message = f"{_shown(array[row].as_py())} in {column} is not a number"
                problems.append((row, 45, message, column))
        given = ~missing.any(axis=1)
        incomplete = ~blank & ~given
        if self.labelled:  # a row without any is a hard verdict
            incomplete &= ~missing.all(axis=1)
        row = _first_row(incomplete)
        if row is not None:
            absent = [
                x
                for x, label in zip(PROBABILITY_COLUMNS, _PROBABILITY_LABELS, strict=True)
                if missing[row, label]
            ]
            message = (
                f"missing value(s) in {', '.join(absent)}; a soft verdict needs all three of "
                f"{', '.join(PROBABILITY_COLUMNS)}"
            )
            message += (
                ", a hard verdict none" if self.labelled else " (the file has no verdict column)"
            )
            problems.append((row, 46, message, ", ".join(absent)))
        usable = given & ~blank
        bad = usable & probability_problems(probs)
        row = _first_row(bad)
        if row is not None:
            values = [float(probs[row, label]) for label in _PROBABILITY_LABELS]
            outside = [
                x for x, v in zip(PROBABILITY_COLUMNS, values, strict=True) if not 0.0 <= v <= 1.0
            ]
            shown = ", ".join(
                f"{x} {v!r}" for x, v in zip(PROBABILITY_COLUMNS, values, strict=True)
            )
            message = (
                f"label probabilities {shown} (sum {sum(values):.6g}): each must lie in [0, 1] "
                f"and the three must sum to 1 (within {PROBABILITY_TOLERANCE:g})"
            )
            problems.append((row, 47, message, ", ".join(outside or PROBABILITY_COLUMNS)))
        ok = usable & ~bad
        probs[ok] = label_probabilities(probs[ok])
        return probs, ~missing.all(axis=1) | blank

    def _missing(
        self, batch: Any, column: str, col: _Coded | None, blank: BoolArray, rank: int
    ) -> list[_Problem]:
        """The first row without a value in `column` (a column of lists or objects: the
        first row with one)."""
        c = self.convention
        needs = f"every {c.noun} needs a value here"
        if column == c.outcome and self.soft:
            needs += f" or all of {', '.join(PROBABILITY_COLUMNS)}"
        if col is None:
            values = _code_free(self._column(batch, column))
            row = _first_row(values.is_valid().to_numpy(zero_copy_only=False))
            if row is None:
                return [(0, rank, f"missing value (None); {needs}", column)]
            wanted = c.outcomes if column == c.outcome else "a name (text)"
            return [(row, 10, f"expected {wanted}, got {_kind(values)}", column)]
        row = _first_flagged(col.missing, col.codes, blank)
        if row is None:
            return []
        return [(row, rank, f"missing value ({_shown(col.value(row))}); {needs}", column)]

    def _column(self, batch: Any, column: str) -> Any:
        """A column of the batch; an outcome given in parts, as their values joined by ","."""
        import pyarrow as pa
        import pyarrow.compute as pc

        c = self.convention
        if column != c.outcome or not c.parts:
            return batch.column(column)
        parts = []
        for part in c.parts:
            values = _code_free(batch.column(part))
            if pa.types.is_boolean(values.type):
                values = pc.cast(values, pa.int8())
            parts.append(pc.cast(values, pa.string()))
        return pc.binary_join_element_wise(*parts, ",")

    def _names(self, column: str, col: _Coded | None, n: int, problems: list[_Problem]) -> IntArray:
        """Each row's code among the models, scenarios or criteria (missing: -1)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if col is None:  # reported by _missing
            return np.full(n, -1, dtype=np.int64)
        if col.texts is None:
            row = _first_row(~col.missing[col.codes])
            if row is not None:
                problems.append(
                    (row, 10, f"expected a name (text), got {_kind(col.values)}", column)
                )
            return np.full(n, -1, dtype=np.int64)
        c = self.convention
        names = {c.scenario: self.scenarios, "criterion": self.criteria}.get(column, self.models)
        texts = pc.if_else(pa.array(col.missing), pa.scalar(None, pa.string()), col.texts)
        coded: IntArray = names.codes(texts)[col.codes]
        return coded

    def _crowd(
        self, first: IntArray, second: IntArray, blank: BoolArray, problems: list[_Problem]
    ) -> IntArray:
        """The judge of battles without a judge column: one judge named CROWD."""
        c = self.convention
        crowd = self.models.code(CROWD)
        for column, models in ((c.first, first), (c.second, second)):
            row = _first_row((models == crowd) & ~blank)
            if row is not None:
                message = (
                    f"a model is named '{CROWD}', the name given to the one judge of battles "
                    "without a judge column; add a judge column naming who judged each battle"
                )
                problems.append((row, 30, message, column))
        return np.full(len(first), self.models.add(CROWD), dtype=np.int64)

    def _outcomes(
        self, col: _Coded | None, n: int, blank: BoolArray, problems: list[_Problem]
    ) -> IntArray:
        """Each row's verdict (0 tie, 1 first better, 2 second better)."""
        if col is None:
            return np.full(n, -1, dtype=np.int64)
        c = self.convention
        table = np.array([c.outcome_value(v) for v in col.values.to_pylist()], dtype=np.int64)
        table[col.missing] = 0  # reported as missing
        verdict: IntArray = table[col.codes]
        row = _first_flagged(table < 0, col.codes, blank)
        if row is not None:
            problems.append(
                (row, 40, f"{c.outcome} {_shown(col.value(row))} is not {c.outcomes}", c.outcome)
            )
        return verdict

    def _replies(
        self, batch: Any, blank: BoolArray, problems: list[_Problem]
    ) -> tuple[FloatArray, FloatArray]:
        """Each row's features (columns in the order of `self.features`) of its first and
        of its second reply."""
        c = self.convention
        from_texts = [n for n, source in self.features.items() if source == "texts"]
        sides = []
        for side, text in enumerate(c.texts):
            texts = self._text_features(batch, text, from_texts, blank, problems)
            columns = []
            for name, source in self.features.items():
                if source == "columns":
                    column = c.feature_columns(name)[side]
                    columns.append(
                        self._numbers(batch.column(column), column, column, blank, problems)
                    )
                elif source == "metadata":
                    field = METADATA_FIELDS[name].format("ab"[side])
                    columns.append(self._metadata(batch, field, blank, problems))
                else:
                    columns.append(texts[name])
            sides.append(np.stack(columns, axis=1))
        return sides[0], sides[1]

    def _text_features(
        self, batch: Any, column: str, names: list[str], blank: BoolArray, problems: list[_Problem]
    ) -> dict[str, FloatArray]:
        """The features `names` of the replies in the text column `column`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not names:
            return {}
        texts = _code_free(batch.column(column))
        if self.convention.arena:
            texts = joined_turns(texts)
        if pa.types.is_null(texts.type):
            texts = texts.cast(pa.string())
        if not _is_text(texts.type):
            row = _first_row(_flags(pc.is_valid(texts)) & ~blank)
            if row is not None:
                problems.append((row, 50, f"expected a text, got {_kind(texts)}", column))
            return {n: np.full(len(texts), math.nan) for n in names}
        row = _first_row(_flags(pc.is_null(texts)) & ~blank) if self.features_named else None
        if row is not None:
            message = (
                "missing value (None); a reply without its text has no features: give every "
                "reply its text, or leave style control out (--style none)"
            )
            problems.append((row, 50, message, column))
        return text_features(texts, names)

    def _metadata(
        self, batch: Any, field: str, blank: BoolArray, problems: list[_Problem]
    ) -> FloatArray:
        """A count in METADATA, a struct of counts summed (LMArena's header_count_a
        holds h1 to h6)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        metadata = _code_free(batch.column(METADATA))
        if not pa.types.is_struct(metadata.type):
            row = _first_row(_flags(pc.is_valid(metadata)) & ~blank)
            if row is not None:
                message = f"expected an object with {field}, got {_kind(metadata)}"
                problems.append((row, 50, message, METADATA))
            return np.full(len(metadata), math.nan)
        values = pc.struct_field(metadata, [field])
        if not pa.types.is_struct(values.type):
            return self._numbers(values, METADATA, field, blank, problems)
        total = np.zeros(len(values))
        for part in values.type:
            count = pc.struct_field(values, [part.name])
            total += self._numbers(count, METADATA, f"{field}.{part.name}", blank, problems)
        return total

    def _numbers(
        self, values: Any, column: str, label: str, blank: BoolArray, problems: list[_Problem]
    ) -> FloatArray:
        """A feature's values as floats; the first row without a finite number (numbers
        written as text are read) is a problem."""
        array = _code_free(values)
        floats, missing, wrong = _floats(array)
        checks = {
            "missing value ({}) in {}; every reply needs one, or leave style control out "
            "(--style none)": missing if self.features_named else np.zeros_like(missing),
            "{} in {} is not a number": wrong,
            "{} in {} is not a finite number": np.isinf(floats),
        }
        for rank, (problem, flags) in enumerate(checks.items()):
            row = _first_row(flags & ~blank)
            if row is not None:
                message = problem.format(_shown(array[row].as_py()), label)
                problems.append((row, 50 + rank, message, column))
        return floats

    def table(self) -> VerdictTable:
        rows = self.rows.columns()
        if rows is None or not len(rows["verdict"]):
            if self.criterion is not None and self.read:
                present = ", ".join(sorted(self.criteria.names().to_pylist())[:10])
                raise InputError(
                    f"no rows have criterion {self.criterion!r}; present: {present}",
                    path=self.path,
                )
            raise InputError(f"the file has no verdicts; {_NEEDS}", path=self.path)
        used = np.zeros(self.models.size, dtype=bool)
        for role in _ROLES:
            used[rows[role]] = True
        models, new_model = self.models.ordered(used)
        scenario = rows["scenario"]
        scenarios: Sequence[str]
        if self.numbered:
            scenarios = BattleNames(self.kept)
        elif self.cells:
            scenarios, _ = self.scenarios.ordered(self.seen_scenarios)
        else:
            kept = np.bincount(scenario, minlength=self.scenarios.size) > 0
            scenarios, new_scenario = self.scenarios.ordered(kept)
            scenario = new_scenario[scenario]
        judge, first, second = (new_model[rows[r]] for r in _ROLES)
        verdict, weight = rows["verdict"], rows["count"]
        if self.rows.merge:  # in key order, whatever the batches were
            distinct, group = _distinct([scenario, judge, first, second, verdict])
            scenario, judge, first, second, verdict = distinct
            weight = np.empty_like(weight)
            weight[group] = rows["count"]
        if self.weigh_judgments:
            _, judgment = _distinct([scenario, judge, first, second])
            weight = weight / tally(judgment, weight, int(judgment.max()) + 1)[judgment]
        return VerdictTable(
            scenario=scenario,
            judge=judge,
            first=first,
            second=second,
            verdict=verdict,
            models=models,
            scenarios=scenarios,
            weight=weight,
            features=(
                ReplyFeatures(tuple(self.features), rows["first_features"], rows["second_features"])
                if self.features
                else None
            ),
            probs=rows.get("probs"),
        )


def _shown(value: Any) -> str:
    """A cell's value as a message shows it: its repr, cut short (a number of thousands
    of digits is no help on the terminal)."""
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else f"{text[: _SHOWN_CHARS - 5]}...{text[-4:]}"


def _first_row(rows: BoolArray) -> int | None:
    hits = np.flatnonzero(rows)
    return int(hits[0]) if len(hits) else None


def _first_flagged(flags: BoolArray, codes: NDArray[Any], blank: BoolArray) -> int | None:
    """The first row that is not blank and whose value (`codes` into `flags`) is flagged;
    no row is looked at when no value is."""
    return _first_row(flags[codes] & ~blank) if flags.any() else None


def _code_free(column: Any) -> Any:
    """A column as one plain array (chunks combined, dictionary decoded)."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _floats(array: Any) -> tuple[FloatArray, BoolArray, BoolArray]:
    """Numbers (or numbers written as text) as floats, and where a value is missing
    (null, NaN, text such as "" or "NA") or not a number (those are NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    missing = _flags(pc.is_null(array))
    if _is_text(kind):
        trimmed = pc.utf8_trim_whitespace(array)
        missing |= _flags(pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(MISSING_WORDS)))
        trimmed = pc.if_else(pa.array(missing), pa.scalar(None, pa.string()), trimmed)
        try:
            array = pc.cast(trimmed, pa.float64())
        except pa.ArrowException:  # some text is not a number: found in Python
            floats = np.array([_number(v) for v in trimmed.to_pylist()], dtype=np.float64)
            return floats, missing, np.isnan(floats) & ~missing
    elif not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
        return np.full(len(array), math.nan), missing, ~missing
    floats = pc.fill_null(pc.cast(array, pa.float64()), math.nan)
    numbers = np.asarray(floats.to_numpy(zero_copy_only=False), dtype=np.float64)
    return numbers, np.isnan(numbers), np.zeros(len(numbers), dtype=bool)


def _number(text: str | None) -> float:
    try:
        return float(text) if text is not None else math.nan
    except ValueError:
        return math.nan


class _Rows:
    """Kept rows as columns, batch by batch. With `merge`, rows equal in every key
    column become one row whose `count` says how many they were, merged whenever the
    rows waiting are as many as those merged, so memory follows the distinct rows."""

    KEY = ("scenario", "judge", "first", "second", "verdict")

    def __init__(self, *, merge: bool) -> None:
        self.merge = merge
        self.parts: list[dict[str, NDArray[Any]]] = []
        self.waiting = 0
        self.merged = 0

    def add(self, part: dict[str, NDArray[Any]]) -> None:
        self.parts.append(part)
        if self.merge:
            self.waiting += len(part["verdict"])
            if self.waiting >= max(BATCH_ROWS, self.merged):
                self._merge()

    def _merge(self) -> None:
        rows = self._joined()
        distinct, group = _distinct([rows[k] for k in self.KEY])
        merged: dict[str, NDArray[Any]] = dict(zip(self.KEY, distinct, strict=True))
        merged["count"] = tally(group, rows["count"], len(distinct[0]))
        self.parts, self.merged, self.waiting = [merged], len(merged["count"]), 0

    def _joined(self) -> dict[str, NDArray[Any]]:
        if len(self.parts) == 1:
            return self.parts[0]
        return {k: np.concatenate([p[k] for p in self.parts]) for k in self.parts[0]}

    def columns(self) -> dict[str, NDArray[Any]] | None:
        if not self.parts:
            return None
        if self.waiting:
            self._merge()
        return self._joined()


def _distinct(columns: Sequence[IntArray]) -> tuple[list[IntArray], IntArray]:
    """The distinct combinations of the columns' codes, in sorted order (as columns),
    and each row's: counted where the packed keys span a small range, else sorted."""
    sizes = [int(c.max()) + 1 for c in columns]
    span = math.prod(sizes)
    if span >= 2**62:  # no int64 key: compare whole rows
        rows, group = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True)
        return list(rows.T), group.ravel().astype(np.int64)
    key = np.zeros(len(columns[0]), dtype=np.int64)
    for column, size in zip(columns, sizes, strict=True):
        key = key * size + column
    if span <= max(4 * len(key), 1 << 20):
        present = np.bincount(key, minlength=span) > 0
        keys = np.flatnonzero(present)
        group = (np.cumsum(present) - 1)[key]
    else:
        keys, group = np.unique(key, return_inverse=True)
    return list(np.unravel_index(keys, sizes)), group.astype(np.int64)


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
    names = [c for c in (*REQUIRED, *OPTIONAL) if c in columns]
    if table.probs is not None:
        for column, label in zip(PROBABILITY_COLUMNS, _PROBABILITY_LABELS, strict=True):
            columns[column] = [
                float(f"{p:.{PROBABILITY_DIGITS}g}") for p in table.probs[:, label].tolist()
            ]
            names.append(column)
    if table.features is not None:
        replies = (table.features.first, table.features.second)
        for f, name in enumerate(table.features.names):
            for column, values in zip(_VERDICT_TABLE.feature_columns(name), replies, strict=True):
                columns[column] = [_written(v) for v in values[:, f].tolist()]
                names.append(column)
    return names, columns


def _written(value: float) -> int | float | None:
    """A feature's value as written: whole numbers without ".0", NaN as no value."""
    if math.isnan(value):
        return None
    return int(value) if value.is_integer() else value


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
    when `criterion` labels the rows, so that `read_verdicts` restores their weights;
    with p_first, p_second, p_tie for soft verdicts, to PROBABILITY_DIGITS significant
    digits), atomically: a reader never sees a half-written file."""
    target = Path(path)
    fmt = file_format(target)
    with atomic_writer(target) as tmp:
        if fmt == "csv":
            tmp.write_text(verdicts_csv(table, criterion=criterion), encoding="utf-8")
            return
        names, columns = _columns(table, criterion)
        if fmt == "jsonl":
            with tmp.open("w", encoding="utf-8") as f:
                for row in zip(*(columns[c] for c in names), strict=True):
                    f.write(json.dumps(dict(zip(names, row, strict=True))) + "\n")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            pq.write_table(pa.table({c: list(columns[c]) for c in names}), tmp)
