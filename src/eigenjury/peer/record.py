"""The records of peer ranking: the ranking (results.json of `fit`, `rank` and `demo`),
the lines of a run's transcripts.jsonl, a simulation's truth (truth.json), the judges'
agreement and the style check.

Field names, order and values are those eigenjury 0.1 wrote, so its files still read.
Parts 0.1 left out when they did not apply (a run's summary for `fit`, the objective
check, the greenbeard experiment, recovery of a simulated truth) are still left out
rather than written as null. Pydantic only: the viewer and `read_any_record` import it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer

from eigenjury.contracts.record import Estimate
from eigenjury.records import AccountingRecord, Overview, Part, Record, Sparse, VerdictModes

Interval = list[float]  # [low, high]
OpenInterval = list[float | None]  # [low, high]; None: no limit on that side


class PriorSettings(Part):
    """The prior on the judges' scores (stats.btd.ScorePrior), in logits."""

    consensus_sd: float
    judge_sd: float
    self_sd: float


class Settings(Sparse):
    """The estimator's settings (stats.consensus.PeerRanking): `damping` is the a used;
    `external_weights` the weight of each external judge (left out without any);
    `style` the reply features asked to be held equal and `style_per_judge` (both left
    out without style control); `pairwise_intervals` the method of the simultaneous
    intervals on Elo differences behind each model's `above`, "max-t" (family-wise
    coverage `ci`; left out without bootstrap); `interval` the method of the other
    intervals, "bca" or "percentile" (left out without bootstrap, and by records made
    before it was chosen: percentile). `prior` (None: maximum likelihood),
    `self_preference` (whether each judge's preference for its own replies was fitted)
    and `trust` (the trust rule) are left out by records made before issue 26, whose
    Elo came from EigenBench's rule, ties counted as half a win, and no prior."""

    OMITTED = frozenset(
        {
            "external_weights",
            "style",
            "style_per_judge",
            "pairwise_intervals",
            "interval",
            "prior",
            "self_preference",
            "trust",
        }
    )

    dim: int
    l2: float
    position_bias: bool
    restarts: int
    exclude_self: bool
    exclude_judges: list[str] | None = None
    """Judges whose verdicts were left out (`--exclude-judge`); None: none."""
    damping: float
    external_weights: dict[str, float] | None = None
    style: list[str] | None = None
    style_per_judge: bool | None = None
    anchor: str
    anchor_value: float
    bootstrap: int
    bootstrap_unit: str
    ci: float
    seed: int
    pairwise_intervals: str | None = None
    interval: str | None = None
    prior: PriorSettings | None = None
    self_preference: bool | None = None
    trust: str | None = None


class ModelRow(Sparse):
    """A ranked model: Elo, trust and rank with their intervals (None without bootstrap;
    `rank_ci` is marginal: the percentiles of this model's rank over the bootstrap
    draws). `above`: the models it is above with family-wise confidence `ci` (its
    simultaneous interval on the Elo difference lies wholly above a tie, 0.01 points;
    left out without bootstrap). With style control these are with style held equal, and
    `elo_uncontrolled` and `rank_change` (rank without control minus rank with it:
    positive for a model that rises once style is held equal) stand beside them (left
    out without). `unbounded`: "above", "below" or "both" for a model whose verdicts
    cannot measure its gap to the others on that side (a perfect record: Ford's
    condition fails, stats.separation); its `elo_ci` is None on that side (left out
    otherwise)."""

    OMITTED = frozenset({"elo_uncontrolled", "rank_change", "above", "unbounded"})

    name: str
    elo: float
    elo_ci: OpenInterval | None
    trust: float
    trust_ci: Interval | None
    rank: int
    rank_ci: list[int] | None
    verdicts_as_evaluee: float
    elo_uncontrolled: float | None = None
    rank_change: int | None = None
    above: list[str] | None = None
    unbounded: str | None = None


class JudgeRow(Part):
    """A judge's tie propensity, first-slot bias (None when not fitted) and lens;
    `external` for a judge that is never judged (left out when false, as 0.1 wrote).
    `self_preference`: the log-odds it adds to its own reply when it judges itself,
    against what its lens and the others' verdicts give that reply, with its interval,
    and `self_verdicts`, the weight of its verdicts with its own reply in them (left out
    by judges that never judged themselves, and by records made before issue 26)."""

    name: str
    tie_propensity: float
    tie_propensity_ci: Interval | None
    position_bias: float | None
    position_bias_ci: Interval | None
    lens: list[float]
    verdicts: float
    external: bool = False
    self_preference: float | None = None
    self_preference_ci: Interval | None = None
    self_verdicts: float | None = None

    @model_serializer(mode="wrap")
    def _omit_peer(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.external:
            del data["external"]
        if self.self_verdicts is None:
            for key in ("self_preference", "self_preference_ci", "self_verdicts"):
                del data[key]
        return data


class StyleCoefficient(Sparse):
    """A feature's effect on the win logit, per standard deviation of its normalised
    difference between the two replies (positive: judges favour the reply with more of
    it), with its interval; `judge` with one coefficient per judge (else left out)."""

    OMITTED = frozenset({"judge"})

    feature: str
    judge: str | None = None
    coefficient: float
    ci: Interval | None


class StylePart(Part):
    """Style control (stats.style): the features held equal, those left out (feature ->
    why: no fit could tell their effect apart), how the differences were normalised
    (`scale`: each feature's standard deviation of normalised difference) and the
    coefficients."""

    features: list[str]
    dropped: dict[str, str]
    normalisation: str
    scale: dict[str, float]
    per_judge: bool
    coefficients: list[StyleCoefficient]


class TrustMatrix(Part):
    """Row: every judge (zero where it gave no verdict); column: every evaluee."""

    judges: list[str]
    evaluees: list[str]
    rows: list[list[float]]


class HeldOut(Part):
    """Held-out log-likelihood per verdict over scenario folds (`fit --cv`)."""

    mean: float
    stderr: float
    folds: int
    fold_unit: str


class FitSummary(Sparse):
    """How the fit went: likelihood, convergence, size, time; `bootstrap_vanished`: the
    bootstrap rounds in which a judge or an evaluee drew none of its verdicts;
    `bootstrap_degenerate`: the rounds whose refit broke down (no convergence, or a
    model given almost no trust; both left out when none or without bootstrap)."""

    OMITTED = frozenset({"bootstrap_vanished", "bootstrap_degenerate"})

    loglik: float
    loglik_per_verdict: float
    objective: float
    iterations: int
    converged: bool
    grad_norm: float
    restart_losses: list[float]
    starts_at_best_optimum: int
    dim: int
    verdicts: float
    cells: int
    scenarios: int
    bootstrap_converged: float | None
    fit_seconds: float
    bootstrap_seconds: float
    heldout_loglik_per_verdict: HeldOut | None
    bootstrap_vanished: int | None = None
    bootstrap_degenerate: int | None = None


class SeparationGroup(Sparse):
    """`above` won every one of the `verdicts` it had against `below` (stats.separation),
    by `judge` (None: all judges pooled). `scenarios` (pooled groups; left out for a
    judge's own, and in records made before it was counted): the number of distinct
    scenarios in which it beat them, the trials the Elo interval's finite end counts
    (each scenario one Bernoulli trial, since a scenario's verdicts are correlated)."""

    OMITTED = frozenset({"scenarios"})

    judge: str | None
    above: list[str]
    below: list[str]
    verdicts: float
    scenarios: int | None = None
    """Distinct scenarios in which it beat them (pooled groups; None: a judge's own, or a
    record made before 0.3.1)."""


class FavourPart(Part):
    """A judge whose verdicts on one evaluee depart from the other judges' view by more
    than taste explains (stats.favour.Favour)."""

    judge: str
    """The judge."""
    evaluee: str
    """The evaluee it favours."""
    verdicts: float
    """The judge's decisive verdicts with the evaluee against another model (weight)."""
    won: float
    """Of them, those the evaluee won."""
    expected: float
    """What the other judges' view (their median scores) expects it to win."""
    shift: float | None
    """Log-odds the judge adds to the evaluee beyond that view; None: it always picked it."""
    shift_low: float
    """The shift's lower limit at the fit's level, Bonferroni over the pairs tested."""


class SeparationPart(Part):
    """Where Ford's condition fails: the groups the pooled verdicts cannot place against
    each other (`pooled`), and those each judge's own verdicts cannot (`judges`)."""

    pooled: list[SeparationGroup]
    judges: list[SeparationGroup]


class ConstitutionPart(Part):
    title: str
    criteria: list[str]


class Design(Part):
    """The config's sampling section (peer.config.Sampling)."""

    design: str
    group_size: int
    judges_per_group: int
    comparisons: int | None
    rounds: int
    seed: int


class JudgingPart(Sparse):
    """The config's judging section; `soft` when judges were asked for label
    probabilities (left out otherwise)."""

    OMITTED = frozenset({"soft"})

    reflections: bool
    ties: bool
    mode: str
    soft: bool | None = None


class MemberPart(Sparse):
    """A member as configured; `opening` (the words its replies begin with) and
    `evaluee_only` (why it does not judge; "true" without a reason) are left out when
    not set."""

    OMITTED = frozenset({"opening", "evaluee_only"})

    name: str
    model: str
    persona: str | None
    opening: str | None = None
    evaluee_only: str | None = None


class OrderConsistency(Part):
    """Pairs a judge saw in both orders; shares where the same model / slot won both."""

    pairs: int
    consistent: float
    same_slot: float


class RunSummary(Sparse):
    """What a `rank` run collected; its accounting includes a greenbeard control run.
    `soft_verdicts_by_judge`: with soft verdicts, how many of each judge's verdicts came
    with label probabilities (left out otherwise). `verdicts_by_judge`: per served judge
    (HTTP), how its first replies to comparisons gave their verdicts and how many could
    not be read before a repair (left out without served judges)."""

    OMITTED = frozenset({"soft_verdicts_by_judge", "verdicts_by_judge"})

    name: str | None
    constitution: ConstitutionPart
    scenarios: int
    design: Design
    judging: JudgingPart
    members: list[MemberPart]
    comparisons: int
    verdicts: int
    repaired: int
    failures: dict[str, int]
    parse_failures_by_judge: dict[str, int]
    order_consistency: dict[str, OrderConsistency]
    accounting: AccountingRecord
    soft_verdicts_by_judge: dict[str, int] | None = None
    verdicts_by_judge: dict[str, VerdictModes] | None = None


class ObjectiveCheck(Part):
    """Objective mode: true accuracy per member, and how well Elo follows it."""

    questions: int
    accuracy: dict[str, float]
    kendall_tau_elo_vs_accuracy: float | None


class Shift(Part):
    elo_shift: dict[str, float]
    mean_shift_greenbeards: float | None
    mean_shift_others: float | None


class GreenbeardShift(Part):
    """Elo with the clique's instructions minus without, with and without self-judgments."""

    members: list[str]
    marker: str
    with_self_judgments: Shift
    without_self_judgments: Shift


class TruthRecovery(Sparse):
    """`fit --truth`: how well the fit recovered a simulated population."""

    OMITTED = frozenset({"elo_ci_coverage"})

    kendall_tau: float | None
    max_abs_elo_error: float
    elo_ci_coverage: float | None = None


class SimulatedDesign(Sparse):
    """The design a simulation drew its verdicts with (random groups)."""

    OMITTED = frozenset({"soft"})

    scenarios: int
    group_size: int
    judges_per_scenario: int
    scenario_noise: float
    seed: int
    soft: bool | None = None  # True: calibrated judges wrote label probabilities


class TruthRecord(Record, Sparse):
    """`eigenjury simulate`: the population the verdicts were drawn from (as
    stats.simulate.Population.to_dict writes it), the design, and each model's true
    trust and Elo, in the population's order; what `fit --truth` measures recovery by."""

    KIND = "simulation-truth"
    FILE = "truth.json"

    kind: str = KIND
    population: dict[str, Any]
    design: SimulatedDesign
    trust: list[float]
    elo: list[float]

    def overview(self) -> Overview:
        return Overview(name="simulation", models=tuple(self.population.get("models", ())))


class RankingRecord(Record, Sparse):
    """A fitted peer ranking; from `rank` and `demo` also the run that collected it."""

    KIND = "ranking"
    FILE = "results.json"
    OMITTED = frozenset(
        {
            "run",
            "objective",
            "greenbeard",
            "truth_recovery",
            "agreement",
            "style",
            "separation",
            "favours",
        }
    )

    kind: str = KIND
    method: str
    source: str | None
    settings: Settings
    models: list[ModelRow]  # in rank order
    judges: list[JudgeRow]
    dispositions: dict[str, list[float]]
    trust_matrix: TrustMatrix
    fit: FitSummary
    warnings: list[str]
    style: StylePart | None = None
    separation: SeparationPart | None = None
    favours: list[FavourPart] | None = None
    """Judges whose verdicts on one evaluee depart from the others' view by more than
    taste explains (stats.favour); None: none."""
    run: RunSummary | None = None
    objective: ObjectiveCheck | None = None
    greenbeard: GreenbeardShift | None = None
    truth_recovery: TruthRecovery | None = None
    agreement: AgreementTable | None = None  # `fit --agreement`

    @classmethod
    def legacy(cls, data: dict[str, Any]) -> bool:
        return {"models", "judges", "trust_matrix"} <= data.keys()

    def overview(self) -> Overview:
        name = self.run.name if self.run is not None else None
        if name is None and self.source is not None:
            name = Path(self.source).name
        return Overview(
            name=name,
            models=tuple(m.name for m in self.models),
            cost_usd=self.run.accounting.total.cost_usd if self.run is not None else None,
        )


class TranscriptLine(Part):
    """One call of a `rank` run (a line of transcripts.jsonl). `evaluee` belongs to
    reflections; `first`, `second`, `verdicts` and `failure` to comparisons and their
    repairs. The viewer reads who and which verdict from the first bytes of each line,
    so these fields come first, in this order. Likelihood mode (peer.likelihood):
    `tokens`, on a scoring call, is the reply's length in the judge's tokens, and
    `scores`, on a comparison, the two replies' scores (A, B: nats per token; scores,
    not probabilities); both are left out elsewhere."""

    role: str
    member: str
    scenario: str
    evaluee: str | None = None
    first: str | None = None
    second: str | None = None
    verdicts: list[int] | None = None  # per criterion: 0 tie, 1 first, 2 second; None unread
    failure: str | None = None  # "parse", "judge error", ...
    messages: list[list[str]]  # [role, content]
    reply: str | None
    choice_logprobs: dict[str, float] | None
    error: str | None
    cached: bool
    tokens: int | None = None
    scores: dict[str, float] | None = None

    @model_serializer(mode="wrap")
    def _omit_other_roles(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("tokens", "scores"):
            if data[key] is None:
                del data[key]
        if self.role not in ("reflection", "score"):
            del data["evaluee"]
        if self.role not in ("comparison", "repair"):
            for key in ("first", "second", "verdicts", "failure"):
                del data[key]
        return data


class AgreementSettings(Part):
    bootstrap: int
    ci: float
    seed: int


class AgreementRow(Part):
    """A judge against the reference majority (stats.judge_agreement.AgreementRow):
    each statistic with its scenario-bootstrap interval, value None where undefined."""

    judge: str
    reference: bool
    comparisons: int
    with_majority: int
    verdicts: float
    agreement: Estimate
    agreement_decisive: Estimate
    kappa: Estimate
    flip_pairs: float
    flip_share: Estimate
    position_bias: Estimate
    longer_preference: Estimate


class AgreementTable(Part):
    """Every judge's agreement with the reference judges' majority, best first
    (stats.judge_agreement.JudgeAgreement)."""

    references: list[str]
    comparisons: int
    without_majority: int
    settings: AgreementSettings
    judges: list[AgreementRow]


class JudgeAgreementRecord(Record):
    """`eigenjury agreement --out`: the agreement table of a verdict file."""

    KIND = "judge-agreement"
    FILE = "agreement.json"

    kind: str = KIND
    source: str | None
    agreement: AgreementTable

    def overview(self) -> Overview:
        return Overview(
            name=None if self.source is None else Path(self.source).name,
            models=tuple(row.judge for row in self.agreement.judges),
        )


RankingRecord.model_rebuild()  # its `agreement` part is declared above


class TasteRow(Sparse):
    """One judge's taste for length, measured on same-content edits (`judge` None: all
    judges pooled into one taste, each keeping its position bias and tie propensity;
    peer.style_check, stats.taste). `verdicts` (weights: a verdict per criterion counts
    1/C) split into `longer`, `shorter` and `ties`; `share`: the share for the longer
    reply, a tie counting half; `taste`: log-odds per standard deviation of normalised
    length difference, the fit's units (None when its verdicts do not bound it;
    `unbounded` says on which side, and that end of `taste_ci` is None). `fitted`: the
    run's length coefficient for this judge (the shared one, or its own), and
    `difference`: fitted minus taste, with its interval (left out where either is
    missing). `position_locked`: every decisive verdict went to the same slot, so its
    taste is not measured (left out otherwise). `reading`: what the comparison says,
    in words."""

    OMITTED = frozenset(
        {
            "unbounded",
            "position_locked",
            "fitted",
            "fitted_ci",
            "difference",
            "difference_ci",
            "reading",
        }
    )

    judge: str | None
    verdicts: float
    longer: float
    shorter: float
    ties: float
    share: float
    share_ci: Interval | None
    taste: float | None
    taste_ci: OpenInterval | None
    unbounded: str | None = None
    position_locked: bool | None = None
    fitted: float | None = None
    fitted_ci: Interval | None = None
    difference: float | None = None
    difference_ci: OpenInterval | None = None
    reading: str | None = None


class EditsPart(Part):
    """How the replies were made longer: `replies` sampled (seeded by `seed`) from the
    run's, each lengthened by neutral filler sentences (bounds.neighbours.Verbosity)
    toward a normalised length difference of `target`; `achieved` the mean normalised
    difference reached and `short` how many fell short of the target (the filler ran
    out); `scale` the run's standard deviation of normalised length difference (the
    taste's unit), and `scale_source` where it came from."""

    edit: str
    replies: int
    seed: int
    target: float
    achieved: float
    short: int
    scale: float
    scale_source: str


class TasteModelRow(Part):
    """A model's Elo with the length coefficient held at the judges' measured taste,
    beside the run's controlled and uncontrolled Elo (None where the run had none)."""

    name: str
    elo: float
    elo_ci: OpenInterval | None
    rank: int
    elo_controlled: float
    elo_uncontrolled: float | None


class TasteLeaderboard(Part):
    """The run's verdicts refitted with the length coefficient held at the measured
    taste (`held`: the pooled taste for a shared coefficient, by judge for one per
    judge; a judge whose taste is unbounded keeps its fitted coefficient). The
    intervals hold the taste at its estimate: its own interval is not in them."""

    held: dict[str, float]
    models: list[TasteModelRow]


class StyleCheckRecord(Record, Sparse):
    """`eigenjury style-check`: each judge's taste for length measured on same-content
    edits of a rank run's replies, beside the run's fitted length coefficient, and the
    leaderboard with the coefficient held at the taste."""

    KIND = "style-check"
    FILE = "style-check.json"
    OMITTED = frozenset({"leaderboard"})

    kind: str = KIND
    source: str
    run_name: str | None
    judging: str
    ci: float
    bootstrap: int
    edits: EditsPart
    judges: list[TasteRow]
    pooled: TasteRow
    comparisons: int
    failures: dict[str, int]
    accounting: AccountingRecord
    warnings: list[str]
    leaderboard: TasteLeaderboard | None = None

    def overview(self) -> Overview:
        return Overview(
            name=self.run_name or Path(self.source).name,
            models=tuple(j.judge for j in self.judges if j.judge is not None),
            cost_usd=self.accounting.total.cost_usd,
        )
