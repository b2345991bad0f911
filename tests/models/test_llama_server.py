"""A rank run whose judges are served by a real server: llama-cpp-python's OpenAI-compatible
server (the `server` extra) on the bundled SmolLM2-135M, three members, as a user who
serves a small model for judging would run it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from eigenjury.engine.store import Store, spec_json
from eigenjury.jobs import run_rank
from eigenjury.models import ModelSpec
from eigenjury.models.providers.local import model_path
from eigenjury.testing.llama_server import llama_server

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp.server", reason="the local and server extras are not installed")

pytestmark = [pytest.mark.local, pytest.mark.slow]


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with llama_server(model_path("smollm2-135m"), n_ctx=2048, threads=2) as base:
        yield base


def test_served_judges_give_usable_verdicts_on_the_first_call(
    base_url: str, tmp_path: Path
) -> None:
    """Today's free-text prompts gave 3 usable verdicts of 54 on this server; asked for a
    schema verdict, at least 95% of comparisons are read from the first reply."""
    members = {"warm": "You are a warm, gentle friend.", "curt": "You are curt.", "plain": None}
    config = {
        "population": [
            {"name": name, "model": f"openai-compatible:smol@{base_url}", "persona": persona}
            for name, persona in members.items()
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 3, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {
            "reflections": False,
            "ties": False,
            "soft": True,
            "evaluee": {"temperature": 0.7, "max_tokens": 60, "seed": 0},
            "judge": {"temperature": 0.0, "max_tokens": 400},
        },
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "concurrency": 1},
    }
    path = tmp_path / "rank.yaml"
    path.write_text(yaml.safe_dump(config))
    run = run_rank(path, progress=False)
    summary = run.record.run
    assert summary is not None and summary.comparisons == 54
    modes = summary.verdicts_by_judge or {}
    first = sum(m.structured + m.scores + m.text - m.unread for m in modes.values())
    assert first >= 0.95 * 54, modes
    assert summary.verdicts >= first
    # llama-cpp-python takes its own form of structured output, and gives logprobs
    spec = spec_json(ModelSpec.parse(f"openai-compatible:smol@{base_url}"))
    with Store(tmp_path / "store.sqlite", create=False) as store:
        assert store.features(spec) == {"structured": "json_object", "logprobs": "supported"}
    # its logprobs are those before the grammar: now and then a label is not among the
    # top 20 where the verdict is decided, and that verdict is not soft
    soft = sum((summary.soft_verdicts_by_judge or {}).values())
    assert soft >= 0.75 * summary.verdicts
