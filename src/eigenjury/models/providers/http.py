"""Shared HTTP machinery for hosted and served models, over aiohttp.

One pooled `ClientSession` per endpoint. Timeouts per attempt are the engine's job;
here every failure becomes a `ProviderError` class that says whether a retry helps,
and no message ever carries the API key or the endpoint's own secrets (user info, query
values): messages name the endpoint by `shown_url` and redact `spec.secrets()`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from eigenjury.models.errors import (
    AuthError,
    BadRequestError,
    ConnectionFailedError,
    ContextLengthError,
    MalformedResponseError,
    ProviderError,
    RateLimitError,
    ServerError,
    redact,
)
from eigenjury.models.spec import ModelSpec, shown_url
from eigenjury.models.types import Usage

_CONTEXT_WORDS = (
    "context length",
    "context_length",
    "maximum context",
    "too long",
    "too many tokens",
)


SessionFactory = Callable[[], aiohttp.ClientSession]
MAX_TOKEN_COUNT = 2**63 - 1  # the most a 64-bit integer (and the store) can hold


def new_session() -> aiohttp.ClientSession:
    """A pooled session; concurrency is the engine's to limit, not the connector's."""
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0),
        timeout=aiohttp.ClientTimeout(total=None),
    )


class HttpProvider:
    """Base for JSON-over-HTTP providers; subclasses build payloads and parse replies.

    `sessions` lets several models at one endpoint share one pooled session (the
    engine passes its per-endpoint pool); without it the provider owns its own.
    `features` is what is known of what this endpoint and model support (as stored by
    an earlier run); the provider adds what it finds out, for the store to keep.
    """

    def __init__(
        self,
        spec: ModelSpec,
        *,
        sessions: SessionFactory | None = None,
        features: Mapping[str, str] | None = None,
    ) -> None:
        self.spec = spec
        self.features: dict[str, str] = dict(features or {})
        # While a feature is untried, one request finds out at a time, so an endpoint
        # that refuses it is asked once, not by every request in flight.
        self._probing = asyncio.Lock()
        self.base_url = spec.base_url or ""
        self.public_base = shown_url(self.base_url)
        self._key = spec.api_key()
        self._secrets = spec.secrets()
        # user info in the URL is the endpoint's credentials (aiohttp sends it as HTTP
        # Basic), in place of an Authorization header
        self.url_credentials = "@" in urlsplit(self.base_url).netloc
        self._shared = sessions
        self._own: aiohttp.ClientSession | None = None
        # the rates the server says it allows (rate_limit_headers), as it last said them
        self.stated_limits: dict[str, float] = {}

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._shared is not None:
            return self._shared()
        if self._own is None or self._own.closed:
            self._own = new_session()
        return self._own

    async def aclose(self) -> None:
        if self._own is not None and not self._own.closed:
            await self._own.close()

    async def check_reachable(self, timeout_s: float = 5.0) -> None:
        """Raise ConnectionFailedError unless a TCP connection to the endpoint opens."""
        parts = urlsplit(self.base_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            async with asyncio.timeout(timeout_s):
                _, writer = await asyncio.open_connection(parts.hostname, port)
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
            raise ConnectionFailedError(
                f"cannot reach {self.public_base} ({reason}); is the server running, and is "
                f"the endpoint in '{self.spec}' right?"
            ) from None
        writer.close()

    def _redact(self, text: str) -> str:
        return redact(text, self._secrets)

    def url(self, path: str) -> str:
        """The endpoint's URL for `path`: the path goes after the base URL's path, before
        its query (`http://host/v1?auth=x` + `/chat/completions`)."""
        parts = urlsplit(self.base_url)
        return urlunsplit(parts._replace(path=parts.path + path))

    def usage(self, data: dict[str, Any], input_name: str, output_name: str) -> Usage:
        """Token counts from a reply: whole numbers from 0 up (absent: 0). Anything else
        would turn into negative costs or numbers the store cannot hold."""
        usage = data.get("usage") or {}
        counts = []
        for name in (input_name, output_name):
            value = (usage.get(name) or 0) if isinstance(usage, dict) else None
            try:
                count = int(value)  # type: ignore[arg-type]
            except (TypeError, ValueError, OverflowError):
                count = -1
            if not 0 <= count <= MAX_TOKEN_COUNT:
                raise MalformedResponseError(
                    f"{self.public_base} answered with an impossible usage.{name} ({value!r})"
                )
            counts.append(count)
        return Usage(*counts)

    async def send(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        *,
        payload: dict[str, Any] | None = None,
        data: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> bytes:
        """The body of the endpoint's 200 answer to `method` on `path` (a JSON `payload`,
        or `data`: bytes or a form; `params` join the URL's own query); any other answer
        is the ProviderError it means."""
        try:
            async with self.session.request(
                method, self.url(path), json=payload, data=data, headers=headers, params=params
            ) as response:
                body = await response.read()
                status, reply_headers = response.status, response.headers
                self.stated_limits.update(stated_limits(reply_headers))
        except aiohttp.ClientPayloadError as exc:
            raise MalformedResponseError(
                f"truncated response from {self.public_base} ({self._redact(str(exc))})"
            ) from None
        except (aiohttp.ClientConnectionError, OSError) as exc:
            raise ConnectionFailedError(
                f"cannot reach {self.public_base} ({type(exc).__name__}: {self._redact(str(exc))})"
            ) from None
        if status != 200:
            raise self.status_error(status, body, reply_headers.get("Retry-After"))
        return body

    async def post_json(
        self, path: str, payload: dict[str, Any], headers: Mapping[str, str]
    ) -> dict[str, Any]:
        return self.json_of(await self.send("POST", path, headers, payload=payload))

    def json_of(self, body: bytes) -> dict[str, Any]:
        """A 200 answer's body as the JSON object it must be."""
        try:
            data = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise MalformedResponseError(
                f"{self.public_base} answered 200 with a body that is not JSON "
                f"({len(body)} bytes: {body[:80]!r})"
            ) from None
        except RecursionError:
            raise MalformedResponseError(
                f"{self.public_base} answered 200 with JSON nested too deeply to read "
                f"({len(body)} bytes)"
            ) from None
        if not isinstance(data, dict):
            raise MalformedResponseError(
                f"{self.public_base} answered 200 with JSON that is not an object"
            )
        return data

    def status_error(self, status: int, body: bytes, retry_after: str | None) -> ProviderError:
        detail = self._redact(_error_detail(body))
        where = f"{self.public_base} answered HTTP {status}"
        message = f"{where}: {detail}" if detail else where
        if status in (401, 403):
            return AuthError(f"{message}; check the key in {self.spec.key_variable}", status=status)
        if status == 429:
            return RateLimitError(
                message, status=status, retry_after=parse_retry_after(retry_after)
            )
        if status in (408, 409) or status >= 500:
            return ServerError(message, status=status, retry_after=parse_retry_after(retry_after))
        if status in (400, 413, 422) and any(w in detail.lower() for w in _CONTEXT_WORDS):
            return ContextLengthError(message, status=status)
        return BadRequestError(message, status=status)


def valid_text(text: str) -> str:
    """Reply text as valid Unicode: a lone surrogate (a bare \\ud800 escape in the JSON)
    becomes U+FFFD, so the reply can be stored rather than lost."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


def _error_detail(body: bytes, limit: int = 300) -> str:
    """The server's own error message if it sent one, shortened."""
    try:
        data = json.loads(body)
        error = data.get("error", data) if isinstance(data, dict) else data
        text = error.get("message") if isinstance(error, dict) else str(error)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError, RecursionError):
        text = body.decode("utf-8", "replace")
    text = " ".join(str(text or "").split())
    return text[:limit] + ("..." if len(text) > limit else "")


# Where hosted APIs state their limits, per minute: OpenAI's x-ratelimit-limit-*, and
# Anthropic's anthropic-ratelimit-*-limit (its combined tokens limit only: its input and
# output limits are apart, and the engine's token estimate is of both together).
_STATED = {
    "rpm": ("x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit"),
    "tpm": ("x-ratelimit-limit-tokens", "anthropic-ratelimit-tokens-limit"),
}


def stated_limits(headers: Mapping[str, str]) -> dict[str, float]:
    """The requests and tokens a minute a server's headers say it allows ("rpm",
    "tpm"); a value that is not a positive finite number is left out."""
    found: dict[str, float] = {}
    for name, keys in _STATED.items():
        for key in keys:
            try:
                value = float(headers.get(key, ""))
            except ValueError:
                continue
            if math.isfinite(value) and value > 0:
                found[name] = value
                break
    return found


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait, from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
