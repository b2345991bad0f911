"""The records of bias bounds: a judge's sensitivity profile (`bound measure`) and the
certificate of a release (`bound apply`'s certificate.json).

Field names, order and values are those eigenjury 0.1 wrote, so its files still read.
A profile is read back by `bound apply`: unknown fields and NaN or infinite numbers
(which no measurement writes) are refused, with the field named. Pydantic only: the
viewer and `read_any_record` import this module.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal

from pydantic import Field

from eigenjury.errors import InputError
from eigenjury.records import (
    AccountingRecord,
    Overview,
    Part,
    Record,
    Sparse,
    VerdictModes,
    read_record,
)

if TYPE_CHECKING:  # pydantic only at run time: the viewer imports this module
    from eigenjury.stats.abb import Stratum

# Failures that are calls not made or failed (a budget stop, the model erring): a rerun
# sends them again. Unparsed replies and rejected paraphrases are cached as they are.
CALL_ERROR, PARAPHRASE_ERROR = "error", "paraphrase error"
CALL_FAILURES = (CALL_ERROR, PARAPHRASE_ERROR)

Method = Literal["kl+bernstein", "kl", "bernstein", "hoeffding", "bootstrap"]


class ScalePart(Part):
    """A raw score range (bounds.scores.Scale.to_dict())."""

    name: str
    """The scale's name ("likert10", "pairwise5", "preference", ..., or "range" for `--range`)."""
    low: float
    """The lowest raw score: 0 once normalised."""
    high: float
    """The highest raw score: 1 once normalised."""


Score = Annotated[float, Field(ge=0.0, le=1.0)]


class Pair(Sparse):
    """One item's normalised score, original and neighbour; `perturbed` None when the
    judge gave no usable judgment of the neighbour (it counts as the largest change).
    `unit` names the reply whose one edit moved this item and others (absent when it
    moved this item alone)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"unit"})

    item: str
    """The item's id in the dataset."""
    original: Score
    """The judge's score of the item as it was, normalised to [0, 1]."""
    perturbed: Score | None
    """Its score of the neighbour, normalised; None when that reply could not be read (a change of
    1)."""
    unit: str | None = None
    """The sampled reply (item id, with /A or /B in pairs) whose one edit moved this item and others
    (left out when it moved this item alone)."""


def perturbed_scores(pairs: list[Pair]) -> list[float]:
    """The neighbours' scores, NaN where the judgment failed: what
    stats.abb.estimate_sensitivity counts as a change of 1."""
    return [math.nan if p.perturbed is None else p.perturbed for p in pairs]


def unit_codes(pairs: list[Pair]) -> list[int]:
    """One integer per pair, shared by the pairs of one unit, in order of appearance
    (a pair without a unit is its own): stats.abb.estimate_sensitivity's `units`."""
    codes: dict[tuple[str, str | int], int] = {}
    return [
        codes.setdefault(("unit", p.unit) if p.unit is not None else ("pair", i), len(codes))
        for i, p in enumerate(pairs)
    ]


class StratumPart(Part):
    """The measured units of one size (stats.abb.Stratum): how many, and their RMS
    change per item with its upper bound; a size no unit was measured of has no
    estimate, and the range bound 1 at confidence 1."""

    size: int
    """Items one unit of this size feeds."""
    m: int
    """Units of this size measured."""
    estimate: float | None
    """Their RMS change per item, in [0, 1] units; None when none was measured."""
    upper_bound: float
    """The upper bound on the RMS change per item at `confidence` (1: the range)."""
    confidence: float
    """The bound's confidence (1 where it rests on the range)."""


def strata_part(strata: Sequence[Stratum]) -> list[StratumPart] | None:
    """The strata as a record shows them; None for one measured size (nothing to add
    to the generator's own numbers)."""
    if len(strata) == 1 and strata[0].m > 0:
        return None
    return [
        StratumPart(
            size=s.size, m=s.m, estimate=s.estimate, upper_bound=s.per_item_bound,
            confidence=s.confidence,
        )
        for s in strata
    ]  # fmt: skip


class GeneratorProfile(Sparse):
    """One generator's measured sensitivity: Delta per item, its upper bound, and the
    pairs. When the measured units feed different numbers of items, each size is
    bounded on its own (`strata`, left out for one size) and Delta is the worst
    size's."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"strata"})

    estimate: float | None
    """Delta per item: the RMS change of a normalised score when a reply is edited (the worst
    size's); None without a judged pair."""
    upper_bound: float | None
    """Its upper bound at `confidence` (the worst size's); None without a judged pair."""
    confidence: float
    """The confidence of the upper bound."""
    method: Method
    """How the upper bound was computed: "kl+bernstein", "kl", "bernstein", "hoeffding" or
    "bootstrap"."""
    m: int
    """Units measured (a sampled reply that fed several items is one)."""
    beyond_jitter: float | None
    """The change beyond the identity generator's, sqrt(estimate^2 - jitter^2); None without
    identity or an estimate."""
    failures: dict[str, int]
    """Neighbour judgments that failed, by why ("error", "unparsed", "paraphrase error")."""
    pairs: list[Pair]
    """One per item whose original was scored and whose neighbour's call was answered."""
    strata: list[StratumPart] | None = None
    """Each unit size, bounded on its own (left out for one size)."""


class SensitivityProfile(Sparse, Record):
    """What `eigenjury bound measure` writes; per-item pairs let `apply` recompute the
    upper bound at the confidence its own delta calls for. A served judge's profile
    says how its replies gave their verdicts (`verdicts`), and `verdict_format` where
    it was forced. `unit_sizes` gives the items each sampled reply that fed several
    feeds in the dataset (profiles written before it: the most pairs the reply has in
    any generator, `sizes`)."""

    KIND: ClassVar[str] = "sensitivity-profile"
    FILE: ClassVar[str] = "profile.json"
    ALIASES: ClassVar[tuple[str, ...]] = ("eigenjury-bound-profile",)  # eigenjury 0.1
    OMITTED = frozenset({"verdict_format", "verdicts", "unit_sizes"})

    kind: str = KIND
    """Always "sensitivity-profile" ("eigenjury-bound-profile" in files of 0.1)."""
    judge: str
    """The judge measured, as its model spec."""
    protocol: str
    """How the judge was asked: "single" (a 1 to 10 rating of one response) or "pairwise" (a 5-point
    verdict on A and B)."""
    scale: ScalePart
    """The judge's raw score range."""
    dataset: str
    """The dataset, as given."""
    items: int
    """Items in the dataset."""
    m: int
    """Replies sampled; every generator edits each once."""
    seed: int
    """Seeds the sample, the edits, the judge's calls and the bootstrap."""
    confidence: float
    """The confidence of the upper bounds."""
    method: Method
    """How the upper bounds were computed: "kl+bernstein", "kl", "bernstein", "hoeffding" or
    "bootstrap"."""
    paraphraser: str | None
    """The paraphrasing model's spec; None without one."""
    original_failures: dict[str, int]
    """Judgments of the original items that failed, by why ("error", "unparsed")."""
    jitter: float | None
    """The identity generator's Delta: how far a fresh judgment moves alone; None without
    identity."""
    generators: dict[str, GeneratorProfile] = Field(min_length=1)
    """Each generator's measurement, by name."""
    verdict_format: str | None = None
    """How the served judge was made to give verdicts, where forced (left out for "auto" and for
    judges not served)."""
    verdicts: VerdictModes | None = None
    """How a served judge's replies gave their verdicts (left out for judges not served)."""
    accounting: AccountingRecord | None = None
    """What the measurement's calls cost; None in a profile written without it."""
    unit_sizes: dict[str, Annotated[int, Field(ge=1)]] | None = None
    """Items each sampled reply that fed several feeds in the dataset, by reply (left out when each
    fed one)."""

    def sizes(self, pairs: list[Pair]) -> list[int]:
        """How many items the unit of each pair feeds: 1 for a pair of its own, else
        `unit_sizes`, or where it does not say (a profile written before it) the most
        pairs the unit has in any generator (an item whose original judgment failed is
        then not counted)."""
        known: dict[str, int] = {}
        for generator in self.generators.values():
            for unit, n in Counter(p.unit for p in generator.pairs if p.unit).items():
                known[unit] = max(known.get(unit, 0), n)
        known.update(self.unit_sizes or {})
        return [1 if p.unit is None else known[p.unit] for p in pairs]

    @property
    def failed_calls(self) -> int:
        """Calls not made or failed, among the originals and every generator's."""
        counts = [self.original_failures, *(g.failures for g in self.generators.values())]
        return sum(c.get(kind, 0) for c in counts for kind in CALL_FAILURES)

    @property
    def usable(self) -> bool:
        """Whether any generator has a judged pair (else nothing was measured)."""
        return any(g.m for g in self.generators.values())

    def overview(self) -> Overview:
        cost = self.accounting.total.cost_usd if self.accounting else None
        return Overview(self.dataset, (self.judge,), cost)


def read_profile(path: Path) -> SensitivityProfile:
    """The profile at `path`, or a located error that says where profiles come from."""
    try:
        return read_record(path, SensitivityProfile)
    except InputError as exc:  # keeps its place: file, line, field
        exc.message = f"not a profile from `eigenjury bound measure`: {exc.message}"
        raise


class DeltaSplitPart(Part):
    """Where delta goes (stats.abb.DeltaSplit)."""

    sensitivity: float
    """The part of delta for the upper confidence bound on Delta."""
    markov: float
    """The part for the Markov step (0 where the range step bounds the change)."""
    noise: float
    """The part for the noise tail."""


class ScoresPart(Part):
    """The score file released: its format, scale, items and models."""

    format: str
    """The input: "scores" (a score file), "verdicts" (a verdict file), or "contracts-task" or
    "contracts-criterion" (a results.json)."""
    scale: ScalePart
    """The scores' raw range."""
    items: int
    """Items released (d)."""
    models: int
    """Models the items speak for."""

    @property
    def label(self) -> str:
        """ "400 items (scores)": what a list of runs and the report call the release."""
        return f"{self.items} items ({self.format})"


class ProfilePart(Part):
    """The profile the bound rests on."""

    judge: str
    """The judge measured, as its model spec."""
    protocol: str
    """How the judge was asked: "single" or "pairwise"."""
    scale: ScalePart
    """The judge's raw score range."""
    m: int
    """Replies the profile sampled."""
    jitter: float | None
    """The profile's identity Delta per item; None without identity."""
    confidence: float | None = None
    """The confidence of the profile's own upper bounds, as `bound measure` printed them (the
    certificate's are at the confidence its delta demands; None in certificates made before
    eigenjury 0.3.2)."""


class GeneratorBound(Sparse):
    """A generator's Delta for one edit and its upper bound at the release's confidence,
    of the worst unit size; `failed`: neighbours whose judgment failed, each counted as
    a change of 1 (left out when none). `strata` (left out when the one size bounded
    was measured): each unit size of the scores, bounded on its own, per item; a size
    the profile has no unit of rests on the range. `estimate` is None when no size of
    the scores was measured."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"failed", "strata"})

    estimate: float | None
    """The RMS change of a neighbour of the worst unit size, in [0, 1] units; None when no size of
    the scores was measured."""
    upper_bound: float
    """Its upper bound at `confidence`."""
    confidence: float
    """The bound's confidence: 1 minus the part of delta for it."""
    method: Method
    """How the upper bound was computed: "kl+bernstein", "kl", "bernstein", "hoeffding" or
    "bootstrap"."""
    m: int
    """Units the profile measured for this generator."""
    beyond_jitter: float | None
    """The profile's change beyond jitter, for a neighbour of `neighbour_size` items; None without
    identity or an estimate."""
    failed: int | None = None
    """Neighbours whose judgment failed, each counted as a change of 1 (left out when none)."""
    strata: list[StratumPart] | None = None
    """Each unit size of the scores, bounded on its own, per item (left out when the one size
    bounded was measured)."""


class UtilityPart(Part):
    """Correlations between original and released scores; None where undefined."""

    pearson: float | None
    """Pearson correlation; None where undefined (fewer than 2 values, or constant)."""
    spearman: float | None
    """Spearman correlation; None where undefined."""
    kendall: float | None
    """Kendall's tau; None where undefined."""


class UtilityRecord(Part):
    """`tie_tolerance`: model mean scores closer than this were ties (rounding, not
    signal) in the model-level figures and the stability; None in older certificates."""

    items: UtilityPart
    """Correlations of the original and released scores over the items."""
    models: UtilityPart | None
    """The same over the models' mean scores; None with fewer than 2 models."""
    tie_tolerance: float | None = None
    """Model means closer than this were ties, in [0, 1] units; None with fewer than 2 models, and
    in older certificates."""


class Stability(Part):
    """How the model ranking fares over fresh noise draws (it is not what is bounded)."""

    draws: int
    """Fresh noise draws made."""
    kendall_mean: float | None
    """Mean Kendall tau between the models' ranking and each draw's; None where undefined in every
    draw."""
    kendall_p05: float | None
    """Its 5th percentile over the draws; None likewise."""
    same_top_model: float | None
    """Share of the draws whose top model is one tied for the top before; None: every model's mean
    ties for the top."""


class BoundCertificate(Record, Sparse):
    """What `eigenjury bound apply` writes as certificate.json: the (tau, delta) bound
    (stats.abb.Certificate), everything it rests on, and what it cost in signal.

    Fields older certificates lack are left out when None: `k_source` (how
    k was set: "given", or read from the scores' structure as "rows per reply", "items
    per submission" or "rows per unit"), `k_derived` and `k_unit` (the structure's k
    and its largest unit), `raw_bound` (tau / alpha in the scores' raw units: how far
    the released scores, read back on the judge's scale, may move), `deterministic`
    (true when sigma_max is 0: no noise, the release is a deterministic shrinkage) and
    `units_to_decide` (when the range step decided: the fewest measured units at which
    a measurement like this one would have, had it been that large).
    """

    KIND: ClassVar[str] = "bound-certificate"
    FILE: ClassVar[str] = "certificate.json"
    OMITTED: ClassVar[frozenset[str]] = frozenset(
        {
            "k_source",
            "k_derived",
            "k_unit",
            "raw_bound",
            "deterministic",
            "units_to_decide",
            "plain",
        }
    )

    kind: str = KIND
    """Always "bound-certificate"."""
    plain: str | None = None
    """What the certificate guarantees, in one sentence on the judge's own scale, or that it
    guarantees nothing there and what would change that (left out by certificates made before
    eigenjury 0.3.2)."""
    bounded: str
    """What the bound covers, in words."""
    not_bounded: str
    """What it does not cover, in words."""
    guarantee: str
    """The guarantee as a formula, and over which neighbours it holds."""
    tau: float
    """How far a neighbour may move the released scores: L2 distance, in [0, 1] units."""
    delta: float
    """The probability, at most, that it moves them further."""
    split: DeltaSplitPart
    """Where delta goes."""
    dim: int
    """Items released (d)."""
    neighbour_size: int
    """k: the most items one neighbour edits."""
    k_source: str | None = None
    """How k was set: "given", or by the scores' structure, "rows per reply", "items per submission"
    or "rows per unit" (left out by older certificates)."""
    k_derived: int | None = None
    """The k of the scores' structure (left out by older certificates)."""
    k_unit: str | None = None
    """The structure's largest unit (left out when each row is its own, and by older
    certificates)."""
    sensitivity: float
    """The upper bound on Delta used: the largest generator's, for its worst unit size."""
    bias_term: float
    """The bound on the raw change: Delta / sqrt(delta_markov), or sqrt(k) by the range."""
    bias_bound: Literal["markov", "range"]
    """Which step bounds the raw change: "markov" or "range"."""
    alpha: float
    """The shrinkage: released = alpha score + (1 - alpha) centre + noise."""
    alpha_given: bool
    """Whether alpha was given (else the largest that leaves noise its share of tau, at least
    min_alpha)."""
    centre: float | Literal["batch-mean"]
    """What the scores are shrunk toward, in [0, 1] units, or "batch-mean"."""
    lipschitz: float
    """How far the shrunk scores move per unit move of the raw ones."""
    threshold: float
    """lipschitz x bias_term: how far a neighbour may move the shrunk scores; tau must reach it."""
    noise_radius: float
    """sqrt(2R): the noises of two releases differ by at most sigma x this, except with delta's
    noise part."""
    sigma_max: float
    """The largest noise standard deviation the bound holds for, in [0, 1] units."""
    deterministic: bool | None = None
    """True when sigma_max is 0: no noise, a deterministic shrinkage (left out otherwise)."""
    feasible: bool
    """Whether tau reaches the threshold (true in every certificate written)."""
    smallest_feasible_tau: float
    """The smallest tau these settings could certify."""
    noise_share: float
    """The share of tau meant for noise when alpha is chosen."""
    min_alpha: float
    """The least alpha chosen: the released scores keep at least this share of their spread."""
    sigma: float
    """The noise standard deviation used, in [0, 1] units (sigma_max / 2 unless given)."""
    raw_bound: float | None = None
    """tau / alpha in the scores' raw units: how far the released scores, read back on the judge's
    scale, may move (left out by older certificates)."""
    units_to_decide: int | None = None
    """Where the range step decided: the fewest measured units at which a measurement like this one
    would have decided it (left out otherwise, or when none would)."""
    seed: int
    """Seeds the noise, the stability draws and the bootstrap."""
    scores: ScoresPart
    """The scores released."""
    profile: ProfilePart
    """The profile the bound rests on."""
    generators: dict[str, GeneratorBound] = Field(min_length=1)
    """Each generator used, by name, with its bound."""
    utility: UtilityRecord
    """What the release kept of the signal."""
    stability: Stability | None
    """How the models' ranking fares over fresh noise draws; None with fewer than 2 models."""
    warnings: list[str]
    """What weakens the certificate, in words."""

    SHAPE_0_1 = frozenset({"guarantee", "bounded"})

    def overview(self) -> Overview:
        return Overview(self.scores.label, (self.profile.judge,))
