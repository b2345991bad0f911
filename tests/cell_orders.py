"""Counts whose cells do not lie in (judge, first, second) order, as a caller may
build them: every fit and sum must give the same as for the collapsed order."""

from __future__ import annotations

import numpy as np

from eigenjury.stats.verdicts import VerdictCounts


def out_of_order(counts: VerdictCounts, seed: int = 0) -> VerdictCounts:
    """The same cells, shuffled."""
    order = np.random.default_rng(seed).permutation(counts.n_cells)
    return VerdictCounts(
        counts.judge[order],
        counts.first[order],
        counts.second[order],
        counts.n[order],
        counts.models,
        None if counts.style is None else counts.style[order],
    )
