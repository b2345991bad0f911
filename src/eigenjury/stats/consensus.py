"""Peer ranking: verdicts -> low-rank BTD -> trust matrix -> EigenTrust -> Elo, with intervals."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from eigenjury.stats.bootstrap import (
    RoundMap,
    cluster_bootstrap,
    percentile_interval,
    rounds_problem,
)
from eigenjury.stats.btd import DEFAULT_L2, DEFAULT_RESTARTS, BTDParams, LowRankBTD
from eigenjury.stats.eigentrust import eigentrust, trust_matrix
from eigenjury.stats.elo import rank_intervals, ranks, to_elo
from eigenjury.stats.validation import heldout_loglik
from eigenjury.stats.verdicts import (
    DataError,
    FloatArray,
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
    position_bias: bool
    restarts: int
    seed: int | None
    exclude_self: bool
    damping: float
    pretrust: FloatArray | None
    anchor: str | int
    anchor_value: float
    init: BTDParams | None = None

    def model(self) -> LowRankBTD:
        return LowRankBTD(
            self.dim,
            l2=self.l2,
            position_bias=self.position_bias,
            restarts=self.restarts,
            seed=self.seed,
        )

    def fit(self, counts: VerdictCounts) -> LowRankBTD:
        return self.model().fit(counts, init=self.init)

    def summarise(self, model: LowRankBTD) -> dict[str, FloatArray]:
        matrix = trust_matrix(
            model.scores(),
            model.tie_propensity_,
            judge_mask=model.judge_mask_,
            exclude_self=self.exclude_self,
        )
        trust = eigentrust(matrix, damping=self.damping, pretrust=self.pretrust)
        return {
            "trust": trust,
            "elo": to_elo(trust, anchor=self.anchor, value=self.anchor_value),
            "tie_propensity": model.tie_propensity_,
            "position_bias": model.position_bias_,
            "converged": np.array(model.converged_),
            "matrix": matrix,
        }

    def __call__(self, counts: VerdictCounts) -> dict[str, FloatArray]:
        out = self.summarise(self.fit(counts))
        del out["matrix"]
        return out


class PeerRanking:
    """The EigenBench consensus ranking of a population that judges itself.

    Parameters
    ----------
    dim, l2, position_bias, restarts : passed to :class:`LowRankBTD`.
    exclude_self : drop verdicts in which the judge is one of the two evaluees and
        zero the diagonal of the trust matrix, so self-preference cannot reach scores.
    damping, pretrust : EigenTrust damping toward a pre-trust vector (default uniform).
    anchor : "uniform" (uniform trust = anchor_value, the EigenBench convention),
        "mean" (ratings average anchor_value) or a model name fixed at anchor_value.
    bootstrap : cluster-bootstrap rounds over scenarios (0: point estimates only; else at
        least :func:`~eigenjury.stats.bootstrap.min_rounds` of `ci`, 40 for 95%).
    ci : interval coverage. seed : seeds the restarts and the bootstrap.
    n_jobs : processes for the bootstrap (None: every available core).
    map_rounds : run the bootstrap rounds elsewhere instead (e.g. Ray tasks).
    cv : folds of whole scenarios for a held-out log-likelihood (0: none, else at least
        2); compare it across `dim` to choose the latent dimension.
    min_verdicts : below this many verdicts a model is reported as thinly covered.

    Fitted attributes: ``models_``, ``btd_``, ``trust_matrix_``, ``trust_``, ``elo_``,
    ``rank_``, and with bootstrap ``trust_ci_``, ``elo_ci_``, ``rank_ci_``,
    ``tie_propensity_ci_``, ``position_bias_ci_``, ``bootstrap_`` (the raw draws),
    ``bootstrap_converged_`` (share of rounds whose refit converged); ``counts_``,
    ``n_scenarios_``, ``anchor_index_``, ``fit_seconds_``, ``bootstrap_seconds_``, ``warnings_``;
    with cv, ``heldout_`` (a :class:`HeldOutScore`).
    """

    def __init__(
        self,
        dim: int = 2,
        *,
        l2: float = DEFAULT_L2,
        position_bias: bool = True,
        restarts: int = DEFAULT_RESTARTS,
        exclude_self: bool = False,
        damping: float = 0.0,
        pretrust: FloatArray | None = None,
        anchor: str = "uniform",
        anchor_value: float = 1500.0,
        bootstrap: int = 200,
        ci: float = 0.95,
        seed: int | None = 0,
        n_jobs: int | None = None,
        map_rounds: RoundMap | None = None,
        cv: int = 0,
        min_verdicts: float = 30.0,
    ) -> None:
        self.dim = dim
        self.l2 = l2
        self.position_bias = position_bias
        self.restarts = restarts
        self.exclude_self = exclude_self
        self.damping = damping
        self.pretrust = pretrust
        self.anchor = anchor
        self.anchor_value = anchor_value
        self.bootstrap = bootstrap
        self.ci = ci
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
        if self.exclude_self:
            table = table.without_self_judgments()
        start = time.perf_counter()
        data = ScenarioCounts.from_table(table)
        counts = data.counts()
        design = check_design(counts, min_verdicts=self.min_verdicts)
        if design.errors:
            raise DataError("; ".join(design.errors))
        self.warnings_ = list(design.warnings)
        self.models_ = table.models
        self.counts_ = counts
        self.anchor_index_ = self._anchor_index()
        statistic = _ConsensusStatistic(
            self.dim,
            self.l2,
            self.position_bias,
            self.restarts,
            self.seed,
            self.exclude_self,
            self.damping,
            self.pretrust,
            self.anchor_index_,
            self.anchor_value,
        )
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
        point = statistic.summarise(self.btd_)
        self.trust_matrix_ = point["matrix"]
        self.trust_ = point["trust"]
        self.elo_ = point["elo"]
        self.rank_ = ranks(self.elo_)
        self.n_scenarios_ = data.n_scenarios
        self.fit_seconds_ = time.perf_counter() - start
        self.bootstrap_seconds_ = 0.0
        if self.bootstrap > 0:
            start = time.perf_counter()
            self._bootstrap(data, replace(statistic, init=self.btd_.params_))
            self.bootstrap_seconds_ = time.perf_counter() - start
        if self.cv:
            if self.cv > data.n_scenarios:
                raise DataError(f"cv={self.cv} folds need at least {self.cv} scenarios")
            self.heldout_ = heldout_loglik(data, statistic.model, n_splits=self.cv, seed=self.seed)
        return self

    def _bootstrap(self, data: ScenarioCounts, statistic: _ConsensusStatistic) -> None:
        draws = cluster_bootstrap(
            data,
            statistic,
            rounds=self.bootstrap,
            seed=self.seed,
            n_jobs=self.n_jobs,
            map_rounds=self.map_rounds,
        )
        self.bootstrap_ = draws

        def interval(key: str) -> FloatArray:
            return np.stack(percentile_interval(draws[key], self.ci), axis=1)

        self.trust_ci_ = interval("trust")
        self.elo_ci_ = interval("elo")
        self.rank_ci_ = rank_intervals(self.elo_ci_[:, 0], self.elo_ci_[:, 1])
        self.tie_propensity_ci_ = interval("tie_propensity")
        self.position_bias_ci_ = interval("position_bias")
        self.bootstrap_converged_ = float(np.mean(draws["converged"]))
        if self.bootstrap_converged_ < 0.95:
            self.warnings_.append(
                f"only {self.bootstrap_converged_:.0%} of bootstrap refits converged"
            )

    def _anchor_index(self) -> str | int:
        if self.anchor in ("uniform", "mean"):
            return self.anchor
        if self.anchor not in self.models_:
            raise DataError(
                f"anchor model '{self.anchor}' is not in the verdicts; "
                "use 'uniform', 'mean' or one of the model names"
            )
        return self.models_.index(self.anchor)
