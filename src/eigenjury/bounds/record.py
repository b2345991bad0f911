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
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

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
    low: float
    high: float


Score = Annotated[float, Field(ge=0.0, le=1.0)]


class Pair(Sparse):
    """One item's normalised score, original and neighbour; `perturbed` None when the
    judge gave no usable judgment of the neighbour (it counts as the largest change).
    `unit` names the reply whose one edit moved this item and others (absent when it
    moved this item alone)."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"unit"})

    item: str
    original: Score
    perturbed: Score | None
    unit: str | None = None


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

    size: int  # items one unit of this size feeds
    m: int
    estimate: float | None
    upper_bound: float
    confidence: float


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
    upper_bound: float | None
    confidence: float
    method: Method
    m: int
    beyond_jitter: float | None
    failures: dict[str, int]
    pairs: list[Pair]
    strata: list[StratumPart] | None = None


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
    judge: str
    protocol: str
    scale: ScalePart
    dataset: str
    items: int
    m: int
    seed: int
    confidence: float
    method: Method
    paraphraser: str | None
    original_failures: dict[str, int]
    jitter: float | None
    generators: dict[str, GeneratorProfile] = Field(min_length=1)
    verdict_format: str | None = None
    verdicts: VerdictModes | None = None
    accounting: AccountingRecord | None = None
    unit_sizes: dict[str, Annotated[int, Field(ge=1)]] | None = None

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
    markov: float
    noise: float


class ScoresPart(Part):
    """The score file released: its format, scale, items and models."""

    format: str
    scale: ScalePart
    items: int
    models: int

    @property
    def label(self) -> str:
        """ "400 items (scores)": what a list of runs and the report call the release."""
        return f"{self.items} items ({self.format})"


class ProfilePart(Part):
    """The profile the bound rests on."""

    judge: str
    protocol: str
    scale: ScalePart
    m: int
    jitter: float | None


class GeneratorBound(Sparse):
    """A generator's Delta for one edit and its upper bound at the release's confidence,
    of the worst unit size; `failed`: neighbours whose judgment failed, each counted as
    a change of 1 (left out when none). `strata` (left out when the one size bounded
    was measured): each unit size of the scores, bounded on its own, per item; a size
    the profile has no unit of rests on the range. `estimate` is None when no size of
    the scores was measured."""

    OMITTED: ClassVar[frozenset[str]] = frozenset({"failed", "strata"})

    estimate: float | None
    upper_bound: float
    confidence: float
    method: Method
    m: int
    beyond_jitter: float | None
    failed: int | None = None
    strata: list[StratumPart] | None = None


class UtilityPart(Part):
    """Correlations between original and released scores; None where undefined."""

    pearson: float | None
    spearman: float | None
    kendall: float | None


class UtilityRecord(Part):
    """`tie_tolerance`: model mean scores closer than this were ties (rounding, not
    signal) in the model-level figures and the stability; None in older certificates."""

    items: UtilityPart
    models: UtilityPart | None
    tie_tolerance: float | None = None


class Stability(Part):
    """How the model ranking fares over fresh noise draws (it is not what is bounded)."""

    draws: int
    kendall_mean: float | None
    kendall_p05: float | None
    same_top_model: float | None  # None: every model's mean ties for the top


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
        {"k_source", "k_derived", "k_unit", "raw_bound", "deterministic", "units_to_decide"}
    )

    kind: str = KIND
    bounded: str
    not_bounded: str
    guarantee: str
    tau: float
    delta: float
    split: DeltaSplitPart
    dim: int
    neighbour_size: int
    k_source: str | None = None
    k_derived: int | None = None
    k_unit: str | None = None
    sensitivity: float
    bias_term: float
    bias_bound: Literal["markov", "range"]
    alpha: float
    alpha_given: bool
    centre: float | Literal["batch-mean"]
    lipschitz: float
    threshold: float
    noise_radius: float
    sigma_max: float
    deterministic: bool | None = None
    feasible: bool
    smallest_feasible_tau: float
    noise_share: float
    min_alpha: float
    sigma: float
    raw_bound: float | None = None
    units_to_decide: int | None = None
    seed: int
    scores: ScoresPart
    profile: ProfilePart
    generators: dict[str, GeneratorBound] = Field(min_length=1)
    utility: UtilityRecord
    stability: Stability | None
    warnings: list[str]

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> bool:
        return {"guarantee", "bounded"} <= data.keys()

    def overview(self) -> Overview:
        return Overview(self.scores.label, (self.profile.judge,))
