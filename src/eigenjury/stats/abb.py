"""Bias-bounded evaluation (A-BB): certificate, mechanism and sensitivity bounds.

Everything is in normalised score units: a judge's scores on d items form a vector
f(D) in [0, 1]^d, and a neighbour D' perturbs k of the items in ways that should not
move a fair judge. The mechanism releases

    M(D) = alpha * f(D) + (1 - alpha) * mu + Z,    Z ~ N(0, sigma^2 I_d),

and the certificate states that P[ ||M(D) - M(D')||_2 > tau ] <= delta over the
neighbour draw and both noise draws. The proof is a union bound over three events,
each with its own share of delta:

- sensitivity: the RMS sensitivity Delta = sqrt(E ||f(D) - f(D')||^2) is at most
  the upper confidence bound used (share `delta_sensitivity`, spent when measuring);
- Markov: ||f(D) - f(D')|| <= Delta / sqrt(delta_markov), except with delta_markov;
  or, never failing, the range bound ||f(D) - f(D')|| <= sqrt(k) (k changed items in
  [0, 1]), which needs no delta of its own: the rest of delta goes to the noise tail
  (the sensitivity's share stays reserved, because which step is used depends on the
  measured bound, so its failure must stay inside delta either way). Both
  certificates are valid: with alpha chosen automatically the one keeping
  more signal (larger alpha) is used, so a small measured sensitivity pays off; for a
  given alpha, the one with more room for noise (so a looser target never lowers the
  noise ceiling);
- noise: ||Z - Z'||^2 / (2 sigma^2) is chi-square with d degrees of freedom, below
  the Laurent-Massart radius d + 2 sqrt(d x) + 2x, x = ln(1 / delta_noise), except
  with delta_noise.

So the release is within L(alpha) * B + sigma * sqrt(2 R) of its neighbour, where
B is the bias term above, R the radius, and L(alpha) the Lipschitz constant of the
shrinkage: alpha for a fixed centre mu; sqrt(alpha^2 + (1 - alpha^2) k / d) when mu
is the batch mean (one perturbed item moves the centre too).

Infeasibility. With a fixed centre, alpha -> 0 makes any tau reachable, but then
the released scores keep nothing of their spread. The certificate therefore takes
`min_alpha` (default 0.1: released scores keep at least a tenth of their spread)
and is infeasible when tau < L(min_alpha) * B, or tau < L(alpha) * B for a given
alpha; `smallest_feasible_tau` is that value. With the batch-mean centre the limit
is real even at alpha -> 0: L(0) * B = sqrt(k / d) * B.

Units of different sizes. A neighbour edits one unit (a reply, a submission, a score
file's unit) and all r items it feeds move; units differ in r, and the change per
item may differ with r too (the rare reply judged in many rows may be the one a
judge reads differently). The neighbour model: for each size r of the released
units, D' edits one unit of size r; the guarantee holds for each size on its own,
and so for any mix of sizes. The assumption: the measured units of size r are a
sample of the units of size r, with the same mean mu_r of their per-item squared
change. By linearity a neighbour of size r then moves the scores by
E||f(D) - f(D')||^2 = r mu_r. `estimate_sensitivity` bounds each measured size s
on its own, U_s >= mu_s at confidence 1 - delta_sensitivity / S (S the sizes bounded
that were measured: a union bound, so all hold except with delta_sensitivity), and
gives a size the measurement has no unit of U = 1, the range (an item moves at most
1), which never fails. So every size's RMS change is at most
Delta_U = sqrt(max_r r U_r), and the steps above go through with this Delta_U and
k = max r. One size is one sample, bounded as before. Pooling units of different
sizes into one mean, as certificates did before they listed `strata`, bounds a unit
drawn from the measured mix only, and fails for a size that is rare in it.

The release is an affine shrink toward mu plus noise: it bounds how far a neighbour
can move the released scores, and removes no bias. A judge that favours long replies
still favours them in the release, by alpha times as much, beside a signal also
shrunk by alpha: the bias relative to the signal is what it was.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Collection
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize

from eigenjury.stats.verdicts import FloatArray

BATCH_MEAN: Literal["batch-mean"] = "batch-mean"
KL_BERNSTEIN = "kl+bernstein"
BOUND_METHODS = (KL_BERNSTEIN, "kl", "bernstein", "hoeffding", "bootstrap")
# The percentile bootstrap has no finite-sample guarantee and says 0 whenever its few
# units showed no change: a size with fewer units than this gets the range bound.
BOOTSTRAP_MIN_UNITS = 30
Centre = float | Literal["batch-mean"]


def laurent_massart_radius(dim: int, delta: float) -> float:
    """r with P[chi2_dim >= r] <= delta (Laurent and Massart 2000, Lemma 1)."""
    if dim < 1:
        raise ValueError(f"dim must be at least 1, got {dim}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    x = math.log(1.0 / delta)
    return dim + 2.0 * math.sqrt(dim * x) + 2.0 * x


def shrinkage_lipschitz(alpha: float, dim: int, neighbour_size: int, centre: Centre) -> float:
    """How far the shrunk scores can move per unit move of k-sparse raw scores."""
    if centre == BATCH_MEAN:
        share = neighbour_size / dim
        return math.sqrt(alpha**2 + (1.0 - alpha**2) * share)
    return alpha


@dataclass(frozen=True)
class DeltaSplit:
    """Where delta goes: the sensitivity bound, the Markov step and the noise tail."""

    sensitivity: float
    markov: float
    noise: float


@dataclass(frozen=True)
class Certificate:
    """A (tau, delta) bias bound for a d-item score vector, with everything it rests on.

    `threshold` = lipschitz * bias_term: how far the shrunk scores of D and D' can be
    apart (with the Markov or range step); tau must reach it. `sigma_max` is the
    noise ceiling (the bound holds for any sigma in [0, sigma_max]).
    """

    tau: float
    delta: float
    split: DeltaSplit
    dim: int
    neighbour_size: int
    sensitivity: float
    bias_term: float
    bias_bound: Literal["markov", "range"]
    alpha: float
    alpha_given: bool
    centre: float | None  # None: the batch mean
    lipschitz: float
    threshold: float
    noise_radius: float  # sqrt(2 R): ||Z - Z'|| <= sigma * noise_radius
    sigma_max: float
    feasible: bool
    smallest_feasible_tau: float
    noise_share: float
    min_alpha: float

    @property
    def floored(self) -> bool:
        """Whether `min_alpha`, not the noise share, set the chosen alpha: the bias
        term then takes part (or all) of the share of tau meant for noise."""
        kept = (1.0 - self.noise_share) * self.tau
        return self.feasible and not self.alpha_given and not _at_most(self.threshold, kept)

    @property
    def deterministic(self) -> bool:
        """Whether the bias term uses all of tau: no noise can be added (sigma_max 0),
        and the release is the affine map alpha f + (1 - alpha) mu."""
        return self.feasible and self.sigma_max == 0.0

    def weaknesses(self) -> list[str]:
        """What makes this feasible certificate say little, as warnings: the alpha floor
        eating the share of tau meant for noise, or no room for noise at all."""
        out = []
        if self.floored:
            out.append(
                f"the alpha floor took the share of tau meant for noise: min_alpha "
                f"{self.min_alpha:g} leaves the bias term {self.threshold:.4g} of tau "
                f"{self.tau:g}, so {self.tau - self.threshold:.4g} for noise where the noise "
                f"share asked for {self.noise_share * self.tau:.4g}; measure a smaller Delta, "
                "raise tau, or lower min_alpha"
            )
        if self.deterministic:
            centre = "the batch mean" if self.centre is None else f"{self.centre:g}"
            out.append(
                f"no noise: deterministic shrinkage (sigma_max = 0): the release is "
                f"{self.alpha:.4g} x score + {1 - self.alpha:.4g} x {centre}, so its "
                "utilities are 1 by construction"
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        record = asdict(self)
        record["centre"] = BATCH_MEAN if self.centre is None else self.centre
        return record

    def explain(self) -> str:
        """Why the target cannot be certified, and what can."""
        if self.feasible:
            return f"feasible: sigma_max = {self.sigma_max:.6g}"
        which = (
            f"at the given alpha = {self.alpha:g}"
            if self.alpha_given
            else f"even at the smallest shrinkage alpha = {self.min_alpha:g}"
        )
        step = (
            f"the range bound sqrt(k) = {self.bias_term:.4g}"
            if self.bias_bound == "range"
            else f"Delta / sqrt(delta_markov) = {self.sensitivity:.4g} / "
            f"sqrt({self.split.markov:.3g}) = {self.bias_term:.4g}"
        )
        return (
            f"tau = {self.tau:g} is infeasible {which}: perturbations can move the shrunk "
            f"scores by {self.threshold:.4g} ({step}, times {self.lipschitz:.4g}); the "
            f"smallest feasible tau for these settings is {self.smallest_feasible_tau:.4g}"
        )


def certify(
    tau: float,
    delta: float,
    sensitivity: float,
    dim: int,
    *,
    alpha: float | None = None,
    delta_split: float = 0.5,
    delta_sensitivity: float = 0.0,
    neighbour_size: int = 1,
    range_bound: bool = True,
    centre: Centre = 0.5,
    noise_share: float = 0.5,
    min_alpha: float = 0.1,
) -> Certificate:
    """Certify a (tau, delta) bias bound for `dim` scores in [0, 1] units.

    sensitivity: an upper bound on the RMS change of the score vector under one
    neighbour draw (k = `neighbour_size` items perturbed); it holds except with
    probability `delta_sensitivity` (0 when known exactly), which is part of delta.
    The rest of delta is split `delta_split` : 1 - `delta_split` between the Markov
    step and the noise tail. alpha None chooses the largest shrinkage in
    [min_alpha, 1] whose bias term uses at most (1 - noise_share) * tau, leaving the
    rest of tau for noise (noise_share 0 is the reference rule, alpha = tau / B,
    which leaves no room for noise whenever it shrinks). `centre` is fixed (a value
    in [0, 1] chosen before seeing the data; 0.5 is the scale midpoint) or
    "batch-mean", whose shift is added to the sensitivity (see the module docstring).
    """
    _check_open(tau, "tau", 0.0, math.inf)
    _check_open(delta, "delta", 0.0, 1.0)
    _check_open(delta_split, "delta_split", 0.0, 1.0)
    if not math.isfinite(sensitivity) or sensitivity < 0:
        raise ValueError(f"sensitivity must be a finite number >= 0, got {sensitivity}")
    if dim < 1:
        raise ValueError(f"dim must be at least 1, got {dim}")
    if not 1 <= neighbour_size <= dim:
        raise ValueError(f"neighbour_size must be in [1, dim = {dim}], got {neighbour_size}")
    if not 0.0 <= delta_sensitivity < delta:
        raise ValueError(
            f"delta_sensitivity must be in [0, delta = {delta}), got {delta_sensitivity}"
        )
    if not 0.0 <= noise_share < 1.0:
        raise ValueError(f"noise_share must be in [0, 1), got {noise_share}")
    _check_open(min_alpha, "min_alpha", 0.0, 1.0, high_closed=True)
    if alpha is not None:
        _check_open(alpha, "alpha", 0.0, 1.0, high_closed=True)
    if centre != BATCH_MEAN and not (isinstance(centre, float | int) and 0.0 <= centre <= 1.0):
        raise ValueError(f"centre must be in [0, 1] or '{BATCH_MEAN}', got {centre!r}")

    rest = delta - delta_sensitivity
    markov = _candidate(
        tau,
        delta,
        sensitivity / math.sqrt(delta_split * rest),
        "markov",
        DeltaSplit(delta_sensitivity, delta_split * rest, (1.0 - delta_split) * rest),
        sensitivity=sensitivity,
        dim=dim,
        neighbour_size=neighbour_size,
        alpha=alpha,
        centre=centre,
        noise_share=noise_share,
        min_alpha=min_alpha,
    )
    if not range_bound:
        return markov
    # The range step never fails; the sensitivity's share stays spent, since the choice
    # between the two steps rests on the measured bound.
    by_range = _candidate(
        tau,
        delta,
        math.sqrt(neighbour_size),
        "range",
        DeltaSplit(delta_sensitivity, 0.0, rest),
        sensitivity=sensitivity,
        dim=dim,
        neighbour_size=neighbour_size,
        alpha=alpha,
        centre=centre,
        noise_share=noise_share,
        min_alpha=min_alpha,
    )
    # Both are valid. With alpha chosen here, keep the one that keeps more signal (the
    # larger alpha: the measured sensitivity then matters whenever it beats the range
    # step); for a given alpha, the one leaving more room for noise, so that a looser
    # target never gets a smaller noise ceiling.
    if alpha is None:
        best = max(markov, by_range, key=lambda c: (c.feasible, c.alpha, c.sigma_max, -c.threshold))
    else:
        best = max(markov, by_range, key=lambda c: (c.feasible, c.sigma_max, -c.threshold))
    smallest = min(markov.smallest_feasible_tau, by_range.smallest_feasible_tau)
    return replace(best, smallest_feasible_tau=smallest)


def _candidate(
    tau: float,
    delta: float,
    bias_term: float,
    bias_bound: Literal["markov", "range"],
    split: DeltaSplit,
    *,
    sensitivity: float,
    dim: int,
    neighbour_size: int,
    alpha: float | None,
    centre: Centre,
    noise_share: float,
    min_alpha: float,
) -> Certificate:
    """The certificate that bounds the raw change by `bias_term`."""

    def lipschitz(a: float) -> float:
        return shrinkage_lipschitz(a, dim, neighbour_size, centre)

    if alpha is None:
        chosen = _largest_alpha((1.0 - noise_share) * tau, bias_term, dim, neighbour_size, centre)
        alpha_used = max(chosen, min_alpha)
        smallest = lipschitz(min_alpha) * bias_term
    else:
        alpha_used = alpha
        smallest = lipschitz(alpha) * bias_term
    threshold = lipschitz(alpha_used) * bias_term
    # a threshold equal to tau up to rounding leaves no room for noise: sigma_max is 0
    exhausted = math.isclose(tau, threshold, rel_tol=1e-12)
    feasible = tau >= threshold or exhausted
    noise_radius = math.sqrt(2.0 * laurent_massart_radius(dim, split.noise))
    sigma_max = 0.0 if exhausted or not feasible else (tau - threshold) / noise_radius
    return Certificate(
        tau=tau,
        delta=delta,
        split=split,
        dim=dim,
        neighbour_size=neighbour_size,
        sensitivity=sensitivity,
        bias_term=bias_term,
        bias_bound=bias_bound,
        alpha=alpha_used,
        alpha_given=alpha is not None,
        centre=None if centre == BATCH_MEAN else float(centre),
        lipschitz=lipschitz(alpha_used),
        threshold=threshold,
        noise_radius=noise_radius,
        sigma_max=sigma_max,
        feasible=feasible,
        smallest_feasible_tau=smallest,
        noise_share=noise_share,
        min_alpha=min_alpha,
    )


def _largest_alpha(
    budget: float, bias_term: float, dim: int, neighbour_size: int, centre: Centre
) -> float:
    """The largest alpha in [0, 1] with lipschitz(alpha) * bias_term <= budget."""
    if bias_term == 0.0:
        return 1.0
    reach = budget / bias_term
    if centre != BATCH_MEAN:
        return min(1.0, reach)
    share = neighbour_size / dim
    if share >= 1.0 or reach >= 1.0:
        return 1.0
    if reach**2 <= share:
        return 0.0
    return math.sqrt((reach**2 - share) / (1.0 - share))


def _at_most(value: float, limit: float) -> bool:
    return value <= limit or math.isclose(value, limit, rel_tol=1e-12)


def _check_open(
    value: float, name: str, low: float, high: float, *, high_closed: bool = False
) -> None:
    ok = low < value <= high if high_closed else low < value < high
    if not (math.isfinite(value) and ok):
        raise ValueError(
            f"{name} must be in ({low:g}, {high:g}{']' if high_closed else ')'}, got {value}"
        )


def shrink_and_noise(
    scores: ArrayLike, certificate: Certificate, sigma: float, rng: np.random.Generator
) -> FloatArray:
    """The mechanism: shrink toward the centre, add N(0, sigma^2) noise per item.

    Scores are in [0, 1] units, one per item, in the certificate's dimension; sigma
    must be in [0, sigma_max]. The output is not clipped (clipping to [0, 1] would
    keep the bound, being non-expansive, but bias the released means). It bounds how
    far a neighbour moves the released scores; it removes no bias (module docstring).
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 1 or len(x) != certificate.dim:
        raise ValueError(f"expected {certificate.dim} scores (the certificate's d), got {x.shape}")
    if not np.all((x >= 0.0) & (x <= 1.0)):
        raise ValueError("scores must be normalised to [0, 1]")
    if not certificate.feasible:
        raise ValueError(certificate.explain())
    if not 0.0 <= sigma <= certificate.sigma_max * (1 + 1e-12):
        raise ValueError(f"sigma must be in [0, sigma_max = {certificate.sigma_max:.6g}]")
    mu = x.mean() if certificate.centre is None else certificate.centre
    shrunk = certificate.alpha * x + (1.0 - certificate.alpha) * mu
    return np.asarray(shrunk + sigma * rng.standard_normal(len(x)))


def debias(
    scores: ArrayLike, certificate: Certificate, sigma: float, rng: np.random.Generator
) -> FloatArray:
    """The old name of `shrink_and_noise`, kept so that scripts calling it still run;
    it warns, since the release removes no bias."""
    warnings.warn(
        "debias is now shrink_and_noise: the release shrinks and noises the scores, it "
        "does not remove the judge's bias",
        DeprecationWarning,
        stacklevel=2,
    )
    return shrink_and_noise(scores, certificate, sigma, rng)


@dataclass(frozen=True)
class Stratum:
    """The measured units that each feed `size` items: the mean over them of their
    per-item squared change, and its upper confidence bound. A size no measured unit
    has (m = 0) gets the range bound, 1 per item, which never fails."""

    size: int
    m: int  # units of this size measured
    mean_square: float | None  # per item, averaged over the units; None when m = 0
    variance: float  # of the m per-unit samples
    upper_bound: float  # on the per-item mean squared change, at `confidence`
    confidence: float
    failed: int = 0  # neighbours whose judgment failed, counted as a change of 1

    @property
    def estimate(self) -> float | None:
        """The RMS change per item (None when no unit of this size was measured)."""
        return None if self.mean_square is None else math.sqrt(self.mean_square)

    @property
    def per_item_bound(self) -> float:
        return math.sqrt(self.upper_bound)

    @property
    def range_only(self) -> bool:
        """Whether this size rests on the range alone: no unit, or too few for the
        bootstrap (`BOOTSTRAP_MIN_UNITS`)."""
        return self.upper_bound == 1.0 and self.confidence == 1.0


@dataclass(frozen=True)
class Sensitivity:
    """RMS sensitivity of a neighbour that edits one unit, from m measured units, for
    each unit size bounded (`strata`) and for the worst of them.

    estimate and upper_bound are those of the worst size: sqrt(max_r r mean_r) over the
    sizes measured (None when none was) and sqrt(max_r r U_r) over all (module
    docstring: units of different sizes). `neighbour_size` is the largest size, the k
    of the range step.
    """

    estimate: float | None
    upper_bound: float
    confidence: float
    method: str
    m: int
    neighbour_size: int
    strata: tuple[Stratum, ...]
    failed: int = 0  # neighbours whose judgment failed, counted as a change of 1

    def units_to_decide(self, markov_delta: float) -> int | None:
        """The fewest units of each size at which a measurement like this one would
        beat the range step: the Markov step's bias term sqrt(max_r r U_r / markov_delta)
        falls below sqrt(k) once U_r < markov_delta k / r for every size r (see
        `units_to_decide`); 0 where a size needs none; None when some size never would."""
        needed = [
            _stratum_units(s, markov_delta * self.neighbour_size / s.size, self.method)
            for s in self.strata
        ]
        return None if None in needed else max(n for n in needed if n is not None)


def _stratum_units(stratum: Stratum, threshold: float, method: str) -> int | None:
    """The units of its size at which this stratum's bound falls below `threshold`."""
    if threshold > 1.0:
        return 0  # even the range bound of its items is below it
    if stratum.mean_square is None:
        return None
    return units_to_decide(
        stratum.mean_square, stratum.variance, stratum.confidence, method, threshold
    )


def mean_upper_bound(
    values: ArrayLike,
    confidence: float,
    *,
    method: str = KL_BERNSTEIN,
    rounds: int = 2000,
    rng: np.random.Generator | None = None,
) -> float:
    """An upper confidence bound on the mean of i.i.d. values in [0, 1].

    "kl": the Chernoff-Hoeffding bound, the largest q with
    m * kl(mean, q) <= ln(1 / (1 - confidence)); valid for any [0, 1] variable at any
    m, and much tighter than Hoeffding when the mean is near 0, as squared score
    changes mostly are. "bernstein": Maurer and Pontil's empirical Bernstein bound,
    mean + sqrt(2 V ln(2 / e) / m) + 7 ln(2 / e) / (3 (m - 1)) with V the sample
    variance and e = 1 - confidence: it pays off when the changes are many and alike
    (a judge that moves every score a little), where the KL bound, which assumes the
    worst variance for the mean, does not. "kl+bernstein" (default): the smaller of the
    two, each at half the error probability (a union bound). "hoeffding": mean +
    sqrt(ln(1 / (1 - confidence)) / 2m). "bootstrap": the percentile bootstrap, with no
    finite-sample guarantee (it gives 0 when all m changes are 0).
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError("need at least one value")
    if not np.all((v >= 0.0) & (v <= 1.0)):
        raise ValueError("values must be in [0, 1]")
    _check_open(confidence, "confidence", 0.0, 1.0)
    if method == "bootstrap":
        if rng is None:
            raise ValueError("the bootstrap needs an explicit rng")
        means = v[rng.integers(0, len(v), size=(rounds, len(v)))].mean(axis=1)
        return float(np.quantile(means, confidence))
    variance = float(v.var(ddof=1)) if len(v) > 1 else 0.25
    return upper_bound_at(float(v.mean()), variance, len(v), confidence, method)


def upper_bound_at(mean: float, variance: float, m: int, confidence: float, method: str) -> float:
    """The upper bound of `mean_upper_bound` for m values of this mean and sample
    variance (every method but the bootstrap depends on the values only through them)."""
    error = 1.0 - confidence
    if method == KL_BERNSTEIN:
        half = 1.0 - error / 2
        return min(
            upper_bound_at(mean, variance, m, half, "kl"),
            upper_bound_at(mean, variance, m, half, "bernstein"),
        )
    if method == "kl":
        if mean >= 1.0:
            return 1.0
        limit = math.log(1.0 / error) / m

        def excess(q: float) -> float:
            return _bernoulli_kl(mean, q) - limit

        if excess(1.0 - 1e-15) <= 0:
            return 1.0
        return float(optimize.brentq(excess, mean, 1.0 - 1e-15, xtol=1e-14))
    if method == "bernstein":
        if m < 2:
            return 1.0
        log_term = math.log(2.0 / error)
        bound = mean + math.sqrt(2.0 * variance * log_term / m) + 7.0 * log_term / (3 * (m - 1))
        return min(1.0, bound)
    if method == "hoeffding":
        return min(1.0, mean + math.sqrt(math.log(1.0 / error) / (2 * m)))
    raise ValueError(f"method must be one of {', '.join(BOUND_METHODS)}, got {method!r}")


def units_to_decide(
    mean: float, variance: float, confidence: float, method: str, markov_delta: float
) -> int | None:
    """The fewest measured units at which, with this mean and variance of the squared
    per-item changes, the measurement would beat the range step: the Markov step's bias
    term sqrt(k u) / sqrt(markov_delta) falls below the range step's sqrt(k) once the
    upper bound u on the mean is below markov_delta. None when no number would (the
    mean itself is not below it, or the bootstrap, which has no such guarantee)."""
    if method == "bootstrap" or mean >= markov_delta:
        return None
    low, high = 1, 2
    while upper_bound_at(mean, variance, high, confidence, method) >= markov_delta:
        if high > 10**12:
            return None
        low, high = high, 2 * high
    while high - low > 1:
        middle = (low + high) // 2
        if upper_bound_at(mean, variance, middle, confidence, method) >= markov_delta:
            low = middle
        else:
            high = middle
    return high


def _bernoulli_kl(p: float, q: float) -> float:
    left = 0.0 if p == 0.0 else p * math.log(p / q)
    right = 0.0 if p == 1.0 else (1.0 - p) * math.log((1.0 - p) / (1.0 - q))
    return left + right


def estimate_sensitivity(
    original: ArrayLike,
    perturbed: ArrayLike,
    confidence: float,
    *,
    method: str = KL_BERNSTEIN,
    units: ArrayLike | None = None,
    unit_sizes: ArrayLike | None = None,
    neighbour_sizes: Collection[int] | None = None,
    rng: np.random.Generator | None = None,
) -> Sensitivity:
    """Delta and its upper bound, per unit size, from paired [0, 1] scores of items and
    their neighbours.

    A neighbour whose judgment failed (perturbed NaN) counts as the largest change, 1:
    a judge that breaks under an edit is the sensitive case, and dropping it would
    leave the bound on the judgments that survived. `units` (one integer per pair;
    None: each pair its own) groups the pairs one edit moved together: their squared
    changes are averaged into one sample per unit, so the bound rests on the m
    independent units, not on correlated items. `unit_sizes` (one per pair, the same
    within a unit; None: the pairs the unit has) is how many items the unit feeds.
    `neighbour_sizes` are the unit sizes a neighbour may edit (None: the sizes
    measured): each is bounded by the measured units of its size alone, at confidence
    1 - (1 - confidence) / S with S the sizes bounded that were measured, and a size
    with no measured unit by the range (module docstring: units of different sizes).
    """
    a = np.asarray(original, dtype=np.float64)
    b = np.asarray(perturbed, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need paired 1-d arrays, got shapes {a.shape} and {b.shape}")
    if len(a) == 0:
        raise ValueError("need at least one pair")
    failed = np.isnan(b)
    squared = np.where(failed, 1.0, (a - b) ** 2)
    if units is None:
        unit = np.arange(len(squared))
    else:
        codes = np.asarray(units)
        if codes.shape != squared.shape:
            raise ValueError(f"need one unit per pair, got {codes.shape} for {squared.shape}")
        _, unit = np.unique(codes, return_inverse=True)
    pairs = np.bincount(unit)
    samples = np.bincount(unit, squared) / pairs
    failures = np.bincount(unit, failed.astype(np.float64)).astype(np.int64)
    size = pairs if unit_sizes is None else _sizes_of_units(unit_sizes, unit, squared.shape)
    bounded = sorted(set(size.tolist()) if neighbour_sizes is None else set(neighbour_sizes))
    if not bounded or bounded[0] < 1:
        raise ValueError(f"neighbour sizes must be at least 1, got {bounded}")
    measured = sum(1 for r in bounded if np.any(size == r))
    share = confidence if measured <= 1 else 1.0 - (1.0 - confidence) / measured
    strata = tuple(
        _stratum(r, samples[size == r], int(failures[size == r].sum()), share, method, rng)
        for r in bounded
    )
    estimates = [s.size * s.mean_square for s in strata if s.mean_square is not None]
    return Sensitivity(
        estimate=math.sqrt(max(estimates)) if estimates else None,
        upper_bound=math.sqrt(max(s.size * s.upper_bound for s in strata)),
        confidence=confidence,
        method=method,
        m=len(samples),
        neighbour_size=bounded[-1],
        strata=strata,
        failed=int(failed.sum()),
    )


def _sizes_of_units(
    unit_sizes: ArrayLike, unit: np.ndarray[Any, Any], shape: tuple[int, ...]
) -> np.ndarray[Any, np.dtype[np.int64]]:
    """One size per unit from one per pair, which must agree within a unit."""
    given = np.asarray(unit_sizes, dtype=np.int64)
    if given.shape != shape:
        raise ValueError(f"need one unit size per pair, got {given.shape} for {shape}")
    size = np.zeros(int(unit.max()) + 1 if len(unit) else 0, dtype=np.int64)
    size[unit] = given
    if np.any(size[unit] != given) or np.any(size < 1):
        raise ValueError("a unit's size must be at least 1 and the same for all its pairs")
    return size


def _stratum(
    size: int,
    samples: FloatArray,
    failed: int,
    confidence: float,
    method: str,
    rng: np.random.Generator | None,
) -> Stratum:
    """The bound of one unit size from its per-unit samples (the range bound for none,
    or for fewer than the bootstrap needs)."""
    m = len(samples)
    mean = float(samples.mean()) if m else None
    variance = float(samples.var(ddof=1)) if m > 1 else 0.0
    if m == 0 or (method == "bootstrap" and m < BOOTSTRAP_MIN_UNITS):
        return Stratum(size, m, mean, variance, 1.0, 1.0, failed)
    upper = mean_upper_bound(samples, confidence, method=method, rng=rng)
    return Stratum(size, m, mean, variance, upper, confidence, failed)


@dataclass(frozen=True)
class Utility:
    """How much signal survives: correlations between original and released scores."""

    pearson: float | None
    spearman: float | None
    kendall: float | None


def tied_within(values: ArrayLike, tolerance: float) -> FloatArray:
    """`values` with differences of at most `tolerance` made ties: in sorted order, a value
    that close to the one before it takes that one's value, so a run of near-equal values
    becomes one value. Differences at the level of rounding then order nothing."""
    array = np.asarray(values, dtype=np.float64)
    if tolerance <= 0 or len(array) < 2:
        return array
    order = np.argsort(array, kind="stable")
    ordered = array[order]
    starts = np.concatenate([[True], np.diff(ordered) > tolerance])
    tied = np.empty_like(array)
    tied[order] = ordered[starts][np.cumsum(starts) - 1]
    return tied


def utility_retained(
    original: ArrayLike, released: ArrayLike, *, tie_tolerance: float = 0.0
) -> Utility:
    """Pearson, Spearman and Kendall; None where undefined (fewer than 2, or constant).
    Values of either vector within `tie_tolerance` of each other are ties (see
    `tied_within`), so a vector constant up to rounding has no correlations."""
    from scipy import stats as sps  # loaded only here: it is slow to import

    a = tied_within(original, tie_tolerance)
    b = tied_within(released, tie_tolerance)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} and {b.shape}")
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return Utility(None, None, None)
    return Utility(
        pearson=float(sps.pearsonr(a, b).statistic),
        spearman=float(sps.spearmanr(a, b).statistic),
        kendall=float(sps.kendalltau(a, b).statistic),
    )
