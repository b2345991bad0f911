"""Kept rows, merged where a caller needs counts only: rows equal in scenario, judge,
first, second and verdict become one row that counts them, so that memory follows
the distinct rows, not the file's."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from eigenjury.stats.verdicts import Codes, tally
from eigenjury.verdict_files.columns import IntArray


class KeptRows:
    """Kept rows as columns, batch by batch. With `merge`, rows equal in every key
    column become one row whose `count` says how many they were, merged whenever the
    rows waiting are as many as those merged (and at least `batch_rows`), so memory
    follows the distinct rows."""

    KEY = ("scenario", "judge", "first", "second", "verdict")

    def __init__(self, *, merge: bool, batch_rows: int) -> None:
        self.merge = merge
        self.batch_rows = batch_rows
        self.parts: list[dict[str, NDArray[Any]]] = []
        self.waiting = 0
        self.merged = 0

    def add(self, part: dict[str, NDArray[Any]]) -> None:
        self.parts.append(part)
        if self.merge:
            self.waiting += len(part["verdict"])
            if self.waiting >= max(self.batch_rows, self.merged):
                self._merge()

    def _merge(self) -> None:
        rows = self._joined()
        distinct, group = distinct_rows([rows[k] for k in self.KEY])
        merged: dict[str, NDArray[Any]] = dict(zip(self.KEY, distinct, strict=True))
        merged["count"] = tally(group, rows["count"], len(distinct[0]))
        self.parts, self.merged, self.waiting = [merged], len(merged["count"]), 0

    def _joined(self) -> dict[str, NDArray[Any]]:
        """The parts as one, each column copied into place a part at a time and the
        part's copy let go, so that joining needs a part's memory, not the rows'."""
        if len(self.parts) > 1:
            joined: dict[str, NDArray[Any]] = {}
            for key in list(self.parts[0]):
                pieces = [part[key] for part in self.parts]
                column = np.empty(
                    (sum(len(p) for p in pieces), *pieces[0].shape[1:]),
                    dtype=np.result_type(*pieces),
                )
                del pieces
                start = 0
                for part in self.parts:
                    piece = part.pop(key)
                    column[start : start + len(piece)] = piece
                    start += len(piece)
                joined[key] = column
            self.parts = [joined]
        return self.parts[0]

    def columns(self) -> dict[str, NDArray[Any]] | None:
        if not self.parts:
            return None
        if self.waiting:
            self._merge()
        return self._joined()


def distinct_rows(columns: Sequence[Codes]) -> tuple[list[IntArray], IntArray]:
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
