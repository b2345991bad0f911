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

The package, by concern: conventions (which column plays which part, the layout to
read), formats (opening each file format as batches), reading (the columnar reader,
with columns, name_codes, soft, features and merging beside it) and writing.
"""

from __future__ import annotations

from pathlib import Path

from eigenjury.stats.verdicts import VerdictTable
from eigenjury.verdict_files.conventions import (
    BATTLE_REQUIRED,
    CROWD,
    METADATA,
    METADATA_FIELDS,
    ONE_HOT,
    OPTIONAL,
    PROBABILITY_COLUMNS,
    REQUIRED,
    WINNERS,
    Features,
    requested_features,
)
from eigenjury.verdict_files.formats import FORMATS, READ_FORMATS, file_format, open_source
from eigenjury.verdict_files.name_codes import BattleNames
from eigenjury.verdict_files.reading import COLLAPSES, Collapse, ColumnarReader
from eigenjury.verdict_files.writing import PROBABILITY_DIGITS, verdicts_csv, write_verdicts

__all__ = [
    "BATCH_ROWS",
    "BATTLE_REQUIRED",
    "COLLAPSES",
    "CROWD",
    "FORMATS",
    "METADATA",
    "METADATA_FIELDS",
    "ONE_HOT",
    "OPTIONAL",
    "PROBABILITY_COLUMNS",
    "PROBABILITY_DIGITS",
    "READ_FORMATS",
    "REQUIRED",
    "WINNERS",
    "BattleNames",
    "Collapse",
    "Features",
    "file_format",
    "read_verdicts",
    "verdicts_csv",
    "write_verdicts",
]

# Rows per Parquet batch (pyarrow's default row group): memory while streaming a
# dataset is a few times this.
BATCH_ROWS = 1 << 20


def read_verdicts(
    path: str | Path,
    *,
    criterion: str | None = None,
    collapse: Collapse = "rows",
    features: Features = "available",
    strong_weight: float = 3.0,
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
    A strength column (graded verdicts: 1 plain, 2 strong, none given: 1) makes each
    strong row count as `strong_weight` rows (Arena-Hard's 3).
    """
    if collapse not in COLLAPSES:
        raise ValueError(f"collapse must be one of {', '.join(COLLAPSES)}, not {collapse!r}")
    source = open_source(Path(path), requested_features(features), BATCH_ROWS)
    reader = ColumnarReader(source, criterion, collapse, BATCH_ROWS, strong_weight)
    for batch, locate in source.batches:
        reader.add(batch, locate)
    return reader.table()
