"""Inspect AI models as eigenjury's scorers call them: a request (models.types) asked as
Inspect messages, a structured verdict first where the request asks for a verdict,
and the reply as a Completion; models named as `eigenjury grade` names its jurors."""

from __future__ import annotations

import time
from collections.abc import Sequence

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    ResponseSchema,
    get_model,
)
from inspect_ai.util import JSONSchema

from eigenjury.contracts.jury import juror_names
from eigenjury.models.types import ChatRequest, Completion, Usage
from eigenjury.models.verdict_format import verdict_schema


def model_names(jury: str | Sequence[str | Model] | None) -> list[str | Model]:
    if jury is None:
        return []
    if isinstance(jury, str):
        return [name.strip() for name in jury.split(",") if name.strip()]
    return list(jury)


def _messages(request: ChatRequest) -> list[ChatMessage]:
    kinds = {
        "system": ChatMessageSystem,
        "user": ChatMessageUser,
        "assistant": ChatMessageAssistant,
    }
    return [kinds[m.role](content=m.content) for m in request.messages]


def _completion(output: ModelOutput, seconds: float) -> Completion:
    usage = output.usage
    return Completion(
        text=output.completion,
        finish_reason=str(output.stop_reason),
        usage=Usage(usage.input_tokens, usage.output_tokens) if usage else Usage(),
        latency_s=output.time if output.time is not None else seconds,
    )


def _verdict_schema(request: ChatRequest) -> ResponseSchema | None:
    """The structured verdict `eigenjury grade` asks a served juror for (reasons first,
    then one of the verdict lines), where the request asks for a verdict."""
    if request.choices is None:
        return None
    schema = JSONSchema.model_validate(verdict_schema(request.choices))
    return ResponseSchema(name="verdict", json_schema=schema, strict=True)


async def ask_model(
    model: Model, request: ChatRequest, text_only: set[str] | None = None
) -> Completion:
    """One call. A verdict request is asked as a structured verdict first, as `grade`
    asks a served juror; a model whose provider refuses the schema is asked in text,
    and remembered in `text_only` so that it is not asked with one again."""
    config = GenerateConfig(
        temperature=request.temperature, seed=request.seed, max_tokens=request.max_tokens
    )
    schema = _verdict_schema(request)
    start = time.perf_counter()
    if schema is not None and text_only is not None and model.name not in text_only:
        try:
            output = await model.generate(
                _messages(request), config=config.merge(GenerateConfig(response_schema=schema))
            )
            return _completion(output, time.perf_counter() - start)
        except Exception:  # the schema refused: ask in text (a real failure fails again)
            text_only.add(model.name)
            start = time.perf_counter()
    output = await model.generate(_messages(request), config=config)
    return _completion(output, time.perf_counter() - start)


def named_models(jury: Sequence[str | Model]) -> list[tuple[str, int, Model]]:
    """(name, sample, model) per juror; a repeated model's copies are told apart."""
    models = [entry if isinstance(entry, Model) else get_model(entry) for entry in jury]
    bases = [e if isinstance(e, str) else m.name for e, m in zip(jury, models, strict=True)]
    return [(name, n, m) for (name, n), m in zip(juror_names(bases), models, strict=True)]
