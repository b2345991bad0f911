"""Model specs ("provider:model@endpoint"), personas, and where API keys come from.

API keys are read from environment variables only, at call time; a spec holds the
variable's name, never the key, so nothing that stores or prints a spec can leak it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from eigenjury.errors import InputError
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
_SECRET_PARAMS = ("key", "token", "secret", "password", "sig")


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
                f"endpoint '{endpoint}' of model spec '{self}' is not a valid URL ({exc}); "
                "write it as http://host:port/v1 (an IPv6 host in brackets: http://[::1]:8000/v1)"
            ) from None
        if url.scheme not in ("http", "https") or not url.hostname:
            raise SpecError(f"endpoint '{endpoint}' of '{self}' is not an http(s) URL")
        if port == 0:
            raise SpecError(
                f"endpoint '{endpoint}' of model spec '{self}' has port 0; "
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
        for scheme in ("@http://", "@https://"):
            at = rest.rfind(scheme)
            if at >= 0:
                model, endpoint = rest[:at], rest[at + 1 :]
                break
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

    def __str__(self) -> str:
        return f"{self.provider}:{self.model}" + (f"@{self.endpoint}" if self.endpoint else "")

    @property
    def served(self) -> bool:
        """Reached over HTTP, where a request's `choices` ask for a structured verdict (a
        local model instead answers with a bare label)."""
        return self.provider in SERVED_PROVIDERS

    @property
    def base_url(self) -> str | None:
        url = self.endpoint or DEFAULT_ENDPOINTS.get(self.provider)
        return None if url is None else url.rstrip("/")

    def identity(self) -> dict[str, str]:
        """What determines results, without secrets: goes into store keys and records."""
        out = {"provider": self.provider, "model": self.model}
        if self.base_url is not None:
            out["endpoint"] = public_url(self.base_url)
        return out

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


def public_url(url: str) -> str:
    """The URL without user info or secret-looking query parameters."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query)
        if not any(word in k.lower() for word in _SECRET_PARAMS)
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
