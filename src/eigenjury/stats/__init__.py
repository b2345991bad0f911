"""Statistics for LLM judging: pure numpy/scipy, no I/O and no model calls."""

from eigenjury.stats.baselines import BradleyTerry, Davidson, pair_counts
from eigenjury.stats.bootstrap import cluster_bootstrap, percentile_interval
from eigenjury.stats.btd import (
    BTDParams,
    LowRankBTD,
    btd_objective,
    canonical_gauge,
    davidson_nll,
)
from eigenjury.stats.consensus import PeerRanking
from eigenjury.stats.eigentrust import eigentrust, trust_matrix
from eigenjury.stats.elo import rank_intervals, ranks, to_elo
from eigenjury.stats.simulate import Population, make_population, recovery, simulate_verdicts
from eigenjury.stats.validation import HeldOutScore, heldout_loglik, scenario_folds
from eigenjury.stats.verdicts import (
    DataError,
    ScenarioCounts,
    VerdictCounts,
    VerdictTable,
    check_design,
)

__all__ = [
    "BTDParams",
    "BradleyTerry",
    "DataError",
    "Davidson",
    "HeldOutScore",
    "LowRankBTD",
    "PeerRanking",
    "Population",
    "ScenarioCounts",
    "VerdictCounts",
    "VerdictTable",
    "btd_objective",
    "canonical_gauge",
    "check_design",
    "cluster_bootstrap",
    "davidson_nll",
    "eigentrust",
    "heldout_loglik",
    "make_population",
    "pair_counts",
    "percentile_interval",
    "rank_intervals",
    "ranks",
    "recovery",
    "scenario_folds",
    "simulate_verdicts",
    "to_elo",
    "trust_matrix",
]
