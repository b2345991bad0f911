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
dispositions, where the factorised objective's gradient follows from this one's
(_ScoresProblem.factorised_size): no pass over the cells is needed to confirm it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from eigenjury.stats.btd import _LOG_BOUND, _ROUNDING, BTDParams, davidson_curvature
from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    TIE,
    FloatArray,
    IntArray,
    VerdictCounts,
    tally,
)

if TYPE_CHECKING:
    from eigenjury.stats.btd import LowRankBTD

_MAX_STEPS = 100
# Scores spread less than this are a flat ranking, at or next to the kink of l2 |s| at
# s = 0, where Newton's steps are not to be trusted (from an exact 0, |s| underflows
# and a false stationary point appears): left to the factorised solvers.
_FLAT = 1e-6


def _length(scores: FloatArray) -> float:
    """|scores|, without the underflow of squaring tiny values."""
    peak = float(np.max(np.abs(scores), initial=0.0))
    if peak == 0.0:
        return 0.0
    return peak * float(np.sqrt(np.sum((scores / peak) ** 2)))


def sole_external_judge(counts: VerdictCounts) -> int | None:
    """The judge, where one judge gave every verdict and is never judged itself."""
    judges = counts.judges_present
    if len(judges) != 1 or judges[0] in counts.shown:
        return None
    return int(judges[0])


@dataclass(frozen=True)
class _ScoresProblem:
    """The posterior in the judge's scores' space. Parameters, in order: the scores
    of the shown models, the tie logit, the position bias (where fitted), the style
    coefficients. A verdict's offset moves with e_first - e_second (+ the position
    bias) and its style differences; the verdicts of a (judge, first, second) cell (a
    group) share the first part, so the Hessian is summed per group (Run.sums) and per
    feature, never per verdict and parameter."""

    counts: VerdictCounts
    first: IntArray  # per group, the first model's place among the scores
    second: IntArray
    scores: int  # how many
    position_bias: bool
    l2: float
    prior_scale: float  # the prior's curvature on the centred scores, per verdict

    @property
    def tie_at(self) -> int:
        return self.scores

    @property
    def style_at(self) -> int:
        return self.scores + 2 if self.position_bias else self.scores + 1

    @property
    def size(self) -> int:
        return self.style_at + self.counts.n_style

    def factorised_size(self, theta: FloatArray, grad: FloatArray) -> float:
        """The largest component of the factorised objective's gradient at the balanced
        lenses and dispositions of `theta`, from this objective's `grad`: with u of
        length sqrt|s| and v_j = s_j u / |s|, d/dv_j = sqrt|s| d/ds_j and d/du =
        (s . d/ds) / sqrt|s| (every other lens and disposition component 0), the tie,
        position and style terms the same. So the fit stops where the factorised
        solvers would call it converged, with no pass over the cells to check."""
        scores, slope = theta[: self.scores], grad[: self.scores]
        root = math.sqrt(_length(scores))
        rest = float(np.max(np.abs(grad[self.scores :]), initial=0.0))
        if root == 0.0:
            return max(float(np.max(np.abs(slope))), rest)
        return max(abs(float(slope @ scores)) / root, root * float(np.max(np.abs(slope))), rest)

    def _penalty(self, theta: FloatArray) -> float:
        scores, style = theta[: self.scores], theta[self.style_at :]
        centred = scores - scores.mean()
        return (
            self.l2 * _length(scores)
            + 0.5 * self.l2 * float(style @ style)
            + 0.5 * self.prior_scale * float(centred @ centred)
        )

    def expand(self, theta: FloatArray) -> tuple[float, float, FloatArray, FloatArray]:
        """The objective, the negative log-likelihood (total), the objective's gradient
        and its Hessian at `theta`, from one pass over the cells, a run of whole groups
        at a time (StyleEntries.runs)."""
        counts, e = self.counts, self.scores
        k = counts.n_style
        beta = theta[self.style_at :]
        tie = float(theta[self.tie_at])
        group_offset = theta[self.first] - theta[self.second]
        if self.position_bias:
            group_offset += theta[self.scores + 1]
        # per group: slope, curvature, tie cross and curvature times each feature
        per_group = np.zeros((3 + k, len(self.first)))
        nll = g_tie = h_tie = 0.0
        # summed over the verdicts, times each feature: slope, tie cross and curvature
        z_slope, z_cross, z_gram = np.zeros(k), np.zeros(k), np.zeros((k, k))

        def taken(z: FloatArray, terms: tuple[FloatArray, ...]) -> list[FloatArray]:
            """Adds the verdicts' `terms` (davidson_curvature's) with style differences
            `z` to the sums over them; returns their rows to be summed per group."""
            nonlocal nll, g_tie, h_tie
            run_nll, g, run_g_tie, h, h_cross, run_h_tie = terms
            hz = z * h
            nll += float(run_nll.sum())
            g_tie += float(run_g_tie.sum())
            h_tie += float(run_h_tie.sum())
            z_slope[:] += z @ g
            z_cross[:] += z @ h_cross
            z_gram[:] += hz @ z.T
            return [g, h, h_cross, *hz]

        entries = counts.style
        if entries is None:  # each cell its own verdict
            terms = davidson_curvature(group_offset, tie, counts.outcomes)
            per_group[:] = taken(np.zeros((0, len(group_offset))), terms)
        else:
            for run in entries.runs:
                z = entries.differences(run.entries)
                offset = group_offset[entries.cell[run.entries]]
                if k:
                    offset += beta @ z
                terms = davidson_curvature(offset, tie, entries.outcomes(run.entries))
                per_group[:, run.cells] += run.sums(taken(z, terms))

        # the same summed without the features (the position bias's)
        plain_slope, plain_h, plain_cross = per_group[:3].sum(axis=1)
        z_curve = per_group[3:].sum(axis=1)
        # per group: d offset / d scores = e_first - e_second, scattered to the scores
        first, second = self.first, self.second

        def spread(values: FloatArray) -> FloatArray:
            return tally(first, values, e) - tally(second, values, e)

        grad = np.zeros(self.size)
        hessian = np.zeros((self.size, self.size))
        grad[:e] = spread(per_group[0])
        pair_h = per_group[1]
        laplacian = tally(first * e + first, pair_h, e * e)
        laplacian += tally(second * e + second, pair_h, e * e)
        laplacian -= tally(first * e + second, pair_h, e * e)
        laplacian -= tally(second * e + first, pair_h, e * e)
        hessian[:e, :e] = laplacian.reshape(e, e)
        # the offset's other parameters: position bias (1 per cell), style (z)
        rest_at = e + 1
        columns = slice(rest_at, self.size)
        if self.position_bias:
            grad[columns] = np.r_[plain_slope, z_slope]
            others_h = np.block([[plain_h, z_curve], [z_curve[:, None], z_gram]])
            others_cross = np.r_[plain_cross, z_cross]
        else:
            grad[columns], others_h, others_cross = z_slope, z_gram, z_cross
        hessian[columns, columns] = others_h
        cross = [spread(pair_h)] if self.position_bias else []
        cross += [spread(row) for row in per_group[3:]]
        if cross:
            block = np.column_stack(cross)
            hessian[:e, columns] = block
            hessian[columns, :e] = block.T
        # the tie logit
        t = self.tie_at
        grad[t] = g_tie
        tie_cross = np.concatenate([spread(per_group[2]), others_cross])
        keep = np.r_[0:e, rest_at : self.size]
        hessian[t, keep] = hessian[keep, t] = tie_cross
        hessian[t, t] = h_tie
        grad /= counts.total
        hessian /= counts.total
        # the penalties: l2 |s| (a norm), l2/2 |b|^2, the prior on centred scores
        scores, style = theta[:e], theta[self.style_at :]
        norm = _length(scores)
        unit = scores / norm if norm > 0 else np.zeros(e)
        centred = scores - scores.mean()
        grad[:e] += self.prior_scale * centred + self.l2 * unit
        grad[self.style_at :] += self.l2 * style
        hessian[:e, :e] += self.prior_scale * (np.eye(e) - 1.0 / e)
        if norm > 0:
            hessian[:e, :e] += self.l2 / norm * (np.eye(e) - np.outer(unit, unit))
        hessian[self.style_at :, self.style_at :] += self.l2 * np.eye(k)
        # a shift of every score changes nothing but |s|, least where they sum to 0:
        # the steps are kept there (the gradient has no part along it at a centred s)
        hessian[:e, :e] += 1.0 / e
        return nll / counts.total + self._penalty(theta), nll, grad, hessian


@dataclass(frozen=True)
class OneJudgeFit:
    """The posterior's optimum in the judge's scores' space, as lenses and
    dispositions (`params`), and what the factorised fit reports of it."""

    params: BTDParams
    steps: int  # Newton steps
    objective: float  # per verdict; the L2 term at its least over factorisations, l2 |s|
    nll: float  # total negative log-likelihood
    grad_norm: float  # the factorised objective's largest gradient component, per verdict


def one_judge_fit(
    counts: VerdictCounts,
    judge: int,
    model: LowRankBTD,
    style_shape: tuple[int, ...],
    init: BTDParams | None = None,
) -> OneJudgeFit | None:
    """The optimum of `model`'s posterior on `counts` (one external `judge`), as
    balanced lenses and dispositions; None where the reduced problem does not settle
    to tolerance inside the factorised fit's bounds (a judge that never ties, an
    unlimited perfect record without prior or L2, a flat ranking): the factorised
    solvers then take over. `init`: a nearby fit to start from (a bootstrap round's,
    the full fit)."""
    if init is None and counts.n_style:
        # without style the cells are few (a pair's battles in three): its optimum is a
        # start some passes over the styled cells nearer
        plain = counts.without_style()
        solved = one_judge_fit(plain, judge, model, (*style_shape[:-1], 0))
        init = None if solved is None else solved.params
    shown = counts.shown
    problem = _problem(counts, model)
    theta = _start(problem, judge, shown, init)
    e = problem.scores
    value, nll, grad, hessian = problem.expand(theta)
    if _length(theta[:e]) < _FLAT:
        # at the kink: off it along the likelihood's pull, unless l2 |s| outweighs it
        # (then the optimum is a flat ranking)
        pull = _length(grad[:e])
        if pull <= model.l2:
            return None
        theta[:e] = -0.1 * grad[:e] / pull
        value, nll, grad, hessian = problem.expand(theta)
    steps = 0
    largest = problem.factorised_size(theta, grad)
    while largest > model.tol:  # as L-BFGS-B's and the pair solver's tolerance
        if steps == _MAX_STEPS:
            return None
        steps += 1
        try:
            step = -np.linalg.solve(hessian, grad)
        except np.linalg.LinAlgError:  # nothing holds some score (no prior, no link)
            return None
        decrease = float(grad @ step)
        if not decrease < 0:
            return None
        # backtracking (Armijo); each trial's expansion serves the next step, and near
        # the optimum the whole step is taken: one pass over the cells a step
        length = 1.0
        trial = problem.expand(theta + step)
        while not (trial[0] <= value + 1e-4 * length * decrease or _rounding(trial[0], value)):
            length *= 0.5
            if length < 1e-10:
                return None
            trial = problem.expand(theta + length * step)
        trial_largest = problem.factorised_size(theta + length * step, trial[2])
        rounding = _rounding(trial[0], value)
        if rounding and trial_largest >= largest:
            break  # at the optimum the objective stops moving: the gradient says so too
        theta = theta + length * step
        value, nll, grad, hessian = trial
        largest = trial_largest
        bounded = theta[problem.tie_at : problem.style_at]
        if not np.all(np.isfinite(theta)) or np.max(np.abs(bounded)) >= _LOG_BOUND:
            return None  # a judge that never ties, or always picks one slot
    if largest > 10 * model.tol:
        return None  # short of what the factorised fit calls converged
    if _length(theta[:e]) < _FLAT:
        return None
    params = _balanced(problem, theta, judge, shown, model.dim, style_shape)
    return OneJudgeFit(params, steps, value, nll, largest)


def _problem(counts: VerdictCounts, model: LowRankBTD) -> _ScoresProblem:
    """`model`'s posterior on `counts` in the scores of the models they show."""
    shown = counts.shown
    index = np.full(counts.n_models, -1)
    index[shown] = np.arange(len(shown))
    prior = model.prior
    return _ScoresProblem(
        counts,
        index[counts.first],
        index[counts.second],
        len(shown),
        model.position_bias,
        model.l2,
        0.0 if prior is None else 1.0 / (prior.judge_sd**2 + prior.consensus_sd**2) / counts.total,
    )


def _rounding(new: float, old: float) -> bool:
    """Whether two values of the objective differ only in their last digits."""
    return abs(new - old) <= _ROUNDING * max(1.0, abs(old))


def _start(
    problem: _ScoresProblem, judge: int, shown: IntArray, init: BTDParams | None
) -> FloatArray:
    """From `init` where given, else each shown model's log odds of winning (ties
    half), centred."""
    theta = np.zeros(problem.size)
    e = problem.scores
    if init is None:
        counts = problem.counts
        first, second = problem.first, problem.second
        tie, won, lost = counts.n[:, TIE], counts.n[:, FIRST], counts.n[:, SECOND]
        both = np.concatenate([first, second])
        wins = tally(both, np.concatenate([won, lost]) + 0.5 * np.tile(tie, 2), e)
        played = tally(both, np.tile(counts.n.sum(axis=1), 2), e)
        logits = np.log((wins + 0.5) / (played - wins + 0.5))
        theta[:e] = logits - logits.mean()
        return theta
    scores = init.dispositions[shown] @ init.lenses[judge]
    theta[:e] = scores - scores.mean()
    theta[problem.tie_at] = init.log_tie[judge]
    if problem.position_bias:
        theta[problem.tie_at + 1] = init.position_bias[judge]
    style = init.style[judge] if init.style.ndim == 2 else init.style
    if style.shape == (problem.counts.n_style,):
        theta[problem.style_at :] = style
    return theta


def _balanced(
    problem: _ScoresProblem,
    theta: FloatArray,
    judge: int,
    shown: IntArray,
    dim: int,
    style_shape: tuple[int, ...],
) -> BTDParams:
    """The factorisation of the judge's scores that the L2 term prefers: its lens of
    length sqrt|s| along the first axis, the dispositions s / sqrt|s| along it."""
    m = problem.counts.n_models
    scores = theta[: problem.scores]
    root = np.sqrt(_length(scores))
    lenses = np.zeros((m, dim))
    dispositions = np.zeros((m, dim))
    lenses[judge, 0] = root
    dispositions[shown, 0] = scores / root
    log_tie = np.zeros(m)
    log_tie[judge] = theta[problem.tie_at]
    bias = np.zeros(m)
    if problem.position_bias:
        bias[judge] = theta[problem.tie_at + 1]
    style = np.zeros(style_shape)
    coefficients = theta[problem.style_at :]
    if len(style_shape) == 2:  # per judge: the one judge's row
        style[judge] = coefficients
    else:
        style[:] = coefficients
    return BTDParams(lenses, dispositions, log_tie, bias, np.zeros(m), style)
