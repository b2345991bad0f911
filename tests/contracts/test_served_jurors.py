"""Served jurors (HTTP) give structured verdicts where their endpoint enforces the schema,
fall back to today's free text and repair where it does not, and are counted by how
their first replies gave their verdicts; local and scripted jurors are asked as before."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from eigenjury.contracts.bundle import load_contract
from eigenjury.contracts.grading import Submission, TaskResult, grade
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.prompts import juror_request
from eigenjury.contracts.rules import GRADE_CHOICES, parse_grade
from eigenjury.contracts.trace import grading_record
from eigenjury.engine import Engine, Store
from eigenjury.engine.store import request_key
from eigenjury.models import ModelSpec
from eigenjury.models.types import ChatRequest
from eigenjury.models.verdict_format import VerdictFormat
from eigenjury.records import VerdictModes
from eigenjury.testing.server import FaultServer, Judging

CONTRACT = """\
name: capitals
tasks:
  - task_id: france
    execution: {prompt: "What is the capital of France?"}
    evaluation:
      criteria:
        - {id: city, weight: 20, grader: exact_match, prompt: Paris}
        - {id: names-paris, weight: 40, grader: llm_judge, prompt: The answer names paris}
        - {id: lovely, weight: 40, grader: llm_judge, prompt: The answer says lovely}
"""
SUBMISSIONS = [Submission("france", "x", "Paris"), Submission("france", "y", "Lyon")]
JURORS = ("j1", "j2")
ALWAYS_C = {"GRADE: C": 1.0}
ALWAYS_I = {"GRADE: I": 1.0}


class Graded:
    """A grading by served jurors: results, record, and what the server was sent."""

    def __init__(self, results: list[TaskResult], jury: Jury, bodies: list[dict[str, Any]]):
        self.results = results
        self.record = grading_record(results, contract="capitals", jury=jury)
        self.bodies = bodies
        self.votes = [v for r in results for c in r.criteria if c.by_jury for v in c.votes]

    def structured_asks(self, model: str) -> int:
        return sum("response_format" in b for b in self.bodies if b.get("model") == model)


def grade_served(
    tmp_path: Path,
    judging: Judging,
    *,
    spec: Callable[[str, str], str] = lambda model, base: f"openai-compatible:{model}@{base}",
    verdict_format: VerdictFormat = "auto",
    batch: bool = False,
) -> Graded:
    """Grade SUBMISSIONS with JURORS served by the test server answering as `judging`."""
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    source = load_contract(path)

    async def go() -> Graded:
        served = FaultServer(judging=judging, keep_bodies=True)
        base = await served.start()
        jury = Jury.from_specs(
            [spec(m, base) for m in JURORS], verdict_format=verdict_format, batch_criteria=batch
        )
        try:
            async with Engine(Store(tmp_path / "store.sqlite"), progress=False) as engine:
                results = await grade(engine, source, SUBMISSIONS, jury)
        finally:
            await served.stop()
        return Graded(results, jury, served.bodies or [])

    return asyncio.run(go())


def modes(graded: Graded) -> dict[str, VerdictModes]:
    """The record's verdict modes by juror model."""
    assert graded.record.verdicts is not None
    return {ModelSpec.parse(name).model: m for name, m in graded.record.verdicts.items()}


def test_a_structured_reply_is_read_by_its_verdict_first() -> None:
    reply = json.dumps({"reasoning": "It says GRADE: C, but no.", "verdict": "GRADE: I"})
    assert parse_grade(reply) == "I"
    assert parse_grade(f"```json\n{reply}\n```") == "I"
    assert parse_grade(json.dumps({"reasoning": "x", "verdict": "C"})) is None  # not a label
    assert parse_grade("Fine.\nGRADE: C") == "C"  # text as before


@pytest.mark.parametrize("odds, grade", [(ALWAYS_C, "C"), (ALWAYS_I, "I")])
def test_an_enforcing_server_gives_structured_grades_without_repair(
    tmp_path: Path, odds: dict[str, float], grade: str
) -> None:
    graded = grade_served(tmp_path, Judging("enforce", verdicts=odds))
    assert [v.grade for v in graded.votes] == [grade] * 8  # 2 submissions x 2 criteria x 2
    assert all(v.attempts == 1 and v.verdict_mode == "structured" for v in graded.votes)
    assert len(graded.bodies) == 8  # no repair call
    body = graded.bodies[0]
    assert body["response_format"]["json_schema"]["schema"]["properties"]["verdict"] == {
        "enum": list(GRADE_CHOICES)
    }
    passed = grade == "C"
    assert [[c.passed for c in r.criteria[1:]] for r in graded.results] == [[passed] * 2] * 2
    assert modes(graded) == {
        m: VerdictModes(structured=4, scores=0, text=0, unread=0, unread_rate=0.0) for m in JURORS
    }
    assert "verdict_format" not in graded.record.model_dump()["jury"]  # auto: not written


@pytest.mark.parametrize("batch", [False, True])
def test_a_juror_that_repeats_the_format_after_its_grade_is_read_by_its_grade(
    tmp_path: Path, batch: bool
) -> None:
    """After its grade the juror repeats the format it was shown ("GRADE: C if it meets
    the criterion, GRADE: I if it does not"; "GRADE[id]: C or I"): its grade counts."""
    verdict = "GRADE[names-paris]: C\nGRADE[lovely]: C" if batch else "GRADE: C"
    graded = grade_served(tmp_path, Judging("ignore", {verdict: 1.0}, echo=True), batch=batch)
    assert [v.grade for v in graded.votes] == ["C"] * 8
    assert all(v.attempts == 1 for v in graded.votes)


def test_a_refusing_server_is_asked_once_then_answers_in_text(tmp_path: Path) -> None:
    graded = grade_served(tmp_path, Judging("refuse", verdicts=ALWAYS_C))
    assert [v.grade for v in graded.votes] == ["C"] * 8
    assert all(v.attempts == 1 and v.verdict_mode == "text" for v in graded.votes)
    assert [graded.structured_asks(m) for m in JURORS] == [1, 1]  # the refusal, once each
    assert len(graded.bodies) == 8 + 2
    assert modes(graded)["j1"] == VerdictModes(
        structured=0, scores=0, text=4, unread=0, unread_rate=0.0
    )


def test_an_ignoring_server_answers_in_text_repaired_as_today(tmp_path: Path) -> None:
    """The server takes the schema but answers in free text, here without a verdict:
    every first reply is unread and repaired once (the repair has no verdict either)."""
    graded = grade_served(tmp_path, Judging("ignore"))
    assert all(v.unparsed and v.attempts == 2 for v in graded.votes)
    assert all(v.verdict_mode == "text" and not v.first_read for v in graded.votes)
    assert len(graded.bodies) == 8 + 8  # each first reply repaired once
    repairs = [b for b in graded.bodies if len(b["messages"]) == 4]
    assert len(repairs) == 8 and not any("response_format" in b for b in repairs)
    assert [graded.structured_asks(m) for m in JURORS] == [1, 1]  # then known as ignored
    assert modes(graded)["j2"] == VerdictModes(
        structured=0, scores=0, text=4, unread=4, unread_rate=1.0
    )
    assert not any(c.passed for r in graded.results for c in r.criteria[1:])


def test_forced_text_sends_no_response_format(tmp_path: Path) -> None:
    judging = Judging("enforce", verdicts=ALWAYS_I)
    graded = grade_served(tmp_path, judging, verdict_format="text")
    assert len(graded.bodies) == 8 and not any("response_format" in b for b in graded.bodies)
    assert [v.grade for v in graded.votes] == ["I"] * 8  # from the free-text verdict line
    assert graded.record.model_dump()["jury"]["verdict_format"] == "text"


def test_forced_logprobs_counts_replies_with_label_scores(tmp_path: Path) -> None:
    judging = Judging("enforce", verdicts={"GRADE: C": 0.7, "GRADE: I": 0.3}, logprobs=True)
    graded = grade_served(tmp_path, judging, verdict_format="logprobs")
    assert not any("response_format" in b for b in graded.bodies)
    assert all(v.grade in ("C", "I") and v.verdict_mode == "scores" for v in graded.votes)
    assert modes(graded)["j1"].scores == 4


def test_batched_criteria_stay_free_text(tmp_path: Path) -> None:
    graded = grade_served(tmp_path, Judging("enforce", verdicts=ALWAYS_C), batch=True)
    assert len(graded.bodies) == 2 * 2 + 2 * 2  # one call per juror and submission, repaired
    assert not any("response_format" in b for b in graded.bodies)
    assert modes(graded)["j1"].text == 4  # one per vote: 2 criteria in each of 2 calls


def test_an_anthropic_juror_answers_by_a_forced_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    graded = grade_served(
        tmp_path,
        Judging(verdicts=ALWAYS_C),
        spec=lambda model, base: f"anthropic:{model}@{base}",
    )
    assert [v.grade for v in graded.votes] == ["C"] * 8
    assert all(v.attempts == 1 and v.verdict_mode == "structured" for v in graded.votes)


def test_local_and_scripted_jurors_are_asked_as_before(tmp_path: Path) -> None:
    """Their requests, and so their store keys, are those of before served verdicts."""
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    task = load_contract(path).contract.tasks[0]
    criterion = task.evaluation.criteria[1:2]
    options: dict[str, Any] = {"temperature": 0.0, "seed": 3, "max_tokens": 64}
    local = ModelSpec.parse("local:some-model")
    assert not local.served and not ModelSpec.parse("scripted:echo").served
    asked = juror_request(task, None, "Paris", criterion, constrained=True, **options)
    before = ChatRequest(asked.messages, temperature=0.0, seed=3, choices=("GRADE: C", "GRADE: I"))
    assert request_key(local, asked) == request_key(local, before)
    text = juror_request(task, None, "Paris", criterion, constrained=False, **options)
    plain = ChatRequest(text.messages, temperature=0.0, max_tokens=64, seed=3)
    assert request_key(local, text) == request_key(local, plain)  # (scripted jurors)
    served = juror_request(
        task, None, "Paris", criterion, constrained=False, verdict_format="auto", **options
    )
    assert served.choices == GRADE_CHOICES and served.messages == text.messages
