"""Verdict tables and the sufficient statistics every peer-ranking fit works on.

Judge i compares evaluee j (shown first) with evaluee k (shown second) and returns
0 (tie), 1 (first better) or 2 (second better). The pairwise likelihoods used here
depend on the data only through weighted counts per (judge, first, second, verdict),
so fitting cost is set by the number of distinct cells, never by the number of
verdicts. Judges and evaluees share one namespace (`models`): in peer ranking the
population plays both roles, and EigenTrust needs that identification.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import cached_property
from itertools import pairwise
from typing import Protocol

import numpy as np
from numpy.typing import NDArray
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from eigenjury.errors import InputError

TIE, FIRST, SECOND = 0, 1, 2

IntArray = NDArray[np.int64]
FloatArray = NDArray[np.float64]
# Codes as a file's reader keeps them: in the narrowest integer type that holds them
# (code_type); whoever multiplies them widens them to 64 bits first
Codes = NDArray[np.integer]
# Feature values as a file's reader keeps them: in the narrowest type that holds every
# value exactly (2-byte counts, single or double precision); whoever computes with them
# takes them as double first
Values = NDArray[np.integer] | NDArray[np.floating]

# The fit holds judges x models matrices of scores and gradients: beyond this many
# names they no longer fit in memory, or in time.
MAX_NAMES = 5000
# More external judges than this, with a median below `min_verdicts` each, look like a
# crowd of individual voters (a judge column of user ids).
_CROWD = 100

# Above this many (judge, first, second) keys the collapse sorts instead of counting densely.
_DENSE_KEY_LIMIT = 50_000_000
# Rows per chunk of the collapse into cells.
_CHUNK_ROWS = 1 << 20


def chunks(n: int, size: int) -> list[slice]:
    """[0, n) in slices of `size`: the passes over 1e8 verdicts go a slice at a time,
    so that their temporaries are a slice's, not the table's."""
    return [slice(a, min(a + size, n)) for a in range(0, n, size)]


def tally(index: NDArray[np.integer], weights: FloatArray | None, size: int) -> FloatArray:
    """Sum `weights` (default 1) per index value in [0, size): the scatter-add behind
    every count and gradient here."""
    return np.asarray(np.bincount(index, weights, minlength=size), dtype=np.float64)


def _present(n_models: int, *models: IntArray) -> IntArray:
    """The models that occur in any of `models`, in order (a count, not a sort)."""
    seen = np.zeros(n_models, dtype=bool)
    for column in models:
        seen[column] = True
    return np.flatnonzero(seen).astype(np.int64)


def _read_only(values: FloatArray) -> FloatArray:
    """`values`, marked read-only: a total cached on the counts, shared by every caller."""
    values.flags.writeable = False
    return values


@dataclass(frozen=True)
class OutcomeSums:
    """Per cell, what a pairwise likelihood reads of its (tie, first, second) counts:
    their total, first minus second, and the ties, each contiguous (a column of the
    cells x 3 counts is strided, and every pass of a fit reads all three)."""

    total: FloatArray
    wins: FloatArray
    ties: FloatArray

    @classmethod
    def of(cls, n: FloatArray) -> OutcomeSums:
        """From counts `n` (cells x 3)."""
        ties, first, second = n[:, TIE], n[:, FIRST], n[:, SECOND]
        total = first + second
        total += ties
        return cls(total, first - second, np.ascontiguousarray(ties))

    @classmethod
    def of_labels(cls, label: NDArray[np.integer], weight: FloatArray | None) -> OutcomeSums:
        """Of verdicts one by one: labels (TIE, FIRST, SECOND) and weights (None: 1)."""
        wins = (label == FIRST).astype(np.float64)
        wins -= label == SECOND
        ties = (label == TIE).astype(np.float64)
        if weight is None:
            return cls(np.ones(len(label)), wins, ties)
        return cls(weight, wins * weight, ties * weight)

    def __getitem__(self, cells: slice) -> OutcomeSums:
        return OutcomeSums(self.total[cells], self.wins[cells], self.ties[cells])


class DataError(InputError, ValueError):
    """The verdicts cannot support the requested fit (a user-facing, fixable problem);
    where they came from is added by whoever read them (errors.located)."""


@dataclass(frozen=True, eq=False)
class ReplyFeatures:
    """Numeric features of the two replies behind each verdict row (their length in
    tokens, markdown headers, list items, bold spans, or any a file names):
    `first[r, f]` and `second[r, f]` hold feature `names[f]` of row r's first and second
    reply; NaN where unknown. Style control (stats.style) reads them."""

    names: tuple[str, ...]
    first: Values  # (rows, features)
    second: Values  # (rows, features)

    def __post_init__(self) -> None:
        shape = (self.first.shape[0], len(self.names))
        if self.first.shape != shape or self.second.shape != shape:
            raise ValueError(f"features must be (rows, {len(self.names)}) arrays for both replies")
        if len(set(self.names)) != len(self.names):
            raise ValueError("each feature may be named once")

    def __len__(self) -> int:
        return int(self.first.shape[0])

    def select(self, mask: NDArray[np.bool_] | IntArray) -> ReplyFeatures:
        """Rows where `mask` holds (or at these indices)."""
        return ReplyFeatures(self.names, self.first[mask], self.second[mask])

    def only(self, names: Sequence[str]) -> ReplyFeatures:
        """These features, in this order (a KeyError names one that is absent); all of
        them in their order: these same arrays."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise KeyError(", ".join(missing))
        if tuple(names) == self.names:
            return self
        index = [self.names.index(n) for n in names]
        return ReplyFeatures(tuple(names), self.first[:, index], self.second[:, index])

    def get(self, name: str) -> tuple[Values, Values] | None:
        """One feature's (first, second) columns, or None without it."""
        if name not in self.names:
            return None
        f = self.names.index(name)
        return self.first[:, f], self.second[:, f]


@dataclass(frozen=True, eq=False)
class VerdictTable:
    """Verdicts as integer-coded columns.

    `judge`, `first` and `second` index `models`; `scenario` indexes `scenarios`.
    `weight` gives each row's share of one judgment (1 unless several criterion rows
    come from the same judgment, which then share a total weight of 1; a reader that
    merges equal rows gives the merged row their summed weight). `features`, where the
    verdicts came with the replies' texts or numeric features of them, holds those per
    row (ReplyFeatures); "length" among them is what agreement's longer-reply
    preference reads.

    `probs`, for soft verdicts, holds each row's label probabilities (tie, first,
    second; each row sums to 1): the judge's own probabilities of its three answers.
    The counts then take them as fractional verdicts (a row adds weight x p to each
    label), while `verdict` keeps the label the judge gave, for what reads single
    verdicts (agreement, order consistency). A hard verdict is the row [0, 1, 0] etc.
    """

    scenario: Codes
    judge: Codes
    first: Codes
    second: Codes
    verdict: Codes
    models: tuple[str, ...]
    scenarios: Sequence[str]
    weight: FloatArray
    features: ReplyFeatures | None = None
    probs: FloatArray | None = None  # (rows, 3): soft verdicts

    @classmethod
    def from_columns(
        cls,
        scenario: Sequence[object] | NDArray[np.generic],
        judge: Sequence[object] | NDArray[np.generic],
        first: Sequence[object] | NDArray[np.generic],
        second: Sequence[object] | NDArray[np.generic],
        verdict: Sequence[int] | NDArray[np.integer],
        criterion: Sequence[object] | NDArray[np.generic] | None = None,
        probs: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> VerdictTable:
        """Code named columns. With `criterion`, rows of one judgment share weight 1;
        `probs` (tie, first, second per row) makes the verdicts soft."""
        judge_a, first_a, second_a = (np.asarray(c).astype(str) for c in (judge, first, second))
        models, coded = np.unique(np.concatenate([judge_a, first_a, second_a]), return_inverse=True)
        n = len(judge_a)
        scen_names, scen_codes = np.unique(np.asarray(scenario).astype(str), return_inverse=True)
        return cls.from_codes(
            scen_codes,
            coded[:n],
            coded[n : 2 * n],
            coded[2 * n :],
            verdict,
            models=tuple(str(m) for m in models),
            scenarios=tuple(str(s) for s in scen_names),
            criterion=criterion,
            probs=probs,
        )

    @classmethod
    def from_codes(
        cls,
        scenario: NDArray[np.integer],
        judge: NDArray[np.integer],
        first: NDArray[np.integer],
        second: NDArray[np.integer],
        verdict: Sequence[int] | NDArray[np.integer],
        *,
        models: tuple[str, ...],
        scenarios: Sequence[str],
        criterion: Sequence[object] | NDArray[np.generic] | None = None,
        probs: Sequence[Sequence[float]] | FloatArray | None = None,
    ) -> VerdictTable:
        """Columns already coded (indices into `models` and `scenarios`); see
        from_columns."""
        verdict_a = np.asarray(verdict, dtype=np.int64)
        if verdict_a.size and (verdict_a.min() < 0 or verdict_a.max() > 2):
            raise DataError("verdicts must be 0 (tie), 1 (first better) or 2 (second better)")
        table = cls(
            scenario=np.asarray(scenario, dtype=np.int64),
            judge=np.asarray(judge, dtype=np.int64),
            first=np.asarray(first, dtype=np.int64),
            second=np.asarray(second, dtype=np.int64),
            verdict=verdict_a,
            models=models,
            scenarios=scenarios,
            weight=np.ones(len(verdict_a)),
            probs=None if probs is None else label_probabilities(probs),
        )
        if criterion is not None:
            table = table.with_weight(judgment_weights(table))
        return table

    def __len__(self) -> int:
        return len(self.verdict)

    @property
    def n_models(self) -> int:
        return len(self.models)

    def with_weight(self, weight: FloatArray) -> VerdictTable:
        return VerdictTable(
            self.scenario,
            self.judge,
            self.first,
            self.second,
            self.verdict,
            self.models,
            self.scenarios,
            np.asarray(weight, dtype=np.float64),
            self.features,
            self.probs,
        )

    def with_strong(self, strong: NDArray[np.bool_], weight: float) -> VerdictTable:
        """The rows where `strong` holds (graded verdicts said "much better": A>>B, B>>A)
        counted as `weight` verdicts each, as that many copies of them would be."""
        return replace(self, weight=np.where(strong, weight * self.weight, self.weight))

    def select(self, mask: NDArray[np.bool_]) -> VerdictTable:
        """Rows where `mask` holds; names and codes are kept as they are."""
        return VerdictTable(
            self.scenario[mask],
            self.judge[mask],
            self.first[mask],
            self.second[mask],
            self.verdict[mask],
            self.models,
            self.scenarios,
            self.weight[mask],
            None if self.features is None else self.features.select(mask),
            None if self.probs is None else self.probs[mask],
        )

    def label_weights(self) -> FloatArray:
        """Each row's weight on each label (rows, 3: tie, first, second): its weight on
        the label given, or spread by its probabilities for a soft verdict."""
        probs = certain(self.verdict) if self.probs is None else self.probs
        return self.weight[:, None] * probs

    def without_self_judgments(self) -> VerdictTable:
        """Drop comparisons in which the judge is one of the two evaluees."""
        return self.select((self.judge != self.first) & (self.judge != self.second))


def pool_judges(table: VerdictTable, pattern: str) -> VerdictTable:
    """The judges whose names match the shell-style `pattern` merged into one judge
    named `pattern`.

    A crowd whose judge column names every voter gives each a handful of verdicts:
    too few for a lens, tie propensity and position bias of its own. Pooled, the crowd
    is one external judge. Only external judges (never judged) can be pooled.
    """
    matched = np.array([fnmatchcase(name, pattern) for name in table.models], dtype=bool)
    if not matched.any():
        raise DataError(f"no judge matches {pattern!r}")
    evaluee = np.zeros(table.n_models, dtype=bool)
    evaluee[table.first] = evaluee[table.second] = True
    if (matched & evaluee).any():
        raise DataError(
            f"{pattern!r} matches {_list(np.asarray(table.models)[matched & evaluee])}, which "
            "are judged; only judges that are never judged can be pooled"
        )
    if pattern in table.models and not matched[table.models.index(pattern)]:
        raise DataError(f"{pattern!r} already names a model; pooled judges take that name")
    pooled = np.where(matched, pattern, np.asarray(table.models, dtype=object))
    models, code = np.unique(pooled.astype(str), return_inverse=True)  # sorted, as read
    return VerdictTable(
        table.scenario,
        code[table.judge],
        code[table.first],
        code[table.second],
        table.verdict,
        tuple(str(name) for name in models),
        table.scenarios,
        table.weight,
        table.features,
        table.probs,
    )


PROBABILITY_TOLERANCE = 1e-3  # label probabilities as printed to a few digits still sum to 1


def label_probabilities(probs: Sequence[Sequence[float]] | FloatArray) -> FloatArray:
    """Soft verdicts checked (rows of tie, first, second probabilities, each in [0, 1],
    summing to 1, both within PROBABILITY_TOLERANCE), clipped to [0, 1] and renormalised
    to sum to 1 exactly."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 3:
        raise DataError("label probabilities must be rows of three (tie, first, second)")
    problem = probability_problems(p)
    if problem.any():
        row = int(np.flatnonzero(problem)[0])
        raise DataError(
            f"label probabilities of row {row} are {p[row].tolist()} (tie, first, second); "
            f"each must lie in [0, 1] and the three must sum to 1"
        )
    p = np.clip(p, 0.0, 1.0)
    return np.asarray(p / p.sum(axis=1, keepdims=True), dtype=np.float64)


def certain(verdict: Sequence[int] | Codes) -> FloatArray:
    """Verdicts given without probabilities, as probabilities: one-hot rows (tie, first,
    second)."""
    return np.eye(3)[np.asarray(verdict, dtype=np.int64)]


def probability_problems(p: FloatArray) -> NDArray[np.bool_]:
    """Rows of label probabilities that are not a distribution (see label_probabilities;
    a value within the tolerance outside [0, 1], as 1 - p1 - p2 can give, is rounding)."""
    tol = PROBABILITY_TOLERANCE
    with np.errstate(invalid="ignore"):
        outside = ~((p >= -tol) & (p <= 1.0 + tol)).all(axis=1)
        off = ~(np.abs(p.sum(axis=1) - 1.0) <= tol)
    return np.asarray(outside | off, dtype=np.bool_)


def judgment_weights(table: VerdictTable) -> FloatArray:
    """Weight 1/C for each of the C criterion rows of one judgment.

    A judgment is one (scenario, judge, first, second) call; counting its criterion
    rows as independent verdicts would overstate the evidence C-fold.
    """
    key = np.stack([table.scenario, table.judge, table.first, table.second])
    _, inverse, sizes = np.unique(key, axis=1, return_inverse=True, return_counts=True)
    return np.asarray(1.0 / sizes[inverse.ravel()], dtype=np.float64)


@dataclass(frozen=True, eq=False)
class Run:
    """Entries taken in one go by a pass over a styled fit's verdicts (StyleEntries):
    `entries` is their range and `cells` the cells their sums go to. `starts`, where
    each cell's entries start within the run, where the entries lie in cell order (a
    running sum per cell, `cells` those cells); None where they do not, and each cell
    is summed by `cell`, the entries' cells (`cells` then every cell)."""

    entries: slice
    cells: IntArray | slice
    starts: IntArray | None
    cell: NDArray[np.integer]
    n_cells: int

    def sums(self, rows: Sequence[FloatArray]) -> FloatArray:
        """Per cell of `cells`, the sums of each of `rows` (one value per entry of the
        run), as rows x cells."""
        if self.starts is not None:
            return np.stack([np.add.reduceat(row, self.starts) for row in rows])
        cell = self.cell[self.entries]
        return np.stack([tally(cell, row, self.n_cells) for row in rows])


# About this many entries make a run (Run): a run's arrays and the dozens of
# temporaries a pass makes of them stay in a core's cache, where whole arrays of a
# million entries send every operation to memory (a pass over 1.67 M arena battles:
# 2.5x faster), and a pass over 1e8 verdicts needs no memory beyond them.
RUN_ENTRIES = 32_768
# The longest run of verdicts out of cell order (its temporaries: some 200 MB).
_LONGEST_RUN = 1 << 20
# Up to this many styled verdicts their style differences are kept in memory, and the
# verdicts put in cell order, so that a run sums each cell's entries as they lie.
# Beyond it a run's differences are computed from the replies' features as the run is
# taken, and the verdicts stay in the order given (sorting would need a permutation as
# large as they are), each run counting into every cell: memory then follows the
# verdict table alone (1e8 styled verdicts in 4 GB).
STYLE_IN_MEMORY = 1 << 24


class StyleSource(Protocol):
    """Style differences of a table's rows: features x rows for `rows` when called;
    `kept`, all of them (features x rows) where they are kept in memory, else None."""

    @property
    def n_features(self) -> int: ...

    @property
    def kept(self) -> FloatArray | None: ...

    def __call__(self, rows: slice | NDArray[np.integer]) -> FloatArray: ...


@dataclass(frozen=True, eq=False)
class KeptStyle:
    """Style differences kept in memory, features x rows (a StyleSource)."""

    kept: FloatArray

    @property
    def n_features(self) -> int:
        return int(self.kept.shape[0])

    def __call__(self, rows: slice | NDArray[np.integer]) -> FloatArray:
        return self.kept[:, rows]


@dataclass(frozen=True, eq=False)
class StyleEntries:
    """The verdicts of styled counts one by one, under their (judge, first, second)
    cell: style control gives every verdict its own style differences, so they are
    not summed. Entry e is verdict `label[e]` (TIE, FIRST, SECOND) in cell `cell[e]`,
    weighing `weight[e]` (None: 1 each), with the style differences of row `row[e]`
    of `source` (None: row e). A soft verdict is an entry per label it gives weight
    to."""

    cell: NDArray[np.integer]
    label: NDArray[np.integer]
    weight: FloatArray | None
    source: StyleSource
    n_cells: int
    row: NDArray[np.integer] | None = None

    def __len__(self) -> int:
        return len(self.cell)

    @property
    def n_features(self) -> int:
        return self.source.n_features

    def differences(self, entries: slice | NDArray[np.integer]) -> FloatArray:
        """The style differences of `entries`, features x entries."""
        return self.source(entries if self.row is None else self.row[entries])

    def weights(self) -> FloatArray:
        """Each entry's weight (1 each where none is kept)."""
        return np.ones(len(self)) if self.weight is None else self.weight

    def outcomes(self, entries: slice | NDArray[np.integer]) -> OutcomeSums:
        """What the likelihood reads of `entries` (OutcomeSums): up to STYLE_IN_MEMORY
        entries from sums made once for every pass (a bootstrap round's three passes
        over 1.67 M battles), beyond it made for these entries alone."""
        if len(self) <= STYLE_IN_MEMORY:
            whole = self._outcomes
            return OutcomeSums(whole.total[entries], whole.wins[entries], whole.ties[entries])
        weight = None if self.weight is None else self.weight[entries]
        return OutcomeSums.of_labels(self.label[entries], weight)

    @cached_property
    def _outcomes(self) -> OutcomeSums:
        return OutcomeSums.of_labels(self.label, self.weight)

    def counts(self, weight: FloatArray | None = None) -> FloatArray:
        """The (tie, first, second) counts per cell (cells x 3) of the entries under
        `weight` (default their own)."""
        weight = self.weight if weight is None else weight
        slot = self._slots if len(self) <= STYLE_IN_MEMORY else self._slot()
        return tally(slot, weight, 3 * self.n_cells).reshape(self.n_cells, 3)

    def _slot(self) -> IntArray:
        """Each entry's cell * 3 + label: its place among the cells' counts."""
        return self.cell.astype(np.int64) * 3 + self.label

    @cached_property
    def _slots(self) -> IntArray:
        return self._slot()

    def with_weight(self, weight: FloatArray) -> StyleEntries:
        """The same entries under other weights (runs and slots kept)."""
        out = replace(self, weight=weight)
        for kept in ("runs", "_slots"):
            if kept in self.__dict__:
                out.__dict__[kept] = self.__dict__[kept]
        return out

    @cached_property
    def runs(self) -> tuple[Run, ...]:
        """The entries in runs of about RUN_ENTRIES: of whole cells where they lie in
        cell order (a cell larger than that is a run of its own), else in the order
        given, each run counting into every cell (then at least as long as the cells
        are many, up to _LONGEST_RUN, so that counting costs no more than the run)."""
        cell, n = self.cell, len(self)
        if not (n and np.all(cell[1:] >= cell[:-1])):
            every = slice(0, self.n_cells)
            length = min(max(RUN_ENTRIES, self.n_cells), _LONGEST_RUN)
            return tuple(Run(run, every, None, cell, self.n_cells) for run in chunks(n, length))
        starts = np.flatnonzero(np.r_[True, cell[1:] != cell[:-1]])
        # each run from the first cell starting at or after a multiple of RUN_ENTRIES
        bounds = np.searchsorted(starts, np.arange(0, n, RUN_ENTRIES))
        bounds = np.unique(np.r_[bounds, len(starts)])
        entry_at = np.r_[starts, n]
        return tuple(
            Run(
                slice(int(entry_at[a]), int(entry_at[b])),
                np.asarray(cell[starts[a:b]], dtype=np.int64),
                starts[a:b] - starts[a],
                cell,
                self.n_cells,
            )
            for a, b in pairwise(bounds)
        )


@dataclass(frozen=True, eq=False)
class VerdictCounts:
    """Weighted verdict counts per distinct (judge, first, second) cell.

    `n[c]` holds the (tie, first, second) counts of cell c. Cells with zero weight are
    allowed and contribute nothing, so resampled counts can share one cell layout. With
    style control, `style` holds the cells' verdicts one by one with their style
    differences (StyleEntries), which is what the likelihood reads; `n` is still their
    sum per cell, for everything that reads only who judged whom and how.
    """

    judge: IntArray
    first: IntArray
    second: IntArray
    n: FloatArray
    models: tuple[str, ...]
    style: StyleEntries | None = None

    @classmethod
    def from_table(
        cls, table: VerdictTable, style: FloatArray | StyleSource | None = None
    ) -> VerdictCounts:
        """The counts of `table`; `style` gives each row's style differences (rows x
        features, or a StyleSource)."""
        plain, cell = _cells(table)
        return plain if style is None else _styled(table, plain, cell, style)[0]

    @cached_property
    def judge_first(self) -> IntArray:
        """Flat (judge, first) index into a models x models matrix, per cell."""
        return self.judge * self.n_models + self.first

    @cached_property
    def judge_second(self) -> IntArray:
        return self.judge * self.n_models + self.second

    @cached_property
    def self_side(self) -> FloatArray:
        """Per cell, +1 where the judge's own reply is shown first, -1 second, else 0."""
        return np.asarray(
            (self.judge == self.first).astype(np.float64) - (self.judge == self.second),
            dtype=np.float64,
        )

    @cached_property
    def outcomes(self) -> OutcomeSums:
        """Each cell's total, first-minus-second and tie counts (read once per counts,
        by every pass of a fit over them)."""
        return OutcomeSums.of(self.n)

    @cached_property
    def judges_present(self) -> IntArray:
        """The models with a cell as judge (in the layout, whatever its weight)."""
        return _present(self.n_models, self.judge)

    @cached_property
    def shown(self) -> IntArray:
        """The models with a cell as first or second evaluee (in the layout)."""
        return _present(self.n_models, self.first, self.second)

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def n_cells(self) -> int:
        return len(self.judge)

    @property
    def n_terms(self) -> int:
        """What the likelihood sums over: the cells, or with style the entries."""
        return self.n_cells if self.style is None else len(self.style)

    @property
    def n_style(self) -> int:
        return 0 if self.style is None else self.style.n_features

    @cached_property
    def total(self) -> float:
        """The verdicts' total weight (read by every objective evaluation)."""
        return float(self.n.sum())

    def with_n(self, n: FloatArray, style: StyleEntries | None = None) -> VerdictCounts:
        """Same cells, other counts (keeps the cached index arrays), and the style
        entries whose weights sum to `n` (styled counts are reweighted with them)."""
        if self.style is not None and style is None:
            raise ValueError("styled counts are reweighted with their entries")
        return self._same_cells(n, style)

    def _same_cells(self, n: FloatArray, style: StyleEntries | None) -> VerdictCounts:
        """These cells with counts `n` and entries `style`, the cached index arrays kept."""
        out = VerdictCounts(self.judge, self.first, self.second, n, self.models, style)
        for name in ("judge_first", "judge_second", "self_side", "judges_present", "shown"):
            if name in self.__dict__:
                out.__dict__[name] = self.__dict__[name]
        return out

    def without_style(self) -> VerdictCounts:
        """The same verdicts in (judge, first, second) cells, style set aside."""
        return self._without_style

    @cached_property
    def _without_style(self) -> VerdictCounts:
        return self if self.style is None else self._same_cells(self.n, None)

    def judge_totals(self) -> FloatArray:
        """Verdict weight each model gave as a judge (read-only)."""
        return self._judge_totals

    def evaluee_totals(self) -> FloatArray:
        """Verdict weight in which each model was one of the two evaluees (read-only)."""
        return self._evaluee_totals

    @cached_property
    def _judge_totals(self) -> FloatArray:
        return _read_only(tally(self.judge, self.outcomes.total, self.n_models))

    @cached_property
    def _evaluee_totals(self) -> FloatArray:
        per_cell = self.outcomes.total
        both = tally(self.first, per_cell, self.n_models)
        both += tally(self.second, per_cell, self.n_models)
        return _read_only(both)

    def pooled(self) -> tuple[FloatArray, FloatArray]:
        """Judges pooled: (wins, ties), wins[j, k] = times j beat k in either slot."""
        m = self.n_models
        wins = tally(self.first * m + self.second, self.n[:, FIRST], m * m)
        wins += tally(self.second * m + self.first, self.n[:, SECOND], m * m)
        ties = tally(self.first * m + self.second, self.n[:, TIE], m * m).reshape(m, m)
        return wins.reshape(m, m), ties + ties.T


@dataclass(frozen=True, eq=False)
class ScenarioCounts:
    """Counts kept per scenario, so that scenarios (clusters) can be reweighted.

    The cluster bootstrap and scenario-split validation both need counts under a
    weight per scenario; with this layout each such count is one `bincount`. Without
    style an entry is a (scenario, cell, verdict) with its summed weight; with style
    it is the counts' own StyleEntries entry, and `entry_scenario` says whose.
    """

    cells: VerdictCounts  # cell layout; its `n` holds the full-data counts
    entry_scenario: NDArray[np.integer]  # per entry
    n_scenarios: int
    plain: tuple[IntArray, FloatArray] | None = None  # without style: (slot, weight)

    @classmethod
    def from_table(
        cls, table: VerdictTable, style: FloatArray | StyleSource | None = None
    ) -> ScenarioCounts:
        """Per-scenario counts of `table`; `style` gives each row's style differences
        (rows x features, or a StyleSource)."""
        cells, cell = _cells(table)
        n_scenarios = len(table.scenarios)
        if style is not None:
            return cls(*_styled(table, cells, cell, style), n_scenarios)
        n_cells = cells.n_cells
        scenario = table.scenario
        if table.probs is None:
            slot, row_weight = cell.astype(np.int64) * 3 + table.verdict, table.weight
        else:  # a soft verdict is an entry per label
            label = table.label_weights()
            row, verdict = np.nonzero(label)
            scenario, slot, row_weight = (
                scenario[row],
                cell[row].astype(np.int64) * 3 + verdict,
                label[row, verdict],
            )
        entry = scenario.astype(np.int64) * (3 * n_cells) + slot
        if np.all(row_weight == 1.0):
            uniq, count = np.unique(entry, return_counts=True)
            weight = count.astype(np.float64)
        else:
            uniq, inverse = np.unique(entry, return_inverse=True)
            weight = tally(inverse, row_weight, len(uniq))
        scen, slot_u = np.divmod(uniq, 3 * n_cells)
        return cls(cells, scen, n_scenarios, (slot_u, weight))

    @cached_property
    def _cell_label(self) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        if self.plain is None:
            style = self.cells.style
            assert style is not None
            return style.cell, style.label
        cell, label = np.divmod(self.plain[0], 3)
        return cell, label

    @property
    def entry_cell(self) -> NDArray[np.integer]:
        """Each entry's cell."""
        return self._cell_label[0]

    @property
    def entry_label(self) -> NDArray[np.integer]:
        """Each entry's verdict (TIE, FIRST, SECOND)."""
        return self._cell_label[1]

    @property
    def entry_weight(self) -> FloatArray:
        """Each entry's weight in the full data."""
        if self.plain is None:
            style = self.cells.style
            assert style is not None
            return style.weights()
        return self.plain[1]

    def entry_style(self, entries: slice) -> FloatArray:
        """The style differences of `entries` (features x entries; no rows without
        style)."""
        style = self.cells.style
        if style is None:
            return np.zeros((0, len(self.entry_scenario[entries])))
        return style.differences(entries)

    def entry_outcomes(self, entries: slice) -> OutcomeSums:
        """What the likelihood reads of `entries` (OutcomeSums)."""
        style = self.cells.style
        if style is not None:
            return style.outcomes(entries)
        return OutcomeSums.of_labels(self.entry_label[entries], self.entry_weight[entries])

    def counts(self, scenario_weight: FloatArray | None = None) -> VerdictCounts:
        """Counts with each scenario's verdicts multiplied by its weight (default 1)."""
        if scenario_weight is None:
            return self.cells
        style = self.cells.style
        w = scenario_weight[self.entry_scenario]
        if style is None or style.weight is not None:
            w *= self.entry_weight
        if style is not None:
            return self.cells.with_n(style.counts(w), style.with_weight(w))
        assert self.plain is not None
        n = tally(self.plain[0], w, 3 * self.cells.n_cells)
        return self.cells.with_n(n.reshape(-1, 3))


def _cells(table: VerdictTable) -> tuple[VerdictCounts, NDArray[np.integer]]:
    """The counts of `table` per (judge, first, second) cell, and each row's cell;
    the rows taken _CHUNK_ROWS at a time, so that 1e8 of them need no whole-length
    temporaries."""
    m = table.n_models
    parts = chunks(len(table), _CHUNK_ROWS)

    def keys(rows: slice) -> IntArray:
        judge = table.judge[rows].astype(np.int64)
        return (judge * m + table.first[rows]) * m + table.second[rows]

    if m**3 <= _DENSE_KEY_LIMIT:
        present = np.zeros(m**3, dtype=bool)
        for rows in parts:
            present[keys(rows)] = True
        cell_keys = np.flatnonzero(present)
        lookup = np.cumsum(present, dtype=code_type(len(cell_keys))) - 1
        del present

        def cells(rows: slice) -> NDArray[np.integer]:
            return lookup[keys(rows)]
    else:
        found = [np.unique(keys(rows)) for rows in parts]
        cell_keys = np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)

        def cells(rows: slice) -> NDArray[np.integer]:
            return np.searchsorted(cell_keys, keys(rows)).astype(code_type(len(cell_keys)))

    n_cells = len(cell_keys)
    cell = np.empty(len(table), dtype=code_type(n_cells))
    n = np.zeros(3 * n_cells)
    for rows in parts:
        cell[rows] = here = cells(rows)
        if table.probs is None:
            slot = here.astype(np.int64) * 3 + table.verdict[rows]
            n += tally(slot, table.weight[rows], 3 * n_cells)
        else:
            label = table.weight[rows, None] * table.probs[rows]
            n += np.stack([tally(here, label[:, r], n_cells) for r in range(3)], axis=1).ravel()
    judge, rest = np.divmod(cell_keys, m * m)
    first, second = np.divmod(rest, m)
    return VerdictCounts(judge, first, second, n.reshape(n_cells, 3), table.models), cell


def code_type(size: int) -> type[np.signedinteger]:
    """The narrowest integer type that holds the codes of `size` things (names,
    cells): a table of 1e8 verdicts over some thousand models holds each code in 2
    bytes, not 8."""
    if size < 2**15:
        return np.int16
    return np.int32 if size < 2**31 else np.int64


def _styled(
    table: VerdictTable,
    plain: VerdictCounts,
    cell: NDArray[np.integer],
    style: FloatArray | StyleSource,
) -> tuple[VerdictCounts, NDArray[np.integer]]:
    """`plain`, the counts of `table` whose rows lie in cells `cell`, with the rows as
    style entries (style differences `style`: rows x features, or a StyleSource; a soft
    verdict an entry per label it gives weight to), in cell order where the
    differences are kept in memory and at most STYLE_IN_MEMORY. And each entry's
    scenario."""
    source = KeptStyle(np.ascontiguousarray(style.T)) if isinstance(style, np.ndarray) else style
    index, scenario, label, weights = cell, table.scenario, table.verdict, table.weight
    row = None
    if table.probs is not None:
        spread = table.label_weights()
        row, label = np.nonzero(spread)
        index, scenario, weights = index[row], scenario[row], spread[row, label]
    kept = source.kept
    if kept is not None and len(index) <= STYLE_IN_MEMORY and not np.all(index[1:] >= index[:-1]):
        order = np.argsort(index, kind="stable")
        index, label, scenario, weights = (
            index[order],
            label[order],
            scenario[order],
            weights[order],
        )
        source = KeptStyle(kept[:, order if row is None else row[order]])
        row = None
    weight = None if np.all(weights == 1.0) else weights
    entries = StyleEntries(index, label, weight, source, plain.n_cells, row)
    return plain.with_n(plain.n, entries), scenario


@dataclass(frozen=True)
class DesignReport:
    """What the verdicts can and cannot support; errors block the fit. `external` marks
    the external judges: models that judge but are never judged."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    external: NDArray[np.bool_]


def check_design(counts: VerdictCounts, *, min_verdicts: float = 30.0) -> DesignReport:
    """Find models without data, a disconnected graph of evaluees, thin data; tell
    external judges (judges never judged) from evaluees."""
    names = np.asarray(counts.models, dtype=object)
    errors: list[str] = []
    warnings: list[str] = []
    evaluee_n = counts.evaluee_totals()
    judge_n = counts.judge_totals()
    never_evaluated = evaluee_n <= 0
    external = never_evaluated & (judge_n > 0)
    if counts.total <= 0:
        return DesignReport(("there are no usable verdicts",), (), external)
    crowd = _crowd_hint(names[external], judge_n[external], min_verdicts)
    if counts.n_models > MAX_NAMES:
        return DesignReport(
            (
                f"{counts.n_models:,} judges and evaluees: the fit holds a matrix of that size "
                f"squared, so at most {MAX_NAMES:,} can be fitted{crowd or ''}",
            ),
            (),
            external,
        )
    unused = never_evaluated & ~external
    if unused.any():
        errors.append(
            f"{_list(names[unused])} appear in no usable verdict, neither as a judge nor as "
            "an evaluee (first or second); remove their rows or add verdicts"
        )
    evaluated = ~never_evaluated
    if evaluated.sum() > 1:
        m = counts.n_models
        used = counts.n.sum(axis=1) > 0
        graph = coo_matrix(
            (np.ones(int(used.sum())), (counts.first[used], counts.second[used])), shape=(m, m)
        )
        n_comp, label = connected_components(graph, directed=False)
        groups = [names[(label == c) & evaluated] for c in range(n_comp)]
        groups = [g for g in groups if len(g)]
        if len(groups) > 1:
            shown = "; ".join(f"{{{_list(g)}}}" for g in groups[:4])
            errors.append(
                f"the comparison graph falls into {len(groups)} disconnected groups ({shown}); "
                "scores across groups are not comparable; add verdicts that compare models "
                "of different groups"
            )
    no_judging = evaluated & (judge_n <= 0)
    if no_judging.any() and not no_judging[evaluated].all():
        onward = "evenly to every evaluee"
        if external.any():
            onward = "as the external judges' consensus"
        warnings.append(
            f"{_list(names[no_judging])} never judge: their own trust comes from the "
            "verdicts on them, as every member's does; the trust that reaches them they "
            f"pass on {onward} (the PageRank convention for members without verdicts of "
            "their own), an empty row in the trust matrix"
        )
    thin_e = evaluated & (evaluee_n < min_verdicts)
    if thin_e.any():
        warnings.append(
            f"thin data: {_list(names[thin_e])} appear in fewer than {min_verdicts:g} verdicts "
            "as an evaluee; their intervals will be wide"
        )
    thin_j = (judge_n > 0) & (judge_n < min_verdicts)
    if thin_j.any():
        warnings.append(
            f"thin data: {_list(names[thin_j])} gave fewer than {min_verdicts:g} verdicts "
            "as a judge; their lens and tie propensity are poorly determined"
        )
    if crowd:
        warnings.append(crowd.removeprefix("; "))
    return DesignReport(tuple(errors), tuple(warnings), external)


def _crowd_hint(names: NDArray[np.object_], verdicts: FloatArray, min_verdicts: float) -> str:
    """Advice for many thin external judges (a judge column naming every voter)."""
    if len(names) <= _CROWD or np.median(verdicts) >= min_verdicts:
        return ""
    return (
        f"; {len(names):,} external judges gave a median of {np.median(verdicts):g} verdicts "
        "each, too few to fit a judge each (a crowd of voters?); pool them into one judge "
        f"with --pool-judges PATTERN (e.g. {_pattern_hint(names)!r}) or drop the judge column"
    )


def _pattern_hint(names: NDArray[np.object_]) -> str:
    """The longest common prefix of the names, as a pattern."""
    prefix = os.path.commonprefix([str(n) for n in names])  # noqa: RUF071 (by character)
    return prefix + "*" if prefix else "*"


def _list(names: NDArray[np.object_] | Sequence[str], limit: int = 8) -> str:
    shown = [f"'{n}'" for n in list(names)[:limit]]
    more = len(names) - limit
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
