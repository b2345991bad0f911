"""Inspect AI eval logs as given answers: each log's model a member, read through
Inspect's own log reader, and judged against a baseline by `eigenjury judge`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai")
from inspect_ai import Task  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import write_eval_log  # noqa: E402
from inspect_ai.model import (  # noqa: E402
    ChatMessageSystem,
    ChatMessageUser,
    Model,
    ModelOutput,
    ModelUsage,
    get_model,
)
from inspect_ai.solver import generate  # noqa: E402

import peer_scripts  # noqa: E402, F401  (registers the scripted judges)
from eigenjury.cli import main  # noqa: E402
from eigenjury.peer.answers import read_answers  # noqa: E402

SAMPLES = [
    *(Sample(id=i, input=f"Question {i}: how?") for i in range(1, 9)),
    Sample(
        id="chat",
        input=[ChatMessageSystem(content="Be brief."), ChatMessageUser(content="Explain tides.")],
    ),
]


def mock(quality: float, fail: str | None = None) -> Model:
    """A model that signs its answers with a hidden quality (the scripted judge reads
    it), and whose call fails on the question `fail`."""

    def answer(messages: Any, *_: Any) -> ModelOutput:
        if fail is not None and fail in messages[-1].text:
            raise RuntimeError("the provider went away")
        output = ModelOutput.from_content("mockllm/model", f"Here you go [quality {quality}].")
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", memoize=False, custom_outputs=answer)


def eval_log(folder: Path, model: str, quality: float, *, epochs: int = 1, **fail: str) -> Path:
    """An Inspect run of the samples, as its log (named as the model would be)."""
    [log] = inspect_ai.eval(
        Task(dataset=SAMPLES, solver=generate()),
        model=mock(quality, **fail),
        log_dir=str(folder / "logs"),
        display="none",
        fail_on_error=False,
        epochs=epochs,
    )
    log.eval.model = model  # mockllm names every model alike
    path = folder / f"{model.replace('/', '-')}.eval"
    write_eval_log(log, str(path))
    return path


def test_an_inspect_log_gives_its_models_answers_by_sample(tmp_path: Path) -> None:
    path = eval_log(tmp_path, "openai/gpt-4o", 0.5, fail="Question 3")
    (answers,) = read_answers(path)
    assert answers.model == "openai/gpt-4o" and answers.format == "inspect"
    assert set(answers.answers) == {*map(str, range(1, 9)), "chat"}
    assert answers.answers["1"].text == "Here you go [quality 0.5]."
    assert answers.answers["3"].kind == "error"  # the harness failed, not the model
    assert answers.questions["chat"] == "System:\nBe brief.\n\nUser:\nExplain tides."
    epochs = read_answers(eval_log(tmp_path / "e", "m/e", 0.0, epochs=2))[0]
    assert {"1/1", "1/2"} <= set(epochs.answers)  # each epoch its own question


def test_eigenjury_judge_ranks_inspect_logs_against_a_baseline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = eval_log(tmp_path, "org/base", 0.0)
    better = eval_log(tmp_path, "org/better", 2.0, fail="Question 3")
    out = tmp_path / "judged"
    args = [str(base), str(better), "--judge", "scripted:peer-truth", "--baseline", "org/base"]
    assert main(["judge", *args, "--out", str(out), "--no-progress"]) == 0
    record = json.loads((out / "results.json").read_text())
    (row,) = record["baseline"]["models"]
    assert row["model"] == "org/better" and row["verdicts"] == 16  # 8 questions, both orders
    assert row["win_rate"] > 0.6
    members = {m["name"]: m["answers"] for m in record["run"]["members"]}
    assert members["org/better"]["errors"] == 1 and members["org/better"]["format"] == "inspect"
    assert "Against the baseline org/base" in capsys.readouterr().out
