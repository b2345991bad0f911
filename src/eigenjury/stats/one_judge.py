"""The low-rank BTD fit where one external judge gave every verdict (an arena's crowd),
solved exactly in the space of that judge's scores.

One judge's scores are one row s = V u of the score matrix, so lenses and dispositions
matter only through s: the likelihood, the prior (on s centred) and the L2 term, whose
least value over the factorisations of s is (l2/2)(|u|^2 + |V|^2) = l2 |s| (u of
length sqrt|s|, V = s u^T / |u|^2). What is left is convex in (s, tie logit, position
bias, style coefficients): Davidson's negative log-likelihood is a log-sum-exp of
affine functions of the offset and tie logit, the prior a quadratic, |s| a norm. So it
has one optimum, which Newton's method reaches in a few passes from any start, where
the factorised fit explores random starts with L-BFGS-B for hundreds of passes each
(4.8 s on 1.67 M arena battles). The optimum is mapped back to lenses and
dispositions, and the caller's solver confirms it there to its own tolerance.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from eigenjury.stats.btd import _LOG_BOUND, BTDParams, ScorePrior, davidson_curvature
from eigenjury.stats.verdicts import FloatArray, VerdictCounts

_MAX_STEPS = 100


def sole_external_judge(counts: VerdictCounts) -> int | None:
    """The judge, where one judge gave every verdict and is never judged itself."""
    judges = counts.judges_present
    if len(judges) != 1 or judges[0] in counts.shown:
        return None
    return int(judges[0])


def one_judge_start(
    counts: VerdictCounts,
    judge: int,
    dim: int,
    *,
    l2: float,
    position_bias: bool,
    prior: ScorePrior | None,
    style_shape: tuple[int, ...],
    tol: float,
) -> BTDParams | None:
    """The optimum of the low-rank BTD posterior on `counts` (one external `judge`),
    as balanced lenses and dispositions; None where the reduced problem does not settle
    inside the factorised fit's bounds (a judge that never ties, an unlimited perfect
    record without prior or L2): the factorised solvers then take over."""
    m = counts.n_models
    shown = counts.shown
    index = np.full(m, -1)
    index[shown] = np.arange(len(shown))
    e = len(shown)
    k = counts.n_style
    # parameters: scores of the shown models, tie logit, position bias, style
    tie_at, pos_at = e, e + 1
    style_at = e + 2 if position_bias else e + 1
    size = style_at + k
    cells = counts.n_cells
    rows = np.arange(cells)
    columns = [index[counts.first], index[counts.second]]
    values = [np.ones(cells), -np.ones(cells)]
    if position_bias:
        columns.append(np.full(cells, pos_at))
        values.append(np.ones(cells))
    if k:
        assert counts.style is not None
        columns += [np.full(cells, style_at + f) for f in range(k)]
        values += [counts.style[:, f] for f in range(k)]
    jacobian = sparse.csr_array(
        (np.concatenate(values), (np.tile(rows, len(values)), np.concatenate(columns))),
        shape=(cells, size),
    )
    weight = 1.0 / counts.total
    centring = np.eye(e) - 1.0 / e
    prior_scale = 0.0 if prior is None else weight / (prior.judge_sd**2 + prior.consensus_sd**2)

    def expand(theta: FloatArray, order: int) -> tuple[float, FloatArray, FloatArray]:
        offset = jacobian @ theta
        log_tie = np.full(cells, theta[tie_at])
        nll, g_off, g_tie, h_off, h_cross, h_tie = davidson_curvature(offset, log_tie, counts.n)
        scores = theta[:e]
        centred = scores - scores.mean()
        norm = float(np.sqrt(scores @ scores))
        style = theta[style_at:]
        value = weight * float(nll.sum()) + l2 * norm + 0.5 * l2 * float(style @ style)
        value += 0.5 * prior_scale * float(centred @ centred)
        if order == 0:
            return value, np.zeros(0), np.zeros(0)
        grad = weight * (jacobian.T @ g_off)
        grad[tie_at] += weight * g_tie.sum()
        grad[:e] += prior_scale * centred + l2 * scores / max(norm, 1e-300)
        grad[style_at:] += l2 * style
        hessian = weight * (jacobian.T @ (jacobian * h_off[:, None])).toarray()
        cross = weight * (jacobian.T @ h_cross)
        hessian[tie_at] += cross
        hessian[:, tie_at] += cross
        hessian[tie_at, tie_at] += weight * h_tie.sum()
        unit = scores / max(norm, 1e-300)
        hessian[:e, :e] += prior_scale * centring
        hessian[:e, :e] += l2 / max(norm, 1e-300) * (np.eye(e) - np.outer(unit, unit))
        hessian[style_at:, style_at:] += l2 * np.eye(k)
        # a shift of every score changes nothing but |s|, least where they sum to 0:
        # the steps are kept there (the gradient has no part along it at a centred s)
        hessian[:e, :e] += 1.0 / e
        return value, grad, hessian

    theta = np.zeros(size)
    theta[:e] = _win_logits(counts, index, e)
    value, grad, hessian = expand(theta, 2)
    for _ in range(_MAX_STEPS):
        if np.max(np.abs(grad)) <= 0.1 * tol:
            break
        try:
            step = -np.linalg.solve(hessian, grad)
        except np.linalg.LinAlgError:  # nothing holds some score (no prior, no link)
            return None
        decrease = float(grad @ step)
        if not decrease < 0:
            return None
        length = 1.0
        while length > 1e-10:  # backtracking (Armijo) on a convex objective
            trial = theta + length * step
            trial_value = expand(trial, 0)[0]
            if trial_value <= value + 1e-4 * length * decrease:
                break
            length *= 0.5
        else:
            break  # rounding: no step decreases it further
        theta = trial
        value, grad, hessian = expand(theta, 2)
    bounded = [theta[tie_at]] + ([theta[pos_at]] if position_bias else [])
    if not np.all(np.isfinite(theta)) or np.max(np.abs(bounded)) >= _LOG_BOUND:
        return None
    scores = np.zeros(m)
    scores[shown] = theta[:e]
    return _balanced(
        scores, judge, dim, theta, tie_at, pos_at, style_at, position_bias, style_shape
    )


def _win_logits(counts: VerdictCounts, index: FloatArray, e: int) -> FloatArray:
    """A start: each shown model's log odds of winning (ties half), centred."""
    first, second = index[counts.first], index[counts.second]
    tie, won, lost = counts.n[:, 0], counts.n[:, 1], counts.n[:, 2]
    both = np.concatenate([first, second])
    wins = np.bincount(both, np.concatenate([won, lost]) + 0.5 * np.tile(tie, 2), e)
    played = np.bincount(both, np.tile(counts.n.sum(axis=1), 2), e)
    logits = np.log((wins + 0.5) / (played - wins + 0.5))
    return np.asarray(logits - logits.mean())


def _balanced(
    scores: FloatArray,
    judge: int,
    dim: int,
    theta: FloatArray,
    tie_at: int,
    pos_at: int,
    style_at: int,
    position_bias: bool,
    style_shape: tuple[int, ...],
) -> BTDParams:
    """The factorisation of the judge's scores that the L2 term prefers: its lens of
    length sqrt|s| along the first axis, the dispositions s / sqrt|s| along it."""
    m = len(scores)
    root = np.sqrt(max(float(np.sqrt(scores @ scores)), 1e-300))
    lenses = np.zeros((m, dim))
    dispositions = np.zeros((m, dim))
    lenses[judge, 0] = root
    dispositions[:, 0] = scores / root
    log_tie = np.zeros(m)
    log_tie[judge] = theta[tie_at]
    bias = np.zeros(m)
    if position_bias:
        bias[judge] = theta[pos_at]
    style = np.zeros(style_shape)
    coefficients = theta[style_at:]
    if len(style_shape) == 2:  # per judge: the one judge's row
        style[judge] = coefficients
    else:
        style[:] = coefficients
    return BTDParams(lenses, dispositions, log_tie, bias, np.zeros(m), style)
