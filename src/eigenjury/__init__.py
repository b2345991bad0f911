"""eigenjury: LLM judging you can trust, by consensus, by contract and by bound.

The names below load on first use, so that `import eigenjury` (and every command
that needs no statistics) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury._version import __version__
from eigenjury.lazy import exports

_EXPORTS = {
    "BradleyTerry": "eigenjury.stats",
    "DataError": "eigenjury.stats",
    "Davidson": "eigenjury.stats",
    "LowRankBTD": "eigenjury.stats",
    "PeerRanking": "eigenjury.stats",
    "VerdictCounts": "eigenjury.stats",
    "VerdictTable": "eigenjury.stats",
    "eigentrust": "eigenjury.stats",
    "to_elo": "eigenjury.stats",
    "Call": "eigenjury.engine",
    "Engine": "eigenjury.engine",
    "Store": "eigenjury.engine",
    "ChatRequest": "eigenjury.models",
    "ModelSpec": "eigenjury.models",
    "Persona": "eigenjury.models",
    "Contract": "eigenjury.contracts",
    "Jury": "eigenjury.contracts",
    "grade": "eigenjury.contracts",
    "load_contract": "eigenjury.contracts",
    "certify": "eigenjury.stats",
    "shrink_and_noise": "eigenjury.stats",
    "debias": "eigenjury.stats",  # the old name of shrink_and_noise (it warns)
    "measure_sensitivity": "eigenjury.bounds",
    "read_scores": "eigenjury.bounds",
    "release": "eigenjury.bounds",
}

__all__ = [
    "BradleyTerry",
    "Call",
    "ChatRequest",
    "Contract",
    "DataError",
    "Davidson",
    "Engine",
    "Jury",
    "LowRankBTD",
    "ModelSpec",
    "PeerRanking",
    "Persona",
    "Store",
    "VerdictCounts",
    "VerdictTable",
    "__version__",
    "certify",
    "eigentrust",
    "grade",
    "load_contract",
    "measure_sensitivity",
    "read_scores",
    "release",
    "shrink_and_noise",
    "to_elo",
]

if TYPE_CHECKING:
    from eigenjury.bounds import measure_sensitivity, read_scores, release
    from eigenjury.contracts import Contract, Jury, grade, load_contract
    from eigenjury.engine import Call, Engine, Store
    from eigenjury.models import ChatRequest, ModelSpec, Persona
    from eigenjury.stats import (
        BradleyTerry,
        DataError,
        Davidson,
        LowRankBTD,
        PeerRanking,
        VerdictCounts,
        VerdictTable,
        certify,
        eigentrust,
        shrink_and_noise,
        to_elo,
    )


__getattr__ = exports(__name__, _EXPORTS)
