"""What can go wrong in a model call, as classes the engine can act on.

Each class says whether trying again can help. Messages never contain credentials:
providers build them from status codes and response bodies only.
"""

from __future__ import annotations

from typing import ClassVar

from eigenjury.errors import EigenjuryError


class ProviderError(EigenjuryError):
    """A failed model call. `kind` is stored with the error; `retryable` steers retries."""

    kind: ClassVar[str] = "error"
    retryable: ClassVar[bool] = False

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.retry_after = retry_after


class AuthError(ProviderError):
    kind = "auth"


class BadRequestError(ProviderError):
    kind = "bad_request"


class ContextLengthError(BadRequestError):
    kind = "context_length"


class RateLimitError(ProviderError):
    kind = "rate_limit"
    retryable = True


class ServerError(ProviderError):
    kind = "server"
    retryable = True


class CallTimeoutError(ProviderError):
    kind = "timeout"
    retryable = True


class ConnectionFailedError(ProviderError):
    kind = "connection"
    retryable = True


class MalformedResponseError(ProviderError):
    """The server answered 200 with something that is not a usable completion."""

    kind = "malformed"
    retryable = True


class BatchExpiredError(ProviderError):
    """A call of a provider batch that ended (its 24 hours ran out, or it was cancelled)
    before the call was answered; a rerun sends it again."""

    kind = "expired"


class BudgetExhaustedError(ProviderError):
    """Not a provider failure: the run's budget cap stopped this call from being made."""

    kind = "budget"


ERROR_KINDS: dict[str, type[ProviderError]] = {
    cls.kind: cls
    for cls in (
        ProviderError,
        AuthError,
        BadRequestError,
        ContextLengthError,
        RateLimitError,
        ServerError,
        CallTimeoutError,
        ConnectionFailedError,
        MalformedResponseError,
        BatchExpiredError,
        BudgetExhaustedError,
    )
}


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """The text with every secret replaced (the longest first, so that none is left half
    showing): a last guard before anything is stored or shown."""
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "[redacted]")
    return text
