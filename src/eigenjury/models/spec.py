"""Model specs ("provider:model@endpoint"), personas, and where API keys come from.

API keys are read from environment variables only, at call time; a spec holds the
variable's name, never the key. An endpoint URL may still carry secrets of its own (user
info, query values such as `?auth=...`): a spec is shown and written only as `str(spec)`,
which hides them, and `secrets()` lists them (with the key) for messages to be redacted.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from eigenjury.errors import InputError
from eigenjury.models.errors import redact
from eigenjury.models.types import ChatRequest, Message

DEFAULT_ENDPOINTS = {
    "openai": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com/v1",
}
DEFAULT_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "openai-compatible": "OPENAI_COMPATIBLE_API_KEY",  # optional: local servers need none
}
PROVIDERS = ("openai", "openai-compatible", "anthropic", "local", "scripted")
SERVED_PROVIDERS = ("openai", "openai-compatible", "anthropic")  # reached over HTTP
_SECRET_PARAMS = ("key", "token", "secret", "password", "sig")  # left out of store keys
HIDDEN = "***"  # what a spec shows in place of user info and query values
_ENDPOINT_START = re.compile(r"@[A-Za-z][A-Za-z0-9+.-]*://")
MIN_SECRET_CHARS = 4  # shorter text (a flag such as "1") is not redacted from messages


class SpecError(InputError):
    """A model spec that cannot be used as written."""


@dataclass(frozen=True)
class ModelSpec:
    """Which model, from which provider, at which endpoint.

    String form: ``provider:model`` or ``openai-compatible:model@http://host:port/v1``.
    Mapping form adds ``api_key_env``, the variable that holds the key for this
    endpoint (overriding the provider's default variable).
    """

    provider: str
    model: str
    endpoint: str | None = None
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        for name in ("endpoint", "api_key_env"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise SpecError(f"the {name} of model spec '{self}' must be text, got {value!r}")
        if self.provider not in PROVIDERS:
            raise SpecError(
                f"unknown provider '{self.provider}' in model spec '{self}'; "
                f"use one of {', '.join(PROVIDERS)}"
            )
        if not self.model:
            raise SpecError(f"model spec '{self}' names no model; write provider:model")
        if self.provider == "openai-compatible" and not self.endpoint:
            raise SpecError(
                f"model spec '{self}' needs an endpoint: openai-compatible:MODEL@http://host:port/v1"
            )
        if self.endpoint is not None:
            self._check_endpoint(self.endpoint)

    def _check_endpoint(self, endpoint: str) -> None:
        """An http(s) URL with a host and a port that can exist, so that no later use of
        it (keys, connections, messages) can fail on it."""
        try:
            url = urlsplit(endpoint)
            port = url.port  # parsed on access: out of range or not a number raises here
        except ValueError as exc:
            raise SpecError(
                f"endpoint '{shown_url(endpoint)}' of model spec '{self}' is not a valid URL "
                f"({redact(str(exc), url_secrets(endpoint))}); "
                "write it as http://host:port/v1 (an IPv6 host in brackets: http://[::1]:8000/v1)"
            ) from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise SpecError(f"endpoint '{shown_url(endpoint)}' of '{self}' is not an http(s) URL")
        if port == 0:
            raise SpecError(
                f"endpoint '{shown_url(endpoint)}' of model spec '{self}' has port 0; "
                "give the port the server listens on (1 to 65535)"
            )

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        provider, sep, rest = text.strip().partition(":")
        if not sep:
            raise SpecError(
                f"model spec '{text}' has no provider; write provider:model, e.g. "
                "openai:gpt-4o-mini or local:smollm2-135m"
            )
        model, endpoint = rest, None
        # the endpoint starts at the last "@scheme://", whatever the scheme, so that one
        # of another scheme is refused as such (and shown without its secrets), not
        # taken for part of the model's name
        starts = list(_ENDPOINT_START.finditer(rest))
        if starts:
            at = starts[-1].start()
            model, endpoint = rest[:at], rest[at + 1 :]
        return cls(provider.strip(), model.strip(), endpoint)

    @classmethod
    def from_value(cls, value: str | Mapping[str, Any] | ModelSpec) -> ModelSpec:
        """A spec from its string form, a mapping (as in config files), or itself."""
        if isinstance(value, ModelSpec):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        unknown = set(value) - {"provider", "model", "endpoint", "api_key_env", "spec"}
        if unknown:
            raise SpecError(f"unknown model spec field(s): {', '.join(sorted(unknown))}")
        if "spec" in value:
            base = cls.parse(str(value["spec"]))
            return cls(base.provider, base.model, base.endpoint, value.get("api_key_env"))
        try:
            return cls(
                str(value["provider"]),
                str(value["model"]),
                value.get("endpoint"),
                value.get("api_key_env"),
            )
        except KeyError as exc:
            raise SpecError(f"model spec mapping is missing '{exc.args[0]}'") from None

    def __repr__(self) -> str:
        extra = f", api_key_env={self.api_key_env!r}" if self.api_key_env else ""
        return f"ModelSpec({str(self)!r}{extra})"

    def __str__(self) -> str:
        """The spec as shown and written anywhere (tables, stores, records, messages):
        the endpoint's user info and query values hidden."""
        endpoint = f"@{shown_url(str(self.endpoint))}" if self.endpoint else ""  # (checked later)
        return f"{self.provider}:{self.model}{endpoint}"

    @property
    def shown_in_full(self) -> bool:
        """Whether `str(self)` is the whole spec: its endpoint carries nothing it hides."""
        return self.endpoint is None or shown_url(self.endpoint) == self.endpoint

    @property
    def served(self) -> bool:
        """Reached over HTTP, where a request's `choices` ask for a structured verdict (a
        local model instead answers with a bare label)."""
        return self.provider in SERVED_PROVIDERS

    @property
    def base_url(self) -> str | None:
        """The endpoint as called (secrets included): no trailing slash on its path."""
        url = self.endpoint or DEFAULT_ENDPOINTS.get(self.provider)
        if url is None:
            return None
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path=parts.path.rstrip("/")))

    def identity(self) -> dict[str, str]:
        """What determines results, without secrets: goes into store keys, and into the
        store's table of what endpoints support."""
        out = {"provider": self.provider, "model": self.model}
        if self.base_url is not None:
            out["endpoint"] = _identity_url(self.base_url)
        return out

    def secrets(self) -> tuple[str, ...]:
        """What must never be shown or written: the API key and the endpoint's secrets
        (see `url_secrets`), for `redact` to take out of messages."""
        key = self.api_key()
        return (*((key,) if key else ()), *url_secrets(self.base_url or ""))

    @property
    def key_variable(self) -> str | None:
        return self.api_key_env or DEFAULT_KEY_VARIABLES.get(self.provider)

    def api_key(self) -> str | None:
        """The key from the environment; a clear error naming the variable if it is needed
        and missing."""
        name = self.key_variable
        if name is None:
            return None
        key = os.environ.get(name, "").strip()
        required = self.provider in ("openai", "anthropic") or self.api_key_env is not None
        if not key and required:
            raise SpecError(
                f"{self} needs an API key: set the environment variable {name}"
                + ("" if self.api_key_env else " (or name another with api_key_env)")
            )
        return key or None


def shown_url(url: str) -> str:
    """The URL as it may be shown or written: as given, but with its user info, every
    query value and any fragment replaced by HIDDEN (any of them may be a secret).
    Plain text work, so that a URL too broken to parse is still shown safely."""
    scheme, slashes, rest = url.partition("://")
    if not slashes:
        scheme, rest = "", url
    rest, hash_mark, fragment = rest.partition("#")
    rest, question_mark, query = rest.partition("?")
    authority, slash, path = rest.partition("/")
    if "@" in authority:
        authority = f"{HIDDEN}@{authority.rpartition('@')[2]}"
    if query:
        query = "&".join(_hidden_value(pair) for pair in query.split("&"))
    return f"{scheme}{slashes}{authority}{slash}{path}{question_mark}{query}" + (
        f"#{HIDDEN}" if hash_mark and fragment else hash_mark
    )


def _hidden_value(pair: str) -> str:
    name, equals, value = pair.partition("=")
    return f"{name}={HIDDEN}" if equals and value else pair


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of a URL that `shown_url` hides (user name, password, query values,
    fragment), as written and percent-decoded, leaving out those shorter than
    MIN_SECRET_CHARS (a flag such as "1" would blot out every digit of a message)."""
    rest = url.partition("://")[2] or url
    rest, _, fragment = rest.partition("#")
    rest, _, query = rest.partition("?")
    authority = rest.partition("/")[0]
    parts = [fragment]
    if "@" in authority:
        user, _, password = authority.rpartition("@")[0].partition(":")
        parts += [user, password, _basic_credentials(unquote(user), unquote(password))]
    parts.extend(pair.partition("=")[2] for pair in query.split("&"))
    found = {form for part in parts for form in (part, unquote(part))}
    return tuple(sorted(s for s in found if len(s) >= MIN_SECRET_CHARS))


def _basic_credentials(user: str, password: str) -> str:
    """User info as an HTTP Basic Authorization header carries it (a server may quote it)."""
    try:
        raw = f"{user}:{password}".encode("latin-1")  # as aiohttp encodes it
    except UnicodeEncodeError:
        raw = f"{user}:{password}".encode()
    return base64.b64encode(raw).decode("ascii")


def _identity_url(url: str) -> str:
    """The URL as far as it determines results: without user info; of its query, the
    parameters not named as secrets (key, token, ...), each value as a digest, so that
    a change of value is a new store key but the value is never written."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    query = [
        (name, "sha256-" + hashlib.sha256(value.encode()).hexdigest()[:16])
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
        if not any(word in name.lower() for word in _SECRET_PARAMS)
    ]
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), urlencode(query), ""))


@dataclass(frozen=True)
class Persona:
    """A model in character: a spec, a system prompt and the name shown in results."""

    name: str
    spec: ModelSpec
    system_prompt: str | None = None

    def dress(self, request: ChatRequest) -> ChatRequest:
        """The request as this persona receives it (its system prompt first)."""
        if not self.system_prompt:
            return request
        return replace(request, messages=(Message("system", self.system_prompt), *request.messages))


_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.\-]*)=(.+)", re.DOTALL)


def named_spec(text: str) -> tuple[str | None, ModelSpec]:
    """`NAME=SPEC` (a short name for the model, shown in tables and records) or a bare
    spec. A name has no ":", so a spec whose endpoint carries "=" (a query) is never
    taken for one."""
    found = _NAME.fullmatch(text.strip())
    if found is None:
        return None, ModelSpec.parse(text)
    return found.group(1), ModelSpec.parse(found.group(2))
