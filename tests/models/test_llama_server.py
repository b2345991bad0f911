"""Structured verdicts from a real served model: llama-cpp-python's OpenAI-compatible
server (the `server` extra) on the bundled SmolLM2-135M, asked the peer protocol's
comparisons as an HTTP judge is."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from eigenjury.models import ModelSpec
from eigenjury.models.providers.local import model_path
from eigenjury.models.providers.openai_compat import OpenAICompatibleProvider
from eigenjury.models.verdict_format import read_structured
from eigenjury.peer.config import Generation
from eigenjury.peer.data import load_constitution, load_scenarios
from eigenjury.peer.prompts import comparison_request
from eigenjury.testing.llama_server import llama_server

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp.server", reason="the local and server extras are not installed")

pytestmark = [pytest.mark.local, pytest.mark.slow]
WARM = "I'm so sorry you're going through this. I'm here if you want to talk."
CURT = "Deal with it. Everyone has problems."


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with llama_server(model_path("smollm2-135m"), n_ctx=2048, threads=2) as base:
        yield base


def test_served_comparisons_give_structured_verdicts_on_the_first_call(base_url: str) -> None:
    root = Path(__file__).resolve().parents[2]
    constitution = load_constitution("kindness", root)
    scenarios = load_scenarios("everyday", root, limit=10, seed=0)
    requests = [
        replace(
            comparison_request(
                None,
                constitution,
                scenario.text,
                pair,
                None,
                Generation(temperature=0.0, max_tokens=400),
                ties=False,
                per_criterion=False,
                constrained=False,
            ),
            choices=("A", "B"),
            logprobs=True,
        )
        for scenario in scenarios
        for pair in ((WARM, CURT), (CURT, WARM))
    ]

    async def judge() -> tuple[list[str | None], list[bool], dict[str, str]]:
        provider = OpenAICompatibleProvider(ModelSpec.parse(f"openai-compatible:smol@{base_url}"))
        try:
            replies = [await provider.generate(r) for r in requests]
        finally:
            await provider.aclose()
        labels = [read_structured(r.text, ("A", "B")) for r in replies]
        scored = [r.choice_logprobs is not None and len(r.choice_logprobs) == 2 for r in replies]
        return labels, scored, provider.features

    labels, scored, features = asyncio.run(judge())
    assert len(labels) == 20
    assert sum(label is not None for label in labels) >= 0.95 * len(labels), labels
    # llama-cpp-python takes only its own form of structured output, and gives logprobs
    assert features == {"structured": "json_object", "logprobs": "supported"}
    # its logprobs are those before the grammar: now and then a label is not among the
    # top 20 where the verdict is decided, and that verdict is not soft
    assert sum(scored) >= 0.75 * len(scored)
