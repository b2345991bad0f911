"""The low-rank Bradley-Terry-Davidson model of pairwise verdicts with ties.

Judge i has a lens u_i, evaluee j a disposition v_j, s_ij = u_i . v_j. A verdict on
(first j, second k) is a softmax over three logits

    tie:    log lambda_i + (s_ij + s_ik) / 2
    first:  s_ij + gamma_i / 2
    second: s_ik - gamma_i / 2

which is Davidson's tie model with lambda_i the tie propensity. gamma_i is the judge's
position bias: the log-odds advantage of whichever response is shown first. It
cancels in the tie logit and is kept out of the trust matrix, so a judge that
favours the first slot does not move anyone's trust. With gamma = 0 this is exactly
P(1) = pi_ij / D, P(2) = pi_ik / D, P(0) = lambda_i sqrt(pi_ij pi_ik) / D.

Self-preference enters the same offset: when judge i is one of the two evaluees,
delta_i is added to its own reply's side (+ when shown first, - second). A judge
that favours itself thus explains its verdicts on itself by delta_i, not by its lens
or its disposition, so they buy it no trust; the score it would give itself, u_i . v_i,
comes from how it judges the others and how the others judge it. (Adding delta to
s_ii would move the tie logit by delta / 2 as well, which shifting all three logits
undoes: the two are the same model.)

Style control adds covariates to the same offset: with z the normalised, standardised
difference in style features between the first and the second reply (stats.style),
gamma_i becomes gamma_i + beta . z, one beta shared by all judges or one per judge.
Like the position bias it moves the win logits in opposite directions and cancels in
the tie logit, so ties stay symmetric, and it stays out of the scores s_ij: trust and
Elo come from the model with style held equal (z = 0).

Only U V^T up to a per-judge constant, lambda, gamma and delta are identified. The fit
is a posterior mode: a Gaussian prior on the judges' centred scores (ScorePrior: a
consensus and each judge's deviation from it) keeps every score finite, a perfect
record included, and draws a thinly seen judge toward the others; a small L2 penalty
per verdict on U and V picks one factorisation of the same scores. The prior does not
shrink with the data: its pull is that of a few verdicts, what it should be.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.optimize import minimize

from eigenjury.stats._threads import one_blas_thread
from eigenjury.stats.verdicts import (
    FIRST,
    SECOND,
    TIE,
    DataError,
    FloatArray,
    IntArray,
    OutcomeSums,
    VerdictCounts,
    code_type,
    tally,
)

if TYPE_CHECKING:
    from eigenjury.stats.one_judge import OneJudgeFit

# Bounds on log lambda and gamma: far beyond any real judge, they only stop a judge
# that never ties (or always picks one slot) from driving a parameter to infinity.
_LOG_BOUND = 15.0

# Per verdict, on lenses and dispositions: it only picks the balanced one of the
# factorisations U V^T of the same scores (the prior, ScorePrior, is what keeps the
# scores themselves finite); small enough that its pull on Elo stays far below
# sampling error even at 1e6 verdicts.
DEFAULT_L2 = 1e-6
DEFAULT_RESTARTS = 4
# Starts are explored to this gradient tolerance, then only the best one is polished
# to `tol`: local optima are told apart long before the last digits are settled.
_EXPLORE_TOL = 1e-5
# Explored starts whose log-posteriors per verdict differ by less than this reached
# the same optimum. (The L2 gauge penalty is left out: at the explore tolerance its
# nearly flat rotation directions are still unsettled.)
_SAME_OPTIMUM = 1e-6
# The bound on each judge's self-preference that trust uses (stats.eigentrust.
# own_scores), in standard deviations: one-sided, about 84%. Lowering a self-score by
# the estimate min(delta_hat, 0) lowered every honest judge by its noise (E min = -0.4
# se at delta 0): a bias of 0.4 standard errors at 100, 300 and 1,000 scenarios alike,
# which no bootstrap sees (BENCHMARKS.md section 19). At 1.96 the kink's bias is gone
# but the factorisation's noisier s_ii is back (RMSE +20%); at 1 both are small.
SELF_BOUND_Z = 1.0
Solver = Literal["auto", "lbfgs"]
SOLVERS: tuple[Solver, ...] = ("auto", "lbfgs")
# The bound's search: at most this far above the estimate (a judge whose every verdict
# on itself picks itself has no finite bound without the prior), and this many steps.
_SELF_REACH = 4096.0
_SELF_STEPS = 100
# Verdicts on oneself per chunk of the bound's passes (a tenth of 1e8 peer verdicts).
_SELF_CHUNK = 1 << 20


def _normaliser(
    x: FloatArray, log_tie: FloatArray | float
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """For the logits [log lambda, x, -x]: a = |x|, t = exp(-a), lambda t, and the
    normaliser over exp(a), 1 + lambda t + t^2 (one exp per cell, no overflow)."""
    a = np.abs(x)
    t = np.negative(a)
    np.exp(t, out=t)
    tie = t * np.exp(log_tie)
    denom = t * t
    denom += tie
    denom += 1.0
    return a, t, tie, denom


def davidson_nll(
    s1: FloatArray, s2: FloatArray, log_tie: FloatArray, gamma: FloatArray, n: FloatArray
) -> tuple[float, FloatArray, FloatArray]:
    """Negative log-likelihood of counts `n` (cells x 3) and its gradient per cell.

    `gamma` is the first slot's offset per cell (position bias plus style terms).
    Returns (nll, g, d/dlog_tie) with g = d/ds1 = -d/ds2 = d/dgamma: adding a constant
    to s1 and s2 together moves all three logits alike and changes nothing, so one
    array serves the three; the pieces every pairwise model in eigenjury chains
    through its own parameters.

    Relative to their midpoint (s1 + s2) / 2 the three logits are [log lambda, x, -x]
    with x = (s1 - s2 + gamma) / 2, so with a = |x| and t = exp(-a) the normaliser is
    exp(a) (1 + t^2 + lambda t): one exp and one log per cell, and no overflow. The
    arithmetic runs in place: at a million cells (style control on arena battles)
    temporaries are what it costs.
    """
    x = s1 - s2
    x += gamma
    x *= 0.5
    a, t, tie, denom = _normaliser(x, log_tie)
    n_tie, n_first, n_second = n[:, TIE], n[:, FIRST], n[:, SECOND]
    total = n_tie + n_first
    total += n_second
    log_norm = np.log(denom)
    log_norm += a
    nll = float(total @ log_norm - n_tie @ log_tie - (n_first @ x - n_second @ x))
    scale = np.divide(total, denom, out=denom)  # total * P(the favoured side)
    r_tie = scale * tie  # d nll / d tie logit
    r_tie -= n_tie
    # d nll / d first logit: P(first) = P(favoured) ahead, P(favoured) t^2 behind
    np.multiply(t, t, out=t)
    g = np.where(x >= 0, scale, scale * t)
    g -= n_first
    g += 0.5 * r_tie
    return nll, g, r_tie


def davidson_curvature(
    offset: FloatArray, log_tie: FloatArray | float, n: OutcomeSums
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """The negative log-likelihood of the counts `n` (per cell) as a function of each
    cell's first-slot offset a = s1 - s2 + gamma (its logits relative to their midpoint
    are [log lambda, a/2, -a/2]) and tie logit (per cell, or one for every cell):
    (nll, d/da, d/dlog_tie, d2/da2, d2/da dlog_tie, d2/dlog_tie2) per cell. The second
    derivatives are the variances and covariance of the verdict's scores (first +1,
    second -1; tie) under the model, times the cell's count: the local model the pair
    solver fits on. Every pass of a Newton fit runs this over all its cells (a million
    on arena battles), so the arithmetic reuses its temporaries."""
    x = 0.5 * offset
    a, t, p_tie, denom = _normaliser(x, log_tie)
    np.multiply(t, t, out=t)
    favoured = np.reciprocal(denom)
    # Var(score) = 1 - P(tie) - (P(first) - P(second))^2 = (4 t^2 + lambda t (1 + t^2))
    # / normaliser^2: the difference loses every digit where the normaliser is all the
    # favoured side's (|offset| beyond ~35), the ratio none
    variance = np.add(t, 1.0)
    variance *= p_tie
    variance += 4.0 * t
    variance *= favoured
    variance *= favoured
    p_tie *= favoured
    lead = np.subtract(1.0, t, out=t)  # P(first) - P(second), signed below
    lead *= favoured
    np.copysign(lead, x, out=lead)
    total, wins, ties = n.total, n.wins, n.ties
    nll = np.log(denom, out=denom)
    nll += a
    nll *= total
    nll -= np.multiply(ties, log_tie, out=a)
    nll -= np.multiply(wins, x, out=x)
    spread = np.multiply(total, lead, out=favoured)  # total (P(first) - P(second))
    g_offset = spread - wins
    g_offset *= 0.5
    expected_ties = total * p_tie
    g_tie = expected_ties - ties
    # Var(score) / 4, Cov(score, tie) / 2 = -P(tie) lead / 2, Var(tie) = P(tie) (1 -
    # P(tie)): each times the count
    h_offset = np.multiply(variance, total, out=variance)
    h_offset *= 0.25
    h_cross = np.multiply(expected_ties, lead, out=lead)
    h_cross *= -0.5
    h_tie = np.multiply(expected_ties, p_tie, out=p_tie)
    np.subtract(expected_ties, h_tie, out=h_tie)
    return nll, g_offset, g_tie, h_offset, h_cross, h_tie


@dataclass(frozen=True)
class BTDParams:
    """A point in parameter space: lenses U, dispositions V, log tie, position bias,
    self-preference, and the style coefficients (features,) shared or (models,
    features) per judge."""

    lenses: FloatArray  # (models, dim)
    dispositions: FloatArray  # (models, dim)
    log_tie: FloatArray  # (models,)
    position_bias: FloatArray  # (models,)
    self_bias: FloatArray  # (models,): log-odds a judge adds to its own reply
    style: FloatArray = field(default_factory=lambda: np.zeros(0))

    def pack(self) -> FloatArray:
        return np.concatenate(
            [
                self.lenses.ravel(),
                self.dispositions.ravel(),
                self.log_tie,
                self.position_bias,
                self.self_bias,
                self.style.ravel(),
            ]
        )

    @classmethod
    def unpack(
        cls, x: FloatArray, n_models: int, dim: int, style: tuple[int, ...] = (0,)
    ) -> BTDParams:
        """The parameters packed in `x`; `style` is the shape of the style coefficients."""
        md, m = n_models * dim, n_models
        return cls(
            x[:md].reshape(m, dim),
            x[md : 2 * md].reshape(m, dim),
            x[2 * md : 2 * md + m],
            x[2 * md + m : 2 * md + 2 * m],
            x[2 * md + 2 * m : 2 * md + 3 * m],
            x[2 * md + 3 * m :].reshape(style),
        )

    def with_style(self, style: FloatArray) -> BTDParams:
        return replace(self, style=style)


def style_shape(counts: VerdictCounts, per_judge: bool) -> tuple[int, ...]:
    """The shape of the style coefficients for these counts."""
    return (counts.n_models, counts.n_style) if per_judge else (counts.n_style,)


def first_offset(
    params: BTDParams, counts: VerdictCounts, position_bias: bool = True
) -> FloatArray:
    """Per cell, the first slot's advantage: position bias and the judge's preference
    for its own reply (+ when it is shown first, - second); with style, each verdict
    adds its style terms to its cell's (_Offsets)."""
    gamma = params.position_bias[counts.judge] if position_bias else np.zeros(counts.n_cells)
    return np.asarray(gamma + params.self_bias[counts.judge] * counts.self_side, dtype=np.float64)


@dataclass(frozen=True)
class ScorePrior:
    """A Gaussian prior on the judges' scores, in logits: what keeps a perfect record
    finite and a thinly seen judge near the others.

    Scores s_ij are identified up to a constant per judge, so the prior is on each
    judge's scores centred over the evaluees, c_i. Each c_i is the population's
    consensus c plus a judge's own deviation: c ~ N(0, consensus_sd^2) per evaluee,
    c_i - c ~ N(0, judge_sd^2). With the consensus integrated out, over J judges,

        -log p = sum_i |c_i - mean_i c_i|^2 / (2 judge_sd^2)
                 + J |mean_i c_i|^2 / (2 (judge_sd^2 + J consensus_sd^2)).

    It is on the scores themselves, so any factorisation U V^T of them pays the same,
    and it does not shrink with the data: a model that wins every comparison gets a
    large, finite score set by how many comparisons it won (the likelihood's pull grows
    with them, the prior's does not), and a judge whose every comparison one model
    won is drawn toward the others instead of stretching its lens without bound.
    `self_sd` is the prior of each judge's preference for its own replies.
    """

    consensus_sd: float = 4.0
    judge_sd: float = 2.0
    self_sd: float = 20.0

    def __post_init__(self) -> None:
        for name in ("consensus_sd", "judge_sd", "self_sd"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number, got {value}")

    def penalty(
        self, scores: FloatArray, judges: IntArray, evaluees: IntArray
    ) -> tuple[float, FloatArray]:
        """-log p of the scores (judges x models; only `judges` rows and `evaluees`
        columns enter) and its gradient with respect to them."""
        grad = np.zeros_like(scores)
        if len(judges) == 0 or len(evaluees) < 2:
            return 0.0, grad
        centred = scores[np.ix_(judges, evaluees)]
        centred = centred - centred.mean(axis=1, keepdims=True)
        consensus = centred.mean(axis=0)
        deviation = centred - consensus
        judge_var = self.judge_sd**2
        consensus_var = judge_var + len(judges) * self.consensus_sd**2
        value = 0.5 * float(np.sum(deviation**2)) / judge_var
        value += 0.5 * len(judges) * float(consensus @ consensus) / consensus_var
        # rows of both terms sum to 0 over the evaluees: already centred
        grad[np.ix_(judges, evaluees)] = deviation / judge_var + consensus / consensus_var
        return value, grad


DEFAULT_PRIOR = ScorePrior()


def btd_objective(
    x: FloatArray,
    counts: VerdictCounts,
    dim: int,
    l2: float,
    position_bias: bool,
    per_judge_style: bool = False,
    prior: ScorePrior | None = None,
) -> tuple[float, FloatArray]:
    """(NLL + the prior's -log p) per verdict + (l2/2)(|U|^2 + |V|^2 + |beta|^2), and
    its exact gradient. The prior is on the judges present in the cells' layout and the
    models shown in it, so that resampled counts keep one prior. With style the
    verdicts are taken a run at a time (_entry_pass)."""
    p = BTDParams.unpack(x, counts.n_models, dim, style_shape(counts, per_judge_style))
    scores = p.lenses @ p.dispositions.T  # (judge, evaluee)
    if counts.style is None:
        nll, g, g_tie = davidson_nll(
            scores.ravel()[counts.judge_first],
            scores.ravel()[counts.judge_second],
            p.log_tie[counts.judge],
            first_offset(p, counts, position_bias),
            counts.n,
        )
        g_style = np.zeros(0)
    else:
        problem = _Problem(counts, dim, l2, position_bias, per_judge_style, prior)
        nll, sums = _entry_pass(problem, p, scores, second_order=False)
        g, g_tie = sums[0], sums[1]
        g_style = _group_style_gradient(sums[2:].T, counts, per_judge_style)
    penalty, grad = _chain(
        p,
        scores,
        counts,
        g,
        g_tie,
        g_style,
        total=counts.total,
        l2=l2,
        position_bias=position_bias,
        prior=prior,
    )
    return nll / counts.total + penalty, grad


def _chain(
    p: BTDParams,
    scores: FloatArray,
    cells: VerdictCounts,
    g: FloatArray,
    g_tie: FloatArray,
    g_style: FloatArray,
    *,
    total: float,
    l2: float,
    position_bias: bool,
    prior: ScorePrior | None,
) -> tuple[float, FloatArray]:
    """The prior's -log p per verdict plus the L2 penalty, and the objective's gradient
    per verdict, from a loss's gradient per cell of `cells` with respect to the first
    slot's offset (`g`, which is also d/ds1 = -d/ds2), to the tie logit (`g_tie`), and
    to the style coefficients (`g_style`, their shape). Cells may be verdict cells, or
    the (judge, pair) groups of the pair solver's local model."""
    m = cells.n_models
    w = 1.0 / total
    g_scores = tally(cells.judge_first, g, m * m)
    g_scores -= tally(cells.judge_second, g, m * m)
    g_scores = g_scores.reshape(m, m)
    g_self = tally(cells.judge, g * cells.self_side, m)
    log_prior = 0.0
    if prior is not None:
        log_prior, g_prior = prior.penalty(scores, cells.judges_present, cells.shown)
        g_scores += g_prior
        log_prior += 0.5 * float(p.self_bias @ p.self_bias) / prior.self_sd**2
        g_self += p.self_bias / prior.self_sd**2
    g_scores *= w
    grad = np.concatenate(
        [
            (g_scores @ p.dispositions + l2 * p.lenses).ravel(),
            (g_scores.T @ p.lenses + l2 * p.dispositions).ravel(),
            tally(cells.judge, g_tie, m) * w,
            tally(cells.judge, g, m) * w if position_bias else np.zeros(m),
            g_self * w,
            (g_style * w + l2 * p.style).ravel(),
        ]
    )
    return log_prior * w + _l2_penalty(p, l2), grad


def _l2_penalty(p: BTDParams, l2: float) -> float:
    return 0.5 * l2 * float(np.sum(p.lenses**2) + np.sum(p.dispositions**2) + np.sum(p.style**2))


@dataclass(frozen=True)
class _Problem:
    """One posterior to minimise: the counts and everything fixed about the fit."""

    counts: VerdictCounts
    dim: int
    l2: float
    position_bias: bool
    per_judge_style: bool
    prior: ScorePrior | None

    def unpack(self, x: FloatArray) -> BTDParams:
        shape = style_shape(self.counts, self.per_judge_style)
        return BTDParams.unpack(x, self.counts.n_models, self.dim, shape)

    def objective(self, x: FloatArray) -> tuple[float, FloatArray]:
        return btd_objective(
            x,
            self.counts,
            self.dim,
            self.l2,
            self.position_bias,
            self.per_judge_style,
            self.prior,
        )


@dataclass(frozen=True)
class _Expansion:
    """The objective at `x` to second order, from one pass over the cells: its value,
    gradient and Hessian (every parameter, fixed ones included); `scale` is the
    Hessian's largest diagonal entry."""

    x: FloatArray
    value: float
    grad: FloatArray
    outer: FloatArray  # the Gauss-Newton part: positive semi-definite
    bilinear: FloatArray  # the second-order terms of the scores' bilinear map

    @property
    def scale(self) -> float:
        return float(np.max(np.abs(np.diag(self.outer)), initial=1e-300))


class _Offsets:
    """Per (judge, first, second) cell: the first slot's offset (scores, position and
    self terms) and tie logit, and each cell's style coefficients where they are per
    judge; `at` gives them for verdicts (style entries) of given cells."""

    def __init__(self, problem: _Problem, p: BTDParams, scores: FloatArray) -> None:
        cells = problem.counts
        self.offset = scores.ravel()[cells.judge_first] - scores.ravel()[cells.judge_second]
        self.offset += first_offset(p, cells, problem.position_bias)
        self.log_tie = p.log_tie[cells.judge]
        self.style = p.style[cells.judge] if problem.per_judge_style else p.style

    def at(self, cell: NDArray[np.integer], z: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Per verdict of cell `cell` with style differences `z` (features x
        verdicts): its offset (its cell's plus its style terms) and its tie logit."""
        if self.style.ndim == 2:
            terms = np.einsum("rf,fr->r", self.style[cell], z)
        else:
            terms = self.style @ z
        return self.offset[cell] + terms, self.log_tie[cell]


def _entry_pass(
    problem: _Problem, p: BTDParams, scores: FloatArray, *, second_order: bool
) -> tuple[float, FloatArray]:
    """One pass over the style entries, a run at a time (StyleEntries.runs, so that
    the pass needs no memory beyond a run's): the negative log-likelihood, and per
    cell (as rows x cells) the sums of its verdicts' slopes by the offset a and the
    tie logit and of the offset's slope times each feature (the slope by that
    feature's coefficient b); with `second_order`, then their curvatures (a a, tie tie,
    a tie, then per feature a b, tie b, and b b' for each pair of features)."""
    counts = problem.counts
    offsets = _Offsets(problem, p, scores)
    entries = counts.style
    if entries is None:  # each cell its own entry
        nll, rows = _entry_terms(
            offsets.offset, offsets.log_tie, counts.outcomes, None, second_order
        )
        return nll, np.stack(rows)
    k = entries.n_features
    size = 2 + k + (3 + 2 * k + k * (k + 1) // 2 if second_order else 0)
    per_cell = np.zeros((size, counts.n_cells))
    nll = 0.0
    for run in entries.runs:
        z = entries.differences(run.entries)
        offset, log_tie = offsets.at(entries.cell[run.entries], z)
        run_nll, rows = _entry_terms(
            offset, log_tie, entries.outcomes(run.entries), z, second_order
        )
        nll += run_nll
        per_cell[:, run.cells] += run.sums(rows)
    return nll, per_cell


def _entry_terms(
    offset: FloatArray,
    log_tie: FloatArray,
    n: OutcomeSums,
    z: FloatArray | None,
    second_order: bool,
) -> tuple[float, list[FloatArray]]:
    """The negative log-likelihood of verdicts (or cells) with these offsets, tie
    logits, counts and style differences (features x verdicts; None: none), and
    their terms in the order _entry_pass gives them, one row per term."""
    nll, g_a, g_tie, h_aa, h_at, h_tt = davidson_curvature(offset, log_tie, n)
    z = np.zeros((0, len(offset))) if z is None else z
    k = len(z)
    rows = [g_a, g_tie, *(g_a * z)]
    if second_order:
        rows += [h_aa, h_tt, h_at]
        for f in range(k):
            weighted = h_aa * z[f]
            rows += [weighted, h_at * z[f]]
            rows += [weighted * z[e] for e in range(f, k)]
    return float(nll.sum()), rows


def _expand(problem: _Problem, x: FloatArray) -> _Expansion:
    """One pass over the verdicts (_entry_pass): the objective, its gradient and its
    exact Hessian.

    Every verdict's loss depends on the parameters through its cell's offset a (style
    excepted), tie logit and style coefficients b only, so the verdicts' curvature
    sums per cell into a (2 + features)-square block; the Hessian is those blocks
    carried through the Jacobian of (a, log_tie, b), plus the second-order terms of
    the scores u_i . v_j (in the loss and the prior), the prior's own curvature and the
    L2 terms.
    """
    counts = problem.counts
    size = counts.n_cells
    p = problem.unpack(x)
    scores = p.lenses @ p.dispositions.T
    n_style = counts.n_style
    nll, per_cell = _entry_pass(problem, p, scores, second_order=True)
    k = 2 + n_style
    slope = np.ascontiguousarray(per_cell[:k].T)
    sums = iter(per_cell[k:])
    block = np.empty((size, k, k))
    block[:, 0, 0], block[:, 1, 1] = next(sums), next(sums)
    block[:, 0, 1] = block[:, 1, 0] = next(sums)
    for f in range(n_style):
        block[:, 0, 2 + f] = block[:, 2 + f, 0] = next(sums)
        block[:, 1, 2 + f] = block[:, 2 + f, 1] = next(sums)
        for e in range(f, n_style):
            block[:, 2 + f, 2 + e] = block[:, 2 + e, 2 + f] = next(sums)
    penalty, grad = _chain(
        p,
        scores,
        counts,
        slope[:, 0],
        slope[:, 1],
        _group_style_gradient(slope[:, 2:], counts, problem.per_judge_style),
        total=counts.total,
        l2=problem.l2,
        position_bias=problem.position_bias,
        prior=problem.prior,
    )
    outer, second = _hessian(problem, p, scores, counts, slope[:, 0], block)
    return _Expansion(x, nll / counts.total + penalty, grad, outer, second)


def _group_style_gradient(g_coef: FloatArray, groups: VerdictCounts, per_judge: bool) -> FloatArray:
    """d/dbeta from each group's gradient with respect to the coefficients it uses."""
    if not per_judge:
        return np.asarray(g_coef.sum(axis=0))
    return np.stack(
        [tally(groups.judge, g_coef[:, f], groups.n_models) for f in range(g_coef.shape[1])],
        axis=1,
    )


def group_jacobian(
    p: BTDParams, groups: VerdictCounts, per_judge_style: bool
) -> tuple[IntArray, FloatArray]:
    """Per (judge, pair) group, the parameters its offset a, tie logit and style
    coefficients b depend on (`where`, groups x width, indices into the packed
    parameters) and the derivatives of (a, log_tie, b) by them (groups x (2 +
    features) x width): the Jacobian, sparse by group."""
    m, d = groups.n_models, p.lenses.shape[1]
    md = m * d
    n_style = p.style.shape[-1] if p.style.size else 0
    judge, first, second = groups.judge, groups.first, groups.second
    width = 3 * d + 3 + n_style
    where = np.empty((groups.n_cells, width), dtype=np.int64)
    where[:, :d] = judge[:, None] * d + np.arange(d)
    where[:, d : 2 * d] = md + first[:, None] * d + np.arange(d)
    where[:, 2 * d : 3 * d] = md + second[:, None] * d + np.arange(d)
    where[:, 3 * d] = 2 * md + m + judge  # position bias
    where[:, 3 * d + 1] = 2 * md + 2 * m + judge  # self-preference
    where[:, 3 * d + 2] = 2 * md + judge  # log tie
    base = 2 * md + 3 * m
    styles = np.arange(n_style)
    where[:, 3 * d + 3 :] = (
        base + judge[:, None] * n_style + styles if per_judge_style else base + styles
    )
    jacobian = np.zeros((groups.n_cells, 2 + n_style, width))
    jacobian[:, 0, :d] = p.dispositions[first] - p.dispositions[second]
    jacobian[:, 0, d : 2 * d] = p.lenses[judge]
    jacobian[:, 0, 2 * d : 3 * d] = -p.lenses[judge]
    jacobian[:, 0, 3 * d] = 1.0
    jacobian[:, 0, 3 * d + 1] = groups.self_side
    jacobian[:, 1, 3 * d + 2] = 1.0
    jacobian[:, 2:, 3 * d + 3 :] = np.eye(n_style)
    return where, jacobian


def through_jacobian(
    where: IntArray, jacobian: FloatArray, block: FloatArray, size: int
) -> FloatArray:
    """sum_g J_g^T block_g J_g as a size x size matrix: per-group blocks over (a,
    log_tie, b) carried to the parameters (group_jacobian gives `where`, `jacobian`)."""
    local = np.transpose(jacobian, (0, 2, 1)) @ (block @ jacobian)
    flat = where[:, :, None] * size + where[:, None, :]
    return tally(flat.ravel(), local.ravel(), size * size).reshape(size, size)


def _hessian(
    problem: _Problem,
    p: BTDParams,
    scores: FloatArray,
    groups: VerdictCounts,
    g_offset: FloatArray,
    block: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """The objective's Hessian from each group's curvature `block` in (a, log_tie, b)
    and gradient `g_offset` in a (see _expand), in two parts: the Gauss-Newton part
    (semi-definite) and the second-order terms of the scores' bilinear map."""
    m, d = groups.n_models, problem.dim
    md = m * d
    size = 2 * md + 3 * m + p.style.size
    base = 2 * md + 3 * m
    where, jacobian = group_jacobian(p, groups, problem.per_judge_style)
    hessian = through_jacobian(where, jacobian, block, size)
    # second-order terms of a = u_i . (v_j - v_k) and of the prior's scores
    bend = tally(groups.judge_first, g_offset, m * m) - tally(groups.judge_second, g_offset, m * m)
    bend = bend.reshape(m, m)
    if problem.prior is not None:
        prior = problem.prior
        bend += prior.penalty(scores, groups.judges_present, groups.shown)[1]
        # the prior is (1/2) tr(S^T K S M) on the present judges' rows and the shown
        # evaluees' columns: K weighs judges (deviation and consensus), M centres
        present, shown = groups.judges_present, groups.shown
        n_judges = len(present)
        consensus_var = prior.judge_sd**2 + n_judges * prior.consensus_sd**2
        within = np.eye(n_judges) - 1.0 / n_judges
        weigh = np.zeros((m, m))
        weigh[np.ix_(present, present)] = within / prior.judge_sd**2 + 1.0 / (
            n_judges * consensus_var
        )
        centre = np.zeros((m, m))
        centre[np.ix_(shown, shown)] = np.eye(len(shown)) - 1.0 / len(shown)
        if len(shown) >= 2:
            lenses, dispositions = p.lenses, p.dispositions
            hessian[:md, :md] += np.kron(weigh, dispositions.T @ centre @ dispositions)
            hessian[md : 2 * md, md : 2 * md] += np.kron(centre, lenses.T @ weigh @ lenses)
            cross = np.einsum("ib,ja->iajb", weigh @ lenses, centre @ dispositions)
            hessian[:md, md : 2 * md] += cross.reshape(md, md)
            hessian[md : 2 * md, :md] += cross.reshape(md, md).T
    bilinear = np.zeros((size, size))
    bilinear[:md, md : 2 * md] = np.kron(bend, np.eye(d))
    bilinear[md : 2 * md, :md] = bilinear[:md, md : 2 * md].T
    hessian /= problem.counts.total
    bilinear /= problem.counts.total
    own = np.arange(2 * md + 2 * m, 2 * md + 3 * m)
    if problem.prior is not None:
        hessian[own, own] += 1.0 / (problem.prior.self_sd**2 * problem.counts.total)
    gauged = np.r_[np.arange(2 * md), np.arange(base, size)]
    hessian[gauged, gauged] += problem.l2
    return hessian, bilinear


def _limits(bounds: list[tuple[float | None, float | None]]) -> tuple[FloatArray, FloatArray]:
    lower = np.array([b[0] if b[0] is not None else -np.inf for b in bounds])
    upper = np.array([b[1] if b[1] is not None else np.inf for b in bounds])
    return lower, upper


def _projected_norm(
    x: FloatArray, grad: FloatArray, limits: tuple[FloatArray, FloatArray]
) -> float:
    """The largest gradient component that a move within the bounds could follow."""
    lower, upper = limits
    blocked = ((x <= lower) & (grad > 0)) | ((x >= upper) & (grad < 0))
    return float(np.max(np.abs(np.where(blocked, 0.0, grad))))


# The pair solver's steps: at most this many, each accepted when the objective falls by
# at least this share of what the second-order model promised.
_PAIR_STEPS = 50
_ACCEPT = 1e-4
_DAMPING = (1e-12, 1e-8, 1e4)  # floor, start, give up (relative to the Hessian)
# Negative curvature of the exact Hessian smaller than this share of its largest is
# the slight bend of a nearly flat direction, not a saddle to leave.
_SLIGHTLY = 1e-3
# The longest first step, in any one parameter (logits); a step that keeps its promise
# lets the next reach four times as far, one that breaks it a quarter.
_REACH = 1.0
# Changes in the objective (per verdict) within this share of it are rounding.
_ROUNDING = 1e-14


def _off_gauge(p: BTDParams, dim: int) -> FloatArray:
    """An orthonormal basis (parameters x gauge directions) of the moves of lenses and
    dispositions that leave every judge's centred scores unchanged: U A, -V A^T for
    each d x d A, and 1 w^T added to V."""
    m = p.lenses.shape[0]
    md = m * dim
    size = p.pack().size
    moves = []
    for a in range(dim):
        for b in range(dim):
            move = np.zeros(size)
            move[:md].reshape(m, dim)[:, b] = p.lenses[:, a]
            move[md : 2 * md].reshape(m, dim)[:, a] = -p.dispositions[:, b]
            moves.append(move)
        shift = np.zeros(size)
        shift[md : 2 * md].reshape(m, dim)[:, a] = 1.0
        moves.append(shift)
    basis, triangle = np.linalg.qr(np.stack(moves, axis=1))
    kept = np.abs(np.diag(triangle)) > 1e-12
    return np.asarray(basis[:, kept])


def _definite(
    hessian: FloatArray, free: NDArray[np.bool_], gauge: FloatArray, scale: float
) -> tuple[FloatArray, FloatArray]:
    """Eigenvalues (ascending) and vectors of the free parameters' Hessian with the
    gauge directions projected out and given the curvature `scale` instead."""
    block = hessian[np.ix_(free, free)]
    inside = block - gauge @ (gauge.T @ block)
    inside = inside - (inside @ gauge) @ gauge.T
    inside += scale * (gauge @ gauge.T)
    values, vectors = np.linalg.eigh(0.5 * (inside + inside.T))
    return values, vectors


# The pair solver's Hessian is dense: its eigen-decomposition costs parameters cubed,
# so beyond this many parameters L-BFGS-B alone polishes.
_NEWTON_PARAMS = 2000


def _newton_pays(counts: VerdictCounts, n_params: int) -> bool:
    """Whether the pair solver beats L-BFGS-B on these counts: cells that style splits
    into verdicts (a pass costs what an L-BFGS evaluation does, and it needs a few
    instead of dozens), and a Hessian small enough to decompose."""
    split = counts.style is not None and len(counts.style) > counts.n_cells
    return split and n_params <= _NEWTON_PARAMS


def _pair_solve(
    problem: _Problem, x: FloatArray, limits: tuple[FloatArray, FloatArray], tol: float
) -> tuple[_Expansion, int]:
    """Damped Newton steps with the exact Hessian (_expand): a style fit has a term per
    verdict (28,800 for 2,400 peer scenarios, a million on arena battles) but few
    (judge, first, second) cells, so one pass over the verdicts gives the whole
    second-order model, and a handful of steps reach the tolerance L-BFGS needed 50-100
    passes for.
    Each step solves (H + mu I) step = -g over the free parameters off the gauge (H
    exact where it is definite, with its curvatures' sizes where it bends only slightly
    negative, else its Gauss-Newton part); mu
    (relative to H's largest curvature) grows tenfold when a step keeps less than a
    quarter of the decrease it promised and shrinks tenfold when it keeps three
    quarters, and a step is capped in length (`_REACH`). Returns the expansion at the
    point reached and the steps taken; the caller polishes with L-BFGS-B where this
    stopped short of `tol`."""
    lower, upper = limits
    free = lower < upper
    here = _expand(problem, x)
    norm = _projected_norm(x, here.grad, limits)
    damping, steps, reach = _DAMPING[1], 0, _REACH
    while norm > tol and steps < _PAIR_STEPS and damping < _DAMPING[2]:
        steps += 1
        # lenses and dispositions move the scores only across the gauge (U A, V A^-T;
        # V + 1 w^T), which the L2 term alone bends, barely: steps keep out of it, and
        # canonical_gauge takes each point to the gauge's own optimum instead
        across = _off_gauge(problem.unpack(x), problem.dim)[free]
        grad = here.grad[free]
        grad = grad - across @ (across.T @ grad)
        # the exact Hessian where it is definite (near the optimum: Newton's
        # quadratic convergence); where the scores' bilinear map bends it slightly
        # negative (a dimension that fits only noise, which the L2 term barely holds:
        # judges who all agree), the same with each curvature's size, so that every
        # other direction keeps Newton's step (its Gauss-Newton part crawled there, 50
        # steps short of the tolerance on 4e6 verdicts); far from the optimum, where it
        # bends strongly negative, its Gauss-Newton part (semi-definite: still descent)
        values, vectors = _definite(here.outer + here.bilinear, free, across, here.scale)
        if values[0] <= -_SLIGHTLY * here.scale:
            values, vectors = _definite(here.outer, free, across, here.scale)
        elif values[0] <= 0:
            values = np.maximum(np.abs(values), _DAMPING[0] * here.scale)
        along = vectors.T @ grad
        size = values + damping * here.scale
        step = -vectors @ (along / size)
        longest = float(np.max(np.abs(step)))
        if longest > reach:
            step *= reach / longest
        promised = -float(grad @ step + 0.5 * step @ (vectors * values) @ (vectors.T @ step))
        trial_x = x.copy()
        trial_x[free] += step
        # lenses and dispositions back in the gauge the L2 term prefers: the same
        # scores at a lower penalty, so the steps need not crawl along the gauge
        trial_x = canonical_gauge(problem.unpack(np.clip(trial_x, lower, upper))).pack()
        trial = _expand(problem, trial_x)
        trial_norm = _projected_norm(trial_x, trial.grad, limits)
        fell = here.value - trial.value
        if abs(fell) <= _ROUNDING * max(1.0, abs(here.value)):
            # at the optimum the objective stops moving in its last digits: the
            # gradient says whether the step still helps
            if trial_norm >= norm:
                break
            here, x, norm = trial, trial_x, trial_norm
            continue
        kept = fell / promised
        if kept > _ACCEPT:
            here, x, norm = trial, trial_x, trial_norm
        if kept < 0.25:
            damping *= 10.0
            reach = 0.25 * min(reach, longest)
        elif kept > 0.75:
            damping = max(damping / 10.0, _DAMPING[0])
            reach = max(reach, 4.0 * longest)
    return here, steps


@dataclass(frozen=True)
class _HeldStyle:
    """Style coefficients held fixed (a value) or fitted (NaN), in their shape."""

    values: FloatArray

    def start(self, fitted: FloatArray) -> FloatArray:
        """`fitted` with the held coefficients in place."""
        return np.where(np.isnan(self.values), fitted, self.values)

    def bounds(self) -> list[tuple[float | None, float | None]]:
        """L-BFGS-B bounds: a held coefficient between its value and itself."""
        return [(None, None) if np.isnan(v) else (float(v), float(v)) for v in self.values.ravel()]


_ONE_JUDGE = "solved in the one judge's scores (convex)"


@dataclass
class _Solution:
    params: BTDParams
    objective: float
    loss: float  # negative log-posterior per verdict, without the L2 gauge penalty
    n_iter: int
    converged: bool
    message: str
    grad_norm: float
    loglik: float | None = None  # total, where the solver has it at `params`


class LowRankBTD:
    """Maximum a posteriori low-rank Bradley-Terry-Davidson fit (L-BFGS, analytic
    gradient).

    Parameters
    ----------
    dim : latent dimension d of lenses and dispositions, at most the number of models
        (a DataError otherwise: scores of m models have rank at most m).
    l2 : L2 penalty on lenses and dispositions, per verdict: it only picks one of the
        factorisations U V^T of the same scores (see module docstring).
    prior : the prior on the judges' scores and self-preference (:class:`ScorePrior`);
        None: none (maximum likelihood, which a perfect record drives to infinity).
    position_bias : fit a per-judge first-slot advantage gamma_i.
    self_preference : fit a per-judge preference delta_i for its own replies: the
        log-odds it adds to its reply when it judges itself, so that its verdicts on
        itself move neither its lens nor its disposition (and so not its trust); its
        verdicts there still inform its lens through the other reply.
    style_per_judge : with style features in the counts, one coefficient per judge and
        feature instead of one per feature shared by all judges.
    style_fixed : style coefficients held where they are given instead of fitted: an
        array of the coefficients' shape (features, or judges x features), NaN where a
        coefficient is fitted (None: all are). Counts without style features have no
        coefficients to hold.
    solver : "auto": with style features, whose cells are one per style difference,
        damped Newton steps over the (judge, pair) groups (exact Hessian from one pass
        over the cells), then L-BFGS-B if they stop short; L-BFGS-B on the cells
        otherwise, and beyond 2,000 parameters. "lbfgs": L-BFGS-B on the cells always
        (the two reach the same optimum; BENCHMARKS.md section 22 times them).
    restarts : seeded starts; the problem is non-convex, the best objective wins.
    tol : gradient tolerance (projected, per verdict) of the optimiser.
    max_iter : iteration cap per start.
    seed : seed for the random starts.

    Fitted attributes: ``lenses_``, ``dispositions_``, ``tie_propensity_``,
    ``position_bias_``, ``self_bias_``, ``self_bias_upper_`` (the largest self-preference
    each judge's verdicts on itself allow, :func:`self_bias_upper`; +inf without
    self-preference or verdicts on itself), ``judge_mask_`` (models with judge data),
    ``loglik_`` (total, unpenalised), ``objective_``, ``n_iter_``, ``converged_``,
    ``grad_norm_``, ``restart_losses_`` (negative log-posterior per verdict, without
    the L2 gauge penalty, reached by each start, explored to a loose tolerance before
    the best is polished; with style features, explored on the model without them,
    whose cells are far fewer),
    ``n_agreeing_starts_`` (starts that reached the best optimum),
    ``n_verdicts_``, ``n_cells_`` (the terms of the likelihood: the cells, or with style
    the verdicts), ``params_``, ``style_coef_`` (per feature, or judges x
    features; empty without style features), ``explored_start_`` (the best start,
    explored on the model without style, that the fit was polished from; None for a
    warm start: a fit of the same counts without style from it equals
    ``fit(counts.without_style())``, restarts and all). Lenses and dispositions are reported in
    the canonical gauge of :func:`canonical_gauge`.
    """

    def __init__(
        self,
        dim: int = 2,
        *,
        l2: float = DEFAULT_L2,
        prior: ScorePrior | None = DEFAULT_PRIOR,
        position_bias: bool = True,
        self_preference: bool = True,
        style_per_judge: bool = False,
        style_fixed: FloatArray | None = None,
        solver: Solver = "auto",
        restarts: int = DEFAULT_RESTARTS,
        tol: float = 1e-9,
        max_iter: int = 5000,
        seed: int | None = 0,
    ) -> None:
        self.dim = dim
        self.l2 = l2
        self.prior = prior
        self.position_bias = position_bias
        self.self_preference = self_preference
        self.style_per_judge = style_per_judge
        self.style_fixed = style_fixed
        self.solver = solver
        self.restarts = restarts
        self.tol = tol
        self.max_iter = max_iter
        self.seed = seed

    def fit(self, counts: VerdictCounts, init: BTDParams | None = None) -> LowRankBTD:
        """Fit to `counts`; with `init`, one warm start from it instead of the restarts
        (its style coefficients are taken when their shape fits, else started at 0)."""
        if self.dim < 1:
            raise ValueError(f"dim must be at least 1, got {self.dim}")
        if self.solver not in SOLVERS:
            raise ValueError(f"solver must be 'auto' or 'lbfgs', got {self.solver!r}")
        if counts.total <= 0:
            raise ValueError("no verdicts to fit")
        m = counts.n_models
        if self.dim > m:  # scores u_i . v_j of m models have rank at most m
            raise DataError(
                f"a latent dimension (dim) of {self.dim} exceeds the {m} models in the data, "
                f"which never need more than {m}; use dim {m} or less"
            )
        shape = style_shape(counts, self.style_per_judge)
        fixed = self._fixed_style(shape)
        with one_blas_thread():
            sole = self._one_judge_fit(counts, shape, fixed, init)
            if sole is not None:  # convex: one optimum, every start's
                best = self._taken(sole)
                explored = [best] * max(self.restarts, 1)
                n_iter = best.n_iter
                self.explored_start_: BTDParams | None = None
            elif init is not None:
                if init.style.shape != shape:
                    init = init.with_style(np.zeros(shape))
                best = self._solve(counts, init.with_style(fixed.start(init.style)), self.tol)
                explored = [best]
                n_iter = best.n_iter
                self.explored_start_ = None
            else:
                # style splits cells by battle: starts are told apart on the model
                # without it, whose cells are few, and the best is polished with it
                plain = counts.without_style()
                rng = np.random.default_rng(self.seed)
                starts = [_informed_start(plain, self.dim, rng)]
                starts += [_random_start(m, self.dim, rng) for _ in range(self.restarts - 1)]
                empty = np.zeros(style_shape(plain, self.style_per_judge))
                starts = [s.with_style(empty) for s in starts]
                explored = [self._solve(plain, s, max(_EXPLORE_TOL, self.tol)) for s in starts]
                leader = min(explored, key=lambda s: s.objective)
                self.explored_start_ = canonical_gauge(leader.params)
                start = self.explored_start_.with_style(fixed.start(np.zeros(shape)))
                best = self._solve(counts, start, self.tol)
                n_iter = leader.n_iter + best.n_iter
        losses = np.array([s.loss for s in explored])
        self.params_ = params = canonical_gauge(best.params)
        self.restart_losses_ = losses
        self.n_agreeing_starts_ = int(np.sum(losses - losses.min() < _SAME_OPTIMUM))
        self.objective_ = best.objective
        self.n_iter_ = n_iter
        self.converged_ = best.converged
        self.message_ = best.message
        self.grad_norm_ = best.grad_norm
        self.judge_mask_ = counts.judge_totals() > 0
        self.lenses_ = params.lenses
        self.dispositions_ = params.dispositions
        self.tie_propensity_ = np.exp(params.log_tie)
        self.position_bias_ = params.position_bias
        self.self_bias_ = params.self_bias
        self.self_bias_upper_ = (
            self_bias_upper(params, counts, position_bias=self.position_bias, prior=self.prior)
            if self.self_preference
            else np.full(m, np.inf)
        )
        self.style_coef_ = params.style
        self.n_verdicts_ = counts.total
        self.n_cells_ = counts.n_terms
        self.loglik_ = self.loglik(counts) if best.loglik is None else best.loglik
        return self

    def _one_judge_fit(
        self,
        counts: VerdictCounts,
        shape: tuple[int, ...],
        fixed: _HeldStyle,
        init: BTDParams | None,
    ) -> OneJudgeFit | None:
        """Where one external judge gave every verdict, the optimum solved in its
        scores' space (stats.one_judge); else None."""
        from eigenjury.stats.one_judge import one_judge_fit, sole_external_judge

        judge = sole_external_judge(counts)
        if judge is None or self.solver != "auto" or not np.isnan(fixed.values).all():
            return None
        return one_judge_fit(counts, judge, self, shape, init)

    def _fixed_style(self, shape: tuple[int, ...]) -> _HeldStyle:
        """The coefficients `style_fixed` holds, checked against their shape."""
        if self.style_fixed is None or shape[-1] == 0:
            return _HeldStyle(np.full(shape, np.nan))
        held = np.asarray(self.style_fixed, dtype=np.float64)
        if held.shape != shape:
            raise ValueError(
                f"style_fixed has shape {held.shape}; the style coefficients have {shape}"
            )
        if np.isinf(held).any():
            raise ValueError("style_fixed holds an infinite coefficient; give finite values")
        return _HeldStyle(held)

    def _problem(self, counts: VerdictCounts) -> _Problem:
        return _Problem(
            counts, self.dim, self.l2, self.position_bias, self.style_per_judge, self.prior
        )

    def _taken(self, sole: OneJudgeFit) -> _Solution:
        """The one judge's optimum: the same posterior, solved exactly, converged where
        the factorised solvers would call it so."""
        loss = sole.objective - _l2_penalty(sole.params, self.l2)
        return _Solution(
            sole.params,
            sole.objective,
            loss,
            sole.steps,
            True,
            _ONE_JUDGE,
            sole.grad_norm,
            -sole.nll,
        )

    def _solve(self, counts: VerdictCounts, start: BTDParams, tol: float) -> _Solution:
        """Minimise from `start` to gradient `tol`: L-BFGS-B on the cells; with style,
        whose cells are one per style difference, the pair solver first."""
        problem = self._problem(counts)
        x0, bounds = self._start_and_bounds(counts, start)
        limits = _limits(bounds)
        n_iter = 0
        if self.solver == "auto" and _newton_pays(counts, x0.size):
            reached, n_iter = _pair_solve(problem, x0, limits, tol)
            x0 = reached.x
            solution = self._solution(
                problem, x0, n_iter, "pair solver converged", limits, tol, reached
            )
            if solution.converged:  # as near as rounding lets L-BFGS-B get too
                return solution
        res = minimize(
            problem.objective,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": self.max_iter, "maxcor": 30, "ftol": 1e-15, "gtol": tol},
        )
        solution = self._solution(
            problem, res.x, n_iter + int(res.nit), str(res.message), limits, tol
        )
        return replace(solution, converged=solution.converged or bool(res.success))

    def _start_and_bounds(
        self, counts: VerdictCounts, start: BTDParams
    ) -> tuple[FloatArray, list[tuple[float | None, float | None]]]:
        """The packed start and each parameter's L-BFGS-B bounds (a parameter not
        fitted is held at 0)."""
        m, d = counts.n_models, self.dim
        bias = slice(2 * m * d + m, 2 * m * d + 2 * m)
        own = slice(2 * m * d + 2 * m, 2 * m * d + 3 * m)
        bounds: list[tuple[float | None, float | None]] = [(None, None)] * (2 * m * d)
        bounds += [(-_LOG_BOUND, _LOG_BOUND)] * (2 * m)
        bounds += [(None, None)] * m  # the prior holds self_bias
        bounds += self._fixed_style(style_shape(counts, self.style_per_judge)).bounds()
        x0 = start.pack().copy()
        for fitted, part in ((self.position_bias, bias), (self.self_preference, own)):
            if not fitted:
                bounds[part] = [(0.0, 0.0)] * m
                x0[part] = 0.0
        return np.clip(x0, *_limits(bounds)), bounds

    def _solution(
        self,
        problem: _Problem,
        x: FloatArray,
        n_iter: int,
        message: str,
        limits: tuple[FloatArray, FloatArray],
        tol: float,
        reached: _Expansion | None = None,
    ) -> _Solution:
        """The solution at `x` (its objective and gradient from `reached`, when the pair
        solver already has them)."""
        value, grad = problem.objective(x) if reached is None else (reached.value, reached.grad)
        grad_norm = _projected_norm(x, grad, limits)
        params = problem.unpack(x)
        return _Solution(
            params,
            value,
            value - _l2_penalty(params, self.l2),
            n_iter,
            grad_norm <= 10 * tol,
            message,
            grad_norm,
        )

    def with_params(self, params: BTDParams, self_bias_upper: FloatArray) -> LowRankBTD:
        """This fitted model at other parameters (a draw from its sandwich covariance,
        stats.sandwich): the fitted attributes that follow from them, the fit's own
        diagnostics (convergence, log-likelihood) kept."""
        out = copy.copy(self)
        out.params_ = params
        out.lenses_, out.dispositions_ = params.lenses, params.dispositions
        out.tie_propensity_ = np.exp(params.log_tie)
        out.position_bias_, out.self_bias_ = params.position_bias, params.self_bias
        out.self_bias_upper_ = self_bias_upper
        out.style_coef_ = params.style
        return out

    def scores(self) -> FloatArray:
        """s_ij = u_i . v_j for every judge i and evaluee j."""
        return np.asarray(self.lenses_ @ self.dispositions_.T)

    def loglik(self, counts: VerdictCounts) -> float:
        """Total log-likelihood of `counts` under the fitted parameters."""
        s = self.scores()
        if counts.style is not None:
            return -_entry_pass(self._problem(counts), self.params_, s, second_order=False)[0]
        nll = davidson_nll(
            s[counts.judge, counts.first],
            s[counts.judge, counts.second],
            np.log(self.tie_propensity_)[counts.judge],
            first_offset(self.params_, counts),
            counts.n,
        )[0]
        return -nll

    def predict_proba(
        self,
        judge: NDArray[np.int64],
        first: NDArray[np.int64],
        second: NDArray[np.int64],
        style: FloatArray | None = None,
    ) -> FloatArray:
        """P(tie, first, second) for each (judge, first, second) triple, with the style
        differences `style` (triples x features; default: style held equal)."""
        s = self.scores()
        own = (judge == first).astype(np.float64) - (judge == second)
        offset = self.position_bias_[judge] + self.self_bias_[judge] * own
        if style is not None and self.style_coef_.size:
            coef = self.style_coef_[judge] if self.style_coef_.ndim == 2 else self.style_coef_
            offset = offset + np.sum(style * coef, axis=-1)
        half = 0.5 * offset
        s1, s2 = s[judge, first], s[judge, second]
        logits = np.stack(
            [np.log(self.tie_propensity_[judge]) + 0.5 * (s1 + s2), s1 + half, s2 - half], axis=1
        )
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return np.asarray(e / e.sum(axis=1, keepdims=True))


def self_bias_upper(
    params: BTDParams,
    counts: VerdictCounts,
    *,
    position_bias: bool = True,
    prior: ScorePrior | None = DEFAULT_PRIOR,
    z: float = SELF_BOUND_Z,
) -> FloatArray:
    """Per judge, the largest self-preference delta_i that its verdicts on itself allow:
    the one-sided profile-likelihood bound at `z` (log-likelihood z^2 / 2 below its
    peak), every other parameter held at `params`; +inf for a judge that never judged
    itself.

    A bound rather than the standard error: a judge whose friend always wins has a
    delta_i of -7 whose information vanishes (it never picks itself), yet its bound
    is still far below 0.
    """
    m = counts.n_models
    upper = np.full(m, np.inf)
    own = np.flatnonzero(counts.self_side != 0)
    if own.size == 0:
        return upper
    dim = params.lenses.shape[1]
    problem = _Problem(counts, dim, 0.0, position_bias, params.style.ndim == 2, None)
    offsets = _Offsets(problem, params, params.lenses @ params.dispositions.T)
    entries = counts.style

    def cells(index: IntArray) -> IntArray:
        return index if entries is None else np.asarray(entries.cell[index], dtype=np.int64)

    def outcomes(index: IntArray) -> OutcomeSums:
        return OutcomeSums.of(counts.n[index]) if entries is None else entries.outcomes(index)

    def apart(index: IntArray) -> FloatArray:
        """The offsets of `index` (cells or verdicts) less the judge's self-preference."""
        cell = cells(index)
        at = (
            offsets.offset[cell]
            if entries is None
            else offsets.at(cell, entries.differences(index))[0]
        )
        return at - params.self_bias[counts.judge[cell]] * counts.self_side[cell]

    if entries is None:  # the cells on oneself
        parts = [(own, apart(own))]
    else:  # each verdict on oneself, with its style terms, gathered a run at a time
        mine = counts.self_side != 0
        parts, found, size = [], [], 0
        for run in entries.runs:
            found.append(np.flatnonzero(mine[entries.cell[run.entries]]) + run.entries.start)
            size += len(found[-1])
            if size >= _SELF_CHUNK or run is entries.runs[-1]:
                index = np.concatenate(found).astype(code_type(len(entries)))
                parts.append((index, apart(index)))
                found, size = [], 0
    prior_var = math.inf if prior is None else prior.self_sd**2

    def loglik(delta: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Each judge's log-likelihood (with the prior) at `delta`, and its first and
        second derivatives, summed a chunk of verdicts on oneself at a time."""
        value, slope = -0.5 * delta**2 / prior_var, -delta / prior_var
        bend = np.full(m, -1.0 / prior_var)
        for index, away in parts:
            cell = cells(index)
            judge, side = counts.judge[cell], counts.self_side[cell]
            nll, g, _, h, _, _ = davidson_curvature(
                away + delta[judge] * side, params.log_tie[judge], outcomes(index)
            )
            value = value - tally(judge, nll, m)
            slope = slope - tally(judge, g * side, m)
            bend = bend - tally(judge, h, m)
        return value, slope, bend

    peak = np.asarray(params.self_bias, dtype=np.float64)
    top, _, bend = loglik(peak)
    target = top - 0.5 * z * z
    # Newton on the concave log-likelihood, from the quadratic's answer, kept inside a
    # bracket [low, high] that bisects when a step would leave it
    low, high = peak.copy(), np.full(m, np.inf)
    delta = peak + np.minimum(z / np.sqrt(np.maximum(-bend, 1e-300)), _SELF_REACH)
    present = np.zeros(m, dtype=bool)
    present[counts.judge[own]] = True
    for _ in range(_SELF_STEPS):
        value, slope, _ = loglik(delta)
        if np.all(
            np.abs(value - target)[present] <= 1e-12 * np.maximum(1.0, np.abs(target))[present]
        ):
            break
        inside = value > target
        low = np.where(inside, delta, low)
        high = np.where(inside, high, delta)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = delta - (value - target) / slope
        usable = (slope < 0) & (newton > low) & (newton < high)
        fallback = np.where(np.isfinite(high), 0.5 * (low + high), low + 2.0 * (low - peak) + 1.0)
        step = np.minimum(np.where(usable, newton, fallback), peak + _SELF_REACH)
        settled = np.abs(step - delta) <= 1e-12 * (1.0 + np.abs(delta))
        delta = step
        if settled.all():
            break
    upper[present] = delta[present]
    return upper


def canonical_gauge(params: BTDParams) -> BTDParams:
    """The same likelihood, with lenses and dispositions in a canonical gauge.

    U V^T is identified only up to a per-judge constant (V -> V + 1 w^T) and an
    invertible d x d map (U -> U A, V -> V A^-T). Centring V and splitting the SVD of
    U V^T evenly (U = P S^1/2, V = Q S^1/2) gives the representative with the
    smallest L2 penalty, so a polish started there has no slow penalty-only
    directions left to crawl along. Axis 1 is the strongest; signs make the lenses
    sum to >= 0 on each axis, so axis 1 points the way the judges broadly agree.
    """
    centred = params.dispositions - params.dispositions.mean(axis=0)
    left, singular, right_t = np.linalg.svd(params.lenses @ centred.T)
    k = min(params.lenses.shape[1], len(singular))
    root = np.sqrt(singular[:k])
    lenses = np.zeros_like(params.lenses)
    dispositions = np.zeros_like(params.dispositions)
    lenses[:, :k] = left[:, :k] * root
    dispositions[:, :k] = right_t[:k].T * root
    sign = np.where(lenses.sum(axis=0) < 0, -1.0, 1.0)
    return replace(params, lenses=lenses * sign, dispositions=dispositions * sign)


def _informed_start(counts: VerdictCounts, dim: int, rng: np.random.Generator) -> BTDParams:
    """Shared lens along axis 0, dispositions from smoothed win log-odds, tie rate per judge."""
    m = counts.n_models
    wins, ties = counts.pooled()
    won = wins.sum(axis=1) + 0.5 * ties.sum(axis=1) + 1.0
    lost = wins.sum(axis=0) + 0.5 * ties.sum(axis=1) + 1.0
    lenses = 0.1 * rng.standard_normal((m, dim))
    lenses[:, 0] += 1.0
    dispositions = 0.1 * rng.standard_normal((m, dim))
    dispositions[:, 0] = np.log(won / lost)
    per_judge = np.stack([tally(counts.judge, counts.n[:, r], m) for r in range(3)])
    tie_share = (per_judge[TIE] + 0.5) / (per_judge.sum(axis=0) + 1.5)
    log_tie = np.log(2 * tie_share / (1 - tie_share))
    return BTDParams(lenses, dispositions, log_tie, np.zeros(m), np.zeros(m))


def _random_start(m: int, dim: int, rng: np.random.Generator) -> BTDParams:
    return BTDParams(
        rng.standard_normal((m, dim)),
        rng.standard_normal((m, dim)),
        rng.normal(-1.0, 0.5, m),
        np.zeros(m),
        np.zeros(m),
    )
