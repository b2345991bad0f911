"""OpenAI chat completions: api.openai.com and every server that speaks /v1/chat/completions
(vLLM, SGLang, Ollama, llama.cpp server, OpenRouter, the in-repo test server).

A request with `choices` asks for a verdict. How depends on what the endpoint supports,
found out on the first such request and kept in `features` (the store keeps it across
runs):

- "structured": the verdict schema in `response_format`, as `json_schema` (OpenAI, vLLM,
  SGLang, llama.cpp's server, Ollama) or as `json_object` with a `schema` (the only form
  llama-cpp-python's server takes). A refusal naming the field, or one that goes away
  when the field is dropped, marks it "refused"; a first reply that does not follow the
  schema marks it "ignored" (such a server never enforces it). The reply is kept as the
  server gave it (JSON; `verdict_format.read_structured` reads it).
- "logprobs": with `request.logprobs`, the top alternatives of every token, from which
  the labels' log-probabilities are read where the verdict is decided; "absent" once a
  reply comes without them.
- otherwise today's free-text request, which the protocol reads and repairs.

`request.verdict_format` forces one of these instead.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from eigenjury.files import json_kind
from eigenjury.models.errors import (
    BadRequestError,
    ContextLengthError,
    MalformedResponseError,
    ServerError,
)
from eigenjury.models.providers.http import HttpProvider, valid_text
from eigenjury.models.types import ChatRequest, Completion
from eigenjury.models.verdict_format import (
    read_structured,
    structured_label_logprobs,
    verdict_line_logprobs,
    verdict_schema,
)

TOP_LOGPROBS = 20  # alternatives per token when labels are scored (OpenAI's maximum)
STRUCTURED_FORMS = ("json_schema", "json_object")
REASONING_CHARS_PER_TOKEN = 2  # a bound on the reasons: about half the reply's budget
_REFUSAL_WORDS = ("response_format", "json_schema")


class OpenAICompatibleProvider(HttpProvider):
    def payload(
        self, request: ChatRequest, *, structured: str | None = None, label_scores: bool = False
    ) -> dict[str, Any]:
        """The request body. `structured` (one of STRUCTURED_FORMS) asks for the verdict
        schema over `request.choices`; `label_scores` for the alternatives of each token."""
        body: dict[str, Any] = {
            "model": self.spec.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
        }
        for name in ("temperature", "max_tokens", "top_p", "seed"):
            value = getattr(request, name)
            if value is not None:
                body[name] = value
        if request.stop:
            body["stop"] = list(request.stop)
        if structured is not None:
            assert request.choices is not None
            body["response_format"] = _response_format(structured, request)
        if label_scores:
            body["logprobs"] = True
            body["top_logprobs"] = TOP_LOGPROBS
        elif request.logprobs and request.choices is None:
            body["logprobs"] = True
            body["top_logprobs"] = 5
        return body

    async def generate(self, request: ChatRequest) -> Completion:
        if request.choices is None:
            return await self._send(request, self.payload(request))
        if request.verdict_format == "auto" and "structured" not in self.features:
            async with self._probing:
                if "structured" not in self.features:
                    return await self._verdict(request)
        return await self._verdict(request)

    async def _verdict(self, request: ChatRequest) -> Completion:
        label_scores, form = self.verdict_form(request, self.features)
        if form is not None:
            return await self._structured(request, form)
        return await self._text_verdict(request, label_scores=label_scores)

    def _label_scores(self, request: ChatRequest) -> bool:
        return request.logprobs and self.features.get("logprobs") != "absent"

    def verdict_form(
        self, request: ChatRequest, features: Mapping[str, str]
    ) -> tuple[bool, str | None]:
        """How a request asks for its verdict (label scores; the structured form, or None
        for free text), from what is known of the endpoint (`features`: the provider's
        own for a live call, those of when its batch was sent for a batched one). A live
        call then falls back where the endpoint refuses the form; a batch cannot."""
        if request.choices is None:
            return False, None
        mode = request.verdict_format
        if mode in ("text", "logprobs"):
            return mode == "logprobs", None
        scores = request.logprobs and features.get("logprobs") != "absent"
        known = features.get("structured")
        if mode == "structured" or known not in ("refused", "ignored"):
            return scores, known if known in STRUCTURED_FORMS else "json_schema"
        return scores, None

    async def _text_verdict(self, request: ChatRequest, *, label_scores: bool) -> Completion:
        body = self.payload(request, label_scores=label_scores)
        return await self._send(request, body, label_scores=label_scores)

    async def _structured(self, request: ChatRequest, form: str) -> Completion:
        """A structured request; on a refusal, the other form where the server names it
        as what it takes, then (unless forced) today's free-text request."""
        label_scores = self._label_scores(request)
        body = self.payload(request, structured=form, label_scores=label_scores)
        try:
            completion = await self._send(request, body, label_scores=label_scores, form=form)
        except (BadRequestError, ServerError) as exc:
            named = any(word in exc.message.lower() for word in _REFUSAL_WORDS)
            if isinstance(exc, ContextLengthError) or not (
                named or isinstance(exc, BadRequestError)
            ):
                raise
            if named and form == "json_schema" and "json_object" in exc.message:
                return await self._structured(request, "json_object")
            if request.verdict_format == "structured":
                if not named:
                    raise
                raise BadRequestError(
                    f"{self.public_base} does not take structured output (response_format) "
                    f"for {self.spec.model} ({exc.message}); set verdict_format: text, or "
                    "auto to fall back to free text by itself",
                    status=exc.status,
                ) from None
            if named:  # learnt now, even if the free-text request below fails
                self.features["structured"] = "refused"
            completion = await self._text_verdict(request, label_scores=self._label_scores(request))
            self.features["structured"] = "refused"  # (unnamed: it went without the field)
        return completion

    async def _send(
        self,
        request: ChatRequest,
        body: dict[str, Any],
        *,
        label_scores: bool = False,
        form: str | None = None,
    ) -> Completion:
        """Post `body`, read the reply, and learn from it what the endpoint supports."""
        start = time.perf_counter()
        data = await self.post_json("/chat/completions", body, self.headers())
        latency = time.perf_counter() - start
        return self.read_reply(request, data, latency, label_scores=label_scores, form=form)

    def headers(self) -> dict[str, str]:
        bearer = self._key and not self.url_credentials
        return {"Authorization": f"Bearer {self._key}"} if bearer else {}

    def batch_body(self, request: ChatRequest, form: tuple[bool, str | None]) -> dict[str, Any]:
        """The body of a batched request asked in `form` (verdict_form)."""
        label_scores, structured = form
        return self.payload(request, structured=structured, label_scores=label_scores)

    def read_reply(
        self,
        request: ChatRequest,
        data: dict[str, Any],
        latency: float,
        *,
        label_scores: bool = False,
        form: str | None = None,
    ) -> Completion:
        """The completion in a chat completion (an answer, or a batch's result), and what
        it says the endpoint supports."""
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponseError(f"{self.public_base} answered with no choices")
        first = choices[0] if isinstance(choices[0], dict) else {}
        message = first.get("message")
        text = message.get("content") if isinstance(message, dict) else None
        if not isinstance(text, str):
            raise MalformedResponseError(f"{self.public_base} answered without message content")
        text = valid_text(text)
        finish_reason = str(first.get("finish_reason") or "unknown")
        labels = request.choices or ()
        if form is not None and self.features.get("structured") not in STRUCTURED_FORMS:
            if read_structured(text, labels) is not None:
                self.features["structured"] = form
            elif finish_reason != "length":  # a reply cut short says nothing either way
                self.features["structured"] = "ignored"
        choice_logprobs = None
        if label_scores:
            tokens = self._logprob_tokens(first.get("logprobs"))
            self.features["logprobs"] = "supported" if tokens else "absent"
            read = structured_label_logprobs if form is not None else verdict_line_logprobs
            choice_logprobs = read(text, tokens, labels) if tokens else None
        return Completion(
            text=text,
            finish_reason=finish_reason,
            usage=self.usage(data, "prompt_tokens", "completion_tokens"),
            latency_s=latency,
            choice_logprobs=choice_logprobs,
        )

    def _logprob_tokens(self, logprobs: Any) -> list[dict[str, Any]]:
        """A choice's `logprobs.content` (none: []): tokens with a text `token` and
        `top_logprobs` (none: []) of a text `token` and a number `logprob` each. Any
        other shape is a malformed reply, and the message names the place."""

        def check(value: Any, where: str, wanted: type | tuple[type, ...], what: str) -> None:
            if not isinstance(value, wanted) or isinstance(value, bool):
                raise MalformedResponseError(
                    f"{self.public_base} answered with choices[0].logprobs{where} "
                    f"{json_kind(value)}, not {what}"
                )

        if logprobs is None:
            return []
        check(logprobs, "", dict, "an object")
        tokens = logprobs.get("content")
        if tokens is None:
            return []
        check(tokens, ".content", list, "a list of tokens")
        for i, token in enumerate(tokens):
            check(token, f".content[{i}]", dict, "an object")
            check(token.get("token"), f".content[{i}].token", str, "text")
            alternatives = token.get("top_logprobs")
            if alternatives is None:
                continue
            check(alternatives, f".content[{i}].top_logprobs", list, "a list")
            for k, alternative in enumerate(alternatives):
                where = f".content[{i}].top_logprobs[{k}]"
                check(alternative, where, dict, "an object")
                check(alternative.get("token"), f"{where}.token", str, "text")
                check(alternative.get("logprob"), f"{where}.logprob", (int, float), "a number")
        checked: list[dict[str, Any]] = tokens
        return checked


def _response_format(form: str, request: ChatRequest) -> dict[str, Any]:
    assert request.choices is not None
    if form == "json_object":  # llama-cpp-python's server: a grammar from `schema`, which
        # bounds the reasons to about half the reply's tokens: small served models ramble
        # on in the reasons and would be cut off before their verdict (BENCHMARKS.md)
        chars = (
            None if request.max_tokens is None else REASONING_CHARS_PER_TOKEN * request.max_tokens
        )
        return {"type": "json_object", "schema": verdict_schema(request.choices, chars)}
    return {  # (OpenAI's strict mode takes no `maxLength`)
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "strict": True,
            "schema": verdict_schema(request.choices),
        },
    }
