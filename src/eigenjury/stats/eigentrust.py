"""Trust matrices from a fitted judge population, and EigenTrust over them.

Trust of judge i in evaluee j is the expected share of "j is at least as good"
outcomes when i compares j with every other evaluee:

    S_ij = pi_ij + (lambda_i / 2) sum_{k != j} sqrt(pi_ij pi_ik),   T_ij = S_ij / sum_j' S_ij'

EigenTrust (Kamvar et al. 2003) then finds t = t G with G = (1 - a) T + a 1 p: an
evaluee is trusted when trusted judges prefer it. Rows of judges without data are
dangling and follow the pre-trust vector p (the PageRank convention).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from eigenjury.stats.verdicts import FloatArray

_FLOOR = 1e-300


def trust_matrix(
    scores: FloatArray,
    tie_propensity: FloatArray,
    *,
    judge_mask: NDArray[np.bool_] | None = None,
    exclude_self: bool = False,
) -> FloatArray:
    """Row-stochastic T from scores s_ij = u_i . v_j (rows: judges, columns: evaluees).

    With `exclude_self`, judge i neither trusts itself nor counts itself among the
    evaluees it compares others with. Rows outside `judge_mask` are all zero.
    """
    m = scores.shape[0]
    keep = np.ones((m, m), dtype=bool)
    if exclude_self:
        np.fill_diagonal(keep, False)
    shifted = np.where(keep, scores, -np.inf)
    shifted = shifted - shifted.max(axis=1, keepdims=True)  # per-judge constant cancels in T
    pi = np.exp(shifted)
    root = np.sqrt(pi)
    support = pi + 0.5 * tie_propensity[:, None] * root * (root.sum(axis=1, keepdims=True) - root)
    # exp underflows for a disposition far below the rest (a perfect losing record);
    # a floor keeps every trust, and so every Elo, finite
    support = np.where(keep, np.maximum(support, _FLOOR), 0.0)
    t = support / support.sum(axis=1, keepdims=True)
    if judge_mask is not None:
        t[~judge_mask] = 0.0
    return np.asarray(t)


def eigentrust(
    trust: FloatArray,
    *,
    damping: float = 0.0,
    pretrust: FloatArray | None = None,
    method: Literal["exact", "power"] = "exact",
    tol: float = 1e-13,
    max_iter: int = 100_000,
) -> FloatArray:
    """The trust vector t = t G, sum(t) = 1, by an eigen-solver or by power iteration."""
    m = trust.shape[0]
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must lie in [0, 1), got {damping}")
    p = np.full(m, 1.0 / m) if pretrust is None else np.asarray(pretrust, dtype=np.float64)
    if p.shape != (m,) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError("pretrust must be a non-negative vector over the models summing to 1")
    rows = trust.sum(axis=1)
    g = np.where((rows > 0)[:, None], trust, p[None, :])
    g = (1.0 - damping) * g + damping * p[None, :]
    if method == "exact":
        values, left = scipy.linalg.eig(g, left=True, right=False)
        vec = np.real(left[:, np.argmin(np.abs(values - 1.0))])
        t = vec / vec.sum()
        if np.any(t < -1e-10):
            raise ValueError("trust matrix is reducible: its stationary vector is not unique")
        t = np.clip(t, _FLOOR, None)
        return np.asarray(t / t.sum())
    if method != "power":
        raise ValueError(f"method must be 'exact' or 'power', got {method!r}")
    t = p.copy()
    for _ in range(max_iter):
        nxt = t @ g
        if np.abs(nxt - t).sum() < tol:
            return np.asarray(nxt / nxt.sum())
        t = nxt
    raise RuntimeError(f"power iteration did not converge in {max_iter} steps")
