"""Served bound judges (HTTP) give structured verdicts where their endpoint enforces the
schema and text otherwise, each reply counted by how it gave its verdict; local and
scripted judges are asked as before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from bound_scripts import write_dataset
from eigenjury.bounds import (
    JudgedItem,
    JudgeProtocol,
    MeasureInputs,
    MeasureSettings,
    SensitivityProfile,
    measure_sensitivity,
    read_dataset,
)
from eigenjury.bounds.judges import RATING_CHOICES, VERDICT_CHOICES
from eigenjury.engine import Engine, Store
from eigenjury.engine.store import request_key
from eigenjury.models import ModelSpec
from eigenjury.models.types import ChatRequest
from eigenjury.models.verdict_format import VerdictFormat
from eigenjury.records import VerdictModes, read_record, write_record
from eigenjury.testing.server import FaultServer, Judging

GENERATORS = ("identity",)  # each neighbour a new request: one reply per request sent
M = 6


def write_pairs(path: Path, n: int = M) -> Path:
    with path.open("w") as f:
        for i in range(n):
            line = {"id": f"p{i}", "prompt": "Q?", "response_a": f"a{i}", "response_b": f"b{i}"}
            f.write(json.dumps(line) + "\n")
    return path


class Measured:
    def __init__(self, profile: SensitivityProfile, bodies: list[dict[str, Any]]) -> None:
        self.profile = profile
        self.bodies = bodies
        self.structured_asks = sum("response_format" in b for b in bodies)


def measure_served(
    tmp_path: Path,
    judging: Judging,
    *,
    kind: str = "single",
    verdict_format: VerdictFormat = "auto",
) -> Measured:
    """A profile of a judge served by the test server answering as `judging`."""
    data = write_dataset(tmp_path / "d.jsonl") if kind == "single" else write_pairs(tmp_path / "p")
    items = read_dataset(data)

    async def go(served: FaultServer) -> SensitivityProfile:
        base = await served.start()
        settings = MeasureSettings(
            judge=ModelSpec.parse(f"openai-compatible:judge@{base}"),
            protocol=JudgeProtocol(kind),
            generators=GENERATORS,
            m=M,
            seed=1,
            verdict_format=verdict_format,
        )
        try:
            async with Engine(Store(tmp_path / "s.sqlite"), progress=False) as engine:
                return await measure_sensitivity(engine, MeasureInputs(items, "d", settings))
        finally:
            await served.stop()

    served = FaultServer(judging=judging, keep_bodies=True)
    return Measured(asyncio.run(go(served)), served.bodies or [])


@pytest.mark.parametrize(
    ("kind", "odds", "score"),
    [("single", {"[[7]]": 1.0}, 7.0), ("pairwise", {"[[A>B]]": 1.0}, 2.0)],
)
def test_an_enforcing_server_gives_structured_verdicts(
    tmp_path: Path,
    kind: str,
    odds: dict[str, float],
    score: float,
) -> None:
    measured = measure_served(tmp_path, Judging("enforce", verdicts=odds), kind=kind)
    profile = measured.profile
    asked = len(measured.bodies)
    assert measured.structured_asks == asked  # every reply asked for, and gave, a verdict
    enum = measured.bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    choices = RATING_CHOICES if kind == "single" else VERDICT_CHOICES
    assert enum["verdict"] == {"enum": list(choices)}
    assert profile.verdicts == VerdictModes(
        structured=asked, scores=0, text=0, unread=0, unread_rate=0.0
    )
    assert profile.original_failures == {}
    normalised = JudgeProtocol(kind).scale.normalise(score)
    identity = profile.generators["identity"]
    assert all(p.original == normalised and p.perturbed == normalised for p in identity.pairs)


def test_a_refusing_server_is_asked_once_then_answers_in_text(tmp_path: Path) -> None:
    measured = measure_served(tmp_path, Judging("refuse", verdicts={"[[4]]": 1.0}))
    asked = len(measured.bodies) - 1  # the refused request has no reply
    assert measured.structured_asks == 1
    assert measured.profile.verdicts == VerdictModes(
        structured=0, scores=0, text=asked, unread=0, unread_rate=0.0
    )


def test_an_ignoring_server_answers_in_text_and_its_failures_are_counted(tmp_path: Path) -> None:
    measured = measure_served(tmp_path, Judging("ignore"))
    asked = len(measured.bodies)
    assert measured.structured_asks == 1  # then known as ignored
    assert measured.profile.verdicts == VerdictModes(
        structured=0, scores=0, text=asked, unread=asked, unread_rate=1.0
    )
    assert measured.profile.original_failures == {"unparsed": M}


@pytest.mark.parametrize(
    ("kind", "odds", "score"),
    [("single", {"[[2]]": 1.0}, 2.0), ("pairwise", {"[[A>>B]]": 1.0}, 1.0)],
)
def test_a_judge_that_repeats_the_format_after_its_verdict_is_read_by_its_verdict(
    tmp_path: Path, kind: str, odds: dict[str, float], score: float
) -> None:
    """The judge gives its verdict, then repeats the format it was shown (for example
    [[7]]; [[A>>B]] if ..., [[B>>A]] if B is much better): its verdict is read."""
    judging = Judging("ignore", verdicts=odds, echo=True)
    profile = measure_served(tmp_path, judging, kind=kind).profile
    assert profile.verdicts is not None and profile.verdicts.unread == 0
    normalised = JudgeProtocol(kind).scale.normalise(score)
    identity = profile.generators["identity"]
    assert all(p.original == normalised and p.perturbed == normalised for p in identity.pairs)


def test_forced_text_sends_no_response_format_and_the_profile_says_so(tmp_path: Path) -> None:
    judging = Judging("enforce", verdicts={"[[B>>A]]": 1.0})
    measured = measure_served(tmp_path, judging, kind="pairwise", verdict_format="text")
    assert measured.structured_asks == 0
    assert measured.profile.verdicts is not None and measured.profile.verdicts.text == len(
        measured.bodies
    )
    path = tmp_path / "profile.json"
    write_record(path, measured.profile)
    written = json.loads(path.read_text())
    assert written["verdict_format"] == "text" and written["verdicts"]["unread"] == 0
    assert read_record(path, SensitivityProfile) == measured.profile


def test_structured_verdicts_are_read_first() -> None:
    single, pairwise = JudgeProtocol("single"), JudgeProtocol("pairwise")
    item = JudgedItem("i", "q", ("r",), (None,))
    pair = JudgedItem("p", "q", ("a", "b"), (None, None), swapped=True)
    reply = json.dumps({"reasoning": "not [[2]] but", "verdict": "[[9]]"})
    assert single.parse(reply, item) == 9.0
    assert single.parse(json.dumps({"reasoning": "[[3]]", "verdict": "[[11]]"}), item) is None
    assert pairwise.parse(json.dumps({"reasoning": "", "verdict": "[[A>>B]]"}), pair) == 5.0


def test_local_and_scripted_judges_are_asked_as_before() -> None:
    """No choices without a verdict format, so their store keys are those of before."""
    item = JudgedItem("i", "q", ("r",), (None,))
    local = ModelSpec.parse("local:some-model")
    for kind in ("single", "pairwise"):
        protocol = JudgeProtocol(kind, max_tokens=50)
        asked = protocol.request(item if kind == "single" else _pair(), 4)
        before = ChatRequest(asked.messages, temperature=0.0, max_tokens=50, seed=4)
        assert asked == before and request_key(local, asked) == request_key(local, before)
        served = protocol.request(item if kind == "single" else _pair(), 4, "auto")
        assert served.choices == protocol.choices and served.messages == asked.messages


def _pair() -> JudgedItem:
    return JudgedItem("p", "q", ("a", "b"), (None, None))


def test_bound_measure_forces_a_mode_and_prints_the_verdict_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.cli import main
    from eigenjury.testing.server import ServerThread

    with ServerThread(judging=Judging("enforce", verdicts={"[[5]]": 1.0})) as server:
        out = tmp_path / "profile.json"
        args = ["bound", "measure", str(write_dataset(tmp_path / "d.jsonl")), "--judge"]
        args += [f"openai-compatible:judge@{server.base_url}", "--generators", "identity"]
        args += ["--m", "4", "--out", str(out), "--store", str(tmp_path / "s"), "--no-progress"]
        assert main([*args, "--verdict-format", "structured"]) == 0
    text = capsys.readouterr().out
    assert "verdicts of the served judge's replies: 8 structured; unread 0%" in text
    written = json.loads(out.read_text())
    assert written["verdict_format"] == "structured" and written["verdicts"]["structured"] == 8
