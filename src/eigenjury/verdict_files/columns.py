"""Checks on whole pyarrow columns: a column dictionary-encoded so that each distinct
value is looked at once, values read as numbers, missing values told apart, and the
first flagged row found, so that a million rows cost no million Python steps."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from eigenjury.names import MISSING_WORDS

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
BoolArray = NDArray[np.bool_]
# A problem found in a batch: (row, check order, message, column); the first row wins.
Problem = tuple[int, int, str, str | None]
SHOWN_CHARS = 60  # of a cell's value in a message


@dataclass(frozen=True)
class Coded:
    """One column of a batch, dictionary-encoded: row i holds values[codes[i]]."""

    codes: NDArray[np.integer[Any]]
    values: Any  # pyarrow Array of the distinct values (null included)
    texts: Any | None  # the values as trimmed text (None: not text, nor numbers)
    missing: BoolArray  # per value: null, NaN or text such as "", "NA", "null"
    blank: BoolArray  # per value: empty text

    def value(self, row: int) -> Any:
        return self.values[int(self.codes[row])].as_py()


def dictionary_coded(column: Any) -> Coded | None:
    """A column dictionary-encoded, or None where its type cannot be (lists, objects)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = plain_array(column)
    if pa.types.is_nested(array.type):
        return None
    encoded = pc.dictionary_encode(array, null_encoding="encode")
    values = encoded.dictionary
    texts = trimmed_texts(values)
    missing = pc.is_null(values)
    blank = np.zeros(len(values), dtype=bool)
    if texts is not None:  # NaN is written "nan"
        missing = pc.or_(missing, pc.is_in(pc.utf8_lower(texts), value_set=pa.array(MISSING_WORDS)))
        blank = as_bools(pc.equal(texts, ""))
    codes = encoded.indices.to_numpy(zero_copy_only=False)  # int32: no copy
    return Coded(codes, values, texts, as_bools(missing), blank)


def as_bools(mask: Any) -> BoolArray:
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(mask, True).to_numpy(zero_copy_only=False), dtype=bool)


def is_text(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def trimmed_texts(values: Any) -> Any | None:
    """Values as trimmed text (numbers written out, as JSON names may be), or None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = values.type
    numbers = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    if not (is_text(kind) or pa.types.is_null(kind) or numbers):
        return None
    return pc.utf8_trim_whitespace(pc.cast(values, pa.string()))


def kind_in_words(column: Any) -> str:
    """What a column's values are, in a user's words."""
    import pyarrow as pa

    kind = column.type
    if pa.types.is_boolean(kind):
        return "true/false"
    if pa.types.is_struct(kind) or pa.types.is_map(kind):
        return "an object"
    return "a list" if pa.types.is_nested(kind) else f"values of type {kind}"


def shown_value(value: Any) -> str:
    """A cell's value as a message shows it: its repr, cut short (a number of thousands
    of digits is no help on the terminal)."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 5]}...{text[-4:]}"


def first_row(rows: BoolArray) -> int | None:
    hits = np.flatnonzero(rows)
    return int(hits[0]) if len(hits) else None


def first_flagged(flags: BoolArray, codes: NDArray[Any], blank: BoolArray) -> int | None:
    """The first row that is not blank and whose value (`codes` into `flags`) is flagged;
    no row is looked at when no value is."""
    return first_row(flags[codes] & ~blank) if flags.any() else None


def plain_array(column: Any) -> Any:
    """A column as one plain array (chunks combined, dictionary decoded)."""
    import pyarrow as pa

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def as_floats(array: Any) -> tuple[FloatArray, BoolArray, BoolArray]:
    """Numbers (or numbers written as text) as floats, and where a value is missing
    (null, NaN, text such as "" or "NA") or not a number (those are NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = array.type
    missing = as_bools(pc.is_null(array))
    if is_text(kind):
        trimmed = pc.utf8_trim_whitespace(array)
        missing |= as_bools(pc.is_in(pc.utf8_lower(trimmed), value_set=pa.array(MISSING_WORDS)))
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
