"""Model specs, personas, prices and the scripted provider."""

from __future__ import annotations

import asyncio
import base64
import hashlib
from typing import Any

import pytest

from eigenjury.errors import InputError
from eigenjury.models import (
    ChatRequest,
    ModelSpec,
    Persona,
    Price,
    PriceTable,
    SpecError,
    Usage,
)
from eigenjury.models.errors import ServerError
from eigenjury.models.providers.scripted import ScriptedProvider, register_script
from eigenjury.models.spec import named_spec
from eigenjury.names import short_labels


@pytest.mark.parametrize(
    ("text", "provider", "model", "endpoint"),
    [
        ("openai:gpt-4o-mini", "openai", "gpt-4o-mini", None),
        ("anthropic:claude-sonnet-4", "anthropic", "claude-sonnet-4", None),
        ("local:smollm2-135m", "local", "smollm2-135m", None),
        ("scripted:echo", "scripted", "echo", None),
        (
            "openai-compatible:qwen3-8b@http://gpu-box:8000/v1",
            "openai-compatible",
            "qwen3-8b",
            "http://gpu-box:8000/v1",
        ),
        (  # an '@' inside the model name stays there
            "openai-compatible:claude@2024@https://proxy.example/v1",
            "openai-compatible",
            "claude@2024",
            "https://proxy.example/v1",
        ),
    ],
)
def test_spec_strings(text: str, provider: str, model: str, endpoint: str | None) -> None:
    spec = ModelSpec.parse(text)
    assert (spec.provider, spec.model, spec.endpoint) == (provider, model, endpoint)
    assert str(spec) == text
    assert ModelSpec.from_value(str(spec)) == spec


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpt-4o", "has no provider"),
        ("openia:gpt-4o", "unknown provider 'openia'"),
        ("openai-compatible:qwen", "needs an endpoint"),
        ("openai:", "names no model"),
        ("openai-compatible:m@ftp://x", r"endpoint .ftp://x. of .* is not an http\(s\) URL"),
        (
            "openai-compatible:m@http://localhost:99999/v1",
            r"endpoint 'http://localhost:99999/v1' of model spec .*Port out of range",
        ),
        ("openai-compatible:m@http://[::1/v1", r"'http://\[::1/v1' .*Invalid IPv6 URL"),
        ("openai-compatible:m@http://h:port/v1", "not a valid URL"),
        ("openai-compatible:m@http://h:0/v1", "has port 0"),
    ],
)
def test_bad_specs_say_what_to_write(text: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ModelSpec.parse(text)


def test_spec_identity_and_keys_carry_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = ModelSpec.parse("openai-compatible:m@https://user:pw@host:8443/v1?api_key=s3cret&v=2")
    # a key-named parameter is left out (a new key reuses the results); any other value
    # makes its own key, as a digest: the store never holds it
    digest = "sha256-" + hashlib.sha256(b"2").hexdigest()[:16]
    assert spec.identity() == {
        "provider": "openai-compatible",
        "model": "m",
        "endpoint": f"https://host:8443/v1?v={digest}",
    }
    other = ModelSpec.parse("openai-compatible:m@https://host:8443/v1?v=3")
    assert other.identity() != spec.identity()
    plain = ModelSpec.parse("openai-compatible:m@http://[::1]:8000/v1/")  # as before
    assert plain.identity()["endpoint"] == "http://::1:8000/v1"
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(InputError, match="set the environment variable OPENAI_API_KEY"):
        ModelSpec.parse("openai:gpt-4o").api_key()
    custom = ModelSpec.from_value(
        {"spec": "openai-compatible:m@http://h/v1", "api_key_env": "ROUTER_KEY"}
    )
    with pytest.raises(InputError, match="ROUTER_KEY"):
        custom.api_key()
    monkeypatch.setenv("ROUTER_KEY", "sk-test")
    assert custom.api_key() == "sk-test"
    assert "sk-test" not in repr(custom) + str(custom.identity())
    assert ModelSpec.parse("openai-compatible:m@http://h/v1").api_key() is None  # optional


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("openai-compatible:m@http://user:PASS@h:1/v1", "openai-compatible:m@http://***@h:1/v1"),
        ("openai-compatible:m@http://:PASS@h/v1", "openai-compatible:m@http://***@h/v1"),
        (
            "openai-compatible:m@https://h/v1?auth=AUTHSECRET&x=1&flag",
            "openai-compatible:m@https://h/v1?auth=***&x=***&flag",
        ),
        ("openai-compatible:m@https://h/v1#FRAGSECRET", "openai-compatible:m@https://h/v1#***"),
        ("openai-compatible:m@https://h.example/v1/", "openai-compatible:m@https://h.example/v1/"),
    ],
)
def test_a_spec_is_shown_without_the_secrets_of_its_endpoint(text: str, shown: str) -> None:
    spec = ModelSpec.parse(text)
    assert str(spec) == shown and shown in repr(spec)
    assert spec.shown_in_full is (shown == text)
    for secret in ("PASS", "AUTHSECRET", "FRAGSECRET"):
        assert secret not in str(spec) + repr(spec) + str(spec.identity())
        assert (secret in text) is (secret in spec.secrets())
    assert spec.endpoint is not None and spec.base_url == spec.endpoint.rstrip("/")


def test_spec_secrets_cover_every_form_of_the_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTER_KEY", "sk-router-key")
    spec = ModelSpec.from_value(
        {
            "spec": "openai-compatible:m@http://us%40er:p%3Ass@h/v1?a=xx%2Fyy&b=1",
            "api_key_env": "ROUTER_KEY",
        }
    )
    secrets = spec.secrets()
    # the key; user info and query values as written and decoded; HTTP Basic as sent;
    # not a one-character flag, which would blot out every digit of a message
    for secret in ("sk-router-key", "us%40er", "us@er", "p%3Ass", "p:ss", "xx%2Fyy", "xx/yy"):
        assert secret in secrets
    assert base64.b64encode(b"us@er:p:ss").decode() in secrets and "1" not in secrets


def test_bad_specs_never_show_their_secrets() -> None:
    for text in (
        "openai-compatible:m@ftp://USERSECRET:PASSSECRET@h/v1?auth=QUERYSECRET",
        "openai-compatible:m@http://USERSECRET:PASSSECRET@h:0/v1?auth=QUERYSECRET",
        "openai-compatible:m@http://USERSECRET:PASSSECRET@[::1/v1?auth=QUERYSECRET",
        "openai-compatible:m@http://USERSECRET:PASSSECRET@h:99999/v1?auth=QUERYSECRET",
    ):
        with pytest.raises(SpecError) as raised:
            ModelSpec.parse(text)
        assert not any(s in str(raised.value) for s in ("USERSECRET", "PASSSECRET", "QUERYSECRET"))


def test_persona_puts_its_system_prompt_first() -> None:
    persona = Persona("kind", ModelSpec.parse("scripted:echo"), "Be kind.")
    request = persona.dress(ChatRequest.chat(("user", "hi"), temperature=0.0))
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[0].content == "Be kind." and request.temperature == 0.0


def test_prices(tmp_path: pytest.TempPathFactory) -> None:
    table = PriceTable()
    mini = ModelSpec.parse("openai:gpt-4o-mini-2024-07-18")  # dated variant finds its family
    assert table.cost(mini, Usage(1_000_000, 1_000_000)) == pytest.approx(0.75)
    assert table.cost(ModelSpec.parse("local:smollm2-135m"), Usage(10, 10)) == 0.0
    unknown = ModelSpec.parse("openai-compatible:mystery@http://h/v1")
    assert table.cost(unknown, Usage(10, 10)) is None
    path = tmp_path / "prices.toml"  # type: ignore[operator]
    path.write_text('"openai-compatible:mystery" = {input = 1.0, output = 2.0}\n')
    extended = PriceTable.from_file(path)
    assert extended.cost(unknown, Usage(1_000_000, 500_000)) == pytest.approx(2.0)
    assert extended.cost(mini, Usage(1_000_000, 0)) == pytest.approx(0.15)
    path.write_text('"x" = {input = "cheap"}\n')
    with pytest.raises(InputError, match="input and output USD per million"):
        PriceTable.from_file(path)


def test_scripted_provider_is_deterministic_and_fails_on_cue() -> None:
    register_script("shout", lambda r: r.messages[-1].content.upper())
    request = ChatRequest.chat(("user", "hello"))
    provider = ScriptedProvider("shout")
    assert asyncio.run(provider.generate(request)).text == "HELLO"
    flaky = ScriptedProvider("echo", failure_rate=1.0)
    with pytest.raises(ServerError):
        asyncio.run(flaky.generate(request))
    choice = ScriptedProvider("choice")
    picks = {
        asyncio.run(
            choice.generate(ChatRequest.chat(("user", f"q{i}"), choices=("0", "1", "2")))
        ).text
        for i in range(30)
    }
    assert picks == {"0", "1", "2"}
    with pytest.raises(SpecError, match="no scripted model 'nope'"):
        ScriptedProvider("nope")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"provider": "openai-compatible", "model": "m", "endpoint": 8000}, "endpoint"),
        ({"spec": "openai:gpt-4o-mini", "api_key_env": 3}, "api_key_env"),
        ("openai-compatible:m@http://", r"not an http\(s\) URL"),
    ],
)
def test_spec_fields_of_the_wrong_kind_are_input_errors(value: object, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        ModelSpec.from_value(value)  # type: ignore[arg-type]


def test_price_tables_and_binary_files_give_located_errors(tmp_path: Any) -> None:
    listed = tmp_path / "prices.json"
    listed.write_text("[1, 2]")
    with pytest.raises(InputError, match=r"prices\.json: a price table maps"):
        PriceTable.from_file(listed)
    binary = tmp_path / "prices.toml"
    binary.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(InputError, match=r"prices\.toml, line 1: not UTF-8 text"):
        PriceTable.from_file(binary)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("p.toml", '"scripted:echo" = {input = -1.0, output = 2.0}', "got -1.0"),
        ("p.toml", '"openai:gpt-4o" = {input = 1.0, output = nan}', "output price .* got nan"),
        ("p.toml", '"openai:gpt-4o" = {input = inf, output = 1.0}', "got inf"),
        ("p.json", '{"openai:gpt-4o": {"input": NaN, "output": 1}}', "got nan"),
        ("p.json", '{"openai:gpt-4o": {"input": 1, "output": -Infinity}}', "got -inf"),
        ("p.json", '{"openai:gpt-4o": {"input": "-3", "output": 1}}', "got -3.0"),
        ("p.json", "[" * 100_000, "nested too deeply"),
        ("p.toml", "a = " + "[" * 100_000, "nested too deeply"),
    ],
)
def test_prices_must_be_finite_and_not_negative(
    tmp_path: Any, name: str, text: str, expected: str
) -> None:
    """A negative or NaN price would make costs negative and slip under --budget-usd."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError, match=expected) as caught:
        PriceTable.from_file(path)
    assert str(caught.value).startswith(str(path))
    if "nested" not in expected:  # the message names the model too
        assert "field '" in str(caught.value)


def test_a_price_is_finite_and_not_negative() -> None:
    with pytest.raises(ValueError, match="finite number of USD, 0 or more"):
        Price(-0.5, 1.0)
    with pytest.raises(ValueError, match="output_per_mtok"):
        Price(1.0, float("nan"))


@pytest.mark.fuzz
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (b"hello, not a model\n", "is not a GGUF model"),
        (b"", "is not a GGUF model"),
        (b"PK\x03\x04 a zip", "is not a GGUF model"),
        (b"GGUF", None),  # the magic alone passes this check; llama.cpp reads the rest
    ],
)
def test_a_local_model_file_that_is_not_gguf_is_refused_up_front(
    content: bytes, problem: str | None, tmp_path: Any
) -> None:
    from eigenjury.models.providers.local import model_path

    path = tmp_path / "model.gguf"
    path.write_bytes(content)
    if problem is None:
        assert model_path(str(path)) == path
        return
    with pytest.raises(SpecError) as error:
        model_path(str(path))
    assert problem in error.value.message and str(path) in error.value.message
    assert "local:" in error.value.message and "CPU" not in error.value.message


@pytest.mark.fuzz
def test_grade_refuses_a_juror_file_that_is_no_model_before_opening_the_store(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.cli import main

    fake = tmp_path / "fake.gguf"
    fake.write_text("not a model")
    contract = tmp_path / "c.yaml"
    contract.write_text(
        "tasks:\n  - task_id: t\n    execution: {prompt: hi}\n    evaluation:\n"
        "      criteria: [{id: c, weight: 100, grader: llm_judge, prompt: says hi}]\n"
    )
    subs = tmp_path / "s.jsonl"
    subs.write_text('{"task_id": "t", "submission": "hi"}\n')
    store = tmp_path / "store.sqlite"
    argv = ["grade", str(contract), "--submissions", str(subs), "--jury", f"local:{fake}"]
    code = main([*argv, "--store", str(store), "--out", str(tmp_path / "out"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and "is not a GGUF model" in err and "Traceback" not in err
    assert not store.exists()  # refused like a missing file: nothing asked, nothing stored


def test_a_short_name_is_taken_only_where_it_cannot_be_part_of_a_spec() -> None:
    """NAME=SPEC names a model; a spec whose endpoint query holds "=" stays a spec, and
    a name that is not a bare word is refused as a spec would be."""
    assert named_spec("judge-a=openai:gpt-4o-mini") == (
        "judge-a",
        ModelSpec.parse("openai:gpt-4o-mini"),
    )
    query = "openai-compatible:m@http://h:8000/v1?auth=abc"
    assert named_spec(query) == (None, ModelSpec.parse(query))
    assert named_spec(" local:smollm2-135m ") == (None, ModelSpec.parse("local:smollm2-135m"))
    with pytest.raises(SpecError, match="unknown provider 'a b=openai'"):
        named_spec("a b=openai:gpt-4o")


def test_short_labels_keep_names_apart() -> None:
    names = [
        "openai-compatible:org/judge@http://127.0.0.1:8080/v1",
        "openai-compatible:org/judge@http://127.0.0.1:8080/v1#2",
        "openai:gpt-4o",
        "anthropic:gpt-4o",
        "local:smollm2-135m",
        "ann",
    ]
    assert short_labels(names) == [
        "judge", "judge#2", "openai:gpt-4o", "anthropic:gpt-4o", "smollm2-135m", "ann",
    ]  # fmt: skip
