"""The run engine: store, limits, retries, budget, progress and accounting."""

from eigenjury.engine.engine import Budget, Call, CallResult, Engine, endpoint_of
from eigenjury.engine.limits import EndpointLimits, RetryPolicy
from eigenjury.engine.store import Store, StoredResult, request_key

__all__ = [
    "Budget",
    "Call",
    "CallResult",
    "EndpointLimits",
    "Engine",
    "RetryPolicy",
    "Store",
    "StoredResult",
    "endpoint_of",
    "request_key",
]
