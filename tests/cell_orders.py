"""Counts whose cells and verdicts do not lie in (judge, first, second) order, as a
caller may build them: every fit and sum must give the same as for the collapsed
order; and styled counts built from cells with their style differences."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from eigenjury.stats.verdicts import FloatArray, KeptStyle, StyleEntries, VerdictCounts


def out_of_order(counts: VerdictCounts, seed: int = 0) -> VerdictCounts:
    """The same cells and style entries, each shuffled."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(counts.n_cells)
    shuffled = VerdictCounts(
        counts.judge[order],
        counts.first[order],
        counts.second[order],
        counts.n[order],
        counts.models,
    )
    entries = counts.style
    if entries is None:
        return shuffled
    place = np.argsort(order)  # a cell's new index
    mixed = rng.permutation(len(entries))
    weight = None if entries.weight is None else entries.weight[mixed]
    moved = StyleEntries(
        place[entries.cell[mixed]],
        entries.label[mixed],
        weight,
        KeptStyle(entries.differences(mixed)),
        counts.n_cells,
    )
    return shuffled.with_n(shuffled.n, moved)


def styled_cells(
    judge: Sequence[int],
    first: Sequence[int],
    second: Sequence[int],
    n: Sequence[Sequence[float]],
    models: tuple[str, ...],
    style: FloatArray,
) -> VerdictCounts:
    """Counts of cells (judge, first, second) each with its (tie, first, second) counts
    `n` and style differences `style` (cells x features); cells with equal keys are
    one cell with an entry per label counted."""
    keys = np.stack([judge, first, second], axis=1)
    unique, cell = np.unique(keys, axis=0, return_inverse=True)
    counts = np.asarray(n, dtype=np.float64)
    row, label = np.nonzero(counts)
    summed = np.zeros((len(unique), 3))
    np.add.at(summed, cell.ravel(), counts)
    kept = KeptStyle(np.ascontiguousarray(style.T[:, row]))
    entries = StyleEntries(cell.ravel()[row], label, counts[row, label], kept, len(unique))
    plain = VerdictCounts(unique[:, 0], unique[:, 1], unique[:, 2], summed, models)
    return plain.with_n(summed, entries)


def reweighted(counts: VerdictCounts, weight: FloatArray) -> VerdictCounts:
    """`counts` with each verdict's weight (a style entry's; without style a cell's
    counts') multiplied by `weight`, as a bootstrap round reweights them."""
    entries = counts.style
    if entries is None:
        return counts.with_n(counts.n * weight[:, None])
    w = entries.weights() * weight
    return counts.with_n(entries.counts(w), entries.with_weight(w))
