"""`bound apply`: a measured profile applied to a score set gives the released scores
(shrunk toward a centre, plus noise) and their certificate.

What is bounded: the released per-item score vector (in [0, 1] units), against a
neighbour that edits one unit of any one size the scores have. What is not: anything
computed from it, rankings above all (a ranking is not Lipschitz in the scores); for
those the ranking stability over noise draws is measured and reported. Nor is the
judge's bias removed: the release moves less under a neighbour, and keeps the bias
relative to the signal it had (stats.abb).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass

import numpy as np

from eigenjury.bounds.record import (
    BoundCertificate,
    GeneratorBound,
    Method,
    ProfilePart,
    ScalePart,
    ScoresPart,
    SensitivityProfile,
    Stability,
    UtilityPart,
    UtilityRecord,
    perturbed_scores,
    strata_part,
    unit_codes,
)
from eigenjury.bounds.scores import ScoreSet
from eigenjury.errors import InputError
from eigenjury.records import now
from eigenjury.stats.abb import (
    BOOTSTRAP_MIN_UNITS,
    Centre,
    Certificate,
    Sensitivity,
    Utility,
    certify,
    estimate_sensitivity,
    shrink_and_noise,
    tied_within,
    utility_retained,
)
from eigenjury.stats.verdicts import FloatArray

# Model means closer than ROUNDING_EPSILONS x (most items of a model) x machine epsilon,
# and at least ROUNDING_FLOOR, are ties (see model_tie_tolerance).
ROUNDING_EPSILONS = 8
ROUNDING_FLOOR = 1e-12
BOUNDED = (
    "the released per-item score vector, in [0, 1] units (L2 distance): how far a "
    "neighbour can move it, not the judge's bias, which the release keeps relative to "
    "the signal"
)
NOT_BOUNDED = (
    "anything derived from the released scores, rankings above all; their stability over "
    "noise draws is measured instead (see 'stability')"
)


@dataclass(frozen=True)
class ReleaseSettings:
    """The target (tau, delta) and how delta and tau are spent.

    `confidence_share` of delta goes to the upper confidence bound on Delta (computed
    from the profile's pairs at confidence 1 - that share); the rest is split
    `delta_split` : 1 - `delta_split` between the Markov step and the noise tail.
    sigma None is sigma_max / 2. neighbour_size (k) None is the scores' own (the most
    items one edited reply, submission or unit feeds); a smaller one is refused, a
    larger one is bounded as one more unit size.
    """

    tau: float
    delta: float
    sigma: float | None = None
    seed: int = 0
    alpha: float | None = None
    centre: Centre = 0.5
    neighbour_size: int | None = None
    delta_split: float = 0.5
    confidence_share: float = 0.2
    noise_share: float = 0.5
    min_alpha: float = 0.1
    range_bound: bool = True
    generators: tuple[str, ...] | None = None  # None: all in the profile
    method: Method | None = None  # None: the profile's
    stability_draws: int = 200


@dataclass(frozen=True)
class Release:
    """The released scores (in [0, 1] units, one per item, shrunk and noised) and their
    certificate."""

    certificate: BoundCertificate
    released: FloatArray

    @property
    def debiased(self) -> FloatArray:
        """The old name of `released`; it warns, since the release removes no bias."""
        warnings.warn(
            "Release.debiased is now Release.released: the release shrinks and noises "
            "the scores, it does not remove the judge's bias",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.released


def neighbour_size(scores: ScoreSet, given: int | None) -> tuple[int, str]:
    """k and how it was set: the scores' structure, or a larger k given.

    A neighbour edits one reply (submission, unit), which moves every item it feeds; a
    k below the most items one edit reaches would certify a bound that can fail.
    """
    derived = scores.neighbourhood
    if given is None:
        return derived.k, derived.source
    if given > scores.dim:
        raise InputError(f"--k {given} exceeds the number of items ({scores.dim})", field="--k")
    if given < derived.k:
        raise InputError(
            f"--k {given} is below the k of these scores, {derived.k}: {derived.reason}, and "
            f"a neighbour editing it moves all {derived.k}; give --k {derived.k} or more, or "
            "leave --k out",
            field="--k",
        )
    return given, "given" if given > derived.k else derived.source


def neighbour_sizes(scores: ScoreSet, k: int) -> tuple[int, ...]:
    """The unit sizes a neighbour may edit: the scores' own, and k where it was given
    larger (a neighbour may then reach k items)."""
    return tuple(sorted({*scores.neighbourhood.sizes, k}))


def profile_sensitivities(
    profile: SensitivityProfile, settings: ReleaseSettings, sizes: tuple[int, ...]
) -> dict[str, Sensitivity]:
    """Each chosen generator's Delta for a neighbour editing one unit of each size in
    `sizes`, with its upper bound at the release's confidence."""
    names = settings.generators or tuple(profile.generators)
    unknown = [g for g in names if g not in profile.generators]
    if unknown:
        raise InputError(
            f"the profile has no generator {unknown[0]!r}; it has {', '.join(profile.generators)}",
            field="generators",
        )
    confidence = 1.0 - settings.confidence_share * settings.delta
    out = {}
    for name in names:
        pairs = profile.generators[name].pairs
        if not pairs:
            raise InputError(
                f"generator {name!r} has no judged pairs in the profile (all failed); leave "
                "it out with --generators or measure again",
                field=f"generators.{name}",
            )
        out[name] = estimate_sensitivity(
            [p.original for p in pairs],
            perturbed_scores(pairs),
            confidence,
            method=settings.method or profile.method,
            units=unit_codes(pairs),
            unit_sizes=profile.sizes(pairs),
            neighbour_sizes=sizes,
            rng=np.random.default_rng(settings.seed),
        )
    return out


def release(scores: ScoreSet, profile: SensitivityProfile, settings: ReleaseSettings) -> Release:
    """Certify against the worst chosen generator and unit size, then shrink and add
    noise."""
    k, k_source = neighbour_size(scores, settings.neighbour_size)
    sensitivities = profile_sensitivities(profile, settings, neighbour_sizes(scores, k))
    worst = max(s.upper_bound for s in sensitivities.values())
    try:
        certificate = certify(
            settings.tau,
            settings.delta,
            worst,
            scores.dim,
            alpha=settings.alpha,
            delta_split=settings.delta_split,
            delta_sensitivity=settings.confidence_share * settings.delta,
            neighbour_size=k,
            range_bound=settings.range_bound,
            centre=settings.centre,
            noise_share=settings.noise_share,
            min_alpha=settings.min_alpha,
        )
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if not certificate.feasible:
        raise InputError(certificate.explain())
    sigma = certificate.sigma_max / 2 if settings.sigma is None else settings.sigma
    if not sigma <= certificate.sigma_max:  # NaN included
        raise InputError(
            f"--sigma {sigma:g} exceeds sigma_max = {certificate.sigma_max:.6g} for these "
            "settings; the bound holds for any sigma up to sigma_max"
        )
    rng = np.random.default_rng(settings.seed)
    original = scores.normalised
    released = shrink_and_noise(original, certificate, sigma, rng)
    models = None
    stability = None
    tolerance = model_tie_tolerance(scores)
    ties: list[str] = []
    if len(scores.models) >= 2:
        before = scores.model_scores(original)
        models = utility_retained(before, scores.model_scores(released), tie_tolerance=tolerance)
        stability = _stability(scores, certificate, sigma, settings, before, tolerance)
        ties = _tie_warnings(before, tolerance)
    utility = UtilityRecord(
        items=_utility(utility_retained(original, released)),
        models=None if models is None else _utility(models),
        tie_tolerance=tolerance if models is not None else None,
    )
    record = _certificate(
        certificate,
        sigma,
        sensitivities,
        utility,
        stability,
        scores,
        profile,
        settings,
        k_source,
        ties,
    )
    return Release(certificate=record, released=released)


def model_tie_tolerance(scores: ScoreSet) -> float:
    """Model mean scores (in [0, 1] units) closer than this are ties: a sum of n values
    in [0, 1] carries a rounding error of up to about n machine epsilons, so 8 n epsilon
    for the most items any model has (at least 1e-12) is rounding, never a difference
    the scores show."""
    most = int(np.bincount(scores.owner, minlength=len(scores.models)).max(initial=1))
    return max(ROUNDING_FLOOR, ROUNDING_EPSILONS * most * float(np.finfo(np.float64).eps))


def _tie_warnings(before: FloatArray, tolerance: float) -> list[str]:
    """What the certificate says where model means tie within the tolerance."""
    tied = tied_within(before, tolerance)
    groups = len(np.unique(tied))
    if groups == len(before):
        return []
    if groups == 1:
        return [
            f"the models' mean scores are equal to within {tolerance:.1e} (their differences "
            "are rounding, not signal): the model ranking, its correlations with the released "
            "scores and its stability are undefined ('-')"
        ]
    counts = np.unique(tied, return_counts=True)[1]
    alike = int(counts[counts > 1].sum())
    return [
        f"{alike} of the {len(before)} models have mean scores equal to within "
        f"{tolerance:.1e} (rounding, not signal): they are ties in the model-level "
        "correlations and the ranking's stability"
    ]


def _utility(utility: Utility) -> UtilityPart:
    return UtilityPart(**asdict(utility))


def _certificate(
    certificate: Certificate,
    sigma: float,
    sensitivities: dict[str, Sensitivity],
    utility: UtilityRecord,
    stability: Stability | None,
    scores: ScoreSet,
    profile: SensitivityProfile,
    settings: ReleaseSettings,
    k_source: str,
    ties: list[str],
) -> BoundCertificate:
    """The certificate record: everything the bound rests on, and what it cost in signal
    (with `ties`, the warnings about model means equal up to rounding)."""
    raw_bound = settings.tau / certificate.alpha * (scores.scale.high - scores.scale.low)
    measurement_free = certificate.bias_bound == "range"
    decide = _units_to_decide(sensitivities, settings) if measurement_free else None
    return BoundCertificate.model_validate(
        {
            "created": now(),
            "plain": _plain(certificate, scores, settings, raw_bound, decide),
            "bounded": BOUNDED,
            "not_bounded": NOT_BOUNDED,
            "guarantee": (
                f"P[ ||M(D) - M(D')||_2 > {settings.tau:g} ] <= {settings.delta:g} over "
                "neighbours D' from each generator used that edit one unit of any one "
                f"size ({_sizes_text(sensitivities)} items), and the noise"
            ),
            **certificate.to_dict(),
            "k_source": k_source,
            "k_derived": scores.neighbourhood.k,
            "k_unit": scores.neighbourhood.unit,
            "deterministic": certificate.deterministic or None,
            "sigma": sigma,
            "raw_bound": raw_bound,
            "units_to_decide": decide,
            "seed": settings.seed,
            "scores": ScoresPart(
                format=scores.source_format,
                scale=ScalePart(**scores.scale.to_dict()),
                items=scores.dim,
                models=len(scores.models),
            ),
            "profile": ProfilePart(
                judge=profile.judge,
                protocol=profile.protocol,
                scale=profile.scale,
                m=profile.m,
                jitter=profile.jitter,
                confidence=_profile_confidence(profile),
            ),
            "generators": {
                name: GeneratorBound(
                    estimate=s.estimate,
                    upper_bound=s.upper_bound,
                    confidence=s.confidence,
                    method=s.method,
                    m=s.m,
                    beyond_jitter=None
                    if s.estimate is None
                    else _for_k(profile.generators[name].beyond_jitter, s.neighbour_size),
                    failed=s.failed or None,
                    strata=strata_part(s.strata),
                )
                for name, s in sensitivities.items()
            },
            "utility": utility,
            "stability": stability,
            "warnings": [
                *_warnings(scores, profile, settings),
                *_size_warnings(sensitivities),
                *ties,
                *certificate.weaknesses(),
                *([_measurement_free(sensitivities, settings, decide)] if measurement_free else []),
            ],
        }
    )


def _plain(
    certificate: Certificate,
    scores: ScoreSet,
    settings: ReleaseSettings,
    raw_bound: float,
    decide: int | None,
) -> str:
    """The guarantee in one sentence on the judge's own scale. An edit of k items moves
    the scores by at most range x sqrt(k) (L2) whatever the judge does, so a bound at
    or above that guarantees nothing; then what would change it."""
    scale = scores.scale
    where = f"the {scale.name} scale [{scale.low:g}, {scale.high:g}]"
    k = certificate.neighbour_size
    items = "item" if k == 1 else f"{k} items"
    anyway = (scale.high - scale.low) * math.sqrt(k)
    if raw_bound >= anyway:
        more = (
            f"measuring at least {decide:,} units, so that the measurement rather than the "
            "whole range sets the sensitivity, or "
            if decide is not None
            else "more measured units (a tighter upper bound on the sensitivity), or "
        )
        return (
            f"This certificate guarantees nothing here: it says an edit of one unit "
            f"({items}) moves the scores by at most {raw_bound:.3g} points on {where}, and "
            f"no such edit can move them by more than {anyway:.3g} points anyway. What would "
            f"change that: {more}a judge whose scores move less under these perturbations."
        )
    return (
        f"With probability at least {1.0 - settings.delta:.4g}, an edit of one unit "
        f"({items}) moves the released scores by at most {raw_bound:.3g} points on {where} "
        f"(the L2 change over the {scores.dim} items, read back on the judge's scale), "
        f"where without the release it could move them by up to {anyway:.3g}."
    )


def _profile_confidence(profile: SensitivityProfile) -> float | None:
    """The confidence `bound measure` gave the profile's upper bounds (one for all)."""
    levels = {g.confidence for g in profile.generators.values()}
    return levels.pop() if len(levels) == 1 else None


def _markov_delta(settings: ReleaseSettings) -> float:
    """The share of delta the Markov step would spend (stats.abb.certify's split)."""
    return settings.delta_split * (1.0 - settings.confidence_share) * settings.delta


def _units_to_decide(
    sensitivities: dict[str, Sensitivity], settings: ReleaseSettings
) -> int | None:
    """The fewest measured units at which every generator's measurement, as it came
    out, would beat the range step; None when one never would."""
    needed = [s.units_to_decide(_markov_delta(settings)) for s in sensitivities.values()]
    return None if any(n is None for n in needed) else max(n for n in needed if n is not None)


def _measurement_free(
    sensitivities: dict[str, Sensitivity], settings: ReleaseSettings, decide: int | None
) -> str:
    """Why the measurement did not change a certificate the range step decided, and
    what would."""
    strata = [s for sensitivity in sensitivities.values() for s in sensitivity.strata]
    sizes = sorted({s.size for s in strata})
    if decide is not None:
        has = f"{min(s.m for s in strata):,}"
        if len(sizes) > 1:
            least = {r: min(s.m for s in strata if s.size == r) for r in sizes}
            has = ", ".join(f"{least[r]:,} of {r} items" for r in sizes)
            decide_text = f"{decide:,} units of each size"
        else:
            decide_text = f"{decide:,} units"
        would = f"a measurement like this one would decide it from {decide_text} (it has {has})"
    elif any(s.range_only for s in strata):
        missing = sorted({s.size for s in strata if s.range_only})
        would = (
            f"no number of units of other sizes would: the units of {_and(missing)} items "
            "rest on the range (too few measured, or none)"
        )
    else:
        markov = _markov_delta(settings)
        worst = max(strata, key=lambda s: (s.mean_square or 0.0) * s.size)
        would = (
            "no number of units would: the measured mean squared change per item, "
            f"{worst.mean_square or 0.0:.3g}"
            + (f" (units of {worst.size} items)" if len(sizes) > 1 else "")
            + f", is not below the Markov step's share of delta, {markov:.3g}"
            + (f" x {max(sizes)} / {worst.size}" if worst.size != max(sizes) else "")
        )
    return (
        "worst-case range bound: the measurement did not change this certificate, which "
        f"rests on the score range (sqrt(k) per neighbour); {would}"
    )


def _size_warnings(sensitivities: dict[str, Sensitivity]) -> list[str]:
    """What the unit sizes did to the certificate: several sizes bounded each on its
    own, and sizes the profile has no unit of, which rest on the range."""
    strata = [s for sensitivity in sensitivities.values() for s in sensitivity.strata]
    out = []
    measured = sorted({s.size for s in strata if s.m > 0})
    if len(measured) > 1:
        out.append(
            f"the profile's units feed {_and(measured)} items: each size is bounded on its "
            "own (its own units, a share of the confidence) and the certificate takes the "
            "worst; certificates before this (without `strata`) pooled the sizes, which "
            "holds for a unit drawn from the measured mix only, and could promise too much "
            "for a size rare in it"
        )
    unmeasured = sorted({s.size for s in strata if s.m == 0})
    if unmeasured:
        have = sorted({s.size for s in strata if s.m > 0})
        profile = f"its units feed {_and(have)}" if have else "none of its units feeds these"
        out.append(
            f"the profile has no unit of {_and(unmeasured)} items ({profile}): a neighbour "
            f"editing one rests on the range, sqrt({max(unmeasured)}) = "
            f"{math.sqrt(max(unmeasured)):.4g} for the largest; certificates before this "
            "scaled the per-item change measured to them, assuming their items change "
            "alike; measure on a dataset whose replies feed as many items as the scores' do"
        )
    few = sorted({s.size for s in strata if s.m > 0 and s.range_only})
    if few:
        out.append(
            f"too few units of {_and(few)} items for the bootstrap (at least "
            f"{BOOTSTRAP_MIN_UNITS} per size): they rest on the range"
        )
    return out


def _sizes_text(sensitivities: dict[str, Sensitivity]) -> str:
    """The unit sizes bounded: "2 or 12"."""
    sizes = sorted({s.size for v in sensitivities.values() for s in v.strata})
    return " or ".join(str(r) for r in sizes)


def _and(values: list[int]) -> str:
    """ "2, 6 and 12"."""
    text = [str(v) for v in values]
    return text[0] if len(text) == 1 else f"{', '.join(text[:-1])} and {text[-1]}"


def _for_k(per_item: float | None, k: int) -> float | None:
    """A profile's per-item RMS change as that of a k-item neighbour (squares add)."""
    return None if per_item is None else math.sqrt(k) * per_item


def _stability(
    scores: ScoreSet,
    certificate: Certificate,
    sigma: float,
    settings: ReleaseSettings,
    before: FloatArray,
    tolerance: float,
) -> Stability:
    """How the model ranking fares over fresh noise draws (it is not what is bounded).
    Means within `tolerance` are ties: the top model is any of those tied for the top,
    and with every model tied there is no ranking to keep."""
    rng = np.random.default_rng([settings.seed, 1])
    normalised = scores.normalised
    tied = tied_within(before, tolerance)
    top = tied == tied.max()
    kendall = []
    same_top = 0
    for _ in range(settings.stability_draws):
        after = scores.model_scores(shrink_and_noise(normalised, certificate, sigma, rng))
        kendall.append(utility_retained(before, after, tie_tolerance=tolerance).kendall)
        same_top += int(top[np.argmax(after)])
    values = np.array([np.nan if k is None else k for k in kendall])
    undefined = bool(np.all(np.isnan(values)))
    return Stability(
        draws=settings.stability_draws,
        kendall_mean=None if undefined else float(np.nanmean(values)),
        kendall_p05=None if undefined else float(np.nanquantile(values, 0.05)),
        same_top_model=None if top.all() else same_top / settings.stability_draws,
    )


def _warnings(
    scores: ScoreSet, profile: SensitivityProfile, settings: ReleaseSettings
) -> list[str]:
    out = []
    if profile.scale.name != scores.scale.name:
        out.append(
            f"the profile was measured on the {profile.scale.name} scale and the "
            f"scores are on the {scores.scale.name} scale; the bound is only as good as "
            "the profile's judge is for these scores"
        )
    names = settings.generators or tuple(profile.generators)
    failed = sum(sum(profile.generators[g].failures.values()) for g in names)
    if failed:
        out.append(
            f"{failed} neighbour judgment(s) in the profile failed and are left out of "
            "Delta (see the profile's failures)"
        )
    return out
