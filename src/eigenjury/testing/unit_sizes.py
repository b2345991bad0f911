"""A judge whose sensitivity depends on how many items an edit reaches, and a Monte
Carlo check of `bound apply`'s certificate against it.

A test double for the bias bounds, written apart from eigenjury.bounds.simulation
(whose judges move items one at a time) so that the check shares none of the code's
assumptions: it builds a profile as `bound measure` records one and a score file as a
user writes one, releases through `bound apply`'s own `release`, and recomputes the
mechanism M(D) = alpha f(D) + (1 - alpha) mu + Z from the certificate's fields alone.

Replies come in two sizes: most feed `small` items, a share `large_share` feed `large`
items (a reply judged in many verdict rows, a submission graded on many criteria).
Every item scores 0 or 1 (a preference verdict); an edit of a large reply flips the
score of each of its items (with probability `flip`, all together), an edit of a small
one moves nothing. So the rare large
units are the sensitive ones, and a measurement that pools its units finds a small
change per item.

The neighbours drawn are those docs/bounds.md describes: one reply is edited and all
the items it feeds are re-judged. A draw picks the reply uniformly among the score
file's large ones, its small ones, or all of them; two independent noise draws at the
noise ceiling sigma_max (where the bound is tightest) complete the pair of releases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eigenjury.bounds.apply import ReleaseSettings, release
from eigenjury.bounds.record import (
    BoundCertificate,
    GeneratorProfile,
    Pair,
    ScalePart,
    SensitivityProfile,
)
from eigenjury.bounds.scores import SCALES, read_scores

NEIGHBOURS = ("large reply", "small reply", "any reply")


@dataclass(frozen=True)
class UnitSizeJudge:
    """Replies of `small` items (most) and of `large` items (a share `large_share`);
    an edit flips every item of a large reply (with probability `flip`) and moves no
    item of a small one."""

    small: int = 2
    large: int = 12
    large_share: float = 0.002
    flip: float = 1.0


def measured_profile(judge: UnitSizeJudge, m: int, rng: np.random.Generator) -> SensitivityProfile:
    """The profile `bound measure` would write after editing m replies sampled from the
    judge's population: one pair per item, named by its reply."""
    pairs: list[Pair] = []
    for reply in range(m):
        large = bool(rng.random() < judge.large_share)
        size = judge.large if large else judge.small
        flipped = large and bool(rng.random() < judge.flip)
        for item in range(size):
            original = float(rng.integers(0, 2))
            pairs.append(
                Pair(
                    item=f"r{reply}/{item}",
                    original=original,
                    perturbed=1.0 - original if flipped else original,
                    unit=f"r{reply}",
                )
            )
    generator = GeneratorProfile(
        estimate=None,  # `bound apply` recomputes everything from the pairs
        upper_bound=None,
        confidence=0.95,
        method="kl+bernstein",
        m=m,
        beyond_jitter=None,
        failures={},
        pairs=pairs,
    )
    return SensitivityProfile(
        judge="unit-size judge",
        protocol="pairwise",
        scale=ScalePart(name="unit", low=0.0, high=1.0),
        dataset="constructed",
        items=len(pairs),
        m=m,
        seed=0,
        confidence=0.95,
        method="kl+bernstein",
        paraphraser=None,
        original_failures={},
        jitter=None,
        generators={"formatting": generator},
    )


def write_score_file(
    path: Path, judge: UnitSizeJudge, small_units: int, large_units: int, rng: np.random.Generator
) -> Path:
    """A score file (item, score, unit) of `small_units` small replies and `large_units`
    large ones, every score 0 or 1."""
    sizes = [judge.small] * small_units + [judge.large] * large_units
    rows = [
        f"u{unit}/{item},{int(rng.integers(0, 2))},u{unit}\n"
        for unit, size in enumerate(sizes)
        for item in range(size)
    ]
    path.write_text("item,score,unit\n" + "".join(rows))
    return path


@dataclass(frozen=True)
class Violations:
    """P[||M(D) - M(D')|| > tau] per kind of neighbour (NEIGHBOURS), with a standard
    error clustered by measurement (the draws of one measurement share its
    certificate), and what the certificates rested on."""

    tau: float
    delta: float
    rate: dict[str, float]  # the kinds the score file has replies of
    se: dict[str, float]
    bias_bounds: dict[str, int]  # certificates by step: "markov" or "range"
    alpha: float  # mean over the measurements
    sigma_max: float

    def interval(self, kind: str) -> tuple[float, float]:
        """The 95% interval of a violation rate."""
        low = max(self.rate[kind] - 1.96 * self.se[kind], 0.0)
        return low, min(self.rate[kind] + 1.96 * self.se[kind], 1.0)


def violations(
    judge: UnitSizeJudge,
    score_file: Path,
    *,
    m: int,
    tau: float,
    delta: float,
    measurements: int,
    draws: int,
    seed: int,
) -> Violations:
    """Measure the judge `measurements` times (m replies each), release the score file
    under each profile's certificate, and count the draws of each kind of neighbour
    whose two releases end up more than tau apart."""
    rng = np.random.default_rng(seed)
    scores = read_scores(score_file, scale=SCALES["unit"])
    x = scores.normalised
    unit_of = np.array([item.split("/")[0] for item in scores.items])
    units = {name: np.flatnonzero(unit_of == name) for name in dict.fromkeys(unit_of)}
    by_kind = {
        "large reply": [u for u in units.values() if len(u) == judge.large],
        "small reply": [u for u in units.values() if len(u) == judge.small],
        "any reply": list(units.values()),
    }
    by_kind = {kind: pool for kind, pool in by_kind.items() if pool}
    rates: dict[str, list[float]] = {kind: [] for kind in by_kind}
    steps = {"markov": 0, "range": 0}
    alphas, sigmas = [], []
    for _ in range(measurements):
        profile = measured_profile(judge, m, rng)
        certificate = release(
            scores, profile, ReleaseSettings(tau=tau, delta=delta, seed=seed)
        ).certificate
        steps[certificate.bias_bound] += 1
        alphas.append(certificate.alpha)
        sigmas.append(certificate.sigma_max)
        for kind, pool in by_kind.items():
            edited = [pool[i] for i in rng.integers(0, len(pool), size=draws)]
            gaps = _gaps(certificate, x, edited, judge, rng)
            rates[kind].append(float(np.mean(gaps > tau)))
    return Violations(
        tau=tau,
        delta=delta,
        rate={kind: float(np.mean(r)) for kind, r in rates.items()},
        se={kind: float(np.std(r, ddof=1) / math.sqrt(len(r))) for kind, r in rates.items()},
        bias_bounds=steps,
        alpha=float(np.mean(alphas)),
        sigma_max=float(np.mean(sigmas)),
    )


def _gaps(
    certificate: BoundCertificate,
    x: np.ndarray,
    edited: list[np.ndarray],
    judge: UnitSizeJudge,
    rng: np.random.Generator,
) -> np.ndarray:
    """||M(D) - M(D')|| for each edited unit, with fresh noise on both sides, from the
    certificate's alpha, centre and sigma_max."""
    alpha, sigma = certificate.alpha, certificate.sigma_max
    out = np.empty(len(edited))
    for i, unit in enumerate(edited):
        neighbour = x.copy()
        if len(unit) == judge.large and rng.random() < judge.flip:
            neighbour[unit] = 1.0 - neighbour[unit]
        if certificate.centre == "batch-mean":
            shift = (1.0 - alpha) * (x.mean() - neighbour.mean())
        else:
            shift = 0.0  # a fixed centre is the same on both sides
        noise = sigma * (rng.standard_normal(len(x)) - rng.standard_normal(len(x)))
        out[i] = np.linalg.norm(alpha * (x - neighbour) + shift + noise)
    return out
