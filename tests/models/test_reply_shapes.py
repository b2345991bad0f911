"""Replies whose JSON has the wrong shape, from a real HTTP server: each is a malformed
reply with a plain message naming the place (never a Python error's text), stored as
such by `batch`; reply texts nested past reading are text, not a crash."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from eigenjury.cli import main
from eigenjury.contracts.rules import parse_grade
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.errors import MalformedResponseError, ProviderError
from eigenjury.models.factory import make_provider
from eigenjury.models.verdict_format import read_structured
from eigenjury.reply_features import joined_turns

VERDICT = '{"verdict": "GRADE: C"}'
DEEP = "[" * 100_000 + "]" * 100_000  # past what Python's JSON reader can nest


def _choice(**fields: Any) -> dict[str, Any]:
    choice = {"message": {"content": VERDICT}, "finish_reason": "stop", **fields}
    return {"choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


def _scored(alternative: Any) -> dict[str, Any]:
    tokens = [{"token": '{"verdict": "GRADE: ', "top_logprobs": []}]
    tokens.append({"token": 'C"}', "top_logprobs": [alternative]})
    return _choice(logprobs={"content": tokens})


# case -> (reply body, what the message says)
SHAPES: dict[str, tuple[Any, str]] = {
    "message is a list": ({"choices": [{"message": ["x"]}]}, "without message content"),
    "message is text": ({"choices": [{"message": "hi"}]}, "without message content"),
    "choice is text": ({"choices": ["hi"]}, "without message content"),
    "choices is an object": ({"choices": {"0": {}}}, "with no choices"),
    "logprobs is a list": (_choice(logprobs=["x"]), "choices[0].logprobs a list, not an object"),
    "content is text": (
        _choice(logprobs={"content": "abc"}),
        "choices[0].logprobs.content text, not a list of tokens",
    ),
    "a token is a number": (
        _choice(logprobs={"content": [1]}),
        "choices[0].logprobs.content[0] a number, not an object",
    ),
    "a token's text is a list": (
        _choice(logprobs={"content": [{"token": ["C"]}]}),
        "choices[0].logprobs.content[0].token a list, not text",
    ),
    "top_logprobs is a number": (
        _choice(logprobs={"content": [{"token": VERDICT, "top_logprobs": 5}]}),
        "choices[0].logprobs.content[0].top_logprobs a number, not a list",
    ),
    "a logprob is text": (
        _scored({"token": 'C"}', "logprob": "high"}),
        "choices[0].logprobs.content[1].top_logprobs[0].logprob text, not a number",
    ),
    "a logprob is true": (
        _scored({"token": 'C"}', "logprob": True}),
        "top_logprobs[0].logprob true/false, not a number",
    ),
    "an alternative is null": (_scored(None), "top_logprobs[0] null, not an object"),
    "nested too deeply": (DEEP, "JSON nested too deeply to read"),
}
ANTHROPIC = {"content": [{"type": "text", "text": ["GRADE: C"]}], "stop_reason": "end_turn"}
PYTHON_WORDS = ("Error", "object has no attribute", "not iterable", "recursion", "Traceback")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A real HTTP server answering /CASE/v1/chat/completions with that case's body."""
    ready = threading.Event()
    where: dict[str, Any] = {}

    async def answer(request: web.Request) -> web.Response:
        case = request.match_info["case"]
        body = ANTHROPIC if case == "anthropic-list-text" else SHAPES[case.replace("-", " ")][0]
        text = body if isinstance(body, str) else json.dumps(body)
        return web.Response(text=text, content_type="application/json")

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/{case}/v1/chat/completions", answer)
        app.router.add_post("/{case}/v1/messages", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        where["port"] = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        where["stop"] = asyncio.Event()
        ready.set()
        await where["stop"].wait()
        await runner.cleanup()

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    ready.wait(30)
    yield f"http://127.0.0.1:{where['port']}"
    loop.call_soon_threadsafe(where["stop"].set)
    thread.join(30)


def _spec(server: str, case: str) -> str:
    return f"openai-compatible:m@{server}/{case.replace(' ', '-')}/v1"


@pytest.mark.fuzz
@pytest.mark.parametrize("case", sorted(SHAPES))
def test_a_reply_of_the_wrong_shape_is_malformed_with_a_plain_message(
    case: str, server: str
) -> None:
    async def call() -> ProviderError:
        provider = make_provider(ModelSpec.parse(_spec(server, case)))
        provider.features.update(structured="json_schema", logprobs="supported")  # type: ignore[attr-defined]
        request = ChatRequest.chat(("user", "hi"), choices=("GRADE: C", "GRADE: I"), logprobs=True)
        try:
            await provider.generate(request)
        except ProviderError as exc:
            return exc
        finally:
            await provider.aclose()
        raise AssertionError("the reply was accepted")

    error = asyncio.run(call())
    assert isinstance(error, MalformedResponseError) and error.retryable
    assert SHAPES[case][1] in error.message
    assert not any(word in error.message for word in PYTHON_WORDS), error.message


@pytest.mark.fuzz
def test_an_anthropic_text_block_whose_text_is_not_text_is_malformed(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")

    async def call() -> ProviderError:
        spec = f"anthropic:m@{server}/anthropic-list-text/v1"
        provider = make_provider(ModelSpec.parse(spec))
        try:
            await provider.generate(ChatRequest.chat(("user", "hi")))
        except ProviderError as exc:
            return exc
        finally:
            await provider.aclose()
        raise AssertionError("the reply was accepted")

    error = asyncio.run(call())
    assert isinstance(error, MalformedResponseError)
    assert "a text block whose text is a list, not text" in error.message


@pytest.mark.fuzz
def test_batch_stores_odd_shapes_as_malformed_replies(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_text(json.dumps({"id": "r1", "messages": [{"role": "user", "content": "hi"}]}))
    for case in ("message is a list", "nested too deeply"):
        out = tmp_path / f"{case}.jsonl"
        argv = ["batch", str(requests), "--model", _spec(server, case), "--out", str(out)]
        code = main([*argv, "--store", str(tmp_path / "s.sqlite"), "--max-attempts", "1"])
        assert code == 1, capsys.readouterr().err
        [row] = [json.loads(line) for line in out.read_text().splitlines()]
        assert row["error"]["kind"] == "malformed"
        assert SHAPES[case][1] in row["error"]["message"]
        assert not any(word in row["error"]["message"] for word in PYTHON_WORDS)


@pytest.mark.fuzz
def test_reply_texts_nested_past_reading_are_text_not_a_crash() -> None:
    assert read_structured(DEEP, ("A", "B")) is None
    assert parse_grade('{"verdict": ' + DEEP + "}") is None
    assert parse_grade(DEEP + "\nGRADE: C") == "C"
    import pyarrow as pa

    turns = joined_turns(pa.array([DEEP, '["a", "b"]']))  # Kaggle's turns, in a verdict file
    assert turns.to_pylist()[0] == DEEP
