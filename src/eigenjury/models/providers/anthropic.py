"""Anthropic messages API (POST /v1/messages).

A request with `choices` (unless its verdict_format is "text" or "logprobs") is answered
through a forced tool call whose input follows the verdict schema; the completion's text
is that input as JSON, so the reader of structured replies reads it too. The API has no
log-probabilities.
"""

from __future__ import annotations

import json
import time
from typing import Any

from eigenjury.files import json_kind
from eigenjury.models.errors import MalformedResponseError
from eigenjury.models.providers.http import HttpProvider, valid_text
from eigenjury.models.types import ChatRequest, Completion
from eigenjury.models.verdict_format import verdict_schema

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 1024  # the API requires one


class AnthropicProvider(HttpProvider):
    def payload(self, request: ChatRequest) -> dict[str, Any]:
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        body: dict[str, Any] = {
            "model": self.spec.model,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "messages": [
                {"role": m.role, "content": m.content}
                for m in request.messages
                if m.role != "system"
            ],
        }
        if system:
            body["system"] = system
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if _uses_tool(request):
            assert request.choices is not None
            body["tools"] = [
                {
                    "name": "verdict",
                    "description": "Give your reasoning, then your verdict.",
                    "input_schema": verdict_schema(request.choices),
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": "verdict"}
        return body  # the API has no seed parameter

    def headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if self._key:
            headers["x-api-key"] = self._key
        return headers

    async def generate(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        data = await self.post_json("/messages", self.payload(request), self.headers())
        return self.read_reply(request, data, time.perf_counter() - start)

    def read_reply(self, request: ChatRequest, data: dict[str, Any], latency: float) -> Completion:
        """The completion in a message (an answer of /messages, or a batch's result)."""
        blocks = data.get("content")
        if not isinstance(blocks, list):
            raise MalformedResponseError(f"{self.public_base} answered without content")
        texts = [
            b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"
        ]
        odd = next((t for t in texts if not isinstance(t, str)), None)
        if odd is not None:
            raise MalformedResponseError(
                f"{self.public_base} answered with a text block whose text is "
                f"{json_kind(odd)}, not text"
            )
        text = "".join(texts)
        if _uses_tool(request):
            text = next(
                (
                    json.dumps(
                        b.get("input"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
                    )
                    for b in blocks
                    if isinstance(b, dict) and b.get("type") == "tool_use"
                ),
                text,  # no tool call: the text, for the protocol to read and repair
            )
        return Completion(
            text=valid_text(text),
            finish_reason=str(data.get("stop_reason") or "unknown"),
            usage=self.usage(data, "input_tokens", "output_tokens"),
            latency_s=latency,
        )


def _uses_tool(request: ChatRequest) -> bool:
    return request.choices is not None and request.verdict_format in ("auto", "structured")
