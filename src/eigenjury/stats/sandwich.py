"""Cluster-robust (sandwich) covariance of the low-rank BTD fit, and draws from it.

A bootstrap round refits the model; the sandwich needs the fit once. Near the optimum
the estimate moves as H^-1 s, with H the Hessian of the objective and s the sum of the
scenarios' scores (gradients of their log-likelihood), so its covariance is

    V = H^-1 B H^-1,   B = G / (G - 1) sum_c (s_c - mean s)(s_c - mean s)^T

over the G clusters (scenarios, questions): verdicts within a scenario may be as
correlated as they like, as with the scenario bootstrap. Lenses and dispositions are
identified only up to their gauge (stats.btd._off_gauge), which leaves every score
unchanged: V lives on the directions across it, and on the parameters the fit does
not hold fixed or at a bound.

Elo is trust through EigenTrust, a non-linear map; rather than a first-order delta
method for every quantity (Elo, ranks, pairwise differences), the fit's parameters are
drawn from N(estimate, V) and each draw is summarised as a bootstrap round is, so the
same interval code serves both (Krinsky and Robb's simulation). The intervals are then
Wald intervals carried through the map: right when the estimate is near normal (many
scenarios); the bootstrap remains the choice for small studies (BENCHMARKS.md 22).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from eigenjury.stats.btd import (
    BTDParams,
    LowRankBTD,
    _expand,
    _limits,
    _off_gauge,
    _Offsets,
    _Problem,
    davidson_curvature,
    group_jacobian,
    through_jacobian,
)
from eigenjury.stats.verdicts import (
    DataError,
    FloatArray,
    ScenarioCounts,
    VerdictCounts,
    chunks,
    tally,
)

BoolArray = NDArray[np.bool_]

Summary = Callable[[LowRankBTD], dict[str, FloatArray]]


@dataclass(frozen=True)
class ClusterCovariance:
    """The sandwich covariance on `basis` (parameters x directions: orthonormal, across
    the gauge, over the parameters free at the optimum): `covariance` (directions
    squared). `clusters`: how many clusters (scenarios) had verdicts."""

    basis: FloatArray
    covariance: FloatArray
    clusters: int

    def draw(self, params: BTDParams, rounds: int, seed: int | None) -> list[BTDParams]:
        """`rounds` parameter sets drawn from N(params, V), through the symmetric
        square root of V carried to the parameters (basis V^1/2 basis^T): unlike V's
        eigenvectors and the basis itself (whose signs and rotation LAPACK picks, and
        rounding can flip), it moves only as much as the fit does, so a seed draws the
        same sets on any machine."""
        values, vectors = np.linalg.eigh(self.covariance)
        root = (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T
        spread = self.basis @ root @ self.basis.T
        rng = np.random.default_rng(seed)
        steps = rng.standard_normal((rounds, len(spread))) @ spread
        centre = params.pack()
        shape = params.style.shape
        m, d = params.lenses.shape
        return [BTDParams.unpack(centre + step, m, d, shape) for step in steps]


def cluster_covariance(model: LowRankBTD, data: ScenarioCounts) -> ClusterCovariance:
    """The sandwich covariance of `model`, fitted to `data.counts()`, clustered by the
    scenarios of `data`. A DataError where the Hessian is not positive definite across
    the gauge (no prior and a perfect record: the estimate is not at a proper optimum,
    and only the bootstrap can say how far it may move)."""
    counts = data.counts()
    params = model.params_
    problem = _Problem(
        counts, model.dim, model.l2, model.position_bias, model.style_per_judge, model.prior
    )
    x = params.pack()
    expansion = _expand(problem, x)
    hessian = (expansion.outer + expansion.bilinear) * counts.total
    _, bounds = model._start_and_bounds(counts, params)  # the fit's own bounds
    lower, upper = _limits(bounds)
    free = (lower < upper) & (x > lower) & (x < upper) & _identified(params, counts, model)
    gram, total, clusters = _cluster_scores(problem, params, data)
    # directions across the gauge among the free parameters
    gauge = _off_gauge(params, model.dim)[free]
    across, _ = np.linalg.qr(np.c_[gauge, np.eye(int(free.sum()))])
    across = across[:, gauge.shape[1] :]
    basis = np.zeros((x.size, across.shape[1]))
    basis[free] = across
    inner = basis.T @ hessian @ basis
    inner = 0.5 * (inner + inner.T)
    values = np.linalg.eigvalsh(inner)
    if values[0] <= 1e-10 * max(values[-1], 1e-300):
        raise DataError(
            "sandwich intervals need a fit at a proper optimum, and this one is flat in "
            "some direction (a model or judge the verdicts cannot place, as with a perfect "
            "record and no prior): use the bootstrap (--interval percentile)"
        )
    # sum_c (s_c - mean)(s_c - mean)^T = S^T S - G mean mean^T, S sparse by cluster
    mean = total / clusters
    spread = gram - clusters * np.outer(mean, mean)
    meat = basis.T @ spread @ basis * (clusters / max(clusters - 1, 1))
    bread = np.linalg.inv(inner)
    return ClusterCovariance(basis, bread @ meat @ bread, clusters)


def _identified(params: BTDParams, counts: VerdictCounts, model: LowRankBTD) -> BoolArray:
    """The parameters some verdict bears on: lenses, tie and position terms of the
    judges that judged, dispositions of the models shown, self-preference of judges
    that judged themselves, the style coefficients (of judges that judged). The rest
    (a lens of a model that never judges, the disposition of an external judge) only
    the L2 term holds; no interval is about them."""
    m, d = params.lenses.shape
    judged = np.zeros(m, dtype=bool)
    judged[counts.judges_present] = True
    shown = np.zeros(m, dtype=bool)
    shown[counts.shown] = True
    own = np.zeros(m, dtype=bool)
    own[counts.judge[counts.self_side != 0]] = True
    style = (
        np.repeat(judged, params.style.shape[-1])
        if model.style_per_judge and params.style.size
        else np.ones(params.style.size, dtype=bool)
    )
    return np.concatenate([np.repeat(judged, d), np.repeat(shown, d), judged, judged, own, style])


# Verdicts per chunk of the cluster scores' pass (a chunk's temporaries: some 20 MB).
_CHUNK = 1 << 17


def _cluster_scores(
    problem: _Problem, params: BTDParams, data: ScenarioCounts
) -> tuple[FloatArray, FloatArray, int]:
    """sum_c s_c s_c^T and sum_c s_c over the clusters, s_c the gradient of cluster
    c's log-likelihood by every parameter, and how many clusters have verdicts. A
    verdict touches few parameters (its judge's lens, tie, position and self terms,
    the two dispositions, the style coefficients): a cluster of one verdict (an arena
    battle) adds its outer product, summed per (judge, pair) group and carried through
    the group's Jacobian as the Hessian's blocks are; larger clusters (a peer
    scenario) go through a sparse matrix by cluster. The verdicts are taken _CHUNK at
    a time, so that 1e8 of them need no whole-length temporaries (the sparse matrix
    holds a row per scenario, the parameters its verdicts touch)."""
    groups = problem.counts
    size = params.pack().size
    offsets = _Offsets(problem, params, params.lenses @ params.dispositions.T)
    where, jacobian = group_jacobian(params, groups, problem.per_judge_style)
    n_groups, k = groups.n_cells, 2 + groups.n_style
    lead = where.shape[1] - 1 - groups.n_style  # the tie logit's column
    parts = chunks(len(data.entry_scenario), _CHUNK)
    seen, again = _seen(data, parts)
    summed = np.zeros((n_groups, k))
    block = np.zeros((n_groups, k, k))
    matrix = sparse.csr_array((data.n_scenarios, size))
    for entries in parts:
        group = data.entry_cell[entries]
        z = data.entry_style(entries)
        offset, log_tie = offsets.at(group, z)
        _, g_offset, g_tie, *_ = davidson_curvature(offset, log_tie, data.entry_outcomes(entries))
        # gradient of the log-likelihood: minus that of the negative log-likelihood
        local = -np.column_stack([g_offset, g_tie, (g_offset * z).T])
        summed += np.stack([tally(group, local[:, a], n_groups) for a in range(k)], axis=1)
        scenario = data.entry_scenario[entries]
        alone = ~again[scenario]
        mine, own = group[alone], local[alone]
        for a in range(k):
            for b in range(a, k):
                block[:, a, b] += tally(mine, own[:, a] * own[:, b], n_groups)
        rest = ~alone
        if rest.any():
            mine, own = group[rest], local[rest]
            # the Jacobian's rows for the tie logit and the style coefficients are unit
            # vectors (group_jacobian): only the offset's row differs by group
            values = own[:, :1] * jacobian[mine, 0, :]
            values[:, lead] += own[:, 1]
            values[:, lead + 1 :] += own[:, 2:]
            rows = np.repeat(scenario[rest], where.shape[1])
            matrix += sparse.csr_array(
                (values.ravel(), (rows, where[mine].ravel())), shape=(data.n_scenarios, size)
            )
    # sum of the scores: per group, then through the Jacobian
    total = np.zeros(size)
    np.add.at(total, where, np.einsum("gk,gkw->gw", summed, jacobian))
    upper = np.triu_indices(k, 1)
    block[:, upper[1], upper[0]] = block[:, upper[0], upper[1]]
    gram = through_jacobian(where, jacobian, block, size)
    if matrix.nnz:
        gram += (matrix.T @ matrix).toarray()
    return gram, total, int(np.count_nonzero(seen))


def _seen(data: ScenarioCounts, parts: list[slice]) -> tuple[BoolArray, BoolArray]:
    """Which scenarios have an entry, and which more than one (a byte each, where
    counts would take eight: 1e8 arena battles are as many scenarios)."""
    seen = np.zeros(data.n_scenarios, dtype=bool)
    again = np.zeros(data.n_scenarios, dtype=bool)
    for entries in parts:
        present, times = np.unique(data.entry_scenario[entries], return_counts=True)
        again[present[(times > 1) | seen[present]]] = True
        seen[present] = True
    return seen, again


def sandwich_draws(
    model: LowRankBTD,
    data: ScenarioCounts,
    summarise: Summary,
    *,
    rounds: int,
    seed: int | None,
) -> dict[str, FloatArray]:
    """`rounds` draws of the fit's parameters from N(estimate, sandwich covariance),
    each summarised by `summarise` as a bootstrap round's refit is (arrays stacked on
    axis 0). A judge's self-preference bound moves with its estimate."""
    covariance = cluster_covariance(model, data)
    counts = data.counts()
    judge_verdicts, evaluee_verdicts = counts.judge_totals(), counts.evaluee_totals()
    results = []
    for params in covariance.draw(model.params_, rounds, seed):
        drawn = model.with_params(
            params, model.self_bias_upper_ + (params.self_bias - model.params_.self_bias)
        )
        out = summarise(drawn)
        out["judge_verdicts"] = judge_verdicts
        out["evaluee_verdicts"] = evaluee_verdicts
        results.append(out)
    return {key: np.stack([r[key] for r in results]) for key in results[0]}
