"""Favouritism: a judge whose verdicts on one evaluee depart from how the other judges
see it, by more than taste explains.

EigenTrust lets each judge give its trust to whom it prefers, so a judge that always
picks a friend gives the friend all of its trust (about 95 Elo among eight peers), and
two judges that pick each other keep their trust between them. No trust rule can tell
such a judge from one with a strong, honest taste; the verdicts can say how strong it
is. For each judge j and evaluee k (j not k), over j's decisive verdicts on k against
another model (never on itself), the shift b in log-odds that j adds to k beyond the
reference view fits

    P(k wins) = sigmoid(r_k - r_o +- p_j + b)

where r is the median over the other judges (j and k left out) of each judge's scores
centred over the evaluees, and p_j is j's position bias (+ with k shown first). A
median of the others cannot be moved by a few colluders. A shift is reported when its
one-sided likelihood-ratio lower limit, Bonferroni-corrected over the pairs tested,
exceeds `min_shift` (2.5 log-odds): a judge that always picks a friend has a perfect
record (b = infinity) and was named in every study of BENCHMARKS.md section 19, part
6, while honest judges with tastes of a logit or so never were. A judge whose honest
view of one model really is that far from everyone else's is named too (5 to 20% of
`eigenjury simulate` studies, whose judges' lenses differ widely): the verdicts cannot
tell a strong taste from a friend, so the warning says both. Verdicts of one scenario
are correlated, so the limit is optimistic; the threshold leaves room for that.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_expit
from scipy.stats import norm

from eigenjury.stats.verdicts import FIRST, SECOND, FloatArray, IntArray, VerdictCounts

# Fewest decisive verdicts of a judge on an evaluee that are tested.
MIN_VERDICTS = 10
# The least shift (log-odds) a judge's lower limit must exceed to be reported.
MIN_SHIFT = 2.5
_BRACKET = 40.0


@dataclass(frozen=True)
class Favour:
    """Judge `judge` gave `evaluee` `won` of `verdicts` decisive verdicts where the other
    judges' view expects `expected`: a shift of `shift` log-odds (inf: it always picked
    it), at least `shift_low` at the tested level."""

    judge: str
    evaluee: str
    verdicts: float
    won: float
    expected: float
    shift: float
    shift_low: float

    def sentence(self) -> str:
        by = "always" if np.isinf(self.shift) else f"by {self.shift:.1f} log-odds"
        return (
            f"judge '{self.judge}' picked '{self.evaluee}' in {self.won:g} of {self.verdicts:g} "
            f"decisive verdicts where the other judges' view expects {self.expected:.0f} "
            f"(it favours it {by}; by at least {self.shift_low:.1f} log-odds)"
        )


def reference_scores(scores: FloatArray, judges: IntArray, evaluees: IntArray) -> FloatArray:
    """ref[j, k]: the median over judges other than j and k of their scores of k, each
    judge's scores centred over the evaluees (NaN where no other judge is left)."""
    rows = scores[np.ix_(judges, evaluees)]
    rows = rows - rows.mean(axis=1, keepdims=True)
    n = scores.shape[0]
    ref = np.full((n, scores.shape[1]), np.nan)
    for j in judges:
        for b, k in enumerate(evaluees):
            keep = (judges != j) & (judges != k)
            if keep.any():
                ref[j, k] = float(np.median(rows[keep, b]))
    return ref


def _loglik(b: float, offset: FloatArray, won: FloatArray, lost: FloatArray) -> float:
    return float(won @ log_expit(offset + b) + lost @ log_expit(-(offset + b)))


def _shift(
    offset: FloatArray, won: FloatArray, lost: FloatArray, z: float, floor: float
) -> tuple[float, float]:
    """The maximum-likelihood shift and its one-sided likelihood-ratio lower limit
    (-inf, -inf for a judge that never picked the evaluee). Where the shift itself is
    at most `floor`, so is the limit, which is then not searched for (-inf)."""
    wins = float(won.sum())
    if wins <= 0:
        return -np.inf, -np.inf
    bracket = _BRACKET + float(np.abs(offset).max())
    if lost.sum() <= 0:
        best, top = np.inf, 0.0  # a perfect record: the likelihood rises to 0
    else:
        total = won + lost
        best = brentq(lambda b: float(expit(offset + b) @ total) - wins, -bracket, bracket)
        top = _loglik(best, offset, won, lost)
    if best <= floor:
        return best, -np.inf
    target = top - 0.5 * z * z
    if _loglik(-bracket, offset, won, lost) >= target:
        return best, -bracket
    start = best if np.isfinite(best) else bracket
    low = brentq(lambda b: _loglik(b, offset, won, lost) - target, -bracket, start)
    return best, float(low)


def favours(
    counts: VerdictCounts,
    scores: FloatArray,
    evaluees: IntArray,
    position_bias: FloatArray,
    *,
    level: float = 0.95,
    min_shift: float = MIN_SHIFT,
    min_verdicts: float = MIN_VERDICTS,
) -> list[Favour]:
    """Every (judge, evaluee) pair whose shift's lower limit exceeds `min_shift`, the
    largest first. `scores` (judges x models) and `position_bias` (per judge) are the
    fit's; `level` is family-wise over the pairs tested (Bonferroni)."""
    judges = np.flatnonzero(counts.judge_totals() > 0)
    if len(judges) < 2:  # no other judge's view to depart from (an arena's one crowd)
        return []
    ref = reference_scores(scores, judges, np.asarray(evaluees))
    decisive = counts.n[:, FIRST] + counts.n[:, SECOND]
    tested: list[tuple[int, int, FloatArray, FloatArray, FloatArray]] = []
    for j in judges:
        # j's decisive cells, not on itself: each evaluee's are picked from these alone
        mine = np.flatnonzero(
            (counts.judge == j) & (counts.first != j) & (counts.second != j) & (decisive > 0)
        )
        firsts, seconds = counts.first[mine], counts.second[mine]
        for k in evaluees:
            if k == j:
                continue
            first, second = mine[firsts == k], mine[seconds == k]
            if decisive[first].sum() + decisive[second].sum() < min_verdicts:
                continue
            pos = position_bias[j]
            offset = np.concatenate(
                [
                    ref[j, k] - ref[j, counts.second[first]] + pos,
                    ref[j, k] - ref[j, counts.first[second]] - pos,
                ]
            )
            won = np.concatenate([counts.n[first, FIRST], counts.n[second, SECOND]])
            lost = np.concatenate([counts.n[first, SECOND], counts.n[second, FIRST]])
            if np.isfinite(offset).all():
                tested.append((int(j), int(k), offset, won, lost))
    if not tested:
        return []
    z = float(norm.ppf(1.0 - (1.0 - level) / len(tested)))
    found = []
    for judge, evaluee, offset, won, lost in tested:
        shift, low = _shift(offset, won, lost, z, min_shift)
        if low > min_shift:
            total = won + lost
            found.append(
                Favour(
                    counts.models[judge],
                    counts.models[evaluee],
                    round(float(total.sum()), 3),
                    round(float(won.sum()), 3),
                    float(expit(offset) @ total),
                    shift,
                    low,
                )
            )
    return sorted(found, key=lambda f: (-f.shift_low, f.judge, f.evaluee))


def rings(found: list[Favour]) -> list[tuple[str, str]]:
    """Pairs of judges that favour each other, each pair once."""
    pairs = {(f.judge, f.evaluee) for f in found}
    return sorted({tuple(sorted(p)) for p in pairs if (p[1], p[0]) in pairs})  # type: ignore[misc]
