"""Statistics for LLM judging: pure numpy/scipy, no I/O and no model calls.

The names below load on first use (but eigentrust's), so that a command needing one
estimator (a fit from a file) does not load every other one (the bias bounds, the
simulations).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury.lazy import exports

# eager: the function shares its module's name, which the import system would set on
# this package in its place once the module loads
from eigenjury.stats.eigentrust import eigentrust, trust_matrix

_EXPORTS = {
    "Certificate": "eigenjury.stats.abb",
    "DeltaSplit": "eigenjury.stats.abb",
    "Sensitivity": "eigenjury.stats.abb",
    "Utility": "eigenjury.stats.abb",
    "Stratum": "eigenjury.stats.abb",
    "certify": "eigenjury.stats.abb",
    "debias": "eigenjury.stats.abb",  # the old name of shrink_and_noise (it warns)
    "estimate_sensitivity": "eigenjury.stats.abb",
    "laurent_massart_radius": "eigenjury.stats.abb",
    "mean_upper_bound": "eigenjury.stats.abb",
    "shrink_and_noise": "eigenjury.stats.abb",
    "utility_retained": "eigenjury.stats.abb",
    "BradleyTerry": "eigenjury.stats.baselines",
    "Davidson": "eigenjury.stats.baselines",
    "pair_counts": "eigenjury.stats.baselines",
    "cluster_bootstrap": "eigenjury.stats.bootstrap",
    "percentile_interval": "eigenjury.stats.bootstrap",
    "BTDParams": "eigenjury.stats.btd",
    "LowRankBTD": "eigenjury.stats.btd",
    "ScorePrior": "eigenjury.stats.btd",
    "btd_objective": "eigenjury.stats.btd",
    "canonical_gauge": "eigenjury.stats.btd",
    "davidson_nll": "eigenjury.stats.btd",
    "PeerRanking": "eigenjury.stats.consensus",
    "elo_difference_intervals": "eigenjury.stats.elo",
    "rank_intervals": "eigenjury.stats.elo",
    "ranks": "eigenjury.stats.elo",
    "to_elo": "eigenjury.stats.elo",
    "Population": "eigenjury.stats.simulate",
    "make_population": "eigenjury.stats.simulate",
    "recovery": "eigenjury.stats.simulate",
    "simulate_verdicts": "eigenjury.stats.simulate",
    "HeldOutScore": "eigenjury.stats.validation",
    "heldout_loglik": "eigenjury.stats.validation",
    "scenario_folds": "eigenjury.stats.validation",
    "DataError": "eigenjury.stats.verdicts",
    "ScenarioCounts": "eigenjury.stats.verdicts",
    "VerdictCounts": "eigenjury.stats.verdicts",
    "VerdictTable": "eigenjury.stats.verdicts",
    "check_design": "eigenjury.stats.verdicts",
}
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
    "ScorePrior",
    "Sensitivity",
    "Stratum",
    "Utility",
    "VerdictCounts",
    "VerdictTable",
    "btd_objective",
    "canonical_gauge",
    "certify",
    "check_design",
    "cluster_bootstrap",
    "davidson_nll",
    "eigentrust",
    "elo_difference_intervals",
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
    "shrink_and_noise",
    "simulate_verdicts",
    "to_elo",
    "trust_matrix",
    "utility_retained",
]

if TYPE_CHECKING:
    from eigenjury.stats.abb import (
        Certificate,
        DeltaSplit,
        Sensitivity,
        Stratum,
        Utility,
        certify,
        estimate_sensitivity,
        laurent_massart_radius,
        mean_upper_bound,
        shrink_and_noise,
        utility_retained,
    )
    from eigenjury.stats.baselines import BradleyTerry, Davidson, pair_counts
    from eigenjury.stats.bootstrap import cluster_bootstrap, percentile_interval
    from eigenjury.stats.btd import (
        BTDParams,
        LowRankBTD,
        ScorePrior,
        btd_objective,
        canonical_gauge,
        davidson_nll,
    )
    from eigenjury.stats.consensus import PeerRanking
    from eigenjury.stats.elo import elo_difference_intervals, rank_intervals, ranks, to_elo
    from eigenjury.stats.simulate import Population, make_population, recovery, simulate_verdicts
    from eigenjury.stats.validation import HeldOutScore, heldout_loglik, scenario_folds
    from eigenjury.stats.verdicts import (
        DataError,
        ScenarioCounts,
        VerdictCounts,
        VerdictTable,
        check_design,
    )

__getattr__ = exports(__name__, _EXPORTS)
