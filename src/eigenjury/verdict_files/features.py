"""The replies' style features (style control's covariates), read from a batch where
the layout says each one is: two numeric columns, LMArena's conv_metadata, or the
replies' texts; a value that is missing (where the features were asked for by name),
not a number or not finite is a problem located at its row."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from eigenjury.reply_features import joined_turns, text_features
from eigenjury.verdict_files.columns import (
    BoolArray,
    FloatArray,
    Problem,
    as_bools,
    as_floats,
    first_row,
    is_text,
    kind_in_words,
    plain_array,
    shown_value,
)
from eigenjury.verdict_files.conventions import METADATA, METADATA_FIELDS, Convention


@dataclass(frozen=True)
class FeatureReader:
    """Reads each feature from its source: "columns", "metadata" or "texts"."""

    convention: Convention
    features: dict[str, str]  # name -> source, in the order the table keeps them
    named: bool  # asked for by name: a reply without a value is a problem, else NaN

    def replies(
        self, batch: Any, blank: BoolArray, problems: list[Problem]
    ) -> tuple[FloatArray, FloatArray]:
        """Each row's features (columns in the order of `features`) of its first and
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
        self, batch: Any, column: str, names: list[str], blank: BoolArray, problems: list[Problem]
    ) -> dict[str, FloatArray]:
        """The features `names` of the replies in the text column `column`."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if not names:
            return {}
        texts = plain_array(batch.column(column))
        if self.convention.arena:
            texts = joined_turns(texts)
        if pa.types.is_null(texts.type):
            texts = texts.cast(pa.string())
        if not is_text(texts.type):
            row = first_row(as_bools(pc.is_valid(texts)) & ~blank)
            if row is not None:
                problems.append((row, 50, f"expected a text, got {kind_in_words(texts)}", column))
            return {n: np.full(len(texts), math.nan) for n in names}
        row = first_row(as_bools(pc.is_null(texts)) & ~blank) if self.named else None
        if row is not None:
            message = (
                "missing value (None); a reply without its text has no features: give every "
                "reply its text, or leave style control out (--style none)"
            )
            problems.append((row, 50, message, column))
        return text_features(texts, names)

    def _metadata(
        self, batch: Any, field: str, blank: BoolArray, problems: list[Problem]
    ) -> FloatArray:
        """A count in METADATA, a struct of counts summed (LMArena's header_count_a
        holds h1 to h6)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        metadata = plain_array(batch.column(METADATA))
        if not pa.types.is_struct(metadata.type):
            row = first_row(as_bools(pc.is_valid(metadata)) & ~blank)
            if row is not None:
                message = f"expected an object with {field}, got {kind_in_words(metadata)}"
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
        self, values: Any, column: str, label: str, blank: BoolArray, problems: list[Problem]
    ) -> FloatArray:
        """A feature's values as floats; the first row without a finite number (numbers
        written as text are read) is a problem."""
        array = plain_array(values)
        floats, missing, wrong = as_floats(array)
        checks = {
            "missing value ({}) in {}; every reply needs one, or leave style control out "
            "(--style none)": missing if self.named else np.zeros_like(missing),
            "{} in {} is not a number": wrong,
            "{} in {} is not a finite number": np.isinf(floats),
        }
        for rank, (problem, flags) in enumerate(checks.items()):
            row = first_row(flags & ~blank)
            if row is not None:
                message = problem.format(shown_value(array[row].as_py()), label)
                problems.append((row, 50 + rank, message, column))
        return floats
