"""Peer ranking: verdicts -> low-rank BTD -> trust matrix -> EigenTrust -> Elo, with intervals.

Judges need not be judged: a judge that never appears as an evaluee (a person, a
crowd, a panel model outside the population) is an external judge, and its opinion
enters EigenTrust as the pre-trust (stats.eigentrust.panel_trust).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from eigenjury.stats.bootstrap import (
    RoundMap,
    bca_interval,
    cluster_bootstrap,
    group_jackknife,
    percentile_interval,
    rounds_problem,
)
from eigenjury.stats.btd import (
    DEFAULT_L2,
    DEFAULT_PRIOR,
    DEFAULT_RESTARTS,
    BTDParams,
    LowRankBTD,
    ScorePrior,
    Solver,
)
from eigenjury.stats.eigentrust import damping_for, own_scores, panel_trust, trust_matrix
from eigenjury.stats.elo import elo_difference_intervals, rank_intervals, ranks, to_elo
from eigenjury.stats.favour import favours, rings
from eigenjury.stats.informative import JudgeSignal, judge_signals
from eigenjury.stats.sandwich import sandwich_draws
from eigenjury.stats.separation import (
    judge_separations,
    pooled_separation,
    record_bound,
    scenarios_won,
    win_graph,
)
from eigenjury.stats.style import StyleDesign, style_design
from eigenjury.stats.validation import heldout_loglik
from eigenjury.stats.verdicts import (
    DataError,
    FloatArray,
    IntArray,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    check_design,
)


@dataclass(frozen=True)
class _ConsensusStatistic:
    """Fit (warm-started when `init` is set) and map the fit to trust and Elo.

    A module-level dataclass so that bootstrap workers can receive it pickled.
    """

    dim: int
    l2: float
    prior: ScorePrior | None
    position_bias: bool
    self_preference: bool
    style_per_judge: bool
    style_fixed: FloatArray | None
    solver: Solver
    restarts: int
    seed: int | None
    damping: float
    pretrust: FloatArray | None
    anchor: str | int
    anchor_value: float
    evaluees: IntArray  # indices of the evaluees among the judges (the BTD's models)
    external: IntArray  # indices of the external judges
    external_weight: FloatArray  # one per external judge
    init: BTDParams | None = None

    def model(self) -> LowRankBTD:
        return LowRankBTD(
            self.dim,
            l2=self.l2,
            prior=self.prior,
            position_bias=self.position_bias,
            self_preference=self.self_preference,
            style_per_judge=self.style_per_judge,
            style_fixed=self.style_fixed,
            solver=self.solver,
            restarts=self.restarts,
            seed=self.seed,
        )

    def fit(self, counts: VerdictCounts) -> LowRankBTD:
        return self.model().fit(counts, init=self.init)

    def trust(
        self, scores: FloatArray, judge_mask: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """The trust matrix (judges x evaluees) and the evaluees' trust vector."""
        matrix = trust_matrix(scores, judge_mask=judge_mask, evaluees=self.evaluees)
        trust = panel_trust(
            matrix,
            self.evaluees,
            self.external,
            self.external_weight,
            damping=self.damping,
            pretrust=self.pretrust,
        )
        return matrix, trust

    def summarise(self, model: LowRankBTD) -> dict[str, FloatArray]:
        scores = model.scores()
        matrix, trust = self.trust(own_scores(scores, model.self_bias_upper_), model.judge_mask_)
        judged = scores[np.ix_(model.judge_mask_, self.evaluees)]
        spread = float(np.ptp(judged, axis=1).max()) if judged.size else 0.0
        return {
            "trust": trust,
            "elo": to_elo(trust, anchor=self.anchor, value=self.anchor_value),
            "tie_propensity": model.tie_propensity_,
            "position_bias": model.position_bias_,
            "self_bias": model.self_bias_,
            "style": model.style_coef_,
            "converged": np.array(model.converged_),
            "degenerate": np.array(
                not model.converged_ or trust.min() < DEGENERATE_TRUST or spread > SCORE_LIMIT
            ),
            "matrix": matrix,
        }

    def round_summary(self, model: LowRankBTD) -> dict[str, FloatArray]:
        """What a bootstrap round (or a sandwich draw) keeps of a fit."""
        out = self.summarise(model)
        del out["matrix"]
        return out

    def __call__(self, counts: VerdictCounts) -> dict[str, FloatArray]:
        out = self.round_summary(self.fit(counts))
        # a model with none of its verdicts drawn in a round is fitted from the prior there
        out["judge_verdicts"] = counts.judge_totals()
        out["evaluee_verdicts"] = counts.evaluee_totals()
        return out


# A fit that breaks down shows it by a trust this small (an absorbing model took the
# rest) or a judge that puts two models this many logits apart (odds of 1e13: a lens
# stretched without bound). The prior keeps fits far from both.
DEGENERATE_TRUST = 1e-12
SCORE_LIMIT = 30.0

# BCa intervals need this many bootstrap rounds and scenarios (else percentile)
BCA_ROUNDS = 100
BCA_SCENARIOS = 20
IntervalMethod = Literal["percentile", "bca", "sandwich"]
INTERVAL_METHODS: tuple[IntervalMethod, ...] = ("percentile", "bca", "sandwich")


class SettingError(DataError):
    """A setting the verdicts cannot take; `setting` names the parameter (a damping that
    cannot apply, weights for judges that are not external, an anchor never judged)."""

    def __init__(self, message: str, setting: str) -> None:
        super().__init__(message)
        self.setting = setting


def _seed_of(seed: int | None) -> int:
    """An integer seed: `seed`, or a fresh one for None."""
    return int(np.random.SeedSequence(seed).generate_state(1)[0])


def _finite(value: float, what: str) -> float:
    """A coefficient to hold: a finite number, or a SettingError naming it."""
    if not np.isfinite(value):
        raise SettingError(
            f"style_fixed for {what} must be a finite number, got {value}", "style_fixed"
        )
    return float(value)


class PeerRanking:
    """The EigenBench consensus ranking of a population that judges itself, optionally
    with external judges (judges that are never judged).

    Parameters
    ----------
    dim, l2, prior, position_bias, self_preference, solver, restarts : passed to
        :class:`LowRankBTD` (prior: the Gaussian prior on the judges' scores,
        :class:`~eigenjury.stats.btd.ScorePrior`; self_preference: fit each judge's
        preference for its own replies, so that its verdicts on itself buy it no trust).
    style : names of reply features (the table's ``features``) to control for
        (stats.style): their differences enter the win logits, and trust and Elo come
        from the model with style held equal; the fit without them is kept beside
        (``elo_uncontrolled_``). None or empty: no style control. A feature with the
        same difference in every verdict, or one that never varies between verdicts on
        the same pair of evaluees, is left out (``style_dropped_``): no fit could tell
        its effect apart.
    style_per_judge : one style coefficient per judge and feature instead of one per
        feature shared by all judges.
    style_fixed : coefficients held at given values instead of fitted, by feature: a
        number (for every judge), or with style_per_judge a mapping of judge names to
        numbers (the judges left out are fitted). For a taste measured directly
        (stats.taste: same-content edits), where the fitted coefficient would also take
        what longer or formatted replies really are better at. A feature that is not
        controlled for is refused; one left out of the fit holds nothing.
    exclude_self : drop verdicts in which the judge is one of the two evaluees (with
        self_preference on, they already buy no trust; this removes them altogether).
    exclude_judges : names of judges whose verdicts are dropped (they stay evaluees):
        what the fit says without a judge that `favours_` names.
    damping : a in EigenTrust's damped form t = (1 - a) t T + a p. None (default): 0
        without external judges, 0.5 with external and peer judges (the external panel
        and the peer population have an equal say), 1 when no evaluee ever judges
        (then t = p; another value is refused).
    pretrust : p over the evaluees (default uniform); refused with external judges,
        whose consensus is p.
    external_weights : weight per external judge in p, by name (default 1 each; 0
        allowed; negative weights, all weights 0, or a name that is not an external
        judge are refused).
    external_judges : accept external judges (False: a population that ranks itself,
        where a member never judged is missing data and is refused).
    anchor : "uniform" (uniform trust = anchor_value, the EigenBench convention),
        "mean" (ratings average anchor_value) or an evaluee's name fixed at anchor_value.
    bootstrap : cluster-bootstrap rounds over scenarios (0: point estimates only; else at
        least :func:`~eigenjury.stats.bootstrap.min_rounds` of `ci`, 40 for 95%); with
        ``interval="sandwich"``, draws from the sandwich covariance instead (no refits).
    interval : "percentile" (default), "bca", or "sandwich": parameters drawn from the
        cluster-robust covariance of the fit, clustered by scenario
        (:mod:`~eigenjury.stats.sandwich`), each draw summarised as a round is: one fit
        instead of one per round, right when the estimate is near normal.
    ci : interval coverage. seed : seeds the restarts and the bootstrap.
    n_jobs : processes for the bootstrap (None: every available core).
    map_rounds : run the bootstrap rounds elsewhere instead (e.g. Ray tasks).
    cv : folds of whole scenarios for a held-out log-likelihood (0: none, else at least
        2); compare it across `dim` to choose the latent dimension.
    min_verdicts : below this many verdicts a model is reported as thinly covered.

    External judges. A judge that never appears as an evaluee (first or second) in a
    usable verdict, decided on the whole data after `exclude_self` (and kept so in the
    bootstrap rounds), is external. The BTD fit covers it as any judge (lens, tie
    propensity, position bias); its disposition means nothing and it gets no trust.
    The trust matrix has a row per judge and a column per evaluee; the evaluees' rows
    are T, and p is the weighted mean of the external judges' rows (a judge without
    verdicts in a bootstrap round drops out, the weights renormalised; uniform p when
    none is left). Evaluees that never judge follow p.

    What the Elo means. Elo_j = anchor_value + 400 log10(N t_j) over the N evaluees
    (anchor "uniform"): 1500 is the Elo of an evaluee given the average trust, 400
    points a tenfold ratio of trust. Trust is the stationary share of a walk that, at
    each step, follows the current evaluee's opinion with probability 1 - a and asks
    the external panel with probability a. A judge's trust is its win shares, T_ij =
    pi_ij / sum_k pi_ik (stats.eigentrust: ties are the judge's habit, not anyone's
    merit), so with one external judge x, t = T_x and Elo differences are 400 / ln 10
    times differences of the judge's scores s_xj at any number of models, ties or not:
    the Bradley-Terry Elo of arena leaderboards. With several external judges, the Elo
    is that of their weighted average opinion, not of their pooled votes: a judge with
    ten times the verdicts has the same say unless weighted so.

    What the data cannot support is said. Where a group of models won every comparison
    it had with the rest (Ford's condition fails, stats.separation), the prior sets the
    gap, a warning names the group, and its Elo interval is open on that side
    (``separation_``; ``judge_separations_`` for each judge's own verdicts). Bootstrap
    rounds whose refit broke down are counted (``bootstrap_degenerate_``) and warned of
    when more than an interval's tail holds them; the simultaneous intervals studentise
    with a robust spread, so that a few of them cannot blow up every interval. A judge
    whose verdicts on one evaluee depart from the other judges' view by more than taste
    explains (stats.favour: one that always picks a friend, two that pick each other)
    is named in ``favours_`` and a warning: EigenTrust lets it give the friend its trust.

    Fitted attributes: ``models_`` (the ranked evaluees, aligned with ``trust_``,
    ``elo_``, ``rank_`` and their intervals), ``judges_`` (every name in the BTD's index
    space: the verdicts' models), ``external_`` (bool mask over ``judges_``),
    ``damping_`` (the a used), ``external_weights_`` (weight per external judge, None
    without any), ``btd_``, ``trust_matrix_`` (``judges_`` x ``models_``), and with
    bootstrap ``trust_ci_``, ``elo_ci_`` (and every other parameter's interval below:
    percentile, or with ``interval="bca"`` bias-corrected and accelerated from a
    20-group scenario jackknife where there are at least 100 rounds and 20 scenarios,
    or the percentiles of sandwich draws; ``interval_method_`` says which), ``rank_ci_``
    (marginal: percentiles of each
    model's rank over the draws, :func:`~eigenjury.stats.elo.rank_intervals`),
    ``elo_difference_ci_`` (``models_`` x ``models_`` x 2: simultaneous intervals on
    Elo_i - Elo_j, family-wise coverage `ci` by max-t,
    :func:`~eigenjury.stats.elo.elo_difference_intervals`), ``tie_propensity_ci_`` and
    ``position_bias_ci_`` and ``self_bias_ci_`` (over ``judges_``), ``bootstrap_`` (the
    raw draws, with each round's ``judge_verdicts`` and ``evaluee_verdicts`` over
    ``judges_`` and whether it is ``degenerate``), ``bootstrap_degenerate_``,
    ``bootstrap_converged_`` (share of rounds whose refit converged),
    ``bootstrap_vanished_`` (rounds in which a judge or evaluee of the data drew none of
    its verdicts; warned of when any); ``counts_``,
    ``style_features_`` (the features controlled for; empty without style control),
    ``style_dropped_`` (requested but left out: feature -> why), ``style_scale_``
    (each one's standard deviation of normalised difference), ``style_coef_`` (per
    feature, or judges x features) and with bootstrap ``style_ci_`` (its intervals on
    a last axis of 2);
    with style control ``elo_uncontrolled_``, ``rank_uncontrolled_`` and
    ``rank_change_`` (uncontrolled rank minus controlled rank: positive for a model
    that ranks higher once style is held equal), from a point fit without style;
    ``n_scenarios_``, ``anchor_index_`` (into ``models_``), ``fit_seconds_``,
    ``bootstrap_seconds_``, ``warnings_``; with bootstrap ``judge_signals_`` (whether each
    judge's verdicts carry information, stats.informative; empty without); with cv,
    ``heldout_`` (a :class:`HeldOutScore`).
    Without external judges, ``models_ == judges_``.
    """

    def __init__(
        self,
        dim: int = 2,
        *,
        l2: float = DEFAULT_L2,
        prior: ScorePrior | None = DEFAULT_PRIOR,
        position_bias: bool = True,
        self_preference: bool = True,
        style: Sequence[str] | None = None,
        style_per_judge: bool = False,
        style_fixed: Mapping[str, float | Mapping[str, float]] | None = None,
        solver: Solver = "auto",
        restarts: int = DEFAULT_RESTARTS,
        exclude_self: bool = False,
        exclude_judges: tuple[str, ...] = (),
        damping: float | None = None,
        pretrust: FloatArray | None = None,
        external_weights: Mapping[str, float] | None = None,
        external_judges: bool = True,
        anchor: str = "uniform",
        anchor_value: float = 1500.0,
        bootstrap: int = 200,
        ci: float = 0.95,
        interval: IntervalMethod = "percentile",
        seed: int | None = 0,
        n_jobs: int | None = None,
        map_rounds: RoundMap | None = None,
        cv: int = 0,
        min_verdicts: float = 30.0,
    ) -> None:
        self.dim = dim
        self.l2 = l2
        self.prior = prior
        self.position_bias = position_bias
        self.self_preference = self_preference
        self.style = style
        self.style_per_judge = style_per_judge
        self.style_fixed = style_fixed
        self.solver = solver
        self.restarts = restarts
        self.exclude_self = exclude_self
        self.exclude_judges = tuple(exclude_judges)
        self.damping = damping
        self.pretrust = pretrust
        self.external_weights = external_weights
        self.external_judges = external_judges
        self.anchor = anchor
        self.anchor_value = anchor_value
        self.bootstrap = bootstrap
        self.ci = ci
        self.interval = interval
        self.seed = seed
        self.n_jobs = n_jobs
        self.map_rounds = map_rounds
        self.cv = cv
        self.min_verdicts = min_verdicts

    def fit(self, table: VerdictTable) -> PeerRanking:
        problem = rounds_problem(self.bootstrap, self.ci)
        if problem:
            raise ValueError(problem)
        if self.cv == 1:
            raise ValueError("cv=1 leaves no scenarios to hold out; use 0 (none) or at least 2")
        if self.interval not in INTERVAL_METHODS:
            raise ValueError(
                f"interval must be 'percentile', 'bca' or 'sandwich', got {self.interval!r}"
            )
        if self.exclude_self:
            table = table.without_self_judgments()
        if self.exclude_judges:
            table = self._without_judges(table)
        start = time.perf_counter()
        style = self._style_design(table)
        data = ScenarioCounts.from_table(table, style if style.names else None)
        counts = data.counts()
        design = check_design(counts, min_verdicts=self.min_verdicts)
        errors = list(design.errors)
        if design.external.any() and not self.external_judges:
            listed = ", ".join(f"'{table.models[i]}'" for i in np.flatnonzero(design.external))
            errors.insert(
                0,
                f"{listed} never appear as an evaluee (first or second) in a usable verdict; "
                "in a population that ranks itself every judge must also be judged",
            )
        if errors:
            raise DataError("; ".join(errors))
        self.warnings_ = list(design.warnings)
        self.judges_ = table.models
        self.external_ = design.external
        evaluees = np.flatnonzero(~design.external)
        external = np.flatnonzero(design.external)
        self.models_ = tuple(self.judges_[i] for i in evaluees)
        peers = bool((counts.judge_totals()[evaluees] > 0).any())
        if self.interval == "sandwich" and self.exclude_self and peers:
            # Without their verdicts on themselves the peers' self-scores u_i . v_i rest
            # on the low-rank structure and the prior alone; normal draws of lens and
            # disposition move them 2-3x as far as refits do (docs/consensus.md).
            raise SettingError(
                "sandwich intervals cannot be trusted with exclude_self: no verdict then "
                "measures a peer's score of itself, which its trust uses, and the normal "
                "draws move it further than refits do (Elo intervals 2-3x the bootstrap's); "
                "use the bootstrap (--interval percentile), or keep verdicts on oneself",
                "interval",
            )
        try:
            self.damping_ = damping_for(self.damping, external=external.size > 0, peers=peers)
        except ValueError as exc:
            raise SettingError(str(exc), "damping") from None
        weight = self._external_weight(external)
        self.external_weights_ = (
            {self.judges_[i]: float(w) for i, w in zip(external, weight, strict=True)}
            if external.size
            else None
        )
        self.counts_ = counts
        self.anchor_index_ = self._anchor_index()
        statistic = _ConsensusStatistic(
            self.dim,
            self.l2,
            self.prior,
            self.position_bias,
            self.self_preference,
            self.style_per_judge,
            self._held_style(),
            self.solver,
            self.restarts,
            self.seed,
            self.damping_,
            self.pretrust,
            self.anchor_index_,
            self.anchor_value,
            evaluees,
            external,
            weight,
        )
        self._statistic = statistic
        self.btd_ = statistic.fit(counts)
        if not self.btd_.converged_:
            self.warnings_.append(
                f"the fit did not reach its tolerance ({self.btd_.message_}); "
                f"largest gradient component {self.btd_.grad_norm_:.2g}"
            )
        if self.restarts > 1 and self.btd_.n_agreeing_starts_ < 2:
            self.warnings_.append(
                f"only one of {self.restarts} starts reached the best optimum (the likelihood "
                "is non-convex); rerun with more --restarts to confirm it is the global one"
            )
        self._scenario_counts = data
        self._check_separation(counts, evaluees)
        self._check_favours(counts, evaluees)
        point = statistic.summarise(self.btd_)
        self.trust_matrix_ = point["matrix"]
        self.trust_ = point["trust"]
        self.elo_ = point["elo"]
        self.rank_ = ranks(self.elo_)
        self.style_coef_ = self.btd_.style_coef_
        if style.names:
            # the restarts were explored on these very counts: polish their best
            plain = replace(statistic, init=self.btd_.explored_start_)
            uncontrolled = statistic.summarise(plain.fit(counts.without_style()))
            self.elo_uncontrolled_ = uncontrolled["elo"]
            self.rank_uncontrolled_ = ranks(self.elo_uncontrolled_)
            self.rank_change_ = self.rank_uncontrolled_ - self.rank_
        self.n_scenarios_ = data.n_scenarios
        self.fit_seconds_ = time.perf_counter() - start
        self.bootstrap_seconds_ = 0.0
        self.judge_signals_: tuple[JudgeSignal, ...] = ()
        if self.bootstrap > 0:
            start = time.perf_counter()
            self._bootstrap(data, replace(statistic, init=self.btd_.params_))
            self.bootstrap_seconds_ = time.perf_counter() - start
            self.judge_signals_ = judge_signals(table, ci=self.ci, seed=_seed_of(self.seed))
        if self.cv:
            if self.cv > data.n_scenarios:
                raise DataError(f"cv={self.cv} folds need at least {self.cv} scenarios")
            self.heldout_ = heldout_loglik(data, statistic.model, n_splits=self.cv, seed=self.seed)
        return self

    def _bootstrap(self, data: ScenarioCounts, statistic: _ConsensusStatistic) -> None:
        if self.interval == "sandwich":
            draws = sandwich_draws(
                self.btd_, data, statistic.round_summary, rounds=self.bootstrap, seed=self.seed
            )
        else:
            draws = cluster_bootstrap(
                data,
                statistic,
                rounds=self.bootstrap,
                seed=self.seed,
                n_jobs=self.n_jobs,
                map_rounds=self.map_rounds,
            )
        self.bootstrap_ = draws
        point = {
            "trust": self.trust_,
            "elo": self.elo_,
            "tie_propensity": self.btd_.tie_propensity_,
            "position_bias": self.btd_.position_bias_,
            "self_bias": self.btd_.self_bias_,
            "style": self.style_coef_,
        }
        # Percentile by default. BCa corrects a bias the draws repeat, which they do on
        # data drawn from the fit's own model; on verdicts it does not describe (tie
        # zones, tastes, shared scenario effects) the draws' offset points the other
        # way as often and BCa's shift is noise: 0.861 coverage at 300 scenarios against
        # the percentile's 0.906 (BENCHMARKS.md 5 and 19). Its shifted levels also need
        # draws to land on and a 20-group jackknife: with fewer rounds or scenarios they
        # reach for the extreme draws, and the percentile interval is kept.
        bca = (
            self.interval == "bca"
            and self.bootstrap >= BCA_ROUNDS
            and data.n_scenarios >= BCA_SCENARIOS
        )
        jackknife = group_jackknife(data, statistic, seed=self.seed) if bca else None
        if jackknife is not None:
            self.interval_method_ = "bca"
        else:  # BCa with too few rounds or scenarios falls back to percentile
            self.interval_method_ = "sandwich" if self.interval == "sandwich" else "percentile"

        def interval(key: str) -> FloatArray:
            if jackknife is None:
                low, high = percentile_interval(draws[key], self.ci)
            else:
                low, high = bca_interval(draws[key], point[key], jackknife[key], self.ci)
            return np.stack([low, high], axis=-1)

        self.trust_ci_ = interval("trust")
        self.elo_ci_ = interval("elo")
        self.rank_ci_ = rank_intervals(draws["elo"], self.ci)
        self.elo_difference_ci_ = elo_difference_intervals(draws["elo"], self.elo_, self.ci)
        self.tie_propensity_ci_ = interval("tie_propensity")
        self.position_bias_ci_ = interval("position_bias")
        self.self_bias_ci_ = interval("self_bias")
        if self.style_features_:
            self.style_ci_ = interval("style")
        self._open_separated_intervals()
        self.bootstrap_converged_ = float(np.mean(draws["converged"]))
        if self.bootstrap_converged_ < 0.95:
            self.warnings_.append(
                f"only {self.bootstrap_converged_:.0%} of bootstrap refits converged"
            )
        self.bootstrap_degenerate_ = int(np.sum(draws["degenerate"]))
        if self.bootstrap_degenerate_ > 0.5 * (1.0 - self.ci) * self.bootstrap:
            self.warnings_.append(
                f"in {self.bootstrap_degenerate_} of {self.bootstrap} bootstrap rounds the "
                "refit broke down (it did not converge, or gave a model almost no trust); "
                "that is more than an interval's tail holds, so the intervals reach into "
                "them: add scenarios"
            )
        self._flag_vanished(draws["judge_verdicts"], draws["evaluee_verdicts"])

    def _check_separation(self, counts: VerdictCounts, evaluees: IntArray) -> None:
        """Ford's condition, pooled and per judge (stats.separation): which gaps the
        verdicts cannot measure, said in words."""
        # verdicts a judge gives on itself go to its self-preference when that is fitted
        own = not self.self_preference
        self.separation_ = pooled_separation(
            counts, evaluees, self_judged=own, data=self._scenario_counts
        )
        self.judge_separations_ = judge_separations(counts, self_judged=own)
        for group in self.separation_.groups:
            self.warnings_.append(
                group.sentence() + "; the prior sets that gap, and the Elo interval is "
                "open on that side"
            )
        judges = sorted({s.judge for s in self.judge_separations_ if s.judge is not None})
        if judges and not self.separation_.groups:
            example = self.judge_separations_[0].sentence()
            self.warnings_.append(
                f"{len(judges)} of {int((counts.judge_totals() > 0).sum())} judges' own "
                f"verdicts leave some models unplaced (e.g. {example}); the fit places them "
                "through the other judges and the prior"
            )

    def _without_judges(self, table: VerdictTable) -> VerdictTable:
        """The table without `exclude_judges`' verdicts; a name that judged nothing is
        refused, so a typo does not pass as a fit without that judge."""
        judging = {table.models[i] for i in np.unique(table.judge)}
        unknown = [name for name in self.exclude_judges if name not in judging]
        if unknown:
            names = ", ".join(f"'{n}'" for n in unknown)
            raise SettingError(f"{names} gave no verdicts to leave out", "exclude_judges")
        dropped = np.isin(table.judge, [table.models.index(n) for n in self.exclude_judges])
        return table.select(~dropped)

    def _check_favours(self, counts: VerdictCounts, evaluees: IntArray) -> None:
        """Judges whose verdicts on one evaluee depart from the other judges' view by
        more than taste explains (stats.favour), said in words: EigenTrust lets such a
        judge give its friend all its trust, and two that favour each other keep it."""
        self.favours_ = favours(
            counts, self.btd_.scores(), evaluees, self.btd_.position_bias_, level=self.ci
        )
        ringed_pairs = rings(self.favours_)
        for pair in ringed_pairs:
            self.warnings_.append(
                f"'{pair[0]}' and '{pair[1]}' favour each other far beyond the other "
                "judges' view: a ring keeps its trust between its members, so their Elo "
                "may be inflated by hundreds of points; compare a fit with --damping, or "
                "beside an external crowd"
            )
        ringed = {name for pair in ringed_pairs for name in pair}
        for found in self.favours_:
            if found.judge in ringed and found.evaluee in ringed:
                continue
            self.warnings_.append(
                found.sentence() + ": a strong taste or a friend, the verdicts cannot tell; "
                f"either way the judge gives '{found.evaluee}' more of its trust, up to all of "
                f"it (--exclude-judge '{found.judge}' shows how much that moves)"
            )

    def _open_separated_intervals(self) -> None:
        """Open the Elo intervals of separated groups on their unmeasured side. The
        other side is moved out to the least that the group's perfect record against
        the models it met allows (stats.separation.record_bound), where that is further
        out than the bootstrap's end: every round keeps the perfect record, so the
        bootstrap cannot show how uncertain the record's size is. The record's trials
        are the scenarios in which the model beat (or lost to) the others
        (stats.separation.scenarios_won), not its verdicts: one scenario's verdicts
        share the same two replies and are not independent."""
        sep = self.separation_
        evaluees = np.flatnonzero(~self.external_)
        own = not self.self_preference
        wins = win_graph(self.counts_, self_judged=own)
        wins = wins[np.ix_(evaluees, evaluees)]
        level = 0.5 * (1.0 + self.ci)

        def mask(chosen: NDArray[np.bool_]) -> NDArray[np.bool_]:
            out = np.zeros(len(self.judges_), dtype=bool)
            out[evaluees[chosen]] = True
            return out

        one = np.eye(len(evaluees), dtype=bool)
        data = self._scenario_counts
        for k in np.flatnonzero(sep.unbounded_above & ~sep.unbounded_below):
            beaten = wins[k] * ~sep.unbounded_above  # all wins: none of them beat it
            trials = scenarios_won(data, mask(one[k]), mask(~sep.unbounded_above), self_judged=own)
            if beaten.sum() > 0 and trials > 0:  # else it met only its own group
                least = beaten @ self.elo_ / beaten.sum() + record_bound(trials, level)
                self.elo_ci_[k, 0] = min(self.elo_ci_[k, 0], least)
        for k in np.flatnonzero(sep.unbounded_below & ~sep.unbounded_above):
            lost_to = wins[:, k] * ~sep.unbounded_below
            trials = scenarios_won(data, mask(~sep.unbounded_below), mask(one[k]), self_judged=own)
            if lost_to.sum() > 0 and trials > 0:
                most = lost_to @ self.elo_ / lost_to.sum() - record_bound(trials, level)
                self.elo_ci_[k, 1] = max(self.elo_ci_[k, 1], most)
        self.elo_ci_[sep.unbounded_above, 1] = np.inf
        self.elo_ci_[sep.unbounded_below, 0] = -np.inf

    def _flag_vanished(self, judge_verdicts: FloatArray, evaluee_verdicts: FloatArray) -> None:
        """Count the rounds in which a judge or an evaluee of the data drew none of its
        verdicts (its estimates there come from the prior alone), and warn of them."""
        vanished = ((judge_verdicts <= 0) & (self.counts_.judge_totals() > 0)) | (
            (evaluee_verdicts <= 0) & (self.counts_.evaluee_totals() > 0)
        )
        self.bootstrap_vanished_ = int(vanished.any(axis=1).sum())
        if self.bootstrap_vanished_:
            rounds = vanished.sum(axis=0)
            often = np.argsort(-rounds, kind="stable")[: min(3, int((rounds > 0).sum()))]
            most = ", ".join(f"{self.judges_[i]} in {rounds[i]}" for i in often)
            self.warnings_.append(
                f"in {self.bootstrap_vanished_} of {len(vanished)} bootstrap rounds a judge or "
                f"an evaluee drew none of its verdicts (most often: {most}), so its "
                "estimates there rest on the prior alone and intervals involving it are "
                "unreliable; add scenarios that include it"
            )

    def _style_design(self, table: VerdictTable) -> StyleDesign:
        """The style covariates asked for."""
        if isinstance(self.style, str):  # a string is a sequence of one-letter names
            raise SettingError(
                f"style takes feature names, not the string {self.style!r}: use "
                f"({self.style!r},) for one feature, or None for no style control",
                "style",
            )
        names = tuple(self.style or ())
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            raise SettingError(f"style feature(s) {', '.join(twice)} named twice", "style")
        if not names:
            design = StyleDesign((), np.zeros(0), {})
        elif table.features is None:
            raise SettingError(
                "style control needs the replies' features, and these verdicts carry none "
                "(no reply texts or feature columns)",
                "style",
            )
        else:
            missing = [n for n in names if n not in table.features.names]
            if missing:
                raise SettingError(
                    f"no style feature {', '.join(missing)} in the verdicts; they carry "
                    f"{', '.join(table.features.names)}",
                    "style",
                )
            try:
                design = style_design(
                    table.features.only(names),
                    table.weight,
                    table.first,
                    table.second,
                    table.n_models,
                )
            except DataError as exc:
                raise SettingError(str(exc), "style") from None
        self.style_features_ = design.names
        self.style_dropped_ = design.dropped
        self.style_scale_ = design.scale
        return design

    def _held_style(self) -> FloatArray | None:
        """`style_fixed` as an array of the coefficients' shape, NaN where fitted."""
        if not self.style_fixed:
            return None
        controlled = tuple(self.style or ())
        features = self.style_features_
        shape = (len(self.judges_), len(features)) if self.style_per_judge else (len(features),)
        held = np.full(shape, np.nan)
        for name, value in self.style_fixed.items():
            if name not in controlled:
                raise SettingError(
                    f"style feature '{name}' is held fixed but not controlled for; control "
                    f"for it (style) or do not fix it",
                    "style_fixed",
                )
            if name not in features:  # left out of the fit (style_dropped_): nothing to hold
                continue
            f = features.index(name)
            if not isinstance(value, Mapping):
                held[..., f] = _finite(value, name)
                continue
            if not self.style_per_judge:
                raise SettingError(
                    f"style feature '{name}' is held per judge, but the coefficients are "
                    "shared by all judges; give one number, or fit one per judge",
                    "style_fixed",
                )
            for judge, per_judge in value.items():
                if judge not in self.judges_:
                    raise SettingError(
                        f"'{judge}' (style_fixed of '{name}') is not a judge in the verdicts",
                        "style_fixed",
                    )
                held[self.judges_.index(judge), f] = _finite(per_judge, f"{name} of {judge}")
        return held

    def elo_at(self, params: BTDParams) -> FloatArray:
        """The evaluees' Elo under other BTD parameters, by the fitted trust rule (for
        derivatives of Elo with respect to the parameters; each judge's self-preference
        bound keeps its margin over the estimate)."""
        margin = self.btd_.self_bias_upper_ - self.btd_.self_bias_
        scores = own_scores(params.lenses @ params.dispositions.T, params.self_bias + margin)
        _, trust = self._statistic.trust(scores, self.btd_.judge_mask_)
        return to_elo(trust, anchor=self.anchor_index_, value=self.anchor_value)

    def _external_weight(self, external: IntArray) -> FloatArray:
        """The external judges' weights in p (default 1), refusing what cannot weigh them."""
        if external.size and self.pretrust is not None:
            raise SettingError(
                "a pre-trust vector cannot be given with external judges: their consensus "
                "is the pre-trust",
                "pretrust",
            )
        names = [self.judges_[i] for i in external]
        weight = np.ones(len(names))
        for name, value in (self.external_weights or {}).items():
            if name not in names:
                role = "an evaluee" if name in self.models_ else "not a judge in the verdicts"
                raise SettingError(
                    f"'{name}' is {role}, not an external judge; only judges that are never "
                    "judged can be weighted",
                    "external_weights",
                )
            if not value >= 0.0 or not np.isfinite(value):
                raise SettingError(
                    f"the weight of external judge '{name}' must be a finite number >= 0, "
                    f"got {value}",
                    "external_weights",
                )
            weight[names.index(name)] = value
        if external.size and weight.sum() <= 0:
            raise SettingError(
                "every external judge has weight 0; give at least one a positive weight",
                "external_weights",
            )
        return weight

    def _anchor_index(self) -> str | int:
        if self.anchor in ("uniform", "mean"):
            return self.anchor
        if self.anchor not in self.models_:
            external = self.anchor in self.judges_
            raise SettingError(
                f"anchor model '{self.anchor}' is "
                + ("an external judge, never judged" if external else "not in the verdicts")
                + "; use 'uniform', 'mean' or one of the evaluees' names",
                "anchor",
            )
        return self.models_.index(self.anchor)
