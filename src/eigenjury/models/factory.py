"""From a spec to a live provider."""

from __future__ import annotations

from collections.abc import Mapping

from eigenjury.models.providers.anthropic import AnthropicProvider
from eigenjury.models.providers.http import SessionFactory
from eigenjury.models.providers.openai_compat import OpenAICompatibleProvider
from eigenjury.models.providers.scripted import ScriptedProvider
from eigenjury.models.spec import ModelSpec
from eigenjury.models.types import Provider


def make_provider(
    spec: ModelSpec,
    *,
    sessions: SessionFactory | None = None,
    features: Mapping[str, str] | None = None,
) -> Provider:
    """A provider for `spec`. Raises SpecError (a located InputError) for a missing key
    or a local model that is not installed, before any call is made. HTTP providers
    use `sessions` (one pooled session per endpoint) when given, and start from
    `features`, what an earlier run found the endpoint supports."""
    if spec.provider in ("openai", "openai-compatible"):
        return OpenAICompatibleProvider(spec, sessions=sessions, features=features)
    if spec.provider == "anthropic":
        return AnthropicProvider(spec, sessions=sessions, features=features)
    if spec.provider == "scripted":
        return ScriptedProvider(spec.model, count_successes=False)
    from eigenjury.models.providers.local import LocalProvider  # needs the `local` extra

    return LocalProvider(spec.model)
