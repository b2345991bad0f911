"""HTTP providers against the in-repo fault server: every fault becomes the right error."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from eigenjury.models import ChatRequest, ModelSpec, Usage
from eigenjury.models.errors import (
    AuthError,
    ConnectionFailedError,
    MalformedResponseError,
    ProviderError,
    RateLimitError,
    ServerError,
)
from eigenjury.models.factory import make_provider
from eigenjury.models.providers.http import HttpProvider, parse_retry_after, valid_text
from eigenjury.models.providers.local import LLAMA_RANDOM_SEED, llama_seed
from eigenjury.testing.server import Faults, FaultServer

REQUEST = ChatRequest.chat(("system", "be brief"), ("user", "hello there"), temperature=0.0)


def with_server(test: Callable[[str], Awaitable[Any]], **options: Any) -> tuple[Any, FaultServer]:
    async def go() -> tuple[Any, FaultServer]:
        server = FaultServer(**options)
        base = await server.start()
        try:
            return await test(base), server
        finally:
            await server.stop()

    return asyncio.run(go())


async def _generate(spec: str, request: ChatRequest = REQUEST) -> Any:
    provider = make_provider(ModelSpec.parse(spec))
    try:
        return await provider.generate(request)
    finally:
        await provider.aclose()


@pytest.mark.parametrize("api", ["openai-compatible", "anthropic"])
def test_a_completion_with_usage(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")

    async def call(base: str) -> Any:
        spec = f"{api}:test@{base}" if api == "openai-compatible" else "anthropic:test"
        if api == "anthropic":
            monkeypatch.setattr(
                "eigenjury.models.spec.DEFAULT_ENDPOINTS", {"anthropic": base, "openai": base}
            )
        return await _generate(spec)

    completion, server = with_server(call, api_key="test-key" if api == "anthropic" else None)
    assert completion.text == "reply to: hello there"
    # the test server counts words; Anthropic sends the system prompt outside `messages`
    assert completion.usage.input_tokens == (4 if api == "openai-compatible" else 2)
    assert completion.usage.output_tokens == 4
    assert completion.finish_reason in ("stop", "end_turn") and completion.latency_s > 0
    assert server.requests == 1


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("rate_limit", RateLimitError),
        ("server_error", ServerError),
        ("malformed", MalformedResponseError),
        ("truncated", MalformedResponseError),
        ("empty_choices", MalformedResponseError),
    ],
)
def test_each_fault_maps_to_its_error_class(fault: str, error: type[ProviderError]) -> None:
    async def call(base: str) -> Any:
        try:
            await _generate(f"openai-compatible:test@{base}")
        except ProviderError as exc:
            return exc
        return None

    exc, _ = with_server(call, faults=Faults(**{fault: 1.0}, retry_after_s=2.5))
    assert type(exc) is error and exc.retryable
    if fault == "rate_limit":
        assert exc.retry_after == pytest.approx(2.5) and exc.status == 429


def test_a_rejected_key_is_an_auth_error_that_never_repeats_the_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_KEY", "sk-planted-secret-123")

    async def call(base: str) -> Any:
        spec = ModelSpec.from_value(
            {"spec": f"openai-compatible:test@{base}", "api_key_env": "MY_KEY"}
        )
        provider = make_provider(spec)
        try:
            await provider.generate(REQUEST)
        except ProviderError as exc:
            return exc
        finally:
            await provider.aclose()

    exc, _ = with_server(call, api_key="the-right-key")
    assert isinstance(exc, AuthError) and not exc.retryable
    assert "sk-planted-secret-123" not in str(exc) and "[redacted]" in str(exc)
    assert "MY_KEY" in str(exc)


@pytest.mark.parametrize("api", ["openai-compatible", "anthropic"])
def test_an_endpoint_query_stays_a_query(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The request path goes after the endpoint's path, before its query; user info is
    sent as HTTP Basic, in place of a Bearer key (aiohttp refuses both at once)."""
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", "sk-default-variable")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-anthropic")

    async def call(base: str) -> Any:
        endpoint = base.replace("http://", "http://user:pw@") + "/?auth=QSECRET&v=1"
        return await _generate(f"{api}:test@{endpoint}")

    completion, server = with_server(call)
    assert completion.text == "reply to: hello there"
    path = "/v1/chat/completions" if api == "openai-compatible" else "/v1/messages"
    assert dict(server.paths) == {f"{path}?auth=QSECRET&v=1": 1}


def test_an_error_quoting_the_endpoints_secrets_never_repeats_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server quotes the credentials and the URL it got (as some proxies do): the
    user info (and its HTTP Basic form), every query value and the key are redacted."""
    monkeypatch.setenv("MY_KEY", "sk-planted-secret-123")
    secrets = ("USERSECRET", "PASSSECRET", "QUERYSECRET", "OTHERSECRET")

    async def call(base: str) -> Any:
        endpoint = base.replace("http://", "http://USERSECRET:PASSSECRET@")
        for spec in (
            ModelSpec.parse(f"openai-compatible:test@{endpoint}?auth=QUERYSECRET"),
            ModelSpec.from_value(
                {"spec": f"openai-compatible:test@{base}?x=OTHERSECRET", "api_key_env": "MY_KEY"}
            ),
        ):
            provider = make_provider(spec)
            try:
                await provider.generate(REQUEST)
            except AuthError as exc:
                yield exc
            finally:
                await provider.aclose()

    async def both(base: str) -> list[AuthError]:
        return [exc async for exc in call(base)]

    errors, server = with_server(both, api_key="the-right-key")
    assert len(errors) == 2 and server.requests == 2
    for exc in errors:
        assert "Incorrect API key provided" in str(exc) and "[redacted]" in str(exc)
        assert not any(s in str(exc) for s in (*secrets, "sk-planted-secret-123"))
        assert "USERSECRET:PASSSECRET" not in str(exc) and "VVNFUlNF" not in str(exc)


def test_an_unreachable_endpoint() -> None:
    async def go() -> ProviderError:
        server = FaultServer()
        base = await server.start()
        await server.stop()  # the port is now closed
        provider = make_provider(ModelSpec.parse(f"openai-compatible:test@{base}"))
        try:
            await provider.generate(REQUEST)
        except ProviderError as exc:
            return exc
        finally:
            await provider.aclose()
        raise AssertionError("no error")

    exc = asyncio.run(go())
    assert isinstance(exc, ConnectionFailedError) and exc.retryable


def test_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past
    assert parse_retry_after("soon") is None


@pytest.mark.parametrize("count", [-5, 2**64, "many", float("inf"), [3]])
def test_impossible_token_counts_are_malformed_replies(count: Any) -> None:
    """Negative counts would make negative costs (slipping under a budget cap), and
    counts beyond 64 bits could not be stored."""
    provider = make_provider(ModelSpec.parse("openai-compatible:m@http://127.0.0.1:9/v1"))
    assert isinstance(provider, HttpProvider)
    reply = {"usage": {"prompt_tokens": 3, "completion_tokens": count}}
    with pytest.raises(MalformedResponseError, match=r"impossible usage\.completion_tokens"):
        provider.usage(reply, "prompt_tokens", "completion_tokens")
    assert provider.usage({"usage": {"prompt_tokens": 3}}, "prompt_tokens", "x") == Usage(3, 0)


def test_any_seed_is_a_fixed_seed_for_llama_cpp() -> None:
    """llama.cpp seeds are 32-bit and 0xFFFFFFFF means "random": a seed of -1 (or one
    that wraps to it) would make a stored, cached result a random draw."""
    assert llama_seed(None) is None
    assert [llama_seed(s) for s in (0, 7, 2**32 - 2)] == [0, 7, 2**32 - 2]  # kept as given
    for seed in (-1, 2**32 - 1, 2**63 - 1, -(2**70)):
        assert 0 <= llama_seed(seed) < LLAMA_RANDOM_SEED  # type: ignore[operator]
    assert llama_seed(-1) != llama_seed(-2)


def test_reply_text_with_a_lone_surrogate_becomes_storable() -> None:
    """json.loads turns a bare \\ud800 escape into text that SQLite cannot store."""
    text = json.loads('"half \\ud800 a pair, and a whole one: \\ud83d\\ude00"')
    cleaned = valid_text(text)
    assert cleaned == "half \ufffd a pair, and a whole one: \U0001f600"
    cleaned.encode("utf-8")  # storable
    assert valid_text("plain é") == "plain é"
