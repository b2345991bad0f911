"""From a verdict table (a file's, or a run's peer.outcomes) to a ranking record: the
estimator FitSettings describe, the fit a rank config asks for, the fit of a verdict
file with its recovery of a simulated truth, the record of a fitted PeerRanking, and
the greenbeard experiment's Elo shift.

Pure: no engine, no files. `fit` (a verdict file) and `rank` (a config) both build
their estimator and record here, so the two fit alike and write the same fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np

from eigenjury._version import __version__
from eigenjury.peer.record import (
    BaselinePart,
    BaselineRow,
    FavourPart,
    FitSummary,
    GreenbeardShift,
    HeldOut,
    JudgeRow,
    ModelRow,
    PriorSettings,
    RankingRecord,
    SeparationGroup,
    SeparationPart,
    Settings,
    Shift,
    SignalPart,
    StyleCoefficient,
    StylePart,
    TrustMatrix,
    TruthRecovery,
)
from eigenjury.peer.settings import FitSettings
from eigenjury.records import EstimatePart, now
from eigenjury.stats.bootstrap import RoundMap
from eigenjury.stats.btd import ScorePrior
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.elo import ELO_TOLERANCE, to_elo
from eigenjury.stats.informative import JudgeSignal
from eigenjury.stats.separation import Separation
from eigenjury.stats.simulate import Population, recovery
from eigenjury.stats.verdicts import DataError, VerdictTable

if TYPE_CHECKING:  # a fit from a file loads neither the engine nor the run's config
    from eigenjury.peer.config import RankConfig

METHOD = "low-rank Bradley-Terry-Davidson -> EigenTrust -> Elo"
TRUST_RULE = "win share: T_ij = exp(s_ij) / sum_j' exp(s_ij'), ties left out"
# with self-preference fitted (stats.eigentrust.own_scores): delta_i^+ is the bound of
# stats.btd.self_bias_upper; 0.3.0 had the fitted s_ii, 0.3.1 to 0.3.3 min(delta_i, 0)
SELF_TRUST_RULE = (
    "; T_ii from s_ii + min(delta_i^+, 0), delta_i^+ the 1-sd upper bound of its self-preference"
)
PAIRWISE_INTERVALS = "max-t"  # stats.elo.elo_difference_intervals
NORMALISATION = (
    "(a - b) / (|a| + |b|) for the first reply's a and the second's b, divided by its "
    "standard deviation over the verdicts"
)


def peer_ranking(
    settings: FitSettings,
    table: VerdictTable,
    *,
    external_judges: bool = True,
    map_rounds: RoundMap | None = None,
    style_fixed: Mapping[str, float | Mapping[str, float]] | None = None,
) -> PeerRanking:
    """The one place the estimator is built: the fit `settings` describe, for `table`
    (whose features the default style control holds equal). `external_judges=False`:
    every judge is an evaluee, one never judged is missing data; `style_fixed`: style
    coefficients held at these values, as PeerRanking takes them."""
    tuning: dict[str, Any] = {
        k: getattr(settings, k) for k in ("l2", "restarts") if getattr(settings, k) is not None
    }
    if settings.prior is not None:  # unset: the estimator's default
        tuning["prior"] = None if settings.prior == "none" else ScorePrior(*settings.prior)
    return PeerRanking(
        settings.dim,
        **tuning,
        position_bias=settings.position_bias,
        self_preference=settings.self_preference,
        style=settings.style_for(table),
        style_per_judge=settings.style_per_judge,
        style_fixed=style_fixed,
        exclude_self=settings.exclude_self,
        exclude_judges=tuple(settings.exclude_judges or ()),
        damping=settings.damping,
        external_weights=settings.external_weight,
        external_judges=external_judges,
        anchor=settings.anchor,
        anchor_value=settings.anchor_value,
        bootstrap=settings.bootstrap,
        ci=settings.ci,
        interval=settings.interval,
        seed=settings.seed,
        n_jobs=settings.jobs,
        map_rounds=map_rounds,
        cv=settings.cv,
    )


# What a fit that only needs the point estimate leaves out
POINT_ESTIMATE: dict[str, Any] = {"bootstrap": 0, "cv": 0}


def fit_config(
    config: RankConfig,
    table: VerdictTable,
    *,
    map_rounds: RoundMap | None = None,
    style_fixed: Mapping[str, float | Mapping[str, float]] | None = None,
    **changes: Any,
) -> PeerRanking:
    """The ranking a rank config's `fit` section asks for, with the FitSettings in
    `changes` replaced (POINT_ESTIMATE: no intervals). Every member is an evaluee: one
    never judged is missing data; the config's `judges` are the only external judges."""
    settings = FitSettings.model_validate({**config.fit.model_dump(), **changes})
    return peer_ranking(
        settings,
        table,
        external_judges=bool(config.judges),
        map_rounds=map_rounds,
        style_fixed=style_fixed,
    ).fit(table)


class TruthError(DataError):
    """The simulation's truth does not describe the fitted verdicts."""


def fit_verdicts(
    table: VerdictTable,
    settings: FitSettings,
    *,
    source: str,
    map_rounds: RoundMap | None = None,
    truth: Population | None = None,
) -> RankingRecord:
    """The ranking record of a verdict file's fit (`eigenjury fit`), with how well it
    recovers `truth` (the simulated population) when given. Raises SettingError for a
    setting the verdicts refuse, TruthError for a truth of other evaluees."""
    ranking = peer_ranking(settings, table, map_rounds=map_rounds).fit(table)
    record = ranking_record(ranking, source=source, style_named=settings.style_named)
    if truth is not None:
        record.truth_recovery = truth_recovery(ranking, truth)
    return record


def truth_recovery(ranking: PeerRanking, truth: Population) -> TruthRecovery:
    """How close the fit comes to the population that made its verdicts (intervals'
    coverage with a bootstrap), trust computed under the fit's own damping and weights."""
    if set(truth.evaluees) != set(ranking.models_):
        raise TruthError(
            "the verdicts and the truth disagree on which judges are external (never "
            "judged); recovery needs the same evaluees in both"
        )
    order = [truth.evaluees.index(m) for m in ranking.models_]
    true_trust = truth.trust(damping=ranking.damping_, external_weights=ranking.external_weights_)[
        order
    ]
    true_elo = to_elo(true_trust, anchor=ranking.anchor_index_, value=ranking.anchor_value)
    return TruthRecovery.model_validate(
        recovery(
            true_trust,
            ranking.trust_,
            true_elo,
            ranking.elo_,
            ranking.elo_ci_ if ranking.bootstrap else None,
        )
    )


def _interval(ci: np.ndarray | None, i: int, digits: int) -> list[float] | None:
    return None if ci is None else [round(float(ci[i, 0]), digits), round(float(ci[i, 1]), digits)]


def _open_interval(ci: np.ndarray | None, i: int, digits: int) -> list[float | None] | None:
    """An interval whose infinite ends (no limit, stats.separation) are None."""
    if ci is None:
        return None
    return [round(float(x), digits) if np.isfinite(x) else None for x in ci[i]]


def _unbounded(ranking: PeerRanking, k: int) -> str | None:
    above = bool(ranking.separation_.unbounded_above[k])
    below = bool(ranking.separation_.unbounded_below[k])
    return "both" if above and below else "above" if above else "below" if below else None


def _groups(separations: list[Separation]) -> list[SeparationGroup]:
    return [
        SeparationGroup(
            judge=s.judge,
            above=list(s.above),
            below=list(s.below),
            verdicts=round(s.verdicts, 3),
            scenarios=s.scenarios,
        )
        for s in separations
    ]


def _signal(signal: JudgeSignal) -> SignalPart:
    return SignalPart(
        verdict=signal.verdict,
        reason=signal.reason,
        why=signal.why,
        order_kappa=EstimatePart.model_validate(signal.order_kappa.record()),
        kappa=EstimatePart.model_validate(signal.kappa.record()),
        pairs=round(signal.pairs, 3),
        shared=signal.shared,
    )


def baseline_part(table: VerdictTable, baseline: str, ranking: PeerRanking) -> BaselinePart:
    """Every model's win rate against `baseline`, highest first: as counted in `table`,
    with its interval from the ranking's bootstrap rounds of question resamples, and as
    the fitted Elo predicts it (style held equal where the fit holds it), with the
    interval of the Elo's bootstrap draws."""
    from eigenjury.stats.bootstrap import percentile_interval
    from eigenjury.stats.elo import decisive_share
    from eigenjury.stats.win_rate import baseline_win_rates

    rounds = ranking.bootstrap
    seed = 0 if ranking.seed is None else ranking.seed
    rates = baseline_win_rates(table, baseline, rounds=rounds, ci=ranking.ci, seed=seed)
    counted = np.stack([rates.low, rates.high], axis=1)
    index = {m: i for i, m in enumerate(ranking.models_)}
    b = index[baseline]
    predicted = decisive_share(ranking.elo_, ranking.elo_[b])
    draws = ranking.bootstrap_["elo"] if rounds else None
    fitted = None
    if draws is not None:
        fitted = np.stack(percentile_interval(decisive_share(draws, draws[:, [b]]), ranking.ci), 1)
    rows = [
        BaselineRow(
            model=model,
            win_rate=round(float(rates.rate[i]), 6),
            win_rate_ci=_open_interval(counted, i, 6) or [None, None],
            verdicts=float(rates.verdicts[i]),
            wins=float(rates.wins[i]),
            ties=float(rates.ties[i]),
            losses=float(rates.losses[i]),
            elo_win_rate=round(float(predicted[index[model]]), 6),
            elo_win_rate_ci=_open_interval(fitted, index[model], 6) or [None, None],
        )
        for i, model in enumerate(rates.models)
    ]
    rows.sort(key=lambda row: -row.win_rate)
    styled = bool(ranking.style_features_)
    return BaselinePart(baseline=baseline, rounds=rounds, models=rows, styled=styled)


def ranking_record(
    ranking: PeerRanking, *, source: str | None = None, style_named: bool = False
) -> RankingRecord:
    """Everything a fitted PeerRanking reports: the evaluees sorted by rank, every judge
    that gave verdicts (external ones marked), dispositions of the evaluees only, and
    style control's coefficients. `style_named`: the user named the style features, so
    one left out as constant is worth a warning."""
    btd = ranking.btd_
    boot = ranking.bootstrap > 0
    elo_ci = ranking.elo_ci_ if boot else None
    trust_ci = ranking.trust_ci_ if boot else None
    rank_ci = ranking.rank_ci_ if boot else None
    # i above j: the simultaneous interval on Elo_i - Elo_j lies wholly above a tie
    above = ranking.elo_difference_ci_[:, :, 0] > ELO_TOLERANCE if boot else None
    order = np.argsort(-ranking.elo_, kind="stable")  # tied ranks keep the input order
    names = ranking.judges_
    evaluees = np.flatnonzero(~ranking.external_)  # models_[k] is names[evaluees[k]]
    evaluee_n = ranking.counts_.evaluee_totals()
    judge_n = ranking.counts_.judge_totals()
    styled = bool(ranking.style_features_)
    models = [
        ModelRow(
            name=ranking.models_[k],
            elo=round(float(ranking.elo_[k]), 2),
            elo_ci=_open_interval(elo_ci, k, 2),
            trust=round(float(ranking.trust_[k]), 6),
            trust_ci=_interval(trust_ci, k, 6),
            rank=int(ranking.rank_[k]),
            rank_ci=None if rank_ci is None else [int(rank_ci[k, 0]), int(rank_ci[k, 1])],
            verdicts_as_evaluee=round(float(evaluee_n[evaluees[k]]), 3),
            elo_uncontrolled=round(float(ranking.elo_uncontrolled_[k]), 2) if styled else None,
            rank_change=int(ranking.rank_change_[k]) if styled else None,
            above=None if above is None else [ranking.models_[j] for j in order if above[k, j]],
            unbounded=_unbounded(ranking, k),
        )
        for k in order
    ]
    own = ranking.counts_.self_side != 0
    self_n = np.bincount(
        ranking.counts_.judge[own], ranking.counts_.n[own].sum(axis=1), len(ranking.judges_)
    )
    measured = ranking.self_preference
    signals = {s.judge: _signal(s) for s in ranking.judge_signals_}
    judges = [
        JudgeRow(
            name=names[i],
            tie_propensity=round(float(btd.tie_propensity_[i]), 4),
            tie_propensity_ci=_interval(ranking.tie_propensity_ci_ if boot else None, i, 4),
            position_bias=round(float(btd.position_bias_[i]), 4) if btd.position_bias else None,
            position_bias_ci=_interval(ranking.position_bias_ci_, i, 4)
            if boot and btd.position_bias
            else None,
            lens=[round(float(x), 5) for x in btd.lenses_[i]],
            verdicts=round(float(judge_n[i]), 3),
            external=bool(ranking.external_[i]),
            self_preference=round(float(btd.self_bias_[i]), 4) if measured else None,
            self_preference_ci=_interval(ranking.self_bias_ci_ if boot else None, i, 4)
            if measured
            else None,
            self_verdicts=round(float(self_n[i]), 3) if measured and self_n[i] > 0 else None,
            signal=signals.get(names[i]),
        )
        for i in range(len(names))
        if btd.judge_mask_[i]
    ]
    heldout = None
    if ranking.cv:
        score = ranking.heldout_
        heldout = HeldOut(
            mean=round(score.mean, 6),
            stderr=round(score.stderr, 6),
            folds=ranking.cv,
            fold_unit="scenario",
        )
    warnings = list(ranking.warnings_)
    if style_named and ranking.style_dropped_:
        warnings.append(
            "left out of style control, as no fit could tell their effect apart: "
            + "; ".join(f"{name} ({why})" for name, why in ranking.style_dropped_.items())
        )
    return RankingRecord(
        eigenjury=__version__,
        created=now(),
        method=METHOD,
        source=source,
        settings=Settings(
            dim=ranking.dim,
            l2=ranking.l2,
            position_bias=ranking.position_bias,
            restarts=ranking.restarts,
            exclude_self=ranking.exclude_self,
            exclude_judges=list(ranking.exclude_judges) or None,
            damping=ranking.damping_,
            external_weights=ranking.external_weights_,
            style=list(ranking.style) if ranking.style else None,
            style_per_judge=ranking.style_per_judge if ranking.style else None,
            anchor=ranking.anchor,
            anchor_value=ranking.anchor_value,
            bootstrap=ranking.bootstrap,
            bootstrap_unit="scenario",
            ci=ranking.ci,
            seed=ranking.seed,
            pairwise_intervals=PAIRWISE_INTERVALS if boot else None,
            interval=ranking.interval_method_ if boot else None,
            prior=None if ranking.prior is None else PriorSettings(**asdict(ranking.prior)),
            self_preference=ranking.self_preference,
            trust=TRUST_RULE + (SELF_TRUST_RULE if ranking.self_preference else ""),
        ),
        models=models,
        judges=judges,
        dispositions={
            name: [round(float(x), 5) for x in btd.dispositions_[i]]
            for name, i in zip(ranking.models_, evaluees, strict=True)
        },
        trust_matrix=TrustMatrix(
            judges=list(names),
            evaluees=list(ranking.models_),
            rows=np.round(ranking.trust_matrix_, 6).tolist(),
        ),
        fit=FitSummary(
            loglik=round(float(btd.loglik_), 4),
            loglik_per_verdict=round(float(btd.loglik_ / btd.n_verdicts_), 6),
            objective=float(btd.objective_),
            iterations=int(btd.n_iter_),
            converged=bool(btd.converged_),
            grad_norm=float(btd.grad_norm_),
            restart_losses=[float(x) for x in btd.restart_losses_],
            starts_at_best_optimum=btd.n_agreeing_starts_,
            dim=ranking.dim,
            verdicts=round(float(btd.n_verdicts_), 3),
            cells=int(btd.n_cells_),
            scenarios=int(ranking.n_scenarios_),
            bootstrap_converged=ranking.bootstrap_converged_ if boot else None,
            fit_seconds=round(ranking.fit_seconds_, 3),
            bootstrap_seconds=round(ranking.bootstrap_seconds_, 3),
            heldout_loglik_per_verdict=heldout,
            bootstrap_vanished=(ranking.bootstrap_vanished_ or None) if boot else None,
            bootstrap_degenerate=(ranking.bootstrap_degenerate_ or None) if boot else None,
        ),
        warnings=warnings,
        style=_style_part(ranking) if ranking.style else None,
        separation=SeparationPart(
            pooled=_groups(list(ranking.separation_.groups)),
            judges=_groups(ranking.judge_separations_),
        )
        if ranking.separation_.groups or ranking.judge_separations_
        else None,
        favours=[
            FavourPart(
                judge=f.judge,
                evaluee=f.evaluee,
                verdicts=f.verdicts,
                won=f.won,
                expected=round(f.expected, 3),
                shift=round(f.shift, 3) if np.isfinite(f.shift) else None,
                shift_low=round(f.shift_low, 3),
            )
            for f in ranking.favours_
        ]
        or None,
    )


def _style_part(ranking: PeerRanking) -> StylePart:
    """The style coefficients (per judge that gave verdicts, with style_per_judge)."""
    features = ranking.style_features_
    ci = ranking.style_ci_ if ranking.bootstrap > 0 and features else None
    coefficients = []
    if ranking.style_per_judge:
        for i, judge in enumerate(ranking.judges_):
            if ranking.btd_.judge_mask_[i]:
                coefficients += [
                    StyleCoefficient(
                        feature=name,
                        judge=judge,
                        coefficient=round(float(ranking.style_coef_[i, f]), 5),
                        ci=None if ci is None else _interval(ci[i], f, 5),
                    )
                    for f, name in enumerate(features)
                ]
    else:
        coefficients = [
            StyleCoefficient(
                feature=name,
                coefficient=round(float(ranking.style_coef_[f]), 5),
                ci=_interval(ci, f, 5),
            )
            for f, name in enumerate(features)
        ]
    return StylePart(
        features=list(features),
        dropped=dict(ranking.style_dropped_),
        normalisation=NORMALISATION,
        scale={n: round(float(x), 6) for n, x in zip(features, ranking.style_scale_, strict=True)},
        per_judge=ranking.style_per_judge,
        coefficients=coefficients,
    )


def greenbeard_shift(
    config: RankConfig, with_clique: VerdictTable, control: VerdictTable, ranking: PeerRanking
) -> GreenbeardShift:
    """Elo of each member with the clique's instructions minus without, with and
    without self-judgments. `ranking` is the run's fit of `with_clique` (its point
    estimate is reused)."""
    assert config.greenbeard is not None
    members = config.greenbeard.members

    def shift(exclude: bool) -> Shift:
        # only point estimates enter the shift: no bootstrap for these fits
        reuse = exclude == config.fit.exclude_self
        a = (
            ranking
            if reuse
            else fit_config(config, with_clique, exclude_self=exclude, **POINT_ESTIMATE)
        )
        b = fit_config(config, control, exclude_self=exclude, **POINT_ESTIMATE)
        elo_shift = {
            name: round(float(a.elo_[a.models_.index(name)] - b.elo_[b.models_.index(name)]), 2)
            for name in a.models_
            if name in b.models_
        }
        clique = [elo_shift[n] for n in members if n in elo_shift]
        others = [v for n, v in elo_shift.items() if n not in members]
        return Shift(
            elo_shift=elo_shift,
            mean_shift_greenbeards=round(sum(clique) / len(clique), 2) if clique else None,
            mean_shift_others=round(sum(others) / len(others), 2) if others else None,
        )

    return GreenbeardShift(
        members=members,
        marker=config.greenbeard.marker,
        with_self_judgments=shift(exclude=False),
        without_self_judgments=shift(exclude=True),
    )
