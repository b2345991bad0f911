"""The adaptive design: each round, the judge calls that shrink ranking uncertainty most.

Under the current fit (a Laplace approximation around the maximum-likelihood point),
the covariance of the parameters is Sigma = F^-1, with F the Fisher information of
the verdicts collected so far. A new comparison (judge i; j and k, both orders) adds
information B^T B, where B stacks, per order, P D^1/2 J: J the Jacobian of the three
logits, D the predicted outcome probabilities and P = I - sqrt(p) sqrt(p)^T. The
target is the uncertainty of the Elo order: G = sum over pairs w_jk a a^T with
a = grad(Elo_j - Elo_k), weighted by w_jk = phi(z) / var with z = |Elo_j - Elo_k| / sd,
so pairs whose order is in doubt count most. A candidate's value is the drop in
trace(G Sigma) it brings (Woodbury):

    trace((I + B Sigma B^T)^-1 B Sigma G Sigma B^T)

Candidates are taken greedily, Sigma updated after each pick, so a batch spreads over
the open questions instead of repeating one. Each pick is judged in both orders on a
scenario that judge has not used for that pair, the least used one first.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from eigenjury.peer.designs import Comparison, draw
from eigenjury.stats.btd import BTDParams, ScorePrior
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.verdicts import FloatArray


def logit_jacobians(
    params: BTDParams, judge: np.ndarray, first: np.ndarray, second: np.ndarray
) -> FloatArray:
    """d(tie, first, second logits)/d(parameters) per comparison: (n, 3, n_params),
    parameters packed as in `BTDParams.pack`."""
    m, d = params.lenses.shape
    n = len(judge)
    p = 2 * m * d + 3 * m
    out = np.zeros((n, 3, p))
    rows = np.arange(n)
    u, vj, vk = params.lenses[judge], params.dispositions[first], params.dispositions[second]
    for axis in range(d):
        lens_col = judge * d + axis
        first_col = m * d + first * d + axis
        second_col = m * d + second * d + axis
        out[rows, 0, lens_col] = 0.5 * (vj[:, axis] + vk[:, axis])
        out[rows, 0, first_col] = 0.5 * u[:, axis]
        out[rows, 0, second_col] = 0.5 * u[:, axis]
        out[rows, 1, lens_col] = vj[:, axis]
        out[rows, 1, first_col] = u[:, axis]
        out[rows, 2, lens_col] = vk[:, axis]
        out[rows, 2, second_col] = u[:, axis]
    out[rows, 0, 2 * m * d + judge] = 1.0
    out[rows, 1, 2 * m * d + m + judge] = 0.5
    out[rows, 2, 2 * m * d + m + judge] = -0.5
    own = (judge == first).astype(np.float64) - (judge == second)  # self-preference
    out[rows, 1, 2 * m * d + 2 * m + judge] = 0.5 * own
    out[rows, 2, 2 * m * d + 2 * m + judge] = -0.5 * own
    return out


def prior_information(
    params: BTDParams, prior: ScorePrior, judges: np.ndarray, evaluees: np.ndarray
) -> FloatArray:
    """The prior's curvature in the packed parameters (Gauss-Newton: the prior is
    quadratic in the scores, J^T H J with J = d scores / d parameters), and its
    self-preference term's."""
    m, d = params.lenses.shape
    entries = [(int(i), int(j)) for i in judges for j in evaluees]
    jacobian = np.zeros((len(entries), 2 * m * d + 3 * m))
    hessian = np.zeros((len(entries), len(entries)))
    rows, cols = (np.array(side) for side in zip(*entries, strict=True))
    for k, (i, j) in enumerate(entries):
        jacobian[k, i * d : (i + 1) * d] = params.dispositions[j]
        jacobian[k, m * d + j * d : m * d + (j + 1) * d] = params.lenses[i]
        basis = np.zeros((m, m))
        basis[i, j] = 1.0
        hessian[:, k] = prior.penalty(basis, judges, evaluees)[1][rows, cols]  # quadratic
    out = jacobian.T @ hessian @ jacobian
    own = np.arange(2 * m * d + 2 * m, 2 * m * d + 3 * m)
    out[own, own] += 1.0 / prior.self_sd**2
    return np.asarray(out)


def information_factors(jacobians: FloatArray, probabilities: FloatArray) -> FloatArray:
    """B with B^T B = J^T (diag(p) - p p^T) J, per comparison: (n, 3, n_params)."""
    root = np.sqrt(np.clip(probabilities, 1e-12, None))
    projector = np.eye(3)[None] - root[:, :, None] * root[:, None, :]
    return np.asarray(np.einsum("nab,nb,nbp->nap", projector, root, jacobians))


def elo_gradient(ranking: PeerRanking, step: float = 1e-5) -> FloatArray:
    """d Elo / d parameters by central differences: (evaluees, n_params)."""
    params = ranking.btd_.params_
    x = params.pack()
    m, d = params.lenses.shape
    grad = np.zeros((len(ranking.models_), len(x)))
    for col in range(len(x)):
        up, down = x.copy(), x.copy()
        up[col] += step
        down[col] -= step
        grad[:, col] = (
            ranking.elo_at(BTDParams.unpack(up, m, d))
            - ranking.elo_at(BTDParams.unpack(down, m, d))
        ) / (2 * step)
    return np.asarray(grad)


def order_weight(gap: FloatArray, var: FloatArray) -> FloatArray:
    """How much shrinking the variance of an Elo difference is worth: phi(z) / var."""
    z = gap / np.sqrt(var)
    return np.asarray(np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) / var)  # normal pdf


def choose(
    ranking: PeerRanking,
    scenarios: Sequence[str],
    done: Iterable[Comparison],
    calls: int,
    *,
    seed: int = 0,
) -> list[Comparison]:
    """About `calls` new judge calls (each pick is two: both orders), best first."""
    btd = ranking.btd_
    params = btd.params_
    names = list(ranking.judges_)
    evaluees = np.flatnonzero(~ranking.external_)
    m, d = params.lenses.shape
    counts = ranking.counts_
    # Fisher information of what is collected, plus the prior's and the penalty's
    # curvature: where the verdicts alone leave a direction open (a perfect record in
    # an early round), the prior is what bounds its uncertainty
    seen = information_factors(
        logit_jacobians(params, counts.judge, counts.first, counts.second),
        btd.predict_proba(counts.judge, counts.first, counts.second),
    )
    weight = counts.n.sum(axis=1)
    fisher = np.einsum("nap,n,naq->pq", seen, weight, seen)
    fisher[np.arange(2 * m * d), np.arange(2 * m * d)] += ranking.l2 * counts.total
    if ranking.prior is not None:
        fisher += prior_information(params, ranking.prior, counts.judges_present, counts.shown)
    fisher += np.eye(len(fisher)) * 1e-6 * np.trace(fisher) / len(fisher)
    sigma = np.linalg.inv(fisher)
    # what we want to learn: the Elo order, pairs in doubt first
    grad = elo_gradient(ranking)
    j_idx, k_idx = np.triu_indices(len(evaluees), 1)
    diffs = grad[j_idx] - grad[k_idx]
    var = np.einsum("np,pq,nq->n", diffs, sigma, diffs)
    gap = np.abs(ranking.elo_[j_idx] - ranking.elo_[k_idx])
    w = order_weight(gap, var)
    target = np.einsum("n,np,nq->pq", w, diffs, diffs)
    # every (judge, unordered pair of evaluees), both orders together
    cand = [
        (i, int(j), int(k))
        for i in range(m)
        for j, k in itertools.combinations(evaluees, 2)
        if btd.judge_mask_[i]
    ]
    judge, first, second = (np.array(c) for c in zip(*cand, strict=True))
    both = [
        information_factors(logit_jacobians(params, judge, a, b), btd.predict_proba(judge, a, b))
        for a, b in ((first, second), (second, first))
    ]
    factors = np.concatenate(both, axis=1)  # (candidates, 6, params)
    used: Counter[tuple[str, str, str, str]] = Counter()
    by_scenario: Counter[str] = Counter()
    for c in done:
        used[c.judge, c.first, c.second, c.scenario] += 1
        by_scenario[c.scenario] += 1
    alive = np.ones(len(cand), dtype=bool)
    out: list[Comparison] = []
    n_cand, rows, width = factors.shape
    eye = np.eye(rows)[None]
    while len(out) + 2 <= calls and alive.any():
        # all as matrix products (BLAS): B Sigma, then (I + B Sigma B^T) and B Sigma G Sigma B^T
        s_b = (factors.reshape(-1, width) @ sigma).reshape(n_cand, rows, width)
        inner = eye + s_b @ factors.transpose(0, 2, 1)
        s_g = (s_b.reshape(-1, width) @ target).reshape(n_cand, rows, width)
        gain = np.einsum("cab,cba->c", np.linalg.inv(inner), s_g @ s_b.transpose(0, 2, 1))
        gain[~alive] = -np.inf
        best = int(np.argmax(gain))
        i, j, k = (names[x] for x in cand[best])
        scenario = _scenario(i, j, k, scenarios, used, by_scenario, seed)
        if scenario is None:  # this judge has compared this pair on every scenario
            alive[best] = False
            continue
        for a, b in ((j, k), (k, j)):
            out.append(Comparison(scenario, i, a, b))
            used[i, a, b, scenario] += 1
        by_scenario[scenario] += 2
        b_best = factors[best]
        s_best = b_best @ sigma
        sigma -= s_best.T @ np.linalg.solve(np.eye(rows) + s_best @ b_best.T, s_best)
    return out


def _scenario(
    judge: str,
    a: str,
    b: str,
    scenarios: Sequence[str],
    used: Counter[tuple[str, str, str, str]],
    by_scenario: Counter[str],
    seed: int,
) -> str | None:
    """The least used scenario on which this judge has not yet compared this pair."""
    fresh = [s for s in scenarios if not used[judge, a, b, s]]
    if not fresh:
        return None
    return min(fresh, key=lambda s: (by_scenario[s], draw(seed, s, judge, a, b)))
