"""Verdicts over HTTP: structured output and label scores, negotiated per endpoint against
the test server's modes (enforced, refused, ignored, llama-cpp-python's form), kept in
the store, and forced by `verdict_format`."""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from eigenjury.engine.caller import Caller
from eigenjury.engine.engine import Call, Engine
from eigenjury.engine.limits import RetryPolicy
from eigenjury.engine.store import Store, StoreError, spec_json
from eigenjury.models import ChatRequest, ModelSpec
from eigenjury.models.errors import BadRequestError, ProviderError
from eigenjury.models.prices import PriceTable
from eigenjury.models.providers.anthropic import AnthropicProvider
from eigenjury.models.providers.openai_compat import OpenAICompatibleProvider
from eigenjury.models.verdict_format import (
    label_logprobs_at,
    read_structured,
    structured_label_logprobs,
    verdict_line_logprobs,
)
from eigenjury.testing.server import FaultServer, Judging

LABELS = ("A", "B", "tie")
ODDS = {"A": 0.6, "B": 0.3, "tie": 0.1}


def verdict_request(n: int = 0, **options: Any) -> ChatRequest:
    return ChatRequest.chat(
        ("system", "Compare the two responses. Reason, then give a verdict line."),
        ("user", f"Scenario {n}: which response is kinder?"),
        temperature=0.0,
        choices=LABELS,
        **options,
    )


class Recorder:
    """An OpenAI-compatible provider whose request bodies are kept (closed by at_server)."""

    live: ClassVar[list[OpenAICompatibleProvider]] = []

    def __init__(self, provider: Any) -> None:
        assert isinstance(provider, OpenAICompatibleProvider)
        self.provider = provider
        self.live.append(provider)
        self.bodies: list[dict[str, Any]] = []
        send = provider.post_json

        async def post_json(path: str, payload: dict[str, Any], headers: Any) -> Any:
            self.bodies.append(payload)
            return await send(path, payload, headers)

        provider.post_json = post_json  # type: ignore[method-assign]

    @classmethod
    def at(cls, base: str, features: dict[str, str] | None = None) -> Recorder:
        spec = ModelSpec.parse(f"openai-compatible:judge@{base}")
        return cls(OpenAICompatibleProvider(spec, features=features))

    @property
    def structured_asks(self) -> int:
        return sum("response_format" in body for body in self.bodies)


def at_server(judging: Judging, test: Callable[[str], Awaitable[Any]]) -> Any:
    async def go() -> Any:
        server = FaultServer(judging=judging)
        base = await server.start()
        try:
            return await test(base)
        finally:
            while Recorder.live:
                await Recorder.live.pop().aclose()
            await server.stop()

    return asyncio.run(go())


# -- payloads -----------------------------------------------------------------------------


def test_requests_without_choices_are_sent_as_before() -> None:
    provider = OpenAICompatibleProvider(ModelSpec.parse("openai-compatible:m@http://h:1/v1"))
    plain = ChatRequest.chat(("user", "hi"), temperature=0.0, max_tokens=9, stop=("\n",))
    with_logprobs = ChatRequest.chat(("user", "hi"), logprobs=True)
    assert json.dumps(provider.payload(plain)) == (
        '{"model": "m", "messages": [{"role": "user", "content": "hi"}], '
        '"temperature": 0.0, "max_tokens": 9, "stop": ["\\n"]}'
    )
    assert json.dumps(provider.payload(with_logprobs)) == (
        '{"model": "m", "messages": [{"role": "user", "content": "hi"}], '
        '"logprobs": true, "top_logprobs": 5}'
    )
    assert ChatRequest.chat(("user", "hi")).identity() == {"messages": [["user", "hi"]]}


def test_verdict_payloads() -> None:
    provider = OpenAICompatibleProvider(ModelSpec.parse("openai-compatible:m@http://h:1/v1"))
    request = verdict_request(logprobs=True)
    schema = {
        "type": "object",
        "properties": {"reasoning": {"type": "string"}, "verdict": {"enum": ["A", "B", "tie"]}},
        "required": ["reasoning", "verdict"],
        "additionalProperties": False,
    }
    body = provider.payload(request, structured="json_schema", label_scores=True)
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": schema},
    }
    assert list(schema["properties"]) == ["reasoning", "verdict"]  # reasons come first
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
    llama = provider.payload(request, structured="json_object")
    assert llama["response_format"] == {"type": "json_object", "schema": schema}
    assert "logprobs" not in llama
    assert "response_format" not in provider.payload(request)  # the free-text request


def test_verdict_format_enters_the_key_only_when_forced() -> None:
    assert "verdict_format" not in verdict_request().identity()
    forced = verdict_request(verdict_format="text").identity()
    assert forced["verdict_format"] == "text"


def test_anthropic_asks_for_a_forced_tool_call(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    provider = AnthropicProvider(ModelSpec.parse("anthropic:claude@http://h:1/v1"))
    body = provider.payload(verdict_request())
    assert body["tool_choice"] == {"type": "tool", "name": "verdict"}
    (tool,) = body["tools"]
    assert tool["name"] == "verdict"
    assert tool["input_schema"]["properties"]["verdict"] == {"enum": ["A", "B", "tie"]}
    assert "tools" not in provider.payload(verdict_request(verdict_format="text"))
    assert "tools" not in provider.payload(ChatRequest.chat(("user", "hi")))


# -- reading ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ('{"reasoning": "kinder", "verdict": "B"}', "B"),
        ('  \n```json\n{"reasoning": "", "verdict": "tie"}\n```\n', "tie"),
        ('```\n{"verdict": "A", "reasoning": "x"}\n```', "A"),
        ('{ "reasoning": "a raw\nline break", "verdict" : "B"}', "B"),
        ('{"reasoning": "x", "verdict": "a"}', None),  # not one of the labels
        ('{"reasoning": "x", "verdict": " A"}', None),
        ('{"reasoning": "x", "verdict": ["A"]}', None),
        ('["A"]', None),
        ("VERDICT: A", None),
        ('{"reasoning": "x", "verdict": "A"', None),  # cut short
    ],
)
def test_read_structured(text: str, label: str | None) -> None:
    assert read_structured(text, LABELS) == label


def tokens(*pieces: str | tuple[str, dict[str, float]]) -> list[dict[str, Any]]:
    """logprobs.content: plain pieces are certain; (piece, {alternative: p}) are not."""
    out = []
    for piece in pieces:
        token, alternatives = piece if isinstance(piece, tuple) else (piece, {piece: 1.0})
        top = [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()]
        out.append({"token": token, "logprob": 0.0, "top_logprobs": top})
    return out


def test_label_scores_where_a_structured_verdict_is_decided() -> None:
    text = '{"reasoning": "\\"verdict\\": \\"B\\" is wrong", "verdict": "A"}'
    content = tokens(
        '{"reasoning": "\\"verdict\\": \\"B\\" is wrong", "verdict": ',
        ('"A', {'"A': 0.5, '"B': 0.2, '"C': 0.2}),
        '"}',
    )
    scores = structured_label_logprobs(text, content, LABELS)
    assert scores == pytest.approx({"A": math.log(0.5), "B": math.log(0.2)})  # tie: absent
    assert structured_label_logprobs("VERDICT: A", content, LABELS) is None


def test_a_label_spelled_two_ways_adds_up_and_a_long_label_is_scored_past_the_shared_part() -> None:
    grades = ("GRADE: C", "GRADE: I")
    text = '{"reasoning": "ok", "verdict": "GRADE: C"}'
    content = tokens(
        '{"reasoning": "ok", "verdict": "',
        "GR",
        "ADE",
        ":",
        (" C", {" C": 0.5, ' C"': 0.2, " I": 0.25, " Incorrect": 0.05}),
        '"}',
    )
    scores = structured_label_logprobs(text, content, grades)
    assert scores == pytest.approx({"GRADE: C": math.log(0.7), "GRADE: I": math.log(0.25)})
    # tokens that do not spell the reply where the verdict is: nothing is read
    assert label_logprobs_at(text, text.index("GRADE"), content[:-1], grades) is None


def test_label_scores_of_a_verdict_line() -> None:
    text = "A is warmer, B is curt.\nVERDICT: B\n"
    content = tokens("A is warmer, B is curt.\nVERDICT:", (" B", {" B": 0.7, " A": 0.2}), "\n")
    assert verdict_line_logprobs(text, content, LABELS) == pytest.approx(
        {"B": math.log(0.7), "A": math.log(0.2)}
    )
    assert verdict_line_logprobs("A is warmer.\nI cannot say.", content, LABELS) is None
    tagged = "Reply A is warmer.\n<verdict>A</verdict>"
    content = tokens("Reply A is warmer.\n<verdict>", ("A", {"A": 0.8, "tie": 0.1}), "</verdict>")
    assert verdict_line_logprobs(tagged, content, LABELS) == pytest.approx(
        {"A": math.log(0.8), "tie": math.log(0.1)}
    )


# -- negotiation --------------------------------------------------------------------------


def test_an_endpoint_that_enforces_the_schema() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        replies = [await judge.provider.generate(verdict_request(n)) for n in range(6)]
        return judge, replies

    judge, replies = at_server(Judging(response_format="enforce"), run)
    assert len(judge.bodies) == judge.structured_asks == 6
    assert all(read_structured(r.text, LABELS) in LABELS for r in replies)
    assert json.loads(replies[0].text)["reasoning"].startswith("reply to: Scenario 0")
    assert judge.provider.features == {"structured": "json_schema"}


def test_an_endpoint_that_refuses_the_field_is_asked_once() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        first = await asyncio.gather(
            *(judge.provider.generate(verdict_request(n)) for n in range(8))
        )
        later = [await judge.provider.generate(verdict_request(n)) for n in range(8, 12)]
        return judge, [*first, *later]

    judge, replies = at_server(Judging(response_format="refuse"), run)
    assert judge.structured_asks == 1  # even with eight requests in flight at first
    assert len(judge.bodies) == 13 and len(replies) == 12
    assert all(r.text.startswith("reply to: Scenario") for r in replies)
    assert judge.provider.features == {"structured": "refused"}


def test_an_endpoint_that_ignores_the_field() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        replies = [await judge.provider.generate(verdict_request(n)) for n in range(3)]
        return judge, replies

    judge, replies = at_server(Judging(response_format="ignore", verdicts=ODDS), run)
    assert judge.structured_asks == 1 and len(judge.bodies) == 3
    assert replies[0].text.splitlines()[-1] in ("VERDICT: A", "VERDICT: B", "VERDICT: tie")
    assert read_structured(replies[0].text, LABELS) is None  # left to the protocol's parser
    assert judge.provider.features == {"structured": "ignored"}


def test_llama_cpp_python_servers_take_the_json_object_form() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        replies = [await judge.provider.generate(verdict_request(n)) for n in range(3)]
        return judge, replies

    judge, replies = at_server(Judging(response_format="json_object"), run)
    forms = [body["response_format"]["type"] for body in judge.bodies]
    assert forms == ["json_schema", "json_object", "json_object", "json_object"]
    assert all(read_structured(r.text, LABELS) in LABELS for r in replies)
    assert judge.provider.features == {"structured": "json_object"}


@pytest.mark.parametrize("retry_fails", [False, True])
def test_a_400_that_names_nothing_is_a_refusal_only_if_it_goes_away_without_the_field(
    retry_fails: bool,
) -> None:
    provider = OpenAICompatibleProvider(ModelSpec.parse("openai-compatible:m@http://h:1/v1"))
    sent: list[dict[str, Any]] = []

    async def post_json(path: str, payload: dict[str, Any], headers: Any) -> Any:
        sent.append(payload)
        if "response_format" in payload or retry_fails:
            raise BadRequestError("http://h:1/v1 answered HTTP 400: invalid request", status=400)
        message = {"role": "assistant", "content": "<verdict>A</verdict>"}
        return {"choices": [{"message": message, "finish_reason": "stop"}]}

    provider.post_json = post_json  # type: ignore[method-assign]
    if retry_fails:  # a bad request either way: its error, and nothing learnt
        with pytest.raises(BadRequestError):
            asyncio.run(provider.generate(verdict_request()))
        assert provider.features == {}
    else:
        assert asyncio.run(provider.generate(verdict_request())).text == "<verdict>A</verdict>"
        assert provider.features == {"structured": "refused"}
    assert ["response_format" in body for body in sent] == [True, False]


def test_what_was_learnt_survives_in_the_store(tmp_path: Path) -> None:
    """Run twice against an endpoint that refuses structured output: the second run
    (a new caller on the reopened store) never asks for it."""
    path = tmp_path / "store.sqlite"

    async def one_run(base: str) -> Recorder:
        spec = ModelSpec.parse(f"openai-compatible:judge@{base}")
        with Store(path) as store:
            caller = Caller(
                RetryPolicy(), PriceTable(), known_features=lambda s: store.features(spec_json(s))
            )
            judge = Recorder(caller.provider(spec))
            for n in range(3):
                await judge.provider.generate(verdict_request(n))
            for learnt_spec, learnt in caller.learned_features().items():
                store.put_features(spec_json(learnt_spec), learnt)
            await caller.aclose()
        return judge

    async def two_runs(base: str) -> tuple[Recorder, Recorder]:
        return await one_run(base), await one_run(base)

    first, second = at_server(Judging(response_format="refuse"), two_runs)
    assert (first.structured_asks, len(first.bodies)) == (1, 4)
    assert (second.structured_asks, len(second.bodies)) == (0, 3)
    with Store(path, create=False) as store:
        (spec,) = [row[0] for row in sqlite3.connect(path).execute("SELECT spec FROM features")]
        assert store.features(spec) == {"structured": "refused"}


def test_the_engine_keeps_what_it_learnt_for_its_next_runs(tmp_path: Path) -> None:
    """Two engines on one store against a server that refuses structured output: the
    first asks once (and stores the refusal), the second never asks."""
    path = tmp_path / "store.sqlite"

    async def runs(base: str) -> list[int]:
        spec = ModelSpec.parse(f"openai-compatible:judge@{base}")
        asks = []
        for run in range(2):
            async with Engine(Store(path), progress=False) as engine:
                judge = Recorder(engine.caller.provider(spec))
                calls = [Call(spec, verdict_request(10 * run + n)) for n in range(4)]
                assert all(r.ok for r in await engine.run(calls))
                asks.append(judge.structured_asks)
                engine.store.close()
        return asks

    assert at_server(Judging(response_format="refuse"), runs) == [1, 0]
    with Store(path, create=False) as store:
        (spec,) = [row[0] for row in sqlite3.connect(path).execute("SELECT spec FROM features")]
        assert store.features(spec) == {"structured": "refused"}


def test_features_are_kept_per_endpoint_and_model(tmp_path: Path) -> None:
    path = tmp_path / "store.sqlite"
    judge = spec_json(ModelSpec.parse("openai-compatible:judge@http://127.0.0.1:9/v1"))
    other = spec_json(ModelSpec.parse("openai-compatible:other@http://127.0.0.1:9/v1"))
    with Store(path) as store:
        assert store.features(judge) == {}
        store.put_features(judge, {"structured": "refused", "logprobs": "absent"})
        store.put_features(judge, {"logprobs": "supported"})
    with Store(path, create=False) as store:
        assert store.features(judge) == {"structured": "refused", "logprobs": "supported"}
        assert store.features(other) == {}


def test_stores_from_before_features_still_open(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with Store(path):
        pass
    db = sqlite3.connect(path)
    db.execute("DROP TABLE features")
    db.commit()
    db.close()
    with Store(path, create=False) as store:  # read-only: left as it is
        assert store.features("{}") == {}
    with Store(path) as store:  # writable: the table is added
        store.put_features("{}", {"structured": "refused"})
        assert store.features("{}") == {"structured": "refused"}
    db = sqlite3.connect(path)
    db.execute("DROP TABLE features")
    db.execute("CREATE TABLE features (spec TEXT, other TEXT)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="features"):
        Store(path)


# -- forced modes -------------------------------------------------------------------------


def test_forcing_structured_output_on_an_endpoint_that_refuses_it() -> None:
    async def run(base: str) -> tuple[Recorder, ProviderError]:
        judge = Recorder.at(base)
        with pytest.raises(ProviderError) as caught:
            await judge.provider.generate(verdict_request(verdict_format="structured"))
        return judge, caught.value

    judge, error = at_server(Judging(response_format="refuse"), run)
    assert isinstance(error, BadRequestError) and error.kind == "bad_request"
    assert not error.retryable and len(judge.bodies) == 1
    assert judge.provider.public_base in error.message
    assert "verdict_format: text" in error.message


def test_forcing_text_or_logprobs() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base, features={"structured": "json_schema"})
        text = await judge.provider.generate(verdict_request(verdict_format="text"))
        scored = await judge.provider.generate(verdict_request(verdict_format="logprobs"))
        return judge, [text, scored]

    judge, (text, scored) = at_server(Judging("enforce", verdicts=ODDS, logprobs=True), run)
    assert judge.structured_asks == 0
    assert "logprobs" not in judge.bodies[0] and judge.bodies[1]["top_logprobs"] == 20
    assert text.choice_logprobs is None
    assert text.text.startswith("reply to: Scenario 0") and "\nVERDICT: " in text.text
    assert {k: math.exp(v) for k, v in scored.choice_logprobs.items()} == pytest.approx(ODDS)


# -- label scores over HTTP ---------------------------------------------------------------


@pytest.mark.parametrize("mode", ["enforce", "refuse"])
def test_soft_verdicts_over_http_are_the_servers_probabilities(mode: str) -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        replies = [
            await judge.provider.generate(verdict_request(n, logprobs=True)) for n in range(4)
        ]
        return judge, replies

    judge, replies = at_server(Judging(mode, verdicts=ODDS, logprobs=True), run)  # type: ignore[arg-type]
    for reply in replies:
        assert {k: math.exp(v) for k, v in reply.choice_logprobs.items()} == pytest.approx(ODDS)
    assert judge.provider.features["logprobs"] == "supported"
    drawn = [read_structured(r.text, LABELS) or r.text.split()[-1] for r in replies]
    assert set(drawn) <= set(LABELS)


def test_an_endpoint_without_logprobs_is_not_asked_again() -> None:
    async def run(base: str) -> tuple[Recorder, list[Any]]:
        judge = Recorder.at(base)
        replies = [
            await judge.provider.generate(verdict_request(n, logprobs=True)) for n in range(3)
        ]
        return judge, replies

    judge, replies = at_server(Judging("enforce", verdicts=ODDS), run)
    assert [("logprobs" in body) for body in judge.bodies] == [True, False, False]
    assert all(r.choice_logprobs is None for r in replies)
    assert judge.provider.features == {"structured": "json_schema", "logprobs": "absent"}


def test_anthropic_verdicts_by_tool_use(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")

    async def run(base: str) -> list[Any]:
        provider = AnthropicProvider(ModelSpec.parse(f"anthropic:claude@{base}"))
        try:
            return [await provider.generate(verdict_request(n)) for n in range(20)] + [
                await provider.generate(verdict_request(verdict_format="text"))
            ]
        finally:
            await provider.aclose()

    *verdicts, text = at_server(Judging(verdicts={"A": 0.5, "B": 0.5}), run)
    labels = [read_structured(r.text, LABELS) for r in verdicts]
    assert set(labels) == {"A", "B"}  # the configured labels only, both drawn
    assert (
        json.loads(verdicts[0].text)["reasoning"]
        == "reply to: Scenario 0: which response is kinder?"
    )
    assert verdicts[0].finish_reason == "tool_use"
    assert text.text == "reply to: Scenario 0: which response is kinder?"
