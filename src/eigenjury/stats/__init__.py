"""Statistics for LLM judging: pure numpy/scipy, no I/O and no model calls."""

from eigenjury.stats.abb import (
    Certificate,
    DeltaSplit,
    Sensitivity,
    Utility,
    certify,
    debias,
    estimate_sensitivity,
    laurent_massart_radius,
    mean_upper_bound,
    utility_retained,
)
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
    "Certificate",
    "DataError",
    "Davidson",
    "DeltaSplit",
    "HeldOutScore",
    "LowRankBTD",
    "PeerRanking",
    "Population",
    "ScenarioCounts",
    "Sensitivity",
    "Utility",
    "VerdictCounts",
    "VerdictTable",
    "btd_objective",
    "canonical_gauge",
    "certify",
    "check_design",
    "cluster_bootstrap",
    "davidson_nll",
    "debias",
    "eigentrust",
    "estimate_sensitivity",
    "heldout_loglik",
    "laurent_massart_radius",
    "make_population",
    "mean_upper_bound",
    "pair_counts",
    "percentile_interval",
    "rank_intervals",
    "ranks",
    "recovery",
    "scenario_folds",
    "simulate_verdicts",
    "to_elo",
    "trust_matrix",
    "utility_retained",
]
