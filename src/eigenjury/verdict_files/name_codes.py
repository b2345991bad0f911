"""Names as integer codes: models, scenarios and criteria coded in one namespace each
across a file's batches, and the scenario names of battles that have none."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, overload

import numpy as np

from eigenjury.verdict_files.columns import BoolArray, IntArray


class NameCodes:
    """Names coded in order of first appearance, one namespace across batches. The
    names are kept as Arrow arrays and a batch's names are looked up among them in
    Arrow, unless the namespace is much larger than the batch's names (a dataset's
    millions of scenarios met a few thousand per batch): then in a Python dict."""

    def __init__(self) -> None:
        self.chunks: list[Any] = []  # pyarrow string arrays, the names in code order
        self.size = 0
        self._index: dict[str, int] | None = None

    def codes(self, texts: Any, *, distinct: bool = False) -> IntArray:
        """The code of each of `texts` (a pyarrow string array; null: -1), new names added.
        `distinct`: no name is among `texts` twice (a dictionary's values that trimming
        left as they were), so they need no encoding: 0.7 s for 1.67 M question ids."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if distinct:
            valid = np.asarray(texts.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            rows = np.where(valid, np.cumsum(valid) - 1, -1)
            distinct_texts = texts if valid.all() else texts.filter(pa.array(valid))
        else:
            encoded = pc.dictionary_encode(texts)
            rows = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False)
            distinct_texts = encoded.dictionary
        known = self._known(distinct_texts)
        return np.where(rows >= 0, np.append(known, -1)[rows], -1)

    def _known(self, distinct: Any) -> IntArray:
        """The codes of `distinct` names, those not yet known added."""
        import pyarrow as pa
        import pyarrow.compute as pc

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
        return known

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

        codes = np.flatnonzero(used)
        kept = self.names().take(pa.array(codes))
        order = _sort_order(kept)
        new = np.full(self.size, -1, dtype=np.int64)
        new[codes[order]] = np.arange(len(codes))
        return tuple(kept.take(pa.array(order)).to_pylist()), new

    def sorted_names(self, used: BoolArray) -> SortedNames:
        """The used names in sorted order, sorted when first read (where no row's code
        follows the order)."""
        import pyarrow as pa

        return SortedNames(self.names().take(pa.array(np.flatnonzero(used))))


def _sort_order(names: Any) -> IntArray:
    import pyarrow.compute as pc

    order: IntArray = pc.array_sort_indices(names).to_numpy(zero_copy_only=False)
    return order


class SortedNames(Sequence[str]):
    """Names in sorted order, sorted when an item is first asked for: a point fit of a
    million arena battles with a question id each needs only how many questions there
    are, and sorting the ids costs 1.4 s, longer than the fit."""

    def __init__(self, names: Any) -> None:
        self._names = names  # pyarrow string array, unsorted
        self._sorted: tuple[str, ...] | None = None

    def __len__(self) -> int:
        return len(self._names)

    def _all(self) -> tuple[str, ...]:
        if self._sorted is None:
            import pyarrow as pa

            order = pa.array(_sort_order(self._names))
            self._sorted = tuple(self._names.take(order).to_pylist())
        return self._sorted

    @overload
    def __getitem__(self, index: int) -> str: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[str, ...]: ...
    def __getitem__(self, index: int | slice) -> str | tuple[str, ...]:
        return self._all()[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and self._all() == tuple(other)

    __hash__ = None  # type: ignore[assignment]


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
