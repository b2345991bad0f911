"""Trust matrices from a fitted judge population, and EigenTrust over them.

Trust of judge i in evaluee j is j's share of i's win strength over the evaluees:

    T_ij = pi_ij / sum_j' pi_ij',   pi_ij = exp(s_ij)

In Davidson's model, the odds of j beating k are pi_ij / pi_ik whatever the judge's
tie propensity, so ties stay out of trust: they are the judge's habit, reported as
its tie propensity. (EigenBench's rule, S_ij = pi_ij + (lambda_i / 2) sum_k
sqrt(pi_ij pi_ik), counted a tie as half a win; it compressed Elo more the more
models there were, so that leaderboards of different sizes were not comparable.
eigenjury 0.3 dropped it.) With one judge, T_ij is the Luce choice share, and Elo
differences are 400 / ln 10 times score differences at any number of models: the
Bradley-Terry Elo.

The self entries T_ii stay: with the fit's self-preference term (stats.btd), s_ii
comes from how i judges the others and how the others judge i, not from i's verdicts
on itself, and zeroing them would skew trust toward the middle of the field (with
one shared lens, t_j would follow pi_j (sum_k pi_k - pi_j) instead of pi_j; two
models would always tie). But the factorisation alone can set s_ii far too high: a
judge's friend that another judge always picks gets a direction of its own, which
only the friend's own lens meets, and nothing but the prior pins that lens (its
verdicts on itself go to delta_i). The friend then trusts itself on a score its own
verdicts deny (delta_i of -7 logits). So s_ii is lowered where the judge's verdicts on
itself say less than the factorisation does, as far as they show it: to s_ii +
delta_i^+, delta_i^+ an upper confidence bound on its self-preference
(stats.btd.self_bias_upper; `own_scores`). A judge that rates itself higher keeps
s_ii, its self-preference buying nothing; an honest judge whose estimate is noise
around 0 is left alone (lowering by the estimate itself biased every fit: the noise
of an honest judge's delta_i only ever took its trust away).

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

# The least trust a model is given: a trust this small means the fit broke down.
FLOOR = 1e-300


def trust_matrix(
    scores: FloatArray,
    *,
    judge_mask: NDArray[np.bool_] | None = None,
    evaluees: IntArray | None = None,
) -> FloatArray:
    """Row-stochastic T from scores s_ij = u_i . v_j (rows: judges, columns: evaluees).

    `evaluees` picks the columns (indices into the judges' namespace; default every
    model), so that judges who are never judged get no trust. Rows outside
    `judge_mask` are all zero.
    """
    columns = np.arange(scores.shape[1]) if evaluees is None else np.asarray(evaluees)
    shifted = scores[:, columns]
    shifted = shifted - shifted.max(axis=1, keepdims=True)  # per-judge constant cancels in T
    # exp underflows for a disposition far below the rest; a floor keeps every trust,
    # and so every Elo, finite (a fit's prior keeps scores far from it)
    support = np.maximum(np.exp(shifted), FLOOR)
    t = support / support.sum(axis=1, keepdims=True)
    if judge_mask is not None:
        t[~judge_mask] = 0.0
    return np.asarray(t)


def own_scores(scores: FloatArray, self_bias_upper: FloatArray) -> FloatArray:
    """`scores` (judges x models, one namespace) with each judge's score of itself
    lowered where its verdicts on itself say less, as far as they show it:
    s_ii + min(delta_i^+, 0), delta_i^+ the upper bound on its self-preference
    (stats.btd.self_bias_upper)."""
    lowered = np.array(scores, dtype=np.float64, copy=True)
    own = np.arange(min(lowered.shape))
    lowered[own, own] += np.minimum(np.asarray(self_bias_upper, dtype=np.float64)[own], 0.0)
    return lowered


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
        t = np.clip(t, FLOOR, None)
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
