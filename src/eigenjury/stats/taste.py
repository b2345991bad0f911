"""A judge's taste for a style, measured directly: verdicts on same-content edits.

Style control (stats.style) assumes that style reaches verdicts only through the
judges' taste. Where longer replies really are better (their substance takes words),
the fitted length coefficient takes the substance too, and holding length equal
removes it. Taste is what is left when the content is held fixed: a reply judged
against itself made longer (neutral filler, bounds.neighbours.Verbosity) or formatted
(bounds.neighbours.Markdown), in both orders. With the same content on both sides the
scores cancel, and a verdict's first-slot log-odds is

    gamma_i + beta_i x

in Davidson's model (the fit's own, stats.btd), where gamma_i is judge i's position
bias and x the edit's covariate, oriented first minus second: for a length edit the
normalised length difference divided by the run's standard deviation of it (so beta_i
is in the fit's units, log-odds per standard deviation), for a formatting edit +1
when the formatted reply is shown first and -1 when second. Each judge gets its own
beta_i (and its own gamma_i and tie propensity); the pooled taste shares one beta over
all judges, as a coefficient shared by all judges in the fit does.

Intervals come from a bootstrap over the edited replies (a reply's verdicts, both
orders and every judge, are drawn together). The estimates are posterior modes under a
weak prior (PRIOR_SD), which keeps small samples finite. A judge whose decisive verdicts
all favoured one reply has no finite maximum-likelihood taste (ties do not bound it: in
Davidson's model the tie propensity grows with the taste and ties keep their share), and
every bootstrap draw keeps its record: its taste is reported as unbounded on that side,
with the least a perfect record of that many decisive verdicts allows (Clopper-Pearson)
as the other end. A judge whose decisive verdicts all went to one slot answered by
position: its taste is not measured at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eigenjury.stats.bootstrap import percentile_interval
from eigenjury.stats.style import normalised_difference
from eigenjury.stats.verdicts import FIRST, SECOND, TIE, FloatArray, IntArray, tally

# Bounds on log tie propensity (a judge that never ties, or always does) and on the
# position bias and the taste, in log-odds for an edit of the mean size: far beyond any
# judge, they only stop a parameter the verdicts do not bound from running off.
_LOG_BOUND = 15.0
# A weak Gaussian prior, in logits, on each judge's position bias and on the log-odds
# its taste gives an edit of the mean size: worth a few verdicts, it keeps small samples
# finite (a judge that chose the same slot in every verdict of one order) and leaves
# a hundred verdicts to themselves.
PRIOR_SD = 4.0
DEFAULT_ROUNDS = 1000


@dataclass(frozen=True)
class EditVerdicts:
    """Verdicts on same-content pairs: per row the judge (an index into `judges`), the
    edited reply (`unit`: the bootstrap's cluster), the covariate `x` (first minus
    second, see the module docstring), whether the edited reply was shown first, and
    the verdict's weights `n` (rows x 3: tie, first, second; fractional for soft
    verdicts or one criterion of several)."""

    judge: IntArray
    unit: IntArray
    x: FloatArray
    edited_first: np.ndarray
    n: FloatArray
    judges: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.judge)

    def toward_edited(self) -> FloatArray:
        """Per row, the weight of the verdict for the edited reply."""
        return np.where(self.edited_first, self.n[:, FIRST], self.n[:, SECOND])

    def away_from_edited(self) -> FloatArray:
        return np.where(self.edited_first, self.n[:, SECOND], self.n[:, FIRST])


def length_edits(
    judge: IntArray,
    unit: IntArray,
    first_length: FloatArray,
    second_length: FloatArray,
    n: FloatArray,
    scale: float,
    judges: tuple[str, ...],
) -> EditVerdicts:
    """Verdicts on lengthened replies, in the units of the fit's length coefficient:
    the normalised length difference (stats.style) divided by `scale`, the run's
    standard deviation of it."""
    x = normalised_difference(first_length, second_length) / scale
    return EditVerdicts(judge, unit, x, first_length > second_length, n, judges)


@dataclass(frozen=True)
class EditEffect:
    """One judge's (or, `judge` None, all judges' pooled) response to the edit.

    `share`: the share of verdicts for the edited reply, a tie counting half (0.5: the
    edit does not move the judge). `effect`: the log-odds the edit adds per unit of the
    covariate (None when the verdicts do not bound it, when no verdict was decisive, or
    when the judge answered by position); `unbounded` says on which side ("above",
    "below") it has no limit; `position_locked` that every decisive verdict went to the
    same slot. Intervals at level `ci`; an end None has no limit."""

    judge: str | None
    verdicts: float
    toward: float
    away: float
    ties: float
    share: float
    share_ci: tuple[float, float] | None
    effect: float | None
    effect_ci: tuple[float | None, float | None] | None
    unbounded: str | None
    position_locked: bool
    mean_x: float  # mean |x| of its verdicts: the size of the edit in the covariate's units


def _fit(
    edits: EditVerdicts, weights: FloatArray, pooled: bool, start: FloatArray | None = None
) -> FloatArray:
    """The posterior mode under bootstrap `weights` (the likelihood and PRIOR_SD's
    prior): per judge its log tie propensity and position bias, then the tastes (one per
    judge, or one pooled).

    The three logits (tie, first, second) are linear in the parameters, so the negative
    log-posterior is convex: Newton's method with backtracking, each parameter kept
    within its bound."""
    j = len(edits.judges)
    size = 2 * j + (1 if pooled else j)
    mean_size = _mean_size(edits.x, edits.n)
    upper = np.full(size, _LOG_BOUND / mean_size)
    upper[: 2 * j] = _LOG_BOUND
    precision = np.full(size, (mean_size / PRIOR_SD) ** 2)  # the prior's, per parameter
    precision[:j] = 0.0  # none on the tie propensity
    precision[j : 2 * j] = PRIOR_SD**-2
    taste = np.zeros_like(edits.judge) if pooled else edits.judge
    index = np.stack([edits.judge, j + edits.judge, 2 * j + taste], axis=1)
    n = edits.n * weights[:, None]
    total = n.sum(axis=1)
    # d logits / d (log tie, position bias, taste), per row: (rows, 3 logits, 3 parameters)
    d = np.zeros((len(edits), 3, 3))
    d[:, TIE, 0] = 1.0
    d[:, FIRST, 1], d[:, FIRST, 2] = 0.5, 0.5 * edits.x
    d[:, SECOND, 1:] = -d[:, FIRST, 1:]

    def nll(theta: FloatArray) -> tuple[float, FloatArray]:
        logits = np.einsum("rkp,rp->rk", d, theta[index])
        top = logits.max(axis=1, keepdims=True)
        norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        prior = 0.5 * float(precision @ theta**2)
        return float(total @ norm - np.sum(n * logits)) + prior, logits

    theta = np.zeros(size) if start is None else start.copy()
    value, logits = nll(theta)
    for _ in range(200):
        p = np.exp(logits - logits.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        residual = total[:, None] * p - n  # d nll / d logits
        local_grad = np.einsum("rk,rkp->rp", residual, d).ravel()
        grad = tally(index.ravel(), local_grad, size) + precision * theta
        spread = total[:, None, None] * (p[:, :, None] * np.eye(3) - p[:, :, None] * p[:, None])
        local = np.einsum("rkp,rkl,rlq->rpq", d, spread, d, optimize=True)
        cells = (index[:, :, None] * size + index[:, None, :]).ravel()
        hessian = np.bincount(cells, local.ravel(), minlength=size * size).reshape(size, size)
        step = np.linalg.solve(hessian + np.diag(precision + 1e-9), grad)
        t = 1.0
        for _ in range(40):  # backtracking: a decrease the gradient promises in part
            trial = np.clip(theta - t * step, -upper, upper)
            trial_value, trial_logits = nll(trial)
            if trial_value <= value - 1e-4 * grad @ (theta - trial):
                break
            t *= 0.5
        else:
            break  # no step lowers it: at the optimum to rounding
        moved = float(np.max(np.abs(trial - theta)))
        theta, value, logits = trial, trial_value, trial_logits
        if moved < 1e-10:
            break
    return theta


def measure_edit_effect(
    edits: EditVerdicts, *, ci: float = 0.95, rounds: int = DEFAULT_ROUNDS, seed: int = 0
) -> list[EditEffect]:
    """Each judge's response to the edit, then all judges pooled (last), with
    bootstrap intervals over the edited replies (`rounds` 0: none)."""
    j = len(edits.judges)
    ones = np.ones(len(edits))
    point = _fit(edits, ones, pooled=False)
    pooled_point = _fit(edits, ones, pooled=True)
    units, unit_index = np.unique(edits.unit, return_inverse=True)
    draws = np.zeros((rounds, j + 1))
    shares = np.zeros((rounds, j + 1))
    rng = np.random.default_rng(seed)
    for r in range(rounds):
        weights = np.bincount(rng.integers(len(units), size=len(units)), minlength=len(units))
        w = weights[unit_index].astype(np.float64)
        draws[r, :j] = _fit(edits, w, pooled=False, start=point)[2 * j :]
        draws[r, j] = _fit(edits, w, pooled=True, start=pooled_point)[2 * j]
        shares[r] = _shares(edits, w)
    out = []
    for k in range(j + 1):  # each judge, then all pooled
        rows = edits.judge == k if k < j else np.ones(len(edits), dtype=bool)
        if not rows.any():  # a judge without verdicts: nothing to say
            continue
        effect = float(point[2 * j + k]) if k < j else float(pooled_point[2 * j])
        name = edits.judges[k] if k < j else None
        bootstrap = (draws[:, k], shares[:, k]) if rounds else None
        out.append(_effect(edits, rows, name, effect, bootstrap, ci))
    return out


def _mean_size(x: FloatArray, n: FloatArray) -> float:
    """The mean |x| by verdict weight (`n`, rows x 3): the covariate of an edit of the
    mean size."""
    return max(float(np.average(np.abs(x), weights=n.sum(axis=1))), 1e-12)


def _shares(edits: EditVerdicts, weights: FloatArray) -> FloatArray:
    """Per judge and pooled (last), the share of verdicts for the edited reply."""
    j = len(edits.judges)
    toward = edits.toward_edited() + 0.5 * edits.n[:, TIE]
    total = edits.n.sum(axis=1)
    num = tally(edits.judge, toward * weights, j)
    den = tally(edits.judge, total * weights, j)
    num, den = np.append(num, num.sum()), np.append(den, den.sum())
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)


def _effect(
    edits: EditVerdicts,
    rows: np.ndarray,
    judge: str | None,
    effect: float,
    bootstrap: tuple[FloatArray, FloatArray] | None,
    ci: float,
) -> EditEffect:
    """The summary of `rows` (one judge's verdicts, or all) with its fitted `effect` and
    its bootstrap draws of the effect and the share."""
    n = edits.n[rows]
    toward = float(edits.toward_edited()[rows].sum())
    away = float(edits.away_from_edited()[rows].sum())
    ties = float(n[:, TIE].sum())
    total = float(n.sum())
    share = (toward + 0.5 * ties) / total
    mean_x = _mean_size(edits.x[rows], n)
    level = 0.5 * (1.0 + ci)
    decisive = toward + away
    unbounded = None
    locked = False
    value: float | None = effect
    interval: tuple[float | None, float | None] | None = None
    share_ci: tuple[float, float] | None = None
    if bootstrap is not None:
        draws, share_draws = bootstrap
        low, high = percentile_interval(share_draws, ci)
        share_ci = (float(low), float(high))
        lo, hi = percentile_interval(draws, ci)
        interval = (float(lo), float(hi))
    if decisive <= 0:
        value, interval = None, None  # every verdict a tie: no side to measure
    elif n[:, FIRST].sum() <= 0 or n[:, SECOND].sum() <= 0:
        # every decisive verdict went to one slot: answered by position, whatever the
        # replies; the bootstrap cannot show that it says nothing (every draw agrees)
        locked = True
        value, interval, share_ci = None, None, None
    elif toward <= 0 or away <= 0:
        # a perfect record: above (or below) by more than the verdicts can measure (the
        # prior alone sets the estimate, and every draw keeps the record)
        unbounded = "above" if away <= 0 else "below"
        least = _record_log_odds(decisive, level) / mean_x
        value = None
        interval = (least, None) if unbounded == "above" else (None, -least)
        limit = (1.0 - level) ** (1.0 / decisive)
        share_ci = (limit, 1.0) if unbounded == "above" else (0.0, 1.0 - limit)
    return EditEffect(
        judge=judge,
        verdicts=total,
        toward=toward,
        away=away,
        ties=ties,
        share=share,
        share_ci=share_ci,
        effect=value,
        effect_ci=interval,
        unbounded=unbounded,
        position_locked=locked,
        mean_x=mean_x,
    )


def _record_log_odds(wins: float, level: float) -> float:
    """The least log-odds a record of `wins` wins in `wins` decisive verdicts allows at
    one-sided `level` (Clopper-Pearson: p >= (1 - level) ** (1 / wins))."""
    p = (1.0 - level) ** (1.0 / wins)
    return math.log(p / (1.0 - p))


def difference_interval(
    a: float,
    a_ci: tuple[float | None, float | None],
    b: float,
    b_ci: tuple[float | None, float | None],
) -> tuple[float, float | None, float | None]:
    """a - b with an interval from the two estimates' own independent intervals (the
    method of variance estimates recovery, Zou and Donner 2008): each end moves by the
    root sum of squares of the two estimates' distances to their relevant ends. An end
    None (no limit) makes that end of the difference None."""
    a_low, a_high = a_ci
    b_low, b_high = b_ci
    low = high = None
    if a_low is not None and b_high is not None:
        low = a - b - math.hypot(a - a_low, b_high - b)
    if a_high is not None and b_low is not None:
        high = a - b + math.hypot(a_high - a, b - b_low)
    return a - b, low, high
