"""The run engine: store, limits, retries, budget, progress and accounting."""

from eigenjury.engine.caller import Caller, WorkItem
from eigenjury.engine.engine import Backend, Budget, Call, CallResult, Engine, endpoint_of
from eigenjury.engine.limits import EndpointLimits, RetryPolicy
from eigenjury.engine.store import Store, StoredResult, request_key

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
