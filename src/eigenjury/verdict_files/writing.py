"""Write a verdict table as a verdict file (CSV, JSONL or Parquet) in the verdict-table
convention, which `read_verdicts` reads back as the same table."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from eigenjury.files import atomic_writer
from eigenjury.stats.verdicts import VerdictTable
from eigenjury.verdict_files.conventions import (
    OPTIONAL,
    PROBABILITY_COLUMNS,
    PROBABILITY_LABELS,
    REQUIRED,
    VERDICT_TABLE,
)
from eigenjury.verdict_files.formats import file_format

# Label probabilities are written to this many significant digits: a rounding error
# far below the tolerance of the sum, and far below any sampling error of a fit.
PROBABILITY_DIGITS = 6


def _columns(
    table: VerdictTable, criterion: Sequence[str] | None, strength: Sequence[int] | None = None
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
    if strength is not None:
        columns["strength"] = list(strength)
    names = [c for c in (*REQUIRED, *OPTIONAL) if c in columns]
    if table.probs is not None:
        for column, label in zip(PROBABILITY_COLUMNS, PROBABILITY_LABELS, strict=True):
            columns[column] = [
                float(f"{p:.{PROBABILITY_DIGITS}g}") for p in table.probs[:, label].tolist()
            ]
            names.append(column)
    if table.features is not None:
        replies = (table.features.first, table.features.second)
        for f, name in enumerate(table.features.names):
            for column, values in zip(VERDICT_TABLE.feature_columns(name), replies, strict=True):
                columns[column] = [_written(v) for v in values[:, f].astype(float).tolist()]
                names.append(column)
    return names, columns


def _written(value: float) -> int | float | None:
    """A feature's value as written: whole numbers without ".0", NaN as no value."""
    if math.isnan(value):
        return None
    return int(value) if value.is_integer() else value


def verdicts_csv(
    table: VerdictTable,
    *,
    criterion: Sequence[str] | None = None,
    strength: Sequence[int] | None = None,
) -> str:
    """A verdict table as the text of a CSV verdict file (see `write_verdicts`); graded
    verdicts' `strength` (1 or 2) in a column of its own, read back as `read_verdicts`
    weighs it."""
    names, columns = _columns(table, criterion, strength)
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
