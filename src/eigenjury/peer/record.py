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
from typing import Any, Literal

from pydantic import SerializerFunctionWrapHandler, model_serializer

from eigenjury.records import (
    AccountingRecord,
    EstimatePart,
    Overview,
    Part,
    Record,
    Sparse,
    VerdictModes,
)

Interval = list[float]  # [low, high]
OpenInterval = list[float | None]  # [low, high]; None: no limit on that side


class PriorSettings(Part):
    """The prior on the judges' scores (stats.btd.ScorePrior), in logits."""

    consensus_sd: float
    """Standard deviation of the population's consensus score of an evaluee, in logits."""
    judge_sd: float
    """Standard deviation of a judge's scores around the consensus, in logits."""
    self_sd: float
    """Standard deviation of a judge's preference for its own replies, in logits."""


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
            "exclude_judges",
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
    """Latent dimension: the length of each judge's lens and each evaluee's disposition."""
    l2: float
    """L2 penalty per verdict on lenses and dispositions (it only picks one factorisation of the
    same scores)."""
    position_bias: bool
    """Whether each judge's first-slot advantage was fitted."""
    restarts: int
    """Starts of the optimiser; the best optimum is kept."""
    exclude_self: bool
    """Whether verdicts in which the judge is one of the two evaluees were dropped."""
    exclude_judges: list[str] | None = None
    """Judges whose verdicts were left out (`--exclude-judge`); None: none."""
    damping: float
    """EigenTrust's a in t = (1 - a) t T + a p, from 0 to 1: the pull of the pre-trust p (by default
    0 without external judges)."""
    external_weights: dict[str, float] | None = None
    """Each external judge's weight in the pre-trust, by name (left out without external judges)."""
    style: list[str] | None = None
    """The reply features asked to be held equal (left out without style control)."""
    style_per_judge: bool | None = None
    """Whether each judge had its own style coefficients (left out without style control)."""
    anchor: str
    """The anchor: "uniform" (an evaluee of average trust has `anchor_value`), "mean" (the Elo
    average `anchor_value`) or the name of the evaluee fixed at it."""
    anchor_value: float
    """The Elo the anchor sets (1500 unless given)."""
    bootstrap: int
    """Cluster-bootstrap rounds behind the intervals (0: none, point estimates only)."""
    bootstrap_unit: str
    """What the bootstrap resamples: always "scenario"."""
    ci: float
    """Coverage of every interval, e.g. 0.95."""
    seed: int
    """Seeds the optimiser's random starts, the bootstrap and the cross-validation folds."""
    pairwise_intervals: str | None = None
    """Method of the simultaneous intervals behind each model's `above`: "max-t" (left out without
    bootstrap)."""
    interval: str | None = None
    """Method of the other intervals, "bca" or "percentile" (left out without bootstrap, and by
    records made before it was chosen: percentile)."""
    prior: PriorSettings | None = None
    """The prior on the judges' scores (left out without one, maximum likelihood, and by records
    made before issue 26)."""
    self_preference: bool | None = None
    """Whether each judge's preference for its own replies was fitted (left out by records made
    before issue 26)."""
    trust: str | None = None
    """The trust rule, in words (left out by records made before issue 26, whose rule was
    EigenBench's: a tie half a win)."""


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
    """The evaluee's name."""
    elo: float
    """Its Elo, to 2 decimals: 400 points are a tenfold ratio of trust, and the anchor sets the
    level."""
    elo_ci: OpenInterval | None
    """Its Elo interval [low, high] at `ci`; an end is None where `unbounded` on that side; None
    without bootstrap."""
    trust: float
    """Its EigenTrust share, from 0 to 1 (the evaluees' trust sums to 1)."""
    trust_ci: Interval | None
    """Its trust interval [low, high]; None without bootstrap."""
    rank: int
    """1 for the highest Elo; models within 0.01 Elo points share the better rank."""
    rank_ci: list[int] | None
    """[best, worst] rank over the bootstrap draws (marginal); None without bootstrap."""
    verdicts_as_evaluee: float
    """Weight of the verdicts in which it was one of the two evaluees (a judgment counts 1, shared
    among its criteria)."""
    elo_uncontrolled: float | None = None
    """Its Elo from the fit without style control (left out without style control)."""
    rank_change: int | None = None
    """Rank without style control minus rank with it: positive for a model that rises once style is
    held equal (left out without style control)."""
    above: list[str] | None = None
    """The models it is above with family-wise confidence `ci`, in rank order (left out without
    bootstrap)."""
    unbounded: str | None = None
    """Where the verdicts cannot measure its gap to the others: "above", "below" or "both" (left out
    otherwise)."""


class SignalPart(Part):
    """Whether a judge's verdicts carry information about the replies
    (stats.informative.JudgeSignal; measured with bootstrap rounds)."""

    verdict: Literal["informative", "weak", "uninformative", "undetermined", "unmeasured"]
    """informative or weak (a signal shown, its measure at least 0.2 or below it),
    uninformative (see `reason`), undetermined (too few scenarios to tell it from chance) or
    unmeasured (too few scenarios with pairs in both orders or comparisons shared with other
    judges)."""
    reason: Literal["same label", "position", "contrary", "slight"] | None
    """Why uninformative: ties nearly always or picks one slot (with no sign of reading the
    replies), disagrees with the other judges more than chance (its verdicts point the wrong
    way), or shows at most a slight signal; None otherwise."""
    why: str
    """The verdict's evidence in words, a clause that follows the judge's name."""
    order_kappa: EstimatePart
    """Order consistency beyond chance: 1 - its flip share over the pairs it judged in both
    orders / the flip share its own label rates give by chance; the interval at the level the
    verdict used (Bonferroni over the judges' measures)."""
    kappa: EstimatePart
    """Cohen's kappa against the majority of the other judges on the same comparisons, with
    the interval the verdict used."""
    pairs: float
    """Weight of the pairs it judged in both orders."""
    shared: int
    """Comparisons it shares with the other judges that have a majority among them."""


class JudgeRow(Part):
    """A judge's tie propensity, first-slot bias (None when not fitted) and lens;
    `external` for a judge that is never judged (left out when false, as 0.1 wrote).
    `self_preference`: the log-odds it adds to its own reply when it judges itself,
    against what its lens and the others' verdicts give that reply, with its interval,
    and `self_verdicts`, the weight of its verdicts with its own reply in them (left out
    by judges that never judged themselves, and by records made before issue 26)."""

    name: str
    """The judge's name."""
    tie_propensity: float
    """Its tie propensity, Davidson's lambda (larger: more ties)."""
    tie_propensity_ci: Interval | None
    """Its interval [low, high]; None without bootstrap."""
    position_bias: float | None
    """The log-odds it adds to whichever reply is shown first; None when position bias is not
    fitted."""
    position_bias_ci: Interval | None
    """Its interval [low, high]; None without bootstrap or position bias."""
    lens: list[float]
    """Its lens u_i (`dim` numbers): it scores evaluee j by u_i . v_j, v_j in `dispositions`."""
    verdicts: float
    """Weight of the verdicts it gave (a judgment counts 1, shared among its criteria)."""
    external: bool = False
    """True for an external judge: never judged, its verdicts set the pre-trust (left out when
    false)."""
    self_preference: float | None = None
    """The log-odds it adds to its own reply when it judges itself (left out with
    `self_verdicts`)."""
    self_preference_ci: Interval | None = None
    """Its interval [low, high]; None without bootstrap (left out with `self_verdicts`)."""
    self_verdicts: float | None = None
    """Weight of its verdicts with its own reply in them (left out when none, or when
    self-preference is not fitted)."""
    signal: SignalPart | None = None
    """Whether its verdicts carry information about the replies (left out without bootstrap,
    and by records made before eigenjury 0.3.2)."""

    @model_serializer(mode="wrap")
    def _omit_peer(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.external:
            del data["external"]
        if self.signal is None:
            del data["signal"]
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
    """The reply feature ("length", "headers", "lists", "bold", or a column of the verdicts)."""
    judge: str | None = None
    """The judge it belongs to, with one coefficient per judge (else left out)."""
    coefficient: float
    """Its effect on the win logit per standard deviation of normalised difference (positive: judges
    favour more of it)."""
    ci: Interval | None
    """Its interval [low, high]; None without bootstrap."""


class StylePart(Part):
    """Style control (stats.style): the features held equal, those left out (feature ->
    why: no fit could tell their effect apart), how the differences were normalised
    (`scale`: each feature's standard deviation of normalised difference) and the
    coefficients."""

    features: list[str]
    """The features held equal: those asked for, less `dropped`."""
    dropped: dict[str, str]
    """Features asked for but left out, each with why (no fit could tell its effect apart)."""
    normalisation: str
    """How a feature's difference between the two replies is normalised, in words."""
    scale: dict[str, float]
    """Each feature's standard deviation of normalised difference: its coefficient's unit."""
    per_judge: bool
    """Whether each judge has its own coefficients."""
    coefficients: list[StyleCoefficient]
    """One per feature, or per judge and feature with `per_judge`."""


class TrustMatrix(Part):
    """Row: every judge (zero where it gave no verdict); column: every evaluee."""

    judges: list[str]
    """Every model in the verdicts, a row each."""
    evaluees: list[str]
    """The evaluees, a column each."""
    rows: list[list[float]]
    """Per judge, each evaluee's share of its win strength (a row sums to 1, or is all zero for a
    judge without verdicts)."""


class HeldOut(Part):
    """Held-out log-likelihood per verdict over scenario folds (`fit --cv`)."""

    mean: float
    """Held-out log-likelihood per verdict (natural log), folds weighted by their verdicts."""
    stderr: float
    """Its standard error over the folds."""
    folds: int
    """How many folds."""
    fold_unit: str
    """What a fold holds out: always "scenario"."""


class FitSummary(Sparse):
    """How the fit went: likelihood, convergence, size, time; `bootstrap_vanished`: the
    bootstrap rounds in which a judge or an evaluee drew none of its verdicts;
    `bootstrap_degenerate`: the rounds whose refit broke down (no convergence, or a
    model given almost no trust; both left out when none or without bootstrap)."""

    OMITTED = frozenset({"bootstrap_vanished", "bootstrap_degenerate"})

    loglik: float
    """Log-likelihood of all the verdicts at the fit (natural log, without the prior)."""
    loglik_per_verdict: float
    """`loglik` per unit of verdict weight."""
    objective: float
    """The objective minimised: negative log-posterior per verdict, plus the L2 penalty."""
    iterations: int
    """Optimiser iterations: the best start's exploration and its polish."""
    converged: bool
    """Whether the optimiser reached its tolerance."""
    grad_norm: float
    """The largest projected gradient component at the end."""
    restart_losses: list[float]
    """Negative log-posterior per verdict each start reached (without the L2 penalty, explored
    loosely before the best is polished)."""
    starts_at_best_optimum: int
    """How many of the starts reached the best optimum."""
    dim: int
    """The latent dimension (as in the settings)."""
    verdicts: float
    """Total weight of the verdicts fitted (a judgment counts 1, shared among its criteria)."""
    cells: int
    """The terms the likelihood sums: distinct (judge, first, second) cells of the verdicts;
    with style control every verdict (a label of a soft one), each with its own style
    differences."""
    scenarios: int
    """Scenarios in the verdicts."""
    bootstrap_converged: float | None
    """Share of the bootstrap refits that converged; None without bootstrap."""
    fit_seconds: float
    """Seconds the fit took, the bootstrap apart."""
    bootstrap_seconds: float
    """Seconds the bootstrap took (0 without one)."""
    heldout_loglik_per_verdict: HeldOut | None
    """Held-out log-likelihood over scenario folds; None without `cv`."""
    bootstrap_vanished: int | None = None
    """Bootstrap rounds in which a judge or an evaluee drew none of its verdicts (left out when
    none, or without bootstrap)."""
    bootstrap_degenerate: int | None = None
    """Bootstrap rounds whose refit broke down (left out when none, or without bootstrap)."""


class SeparationGroup(Sparse):
    """`above` won every one of the `verdicts` it had against `below` (stats.separation),
    by `judge` (None: all judges pooled). `scenarios` (pooled groups; left out for a
    judge's own, and in records made before it was counted): the number of distinct
    scenarios in which it beat them, the trials the Elo interval's finite end counts
    (each scenario one Bernoulli trial, since a scenario's verdicts are correlated)."""

    OMITTED = frozenset({"scenarios"})

    judge: str | None
    """The judge whose verdicts these are; None: all judges pooled."""
    above: list[str]
    """The models that never lost to `below`."""
    below: list[str]
    """The models `above` beat in every verdict between them."""
    verdicts: float
    """Weight of the verdicts between the two groups, all won by `above`."""
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
    """Groups the verdicts of all judges together cannot place against each other."""
    judges: list[SeparationGroup]
    """Groups each judge's own verdicts cannot place (the fit places them through the others)."""


class ConstitutionPart(Part):
    title: str
    """The constitution's title."""
    criteria: list[str]
    """Its criteria, in order (criterion 1 first)."""


class Design(Sparse):
    """The config's sampling section (peer.config.Sampling); `baseline` is left out for
    designs without one."""

    OMITTED = frozenset({"baseline"})

    design: str
    """The design: "all", "random-groups", "balanced", "adaptive" or "baseline"."""
    baseline: str | None = None
    """The baseline design: the member every other is compared with (left out otherwise)."""
    group_size: int
    """Evaluees per group; each judge of it compares every ordered pair (unused by "all")."""
    judges_per_group: int
    """Judges per group (unused by "all")."""
    comparisons: int | None
    """Adaptive: total judge calls to spend; None: as many as random groups would."""
    rounds: int
    """Adaptive: refits between batches."""
    seed: int
    """Seeds the choice of groups and judges."""


class JudgingPart(Sparse):
    """The config's judging section; `soft` when judges were asked for label
    probabilities, `graded` and `strong_weight` with graded verdicts (left out
    otherwise)."""

    OMITTED = frozenset({"soft", "graded", "strong_weight"})

    reflections: bool
    """Whether judges wrote a reflection on each reply before comparing."""
    ties: bool
    """Whether judges could call a tie."""
    mode: str
    """One verdict per comparison ("single"), one per criterion ("criteria"), or "likelihood"."""
    soft: bool | None = None
    """True when judges were asked for label probabilities (left out otherwise)."""
    graded: bool | None = None
    """True when judges gave graded verdicts, A>>B to B>>A (left out otherwise)."""
    strong_weight: float | None = None
    """With graded verdicts: how many verdicts a strong one counted as in the fit (left out
    otherwise; verdicts.csv keeps each verdict's strength, so `fit --strong-weight` can refit)."""


class GivenAnswersPart(Part):
    """Where a member's given answers came from, and what became of them on the run's
    questions."""

    file: str
    """The answer file (or Arena-Hard folder's file) they were read from."""
    format: str
    """Its format: "arena-hard", "alpaca-eval", "fastchat" or "table"."""
    model: str
    """The model whose answers they are, as the file names it."""
    answered: int
    """Questions of the run it answered."""
    missing: int
    """Questions of the run it has no answer to: left out of its comparisons."""
    empty: int
    """Questions whose answer is empty; `empty_rule` says what they counted as."""
    errors: int
    """Questions whose answer is a harness's error marker; `errors_rule` says what they counted
    as."""
    empty_rule: str
    """What an empty answer counted as: "loss" (it lost, with no judge call), "exclude" (its
    comparisons were left out) or "judge" (judges read it)."""
    errors_rule: str
    """What an error marker counted as: "loss" or "exclude"."""
    unused: int
    """Answers to questions the run does not use."""
    ignored_fields: list[str]
    """Fields of the file that nothing reads."""


class MemberPart(Sparse):
    """A member as configured; `opening` (the words its replies begin with),
    `evaluee_only` (why it does not judge; "true" without a reason) and `answers` (given
    answers) are left out when not set."""

    OMITTED = frozenset({"opening", "evaluee_only", "answers"})

    name: str
    """The member's name."""
    model: str | None
    """Its model, as a spec; None for a member that only gives answers."""
    persona: str | None
    """Its persona, as configured; None without one."""
    opening: str | None = None
    """The words each of its replies begins with (left out when not set)."""
    evaluee_only: str | None = None
    """Why it does not judge ("set in the config" when given as true; left out when it judges)."""
    answers: GivenAnswersPart | None = None
    """Its given answers, read and never generated (left out for a member that replies)."""


class OrderConsistency(Part):
    """Pairs a judge saw in both orders; shares where the same model / slot won both."""

    pairs: int
    """Pairs it judged in both orders (same scenario; per criterion in criteria mode; a pair judged
    twice counts once, by its last verdict)."""
    consistent: float
    """Share of them where the same model won both times, or both were ties."""
    same_slot: float
    """Share of them where the same slot won both times."""


class RunSummary(Sparse):
    """What a `rank` run collected; its accounting includes a greenbeard control run.
    `soft_verdicts_by_judge`: with soft verdicts, how many of each judge's verdicts came
    with label probabilities (left out otherwise). `verdicts_by_judge`: per served judge
    (HTTP), how its first replies to comparisons gave their verdicts and how many could
    not be read before a repair (left out without served judges)."""

    OMITTED = frozenset({"soft_verdicts_by_judge", "verdicts_by_judge", "judges", "by_rule"})

    name: str | None
    """The config's name; None without one."""
    constitution: ConstitutionPart
    """The constitution the judges applied."""
    scenarios: int
    """Scenarios the run used (questions, in objective mode)."""
    design: Design
    """The config's sampling section."""
    judging: JudgingPart
    """The config's judging section."""
    members: list[MemberPart]
    """The population, as configured."""
    judges: list[MemberPart] | None = None
    """Judges that are not ranked (external judges), as configured (left out without any)."""
    by_rule: int | None = None
    """Comparisons of given answers decided by the answers rule with no call (an empty or failed
    answer loses; left out where none was)."""
    comparisons: int
    """Comparisons asked for, each presentation order one."""
    verdicts: int
    """Comparisons that gave a verdict."""
    repaired: int
    """Comparisons whose verdict came from a repair request."""
    failures: dict[str, int]
    """Comparisons without a verdict, by why ("parse", "judge error", "missing response", "missing
    reflection")."""
    parse_failures_by_judge: dict[str, int]
    """Per judge, comparisons whose reply could not be read, after any repair (judges without any
    left out)."""
    order_consistency: dict[str, OrderConsistency]
    """Per judge, how its verdicts on pairs judged in both orders agree."""
    accounting: AccountingRecord
    """What the run's calls cost, by member and role, the greenbeard control run's included."""
    soft_verdicts_by_judge: dict[str, int] | None = None
    """With soft verdicts, how many of each judge's verdicts came with label probabilities (left out
    otherwise)."""
    verdicts_by_judge: dict[str, VerdictModes] | None = None
    """Per served judge (HTTP), how its first replies to comparisons gave their verdicts (left out
    without served judges)."""


class ObjectiveCheck(Part):
    """Objective mode: true accuracy per member, and how well Elo follows it."""

    questions: int
    """Questions asked."""
    accuracy: dict[str, float]
    """Per member, the share of its answers that picked the key (0 when it answered none; failed
    calls are not counted)."""
    kendall_tau_elo_vs_accuracy: float | None
    """Kendall's tau between the members' Elo and accuracy; None where undefined (a side
    constant)."""


class Shift(Part):
    elo_shift: dict[str, float]
    """Per member, its Elo with the clique's instructions minus without."""
    mean_shift_greenbeards: float | None
    """Mean shift of the clique's members; None when none of them is ranked."""
    mean_shift_others: float | None
    """Mean shift of the other members; None when there are none."""


class GreenbeardShift(Part):
    """Elo with the clique's instructions minus without, with and without self-judgments."""

    members: list[str]
    """The clique's members."""
    marker: str
    """The phrase they were told to work into their replies and favour in others'."""
    with_self_judgments: Shift
    """Shifts with every verdict kept."""
    without_self_judgments: Shift
    """Shifts with verdicts in which the judge is one of the two evaluees dropped."""


class TruthRecovery(Sparse):
    """`fit --truth`: how well the fit recovered a simulated population."""

    OMITTED = frozenset({"elo_ci_coverage"})

    kendall_tau: float | None
    """Kendall's tau between the true and the fitted trust; None where undefined."""
    max_abs_elo_error: float
    """The largest gap between a model's fitted and true Elo, in Elo points."""
    elo_ci_coverage: float | None = None
    """Share of the models whose true Elo lies in their interval (left out without bootstrap)."""


class SimulatedDesign(Sparse):
    """The design a simulation drew its verdicts with (random groups)."""

    OMITTED = frozenset({"soft"})

    scenarios: int
    """Scenarios drawn."""
    group_size: int
    """Evaluees drawn per scenario; every ordered pair of them is judged."""
    judges_per_scenario: int
    """Judges drawn per scenario (a judge may judge itself)."""
    scenario_noise: float
    """Standard deviation of a reply's quality per scenario, in logits (0: none)."""
    seed: int
    """The population's seed; the verdicts are drawn with this seed plus 1."""
    soft: bool | None = None
    """True: calibrated judges wrote label probabilities (left out otherwise)."""


class TruthRecord(Record, Sparse):
    """`eigenjury simulate`: the population the verdicts were drawn from (as
    stats.simulate.Population.to_dict writes it), the design, and each model's true
    trust and Elo, in the population's order; what `fit --truth` measures recovery by."""

    KIND = "simulation-truth"
    FILE = "truth.json"

    kind: str = KIND
    """Always "simulation-truth"."""
    population: dict[str, Any]
    """The population the verdicts were drawn from: models, lenses, dispositions, tie propensities,
    position biases, ..."""
    design: SimulatedDesign
    """How the verdicts were drawn."""
    trust: list[float]
    """Each evaluee's true trust, in the population's order (external judges left out)."""
    elo: list[float]
    """Each evaluee's true Elo (1500: an evaluee of average trust), in the same order."""

    def overview(self) -> Overview:
        return Overview(name="simulation", models=tuple(self.population.get("models", ())))


class BaselineRow(Part):
    """A model against the baseline (stats.win_rate)."""

    model: str
    """The model."""
    win_rate: float
    """Its share of the verdicts between it and the baseline, a tie counting half."""
    win_rate_ci: list[float | None]
    """The interval from question resamples (the settings' ci); None ends without bootstrap."""
    verdicts: float
    """Verdicts between it and the baseline, in either order, by any judge (weighted)."""
    wins: float
    """Of them, the ones it won."""
    ties: float
    """Of them, ties."""
    losses: float
    """Of them, the ones the baseline won."""
    elo_win_rate: float
    """The share of decisive verdicts against the baseline the fitted Elo predicts it wins, 1 / (1
    + 10^((baseline's Elo - its Elo) / 400)), with style held equal where the fit holds it
    (Arena-Hard's score from a fitted model; ties, which `win_rate` counts half, are left out)."""
    elo_win_rate_ci: list[float | None]
    """Its interval, from the Elo's bootstrap draws (None ends without bootstrap)."""


class BaselinePart(Part):
    """Win rates against the baseline: Arena-Hard's score, beside the fitted Elo."""

    baseline: str
    """The member every other was compared with."""
    rounds: int
    """Question resamples behind the intervals (0: none)."""
    models: list[BaselineRow]
    """Each other model, by win rate, highest first."""
    styled: bool
    """Whether `elo_win_rate` holds style equal (the fit's style control was on)."""


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
            "baseline",
        }
    )

    kind: str = KIND
    """Always "ranking"."""
    method: str
    """The estimator, in words."""
    source: str | None
    """The verdict file (`fit`) or the config (`rank`, `demo`), as given; None where not
    recorded."""
    settings: Settings
    """How the verdicts were fitted."""
    models: list[ModelRow]
    """The evaluees, in rank order (best first)."""
    judges: list[JudgeRow]
    """Every judge that gave verdicts, external ones included."""
    dispositions: dict[str, list[float]]
    """Each evaluee's disposition v_j (`dim` numbers), by name."""
    trust_matrix: TrustMatrix
    """Each judge's trust in each evaluee."""
    fit: FitSummary
    """How the fit went."""
    warnings: list[str]
    """What the data cannot support, and other warnings, in words."""
    style: StylePart | None = None
    """Style control's features and coefficients (left out without style control)."""
    separation: SeparationPart | None = None
    """Where Ford's condition fails (left out where it holds)."""
    favours: list[FavourPart] | None = None
    """Judges whose verdicts on one evaluee depart from the others' view by more than
    taste explains (stats.favour); None: none."""
    run: RunSummary | None = None
    """`rank` and `demo`: the run that collected the verdicts (left out by `fit`)."""
    baseline: BaselinePart | None = None
    """The baseline design: each model's win rate against the baseline (left out otherwise)."""
    objective: ObjectiveCheck | None = None
    """Objective mode: the members' accuracy against the key (left out otherwise)."""
    greenbeard: GreenbeardShift | None = None
    """The greenbeard experiment (left out without a clique in the config)."""
    truth_recovery: TruthRecovery | None = None
    """`fit --truth`: how well the fit recovered the simulated population (else left out)."""
    agreement: AgreementTable | None = None
    """`fit --agreement`: each judge's agreement with the reference judges (left out otherwise)."""

    SHAPE_0_1 = frozenset({"models", "judges", "trust_matrix"})

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
    """The call's role: "evaluee", "reflection", "score", "comparison" or "repair"."""
    member: str
    """The member who was called: the evaluee replying, or the judge."""
    scenario: str
    """The scenario's id."""
    evaluee: str | None = None
    """Reflections and scores: the member whose reply is reflected on or scored (left out
    elsewhere)."""
    first: str | None = None
    """Comparisons and repairs: the member whose reply is shown first, as A."""
    second: str | None = None
    """Comparisons and repairs: the member whose reply is shown second, as B."""
    verdicts: list[int] | None = None
    """Comparisons and repairs: per criterion (one in single mode), 0 tie, 1 first, 2 second; None:
    not read."""
    failure: str | None = None
    """Comparisons and repairs: "parse" (no verdict read) or "judge error" (the call failed); None
    with verdicts."""
    messages: list[list[str]]
    """The request's messages, each [role, content] (none for a likelihood comparison, which makes
    no call)."""
    reply: str | None
    """The reply's text (an evaluee's with its opening); None when the call failed."""
    choice_logprobs: dict[str, float] | None
    """Log-probabilities of the allowed choices, where the model scored them; else None."""
    error: str | None
    """The failed call's error, as "kind: message"; None when it succeeded."""
    cached: bool
    """Whether the reply came from the store."""
    tokens: int | None = None
    """Scores: the reply's length in the judge's tokens (left out elsewhere)."""
    scores: dict[str, float] | None = None
    """Likelihood comparisons: the two replies' scores, A and B, in nats per token (left out
    elsewhere)."""
    rule: str | None = None
    """Comparisons of given answers decided by the config's answers rule, with no call: why
    ("reply A empty", "reply B an error marker", ...; left out elsewhere)."""
    source: str | None = None
    """Evaluee lines of given answers: the file the reply was read from; no call was made (left
    out elsewhere)."""

    @model_serializer(mode="wrap")
    def _omit_other_roles(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("tokens", "scores", "rule", "source"):
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
    """Scenario-bootstrap rounds behind the intervals."""
    ci: float
    """Coverage of the intervals, e.g. 0.95."""
    seed: int
    """Seeds the bootstrap."""


class AgreementRowPart(Part):
    """A judge against the reference majority (stats.judge_agreement.AgreementRow):
    each statistic with its scenario-bootstrap interval, value None where undefined."""

    judge: str
    """The judge's name."""
    reference: bool
    """Whether it is one of the reference judges (then measured against the others)."""
    comparisons: int
    """Comparisons in its row: those the references judged (a reference's: all its own)."""
    with_majority: int
    """Of them, those with a reference majority (agreement and kappa)."""
    verdicts: float
    """Weight of its verdicts on those comparisons (a judgment counts 1, shared among its
    criteria)."""
    agreement: EstimatePart
    """Share of its verdicts that match the reference majority (a tie is an outcome)."""
    agreement_decisive: EstimatePart
    """The same, where both its verdict and the majority are decisive."""
    kappa: EstimatePart
    """Cohen's kappa against the majority over tie, win and loss (0: chance)."""
    flip_pairs: float
    """Weight of the pairs it judged in both orders."""
    flip_share: EstimatePart
    """Share of those pairs whose outcome changed with the order."""
    position_bias: EstimatePart
    """Share of its decisive verdicts for the first slot (0.5: none)."""
    longer_preference: EstimatePart
    """Share of its decisive verdicts for the longer reply, where the lengths differ (None without
    lengths)."""
    order_kappa: EstimatePart | None = None
    """Order consistency beyond chance: 1 - flip share / the flip share of a judge that labels
    first, second and tie at its own rates whatever the replies (0: content-blind, 1: never
    flips; None in records made before eigenjury 0.3.2)."""
    tie_share: EstimatePart | None = None
    """Share of its verdicts that are ties (None in records made before eigenjury 0.3.2)."""


class AgreementTable(Part):
    """Every judge's agreement with the reference judges' majority, best first
    (stats.judge_agreement.JudgeAgreement)."""

    references: list[str]
    """The reference judges."""
    comparisons: int
    """Comparisons the references judged (a scenario and an unordered pair each)."""
    without_majority: int
    """Of them, those left out of agreement and kappa: two outcomes tied for the majority."""
    settings: AgreementSettings
    """The bootstrap behind the intervals."""
    judges: list[AgreementRowPart]
    """Every judge's row, best agreement first (undefined last)."""


class JudgeAgreementRecord(Record):
    """`eigenjury agreement --out`: the agreement table of a verdict file."""

    KIND = "judge-agreement"
    FILE = "agreement.json"

    kind: str = KIND
    """Always "judge-agreement"."""
    source: str | None
    """The verdict file, as given to `agreement`; None where not recorded."""
    agreement: AgreementTable
    """The agreement table."""

    def overview(self) -> Overview:
        return Overview(
            name=None if self.source is None else Path(self.source).name,
            models=tuple(row.judge for row in self.agreement.judges),
        )


RankingRecord.model_rebuild()  # its `agreement` part is declared above


# What a TasteRow's `reading` says: fitted coefficient against measured taste, in words.
SUBSTANCE = (
    "the fitted coefficient is above the taste: part of what style control removes is "
    "substance (longer replies were better for more than their length)"
)
UNDER = (
    "the fitted coefficient is below the taste: longer replies were worse in substance, "
    "and style control removes less than the taste adds"
)
TASTE = "the fitted coefficient is within what the taste explains"
LOCKED = (
    "answered by position: every decisive verdict went to the same slot, so its taste "
    "cannot be measured"
)


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
    """The judge; None: all judges pooled into one taste."""
    verdicts: float
    """Weight of its verdicts on the edits (a verdict per criterion counts 1/C)."""
    longer: float
    """Of them, those for the longer reply."""
    shorter: float
    """Those for the shorter one (the reply as it was)."""
    ties: float
    """Those that were ties."""
    share: float
    """Share for the longer reply, a tie counting half (0.5: length does not move it)."""
    share_ci: Interval | None
    """Its interval over the edited replies; None without bootstrap (unless `unbounded`) or when
    `position_locked`."""
    taste: float | None
    """Log-odds per standard deviation of normalised length difference; None when unbounded, all
    ties or `position_locked`."""
    taste_ci: OpenInterval | None
    """Its interval, an end None where unbounded; None with all ties, `position_locked`, or without
    bootstrap (unless `unbounded`)."""
    unbounded: str | None = None
    """The side on which its verdicts do not bound the taste, "above" or "below" (left out
    otherwise)."""
    position_locked: bool | None = None
    """True when every decisive verdict went to the same slot (left out otherwise)."""
    fitted: float | None = None
    """The run's length coefficient for this judge, or the shared one (left out without one)."""
    fitted_ci: Interval | None = None
    """Its interval (left out without one)."""
    difference: float | None = None
    """`fitted` minus `taste` (left out where either is missing)."""
    difference_ci: OpenInterval | None = None
    """Its interval; an end is None where unbounded (left out without both intervals)."""
    reading: str | None = None
    """What the comparison says, in words, or that it answered by position (left out without both
    intervals)."""


class EditsPart(Part):
    """How the replies were made longer: `replies` sampled (seeded by `seed`) from the
    run's, each lengthened by neutral filler sentences (bounds.neighbours.Verbosity)
    toward a normalised length difference of `target`; `achieved` the mean normalised
    difference reached and `short` how many fell short of the target (the filler ran
    out); `scale` the run's standard deviation of normalised length difference (the
    taste's unit), and `scale_source` where it came from."""

    edit: str
    """How the replies were made longer, in words."""
    replies: int
    """Replies sampled from the run's and lengthened."""
    seed: int
    """Seeds the sample, the filler and the bootstrap."""
    target: float
    """The normalised length difference each edit aimed at."""
    achieved: float
    """The mean normalised length difference the edits reached."""
    short: int
    """Edits that fell short of the target by more than 5% (the filler ran out)."""
    scale: float
    """The run's standard deviation of normalised length difference: the taste's unit."""
    scale_source: str
    """Where `scale` came from: the run's style control, or its verdicts."""


class TasteModelRow(Part):
    """A model's Elo with the length coefficient held at the judges' measured taste,
    beside the run's controlled and uncontrolled Elo (None where the run had none)."""

    name: str
    """The evaluee's name."""
    elo: float
    """Its Elo with the length coefficient held at the taste."""
    elo_ci: OpenInterval | None
    """Its interval; an end is None where unbounded; None without bootstrap."""
    rank: int
    """Its rank at the taste."""
    elo_controlled: float
    """Its Elo in the run, style held equal."""
    elo_uncontrolled: float | None
    """Its Elo in the run without style control; None where the run has none."""


class TasteLeaderboard(Part):
    """The run's verdicts refitted with the length coefficient held at the measured
    taste (`held`: the pooled taste for a shared coefficient, by judge for one per
    judge; a judge whose taste is unbounded keeps its fitted coefficient). The
    intervals hold the taste at its estimate: its own interval is not in them."""

    held: dict[str, float]
    """The taste the coefficient was held at: {"length": the pooled taste} for a shared coefficient,
    else by judge (those whose taste is bounded)."""
    models: list[TasteModelRow]
    """The evaluees, by Elo at the taste (best first)."""


class StyleCheckRecord(Record, Sparse):
    """`eigenjury style-check`: each judge's taste for length measured on same-content
    edits of a rank run's replies, beside the run's fitted length coefficient, and the
    leaderboard with the coefficient held at the taste."""

    KIND = "style-check"
    FILE = "style-check.json"
    OMITTED = frozenset({"leaderboard"})

    kind: str = KIND
    """Always "style-check"."""
    source: str
    """The rank run's output folder, as given."""
    run_name: str | None
    """The run's name in its config; None without one."""
    judging: str
    """The run's judging mode ("single", "criteria" or "likelihood")."""
    ci: float
    """Coverage of the intervals: the run's."""
    bootstrap: int
    """Bootstrap rounds over the edited replies."""
    edits: EditsPart
    """How the replies were made longer."""
    judges: list[TasteRow]
    """Each judge's taste, in the config's order (judges without a verdict left out)."""
    pooled: TasteRow
    """All judges' verdicts pooled into one taste."""
    comparisons: int
    """Comparisons asked for: every judge, every edit, in both orders."""
    failures: dict[str, int]
    """Comparisons without a verdict, by why ("parse", "judge error", ...)."""
    accounting: AccountingRecord
    """What the check's calls cost, by member and role."""
    warnings: list[str]
    """What the check could not compare or refit, in words."""
    leaderboard: TasteLeaderboard | None = None
    """The run's verdicts refitted at the taste (left out without the run's length coefficient or a
    bounded taste)."""

    def overview(self) -> Overview:
        return Overview(
            name=self.run_name or Path(self.source).name,
            models=tuple(j.judge for j in self.judges if j.judge is not None),
            cost_usd=self.accounting.total.cost_usd,
        )
