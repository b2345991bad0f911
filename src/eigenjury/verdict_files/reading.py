"""The columnar reader: a file's batches validated column by column (every check on
whole columns, the first bad row in the file's order reported) and their rows kept as
integer codes, then made into a VerdictTable with names in sorted order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from eigenjury.errors import InputError
from eigenjury.stats.verdicts import (
    ReplyFeatures,
    Values,
    VerdictTable,
    certain,
    chunks,
    code_type,
    tally,
)
from eigenjury.verdict_files.columns import (
    BoolArray,
    Coded,
    FloatArray,
    IntArray,
    Problem,
    as_floats,
    dictionary_coded,
    first_flagged,
    first_row,
    is_text,
    kind_in_words,
    plain_array,
    shown_value,
)
from eigenjury.verdict_files.conventions import CROWD, NEEDS, PROBABILITY_COLUMNS, STRENGTHS
from eigenjury.verdict_files.features import FeatureReader
from eigenjury.verdict_files.formats import Locate, Source
from eigenjury.verdict_files.merging import KeptRows, distinct_rows
from eigenjury.verdict_files.name_codes import BattleNames, NameCodes
from eigenjury.verdict_files.soft import read_probabilities

Collapse = Literal["rows", "scenarios", "cells"]
COLLAPSES: tuple[str, ...] = get_args(Collapse)
_ROLES = ("judge", "first", "second")
_CHUNK = 1 << 20


class ColumnarReader:
    """Validates batches column by column and keeps their rows as codes."""

    def __init__(
        self,
        source: Source,
        criterion: str | None,
        collapse: Collapse,
        batch_rows: int,
        strong_weight: float = 3.0,
    ) -> None:
        self.path = source.path
        self.convention = c = source.layout.convention
        self.columns = source.layout.columns
        self.features = source.layout.features
        self.feature_reader = FeatureReader(c, self.features, source.layout.named)
        self.skip_blank = source.skip_blank
        self.criterion = criterion
        self.strong_weight = strong_weight if "strength" in self.columns else None
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
        self.rows = KeptRows(merge=mode != "rows", batch_rows=batch_rows)
        self.models, self.scenarios, self.criteria = NameCodes(), NameCodes(), NameCodes()
        self.seen_scenarios = np.zeros(0, dtype=bool)  # cells: the scenarios kept
        self.read = 0  # rows that passed the checks
        self.kept = 0  # of which kept (criterion)

    def add(self, batch: Any, locate: Locate) -> None:
        """Check a batch (the first bad row is an InputError) and keep its rows."""
        if not batch.num_rows:
            return
        c = self.convention
        blank, codes, verdict, probs, replies, strong = self._checked(batch, locate)
        keep = ~blank
        self.read += int(keep.sum())
        if self.criterion is not None:
            keep &= codes["criterion"] == self.criteria.code(self.criterion)
        every = bool(keep.all())

        def kept(values: NDArray[Any]) -> NDArray[Any]:
            return values if every else values[keep]

        names = code_type(self.models.size)
        part = {
            r: kept(codes[x]).astype(names)
            for r, x in zip(_ROLES, (c.judge, c.first, c.second), strict=True)
        }
        part["verdict"] = kept(verdict).astype(np.int8)
        if replies is not None:
            part["first_features"], part["second_features"] = (_compact(kept(r)) for r in replies)
        m = len(part["verdict"])
        if self.numbered:
            part["scenario"] = np.arange(self.kept, self.kept + m, dtype=code_type(self.kept + m))
        else:
            part["scenario"] = kept(codes[c.scenario]).astype(code_type(self.scenarios.size))
        if self.cells:
            if not self.numbered:
                used = np.bincount(part["scenario"], minlength=self.scenarios.size) > 0
                used[: len(self.seen_scenarios)] |= self.seen_scenarios
                self.seen_scenarios = used
            part["scenario"] = np.zeros(m, dtype=np.int32)
        if self.rows.merge or self.strong_weight is not None or self.soft:
            part["count"] = np.ones(m)  # else every kept row weighs 1: no count is kept
        if strong is not None and self.strong_weight is not None:  # graded: strong ones count more
            part["count"][kept(strong)] = self.strong_weight
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
        spread["verdict"] = label.astype(np.int64)
        spread["count"] = part["count"][row] * probs[row, label]
        return spread

    def _checked(
        self, batch: Any, locate: Locate
    ) -> tuple[
        BoolArray,
        dict[str, IntArray],
        IntArray,
        FloatArray | None,
        tuple[FloatArray, FloatArray] | None,
        BoolArray | None,
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
        coded = {x: dictionary_coded(self._column(batch, x)) for x in columns}
        blank = np.zeros(n, dtype=bool)
        if self.skip_blank and all(x and x.blank.any() for x in coded.values()):
            blank = np.logical_and.reduce([x.blank[x.codes] for x in coded.values() if x])
        problems: list[Problem] = []
        probs, soft = (
            read_probabilities(batch, blank, problems, labelled=self.labelled)
            if self.soft
            else (None, blank)
        )
        for rank, (column, col) in enumerate(coded.items()):
            skipped = soft if column == c.outcome else blank  # a soft verdict needs no label
            problems += self._missing(batch, column, col, skipped, rank)
        codes = {x: self._names(x, coded[x], n, problems) for x in labels}
        if c.judge not in self.columns:
            codes[c.judge] = self._crowd(codes[c.first], codes[c.second], blank, problems)
        first, second = codes[c.first], codes[c.second]
        same = first_row((first == second) & (first >= 0) & ~blank)
        if same is not None:
            name = self.models.names()[int(first[same])].as_py()
            message = f"{c.first} and {c.second} are both '{name}'; "
            problems.append(
                (same, 20, message + f"a {c.noun} compares two different evaluees", None)
            )
        verdict = self._outcomes(coded.get(c.outcome), n, blank, problems)
        replies = self.feature_reader.replies(batch, blank, problems) if self.features else None
        strong = self._strong(batch, blank, problems) if self.strong_weight is not None else None
        if problems:
            row, _, problem, where = min(problems, key=lambda p: p[:2])
            raise InputError(problem, column=where, **locate(row))
        if probs is not None:
            col = coded.get(c.outcome)
            unlabelled = soft if col is None else soft & col.missing[col.codes]
            verdict[unlabelled] = np.argmax(probs[unlabelled], axis=1)  # ties: tie, first
            hard = ~soft
            probs[hard] = certain(verdict[hard])
        return blank, codes, verdict, probs, replies, strong

    def _strong(self, batch: Any, blank: BoolArray, problems: list[Problem]) -> BoolArray:
        """Which rows are strong graded verdicts (strength 2; none given: 1, plain)."""
        array = plain_array(batch.column("strength"))
        values, missing, _ = as_floats(array)
        wrong = ~blank & ~missing & ~np.isin(values, STRENGTHS)
        row = first_row(wrong)
        if row is not None:
            message = (
                f"strength {shown_value(array[row].as_py())}: a graded verdict's strength is "
                "1 (plain: A>B, B>A, A=B) or 2 (strong: A>>B, B>>A)"
            )
            problems.append((row, 48, message, "strength"))
        return np.asarray(values == 2, dtype=bool)

    def _missing(
        self, batch: Any, column: str, col: Coded | None, blank: BoolArray, rank: int
    ) -> list[Problem]:
        """The first row without a value in `column` (a column of lists or objects: the
        first row with one)."""
        c = self.convention
        needs = f"every {c.noun} needs a value here"
        if column == c.outcome and self.soft:
            needs += f" or all of {', '.join(PROBABILITY_COLUMNS)}"
        if col is None:
            values = plain_array(self._column(batch, column))
            row = first_row(values.is_valid().to_numpy(zero_copy_only=False))
            if row is None:
                return [(0, rank, f"missing value (None); {needs}", column)]
            wanted = c.outcomes if column == c.outcome else "a name (text)"
            return [(row, 10, f"expected {wanted}, got {kind_in_words(values)}", column)]
        row = first_flagged(col.missing, col.codes, blank)
        if row is None:
            return []
        return [(row, rank, f"missing value ({shown_value(col.value(row))}); {needs}", column)]

    def _column(self, batch: Any, column: str) -> Any:
        """A column of the batch; an outcome given in parts, as their values joined by ","."""
        import pyarrow as pa
        import pyarrow.compute as pc

        c = self.convention
        if column != c.outcome or not c.parts:
            return batch.column(column)
        parts = []
        for part in c.parts:
            values = plain_array(batch.column(part))
            if pa.types.is_boolean(values.type):
                values = pc.cast(values, pa.int8())
            parts.append(pc.cast(values, pa.string()))
        return pc.binary_join_element_wise(*parts, ",")

    def _names(self, column: str, col: Coded | None, n: int, problems: list[Problem]) -> IntArray:
        """Each row's code among the models, scenarios or criteria (missing: -1)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if col is None:  # reported by _missing
            return np.full(n, -1, dtype=np.int64)
        if col.texts is None:
            row = first_row(~col.missing[col.codes])
            if row is not None:
                problems.append(
                    (row, 10, f"expected a name (text), got {kind_in_words(col.values)}", column)
                )
            return np.full(n, -1, dtype=np.int64)
        c = self.convention
        names = {c.scenario: self.scenarios, "criterion": self.criteria}.get(column, self.models)
        texts = pc.if_else(pa.array(col.missing), pa.scalar(None, pa.string()), col.texts)
        # distinct values that trimming left whole are distinct names: no re-encoding
        whole = is_text(col.values.type) and _bytes(col.texts) == _bytes(col.values)
        coded: IntArray = names.codes(texts, distinct=whole)[col.codes]
        return coded

    def _crowd(
        self, first: IntArray, second: IntArray, blank: BoolArray, problems: list[Problem]
    ) -> IntArray:
        """The judge of battles without a judge column: one judge named CROWD."""
        c = self.convention
        crowd = self.models.code(CROWD)
        for column, models in ((c.first, first), (c.second, second)):
            row = first_row((models == crowd) & ~blank)
            if row is not None:
                message = (
                    f"a model is named '{CROWD}', the name given to the one judge of battles "
                    "without a judge column; add a judge column naming who judged each battle"
                )
                problems.append((row, 30, message, column))
        return np.full(len(first), self.models.add(CROWD), dtype=np.int64)

    def _outcomes(
        self, col: Coded | None, n: int, blank: BoolArray, problems: list[Problem]
    ) -> IntArray:
        """Each row's verdict (0 tie, 1 first better, 2 second better)."""
        if col is None:
            return np.full(n, -1, dtype=np.int64)
        c = self.convention
        table = np.array([c.outcome_value(v) for v in col.values.to_pylist()], dtype=np.int64)
        table[col.missing] = 0  # reported as missing
        verdict: IntArray = table[col.codes]
        row = first_flagged(table < 0, col.codes, blank)
        if row is not None:
            problems.append(
                (
                    row,
                    40,
                    f"{c.outcome} {shown_value(col.value(row))} is not {c.outcomes}",
                    c.outcome,
                )
            )
        return verdict

    def table(self) -> VerdictTable:
        rows = self.rows.columns()
        if rows is None or not len(rows["verdict"]):
            if self.criterion is not None and self.read:
                present = ", ".join(sorted(self.criteria.names().to_pylist())[:10])
                raise InputError(
                    f"no rows have criterion {self.criterion!r}; present: {present}",
                    path=self.path,
                )
            raise InputError(f"the file has no verdicts; {NEEDS}", path=self.path)
        used = np.zeros(self.models.size, dtype=bool)
        for role in _ROLES:
            for part in _chunks(rows[role]):
                used[part] = True
        models, new_model = self.models.ordered(used)
        scenario = rows.pop("scenario")
        scenarios: Sequence[str]
        if self.numbered:
            scenarios = BattleNames(self.kept)
        elif self.cells:
            scenarios = self.scenarios.sorted_names(self.seen_scenarios)
        else:
            kept = np.zeros(self.scenarios.size, dtype=bool)
            for part in _chunks(scenario):
                kept[part] = True
            scenarios, new_scenario = self.scenarios.ordered(kept)
            scenario = _recoded(scenario, new_scenario)
        judge, first, second = (_recoded(rows.pop(r), new_model) for r in _ROLES)
        verdict = rows.pop("verdict")
        count = rows.pop("count", None)
        weight = np.broadcast_to(1.0, len(verdict)) if count is None else count
        if self.rows.merge:  # in key order, whatever the batches were
            distinct, group = distinct_rows([scenario, judge, first, second, verdict])
            scenario, judge, first, second, verdict = distinct
            weight = np.empty_like(count)
            weight[group] = count
        if self.weigh_judgments:
            _, judgment = distinct_rows([scenario, judge, first, second])
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


def _chunks(codes: NDArray[np.integer]) -> list[NDArray[np.integer]]:
    """`codes` in chunks: an index of 16 or 32 bits is widened to 64 bits where it
    indexes, and a chunk at a time that costs a chunk's memory, not the table's."""
    return [codes[part] for part in chunks(len(codes), _CHUNK)]


def _recoded(codes: NDArray[np.integer], new: IntArray) -> NDArray[np.integer]:
    """`codes` as their `new` codes, in place a chunk at a time (in the narrowest type
    that holds them)."""
    out = codes.astype(code_type(int(new.max(initial=0)) + 1), copy=False)
    narrow = new.astype(out.dtype)
    for part, into in zip(_chunks(codes), _chunks(out), strict=True):
        into[:] = narrow[part]
    return out


def _compact(values: FloatArray) -> Values:
    """Features in the narrowest type that holds every value exactly: counts (tokens,
    headers, list items) below 2^15 in 2 bytes, else single precision where it holds
    them, else double (1e8 replies' two features in 0.8 GB, not 3.2)."""
    with np.errstate(invalid="ignore"):  # NaN: not a count
        counts = np.all((values >= 0) & (values < 2**15))
    if counts and np.array_equal(values, np.floor(values)):
        return values.astype(np.int16)
    with np.errstate(over="ignore"):  # beyond single precision: kept as double
        single = values.astype(np.float32)
    return single if np.array_equal(single, values, equal_nan=True) else values


def _bytes(texts: Any) -> int:
    """The UTF-8 bytes of all of `texts` (trimming only removes: equal totals, nothing
    trimmed)."""
    import pyarrow.compute as pc

    return int(pc.sum(pc.binary_length(texts)).as_py() or 0)
