"""Soft verdicts: the judge's label probabilities (p_first, p_second, p_tie) checked
as a distribution, row by row in whole columns, and renormalised to sum to 1."""

from __future__ import annotations

from typing import Any

import numpy as np

from eigenjury.stats.verdicts import (
    PROBABILITY_TOLERANCE,
    label_probabilities,
    probability_problems,
)
from eigenjury.verdict_files.columns import (
    BoolArray,
    FloatArray,
    Problem,
    as_floats,
    first_row,
    plain_array,
    shown_value,
)
from eigenjury.verdict_files.conventions import PROBABILITY_COLUMNS, PROBABILITY_LABELS


def read_probabilities(
    batch: Any, blank: BoolArray, problems: list[Problem], *, labelled: bool
) -> tuple[FloatArray, BoolArray]:
    """Each row's label probabilities (tie, first, second), renormalised to sum to 1,
    and where any is given (or the row is blank); a row without any is a hard
    verdict. A row with some but not all three, or values that are no distribution,
    is a problem."""
    n = batch.num_rows
    probs = np.empty((n, 3))
    missing = np.empty((n, 3), dtype=bool)
    for column, label in zip(PROBABILITY_COLUMNS, PROBABILITY_LABELS, strict=True):
        array = plain_array(batch.column(column))
        probs[:, label], missing[:, label], wrong = as_floats(array)
        row = first_row(wrong & ~blank)
        if row is not None:
            message = f"{shown_value(array[row].as_py())} in {column} is not a number"
            problems.append((row, 45, message, column))
    given = ~missing.any(axis=1)
    incomplete = ~blank & ~given
    if labelled:  # a row without any is a hard verdict
        incomplete &= ~missing.all(axis=1)
    row = first_row(incomplete)
    if row is not None:
        absent = [
            x
            for x, label in zip(PROBABILITY_COLUMNS, PROBABILITY_LABELS, strict=True)
            if missing[row, label]
        ]
        message = (
            f"missing value(s) in {', '.join(absent)}; a soft verdict needs all three of "
            f"{', '.join(PROBABILITY_COLUMNS)}"
        )
        message += ", a hard verdict none" if labelled else " (the file has no verdict column)"
        problems.append((row, 46, message, ", ".join(absent)))
    usable = given & ~blank
    bad = usable & probability_problems(probs)
    row = first_row(bad)
    if row is not None:
        values = [float(probs[row, label]) for label in PROBABILITY_LABELS]
        outside = [
            x for x, v in zip(PROBABILITY_COLUMNS, values, strict=True) if not 0.0 <= v <= 1.0
        ]
        shown = ", ".join(f"{x} {v!r}" for x, v in zip(PROBABILITY_COLUMNS, values, strict=True))
        message = (
            f"label probabilities {shown} (sum {sum(values):.6g}): each must lie in [0, 1] "
            f"and the three must sum to 1 (within {PROBABILITY_TOLERANCE:g})"
        )
        problems.append((row, 47, message, ", ".join(outside or PROBABILITY_COLUMNS)))
    ok = usable & ~bad
    probs[ok] = label_probabilities(probs[ok])
    return probs, ~missing.all(axis=1) | blank
