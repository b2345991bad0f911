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


def test_given_answers_judged_by_a_served_judge_against_a_baseline(
    base_url: str, tmp_path: Path
) -> None:
    """`eigenjury judge` as a user with Arena-Hard answers and a served judge runs it: the
    run completes, the judge's verdicts are read from its replies (structured, graded on
    five points), and the report shows the win rates against the baseline and the style
    coefficients measured from the answers' texts."""
    from answer_files import arena_hard
    from eigenjury.cli import main

    questions = {
        "u1": "What is the capital of Australia?",
        "u2": "Write a Python function that squares a number.",
        "u3": "How many legs does a spider have?",
    }
    answers = {
        "gpt-4-0314": {"u1": "Canberra.", "u2": "def square(x):\n    return x * x", "u3": "Eight."},
        "careful": {
            "u1": "The capital of Australia is **Canberra**, not Sydney.",
            "u2": "```python\ndef square(x):\n    return x * x\n```\nIt multiplies x by itself.",
            "u3": "A spider has **eight** legs.",
        },
        "sloppy": {"u1": "Sydney.", "u2": "def square(x): return x + x", "u3": ""},
    }
    arena_hard(tmp_path / "data", answers, questions)
    out = tmp_path / "judged"
    judge = f"smol=openai-compatible:smol@{base_url}"
    args = ["--judge", judge, "--baseline", "gpt-4-0314", "--bootstrap", "50", "--no-progress"]
    assert main(["judge", str(tmp_path / "data"), *args, "--out", str(out)]) == 0
    config = yaml.safe_load((out / "config.yaml").read_text())
    config["judging"]["graded"] = True  # the written config, edited and run again
    config["answers"] = {"empty": "loss"}
    (out / "config.yaml").write_text(yaml.safe_dump(config))
    run = run_rank(out / "config.yaml", progress=False)
    summary = run.record.run
    assert summary is not None and summary.verdicts_by_judge is not None
    read = summary.verdicts_by_judge["smol"]
    assert read.structured + read.scores + read.text == 10  # 3 x 2 members x 2 orders, less 2
    assert read.unread_rate is not None and read.unread_rate <= 0.25
    assert summary.by_rule == 2  # sloppy's empty answer loses both orders, with no call
    assert run.record.baseline is not None and len(run.record.baseline.models) == 2
    report = (out / "report.html").read_text()
    assert "Against the baseline" in report and "Style control" in report
