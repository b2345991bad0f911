"""Trust matrices from a fitted judge population, and EigenTrust over them.

Trust of judge i in evaluee j is the expected share of "j is at least as good"
outcomes when i compares j with every other evaluee:

    S_ij = pi_ij + (lambda_i / 2) sum_{k != j} sqrt(pi_ij pi_ik),   T_ij = S_ij / sum_j' S_ij'

EigenTrust (Kamvar et al. 2003) then finds t = t G with G = (1 - a) T + a 1 p: an
evaluee is trusted when trusted judges prefer it. Rows of judges without data are
dangling and follow the pre-trust vector p (the PageRank convention).

External judges (judges that are never judged) have no standing of their own to
weigh them by, so they enter as the pre-trust: p is the weighted mean of their rows,
and t = (1 - a) t T + a p is a random walk that, at each step, with probability a
asks the external panel instead of following the current evaluee's opinion (the
seed set of personalised PageRank / TrustRank). See :func:`panel_trust`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import scipy.linalg
from numpy.typing import NDArray

from eigenjury.stats.verdicts import FloatArray, IntArray

_FLOOR = 1e-300


def trust_matrix(
    scores: FloatArray,
    tie_propensity: FloatArray,
    *,
    judge_mask: NDArray[np.bool_] | None = None,
    exclude_self: bool = False,
    evaluees: IntArray | None = None,
) -> FloatArray:
    """Row-stochastic T from scores s_ij = u_i . v_j (rows: judges, columns: evaluees).

    `evaluees` picks the columns (indices into the judges' namespace; default every
    model), so that judges who are never judged get no trust. With `exclude_self`,
    judge i neither trusts itself nor counts itself among the evaluees it compares
    others with. Rows outside `judge_mask` are all zero.
    """
    m = scores.shape[0]
    columns = np.arange(scores.shape[1]) if evaluees is None else np.asarray(evaluees)
    keep = np.ones((m, len(columns)), dtype=bool)
    if exclude_self:
        keep[columns, np.arange(len(columns))] = False
    shifted = np.where(keep, scores[:, columns], -np.inf)
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


def damping_for(damping: float | None, *, external: bool, peers: bool) -> float:
    """The damping a to use, given the one asked for (None: the default) and whether
    there are external judges and evaluees that judge (peer judges).

    Defaults: 0 without external judges (plain EigenTrust); 0.5 with both kinds, so
    that the external panel and the peer population have an equal say (a is the share
    of trust that flows from the panel; the data cannot choose it); 1 with external
    judges only, where t = p whatever a is, so any other value is refused as
    meaningless. Without external judges a = 1 would make trust the uniform
    pre-trust, and is refused too.
    """
    if damping is not None and not 0.0 <= damping <= 1.0:
        raise ValueError(f"damping must lie in [0, 1], got {damping}")
    if not external:
        if damping == 1.0:
            raise ValueError(
                "damping 1 makes trust the pre-trust alone (uniform without external "
                "judges); use a value below 1"
            )
        return 0.0 if damping is None else damping
    if not peers:
        if damping is not None and damping != 1.0:
            raise ValueError(
                f"damping {damping:g} cannot apply: no evaluee ever judges, so trust is the "
                "external judges' consensus (damping 1); leave the damping unset"
            )
        return 1.0
    return 0.5 if damping is None else damping


def panel_trust(
    trust: FloatArray,
    evaluees: IntArray,
    external: IntArray,
    weights: FloatArray,
    *,
    damping: float,
    pretrust: FloatArray | None = None,
) -> FloatArray:
    """EigenTrust of the evaluees, t = (1 - a) t T + a p, with the external judges'
    weighted consensus as the pre-trust p.

    `trust` is a judges x evaluees matrix (:func:`trust_matrix` with `evaluees`); the
    evaluees' own rows (`evaluees` indexes its rows) are T; `external` indexes the
    external judges' rows, `weights` weighs them. External judges without data (zero
    rows, as in a bootstrap round that drew none of their verdicts) drop out and the
    others' weights are renormalised; when none is left, p is `pretrust` (default
    uniform). With a = 1, t = p.
    """
    rows = trust[external]
    present = np.asarray(weights, dtype=np.float64) * (rows.sum(axis=1) > 0)
    if present.sum() > 0:
        pretrust = present @ rows / present.sum()
    if damping < 1.0:
        return eigentrust(trust[evaluees], damping=damping, pretrust=pretrust)
    n = len(evaluees)
    return np.full(n, 1.0 / n) if pretrust is None else np.asarray(pretrust)
