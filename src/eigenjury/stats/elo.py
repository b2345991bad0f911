"""Elo ratings from trust vectors, ranks, and rank intervals from interval overlap."""

from __future__ import annotations

import numpy as np

from eigenjury.stats.verdicts import FloatArray, IntArray

ELO_BASE = 1500.0
ELO_SCALE = 400.0


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


def ranks(values: FloatArray) -> IntArray:
    """Rank 1 for the largest value (ties broken by position, stably)."""
    order = np.argsort(-values, kind="stable")
    out = np.empty(len(values), dtype=np.int64)
    out[order] = np.arange(1, len(values) + 1)
    return out


def rank_intervals(low: FloatArray, high: FloatArray) -> IntArray:
    """[best, worst] rank per model from interval overlap.

    A model is surely behind every model whose interval lies wholly above its own,
    and surely ahead of every model whose interval lies wholly below it.
    """
    above = (low[None, :] > high[:, None]).sum(axis=1)
    below = (high[None, :] < low[:, None]).sum(axis=1)
    return np.stack([1 + above, len(low) - below], axis=1)
