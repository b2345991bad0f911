"""eigenjury: LLM judging you can trust, by consensus, by contract and by bound."""

from eigenjury.stats import (
    BradleyTerry,
    DataError,
    Davidson,
    LowRankBTD,
    PeerRanking,
    VerdictCounts,
    VerdictTable,
    eigentrust,
    to_elo,
)

__version__ = "0.1.0"

__all__ = [
    "BradleyTerry",
    "DataError",
    "Davidson",
    "LowRankBTD",
    "PeerRanking",
    "VerdictCounts",
    "VerdictTable",
    "__version__",
    "eigentrust",
    "to_elo",
]
