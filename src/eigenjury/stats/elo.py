"""Elo ratings from trust vectors, ranks, and rank intervals from interval overlap."""

from __future__ import annotations

import numpy as np

from eigenjury.stats.verdicts import FloatArray, IntArray

ELO_BASE = 1500.0
ELO_SCALE = 400.0
# Elo values closer than this are equal. Fits of models the verdicts cannot tell apart
# still differ by up to ~1e-4 points (the optimiser's tolerance); that noise must not
# order them. 0.01 is also the precision of the written record.
ELO_TOLERANCE = 0.01


def to_elo(
    trust: FloatArray, *, anchor: str | int = "uniform", value: float = ELO_BASE
) -> FloatArray:
    """Elo_j = value + 400 log10(t_j / reference), over the last axis.

    anchor "uniform": reference 1/N, so a uniform trust vector maps to `value` (the
    EigenBench convention); "mean": ratings shifted to average `value`; an integer:
    that model is fixed at `value`.
    """
    log_t = np.log10(trust)
    n = trust.shape[-1]
    if anchor == "uniform":
        ref = np.full((*log_t.shape[:-1], 1), -np.log10(n))
    elif anchor == "mean":
        ref = log_t.mean(axis=-1, keepdims=True)
    elif isinstance(anchor, int | np.integer) and 0 <= anchor < n:
        ref = log_t[..., [anchor]]
    else:
        raise ValueError(f"anchor must be 'uniform', 'mean' or a model index, got {anchor!r}")
    return np.asarray(value + ELO_SCALE * (log_t - ref))


def ranks(values: FloatArray, tolerance: float = ELO_TOLERANCE) -> IntArray:
    """Rank 1 for the largest value; values within `tolerance` share the better rank
    (1, 1, 3: one more than the number of values clearly above)."""
    above = values[None, :] > values[:, None] + tolerance
    return np.asarray(1 + above.sum(axis=1), dtype=np.int64)


def rank_intervals(low: FloatArray, high: FloatArray, tolerance: float = ELO_TOLERANCE) -> IntArray:
    """[best, worst] rank per model from interval overlap.

    A model is surely behind every model whose interval lies wholly above its own
    (by more than `tolerance`), and surely ahead of every model whose interval lies
    wholly below it; intervals that touch within `tolerance` overlap.
    """
    above = (low[None, :] > high[:, None] + tolerance).sum(axis=1)
    below = (high[None, :] < low[:, None] - tolerance).sum(axis=1)
    return np.stack([1 + above, len(low) - below], axis=1)
