"""OpenAI chat completions: api.openai.com and every server that speaks /v1/chat/completions
(vLLM, SGLang, Ollama, llama.cpp server, OpenRouter, the in-repo test server)."""

from __future__ import annotations

import math
import time
from typing import Any

from eigenjury.models.errors import MalformedResponseError
from eigenjury.models.providers.http import HttpProvider, valid_text
from eigenjury.models.types import ChatRequest, Completion


class OpenAICompatibleProvider(HttpProvider):
    def payload(self, request: ChatRequest) -> dict[str, Any]:
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
        if request.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 5
        return body

    async def generate(self, request: ChatRequest) -> Completion:
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        start = time.perf_counter()
        data = await self.post_json("/chat/completions", self.payload(request), headers)
        latency = time.perf_counter() - start
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices:
            raise MalformedResponseError(f"{self.public_base} answered with no choices")
        first = choices[0] if isinstance(choices[0], dict) else {}
        message = first.get("message") or {}
        text = message.get("content")
        if not isinstance(text, str):
            raise MalformedResponseError(f"{self.public_base} answered without message content")
        return Completion(
            text=valid_text(text),
            finish_reason=str(first.get("finish_reason") or "unknown"),
            usage=self.usage(data, "prompt_tokens", "completion_tokens"),
            latency_s=latency,
            choice_logprobs=_choice_logprobs(first, request) if request.logprobs else None,
        )


def _choice_logprobs(choice: dict[str, Any], request: ChatRequest) -> dict[str, float] | None:
    """Log-probabilities of the allowed choices from the first token's top alternatives.

    Exact for choices that are single tokens (A/B, 0/1/2); others are absent. Servers
    without logprobs give None.
    """
    content = (choice.get("logprobs") or {}).get("content") or []
    if not content or request.choices is None:
        return None
    top = {
        str(alt.get("token", "")).strip(): float(alt.get("logprob", -math.inf))
        for alt in content[0].get("top_logprobs") or []
    }
    found = {c: top[c] for c in request.choices if c in top}
    return found or None
