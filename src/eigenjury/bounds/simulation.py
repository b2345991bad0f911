"""Judges with known sensitivity, and a Monte Carlo check of the certificate.

A simulated judge scores items of known quality on a raw scale. Under a neighbour of
kind g an item's score moves by `points` with probability `rate`, and every
judgment (original or neighbour) has seeded jitter: +-1 point with probability
`jitter`. The check measures the judge on m items as `bound measure` would, certifies
(tau, delta), then draws neighbours and noise many times and counts how often the
released vectors end up more than tau apart, with an interval clustered by
measurement (the draws of one measurement share its certificate). It can fail on
purpose: a neighbour may move more items than the certificate assumed (`true_k` above
`assumed_k`), and the judge deployed may be more sensitive than the one measured
(`deployed`); the violations it then finds show that the check has the power to see
a bound that does not hold; the utility of the release is measured
against the unreleased scores and against the truth (the items' qualities), since a
release without noise keeps correlation 1 with the scores by construction. Used by
the tests and by
benchmarks/bounds_validation.py, which also replays the reference implementation's
choices on the same judges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from eigenjury.bounds.scores import SCALES, Scale
from eigenjury.stats.abb import (
    BATCH_MEAN,
    Certificate,
    certify,
    estimate_sensitivity,
    utility_retained,
)
from eigenjury.stats.verdicts import FloatArray, IntArray


@dataclass(frozen=True)
class SimulatedJudge:
    rate: float  # probability that a neighbour moves the score
    points: float  # by how much (raw points, upward, clipped to the scale)
    jitter: float  # probability of a +-1 point wobble on any judgment
    scale: Scale = SCALES["likert10"]

    def judge(self, quality: FloatArray, rng: np.random.Generator) -> FloatArray:
        wobble = (rng.random(quality.shape) < self.jitter) * rng.choice([-1.0, 1.0], quality.shape)
        return np.asarray(np.clip(quality + wobble, self.scale.low, self.scale.high))

    def neighbour(self, quality: FloatArray, rng: np.random.Generator) -> FloatArray:
        moved = quality + self.points * (rng.random(quality.shape) < self.rate)
        return self.judge(np.clip(moved, self.scale.low, self.scale.high), rng)


@dataclass(frozen=True)
class Choices:
    """How the bound is computed: ours, or any of the reference implementation's
    choices (point estimate of Delta, batch-mean centre without its shift term, tau
    read in raw units while Delta is normalised, no range step)."""

    name: str
    upper_bound: bool = True
    batch_mean: bool = False
    add_centre_shift: bool = True
    mixed_units: bool = False
    range_bound: bool = True


OURS = Choices("eigenjury")
REFERENCE_CHOICES = (
    Choices("point estimate of Delta", upper_bound=False),
    Choices("no range step", range_bound=False),
    Choices("batch-mean centre, shift not added", batch_mean=True, add_centre_shift=False),
    Choices("mixed units (raw tau)", mixed_units=True),
    Choices(
        "reference (all three)",
        upper_bound=False,
        batch_mean=True,
        add_centre_shift=False,
        mixed_units=True,
        range_bound=False,
    ),
)


@dataclass(frozen=True)
class CheckResult:
    choices: str
    tau: float
    delta: float
    violation_rate: float
    violation_se: float  # clustered by measurement: the spread of its rate over them
    markov_share: float  # feasible measurements whose certificate the measurement decided
    feasible_share: float  # measurements whose target was feasible (others release nothing)
    alpha: float  # means over the feasible measurements
    sigma_max: float
    kendall_models: float  # released against the unreleased scores
    pearson_items: float
    kendall_models_truth: float  # released against the true qualities
    pearson_items_truth: float


def make_items(
    dim: int, n_models: int, rng: np.random.Generator, scale: Scale = SCALES["likert10"]
) -> tuple[FloatArray, IntArray]:
    """Integer qualities on the scale, each item owned by one of n models whose mean
    quality differs (so model rankings carry signal)."""
    model = np.arange(dim) % n_models
    centre = np.linspace(scale.low + 2, scale.high - 2, n_models)[model]
    quality = np.clip(np.round(centre + rng.normal(0.0, 1.5, dim)), scale.low, scale.high)
    return quality, model


def check(
    judge: SimulatedJudge,
    *,
    tau: float,
    delta: float,
    dim: int = 200,
    n_models: int = 5,
    m: int = 30,
    measurements: int = 20,
    draws: int = 500,
    confidence_share: float = 0.2,
    choices: Choices = OURS,
    assumed_k: int = 1,
    true_k: int = 1,
    deployed: SimulatedJudge | None = None,
    seed: int = 0,
) -> CheckResult:
    """Violation rate of ||M(D) - M(D')|| > tau over measurements, neighbours and noise.

    Each measurement samples m items (with replacement when m exceeds dim: each
    judgment is a fresh draw), estimates Delta, certifies for `assumed_k`-item
    neighbours and releases; each draw perturbs `true_k` random items with the
    `deployed` judge (default: the one measured) and compares two independent releases.
    """
    rng = np.random.default_rng(seed)
    scale = judge.scale
    width = scale.high - scale.low
    quality, model = make_items(dim, n_models, rng, scale)
    live = judge if deployed is None else deployed
    feasible = markov = 0
    rates: list[float] = []
    alphas, sigmas, kendalls, pearsons, kendalls_truth, pearsons_truth = [], [], [], [], [], []
    true_models = np.bincount(model, quality) / np.bincount(model)
    for _ in range(measurements):
        scores = scale.normalise(judge.judge(quality, rng))
        sample = rng.choice(dim, size=m, replace=m > dim)
        original = scale.normalise(judge.judge(quality[sample], rng))
        moved = scale.normalise(judge.neighbour(quality[sample], rng))
        certificate = _certificate(
            original, moved, tau, delta, dim, confidence_share, choices, assumed_k
        )
        if certificate is None:
            continue
        feasible += 1
        markov += certificate.bias_bound == "markov"
        # violations at the noise ceiling (the hardest case), utility at the default half
        alpha, sigma = certificate.alpha, certificate.sigma_max
        unit = width if choices.mixed_units else 1.0  # the units tau is checked in
        items = np.argsort(rng.random((draws, dim)), axis=1)[:, :true_k]  # distinct, per draw
        after = scale.normalise(live.neighbour(quality[items], rng))
        change = (after - scores[items]) * unit  # the perturbed items' moves
        # a batch-mean centre moves with the perturbed items
        shift = (1 - alpha) * change.sum(axis=1) / dim if choices.batch_mean else np.zeros(draws)
        gap = rng.normal(0.0, math.sqrt(2) * sigma, size=(draws, dim)) + shift[:, None]
        gap[np.arange(draws)[:, None], items] += alpha * change
        rates.append(float(np.mean(np.linalg.norm(gap, axis=1) > tau)))
        released = alpha * scores + rng.normal(0.0, sigma / 2 / unit, dim)  # + a constant
        before_models = np.bincount(model, scores) / np.bincount(model)
        after_models = np.bincount(model, released) / np.bincount(model)
        alphas.append(alpha)
        sigmas.append(sigma)
        kendalls.append(utility_retained(before_models, after_models).kendall or 0.0)
        pearsons.append(utility_retained(scores, released).pearson or 0.0)
        kendalls_truth.append(utility_retained(true_models, after_models).kendall or 0.0)
        pearsons_truth.append(utility_retained(quality, released).pearson or 0.0)
    per_measurement = np.array(rates)
    return CheckResult(
        choices=choices.name,
        tau=tau,
        delta=delta,
        violation_rate=float(per_measurement.mean()) if rates else 0.0,
        violation_se=(
            float(per_measurement.std(ddof=1) / math.sqrt(len(rates))) if len(rates) > 1 else 0.0
        ),
        markov_share=markov / feasible if feasible else 0.0,
        feasible_share=feasible / measurements,
        alpha=_mean(alphas),
        sigma_max=_mean(sigmas),
        kendall_models=_mean(kendalls),
        pearson_items=_mean(pearsons),
        kendall_models_truth=_mean(kendalls_truth),
        pearson_items_truth=_mean(pearsons_truth),
    )


def _mean(values: list[float]) -> float:
    """The mean over feasible measurements (NaN when none was)."""
    return float(np.mean(values)) if values else math.nan


def _certificate(
    original: FloatArray,
    moved: FloatArray,
    tau: float,
    delta: float,
    dim: int,
    confidence_share: float,
    choices: Choices,
    neighbour_size: int = 1,
) -> Certificate | None:
    """The certificate as `choices` compute it (None when infeasible). The items are
    measured one at a time, so ours bounds a k-item neighbour (k > 1) by the range,
    having measured no k-item unit; the reference's point estimate scales the per-item
    change to k.

    A batch-mean centre without its shift term is certified as if the centre were
    fixed; mixed units certify the raw-unit tau against the normalised Delta.
    """
    if choices.upper_bound:
        delta_sensitivity = confidence_share * delta
        sensitivity = estimate_sensitivity(
            original, moved, 1 - delta_sensitivity, neighbour_sizes=(neighbour_size,)
        ).upper_bound
    else:
        delta_sensitivity = 0.0
        sensitivity = math.sqrt(neighbour_size * float(np.mean((original - moved) ** 2)))
    certificate = certify(
        tau,
        delta,
        sensitivity,
        dim,
        delta_sensitivity=delta_sensitivity,
        neighbour_size=neighbour_size,
        range_bound=choices.range_bound,
        centre=BATCH_MEAN if choices.batch_mean and choices.add_centre_shift else 0.5,
    )
    return certificate if certificate.feasible else None
