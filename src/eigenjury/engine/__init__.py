"""The run engine: store, limits, retries, budget, progress and accounting.

The names below load on first use, so that reading the engine's settings (which every
command does to declare its options) does not load the engine itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eigenjury.lazy import exports

_EXPORTS = {
    "Caller": "eigenjury.engine.caller",
    "WorkItem": "eigenjury.engine.caller",
    "Backend": "eigenjury.engine.engine",
    "Budget": "eigenjury.engine.engine",
    "Call": "eigenjury.engine.engine",
    "CallResult": "eigenjury.engine.engine",
    "Engine": "eigenjury.engine.engine",
    "endpoint_of": "eigenjury.engine.engine",
    "EndpointLimits": "eigenjury.engine.limits",
    "RetryPolicy": "eigenjury.engine.limits",
    "Store": "eigenjury.engine.store",
    "StoredResult": "eigenjury.engine.store",
    "request_key": "eigenjury.engine.store",
}
__all__ = [
    "Backend",
    "Budget",
    "Call",
    "CallResult",
    "Caller",
    "EndpointLimits",
    "Engine",
    "RetryPolicy",
    "Store",
    "StoredResult",
    "WorkItem",
    "endpoint_of",
    "request_key",
]

if TYPE_CHECKING:
    from eigenjury.engine.caller import Caller, WorkItem
    from eigenjury.engine.engine import Backend, Budget, Call, CallResult, Engine, endpoint_of
    from eigenjury.engine.limits import EndpointLimits, RetryPolicy
    from eigenjury.engine.store import Store, StoredResult, request_key

__getattr__ = exports(__name__, _EXPORTS)
