"""The Inspect AI extension: `inspect eval eigenjury/contract` and the contract scorer.

Offline with the mockllm provider. Its default outputs carry no token usage, so Inspect
would count tokens with a tokenizer it downloads; every mock output here sets usage,
and the command-line run grades pre-made submissions with graders that need no model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai")
from inspect_ai.log import EvalLog, read_eval_log  # noqa: E402
from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model  # noqa: E402

from eigenjury.integrations.inspect_extension import contract  # noqa: E402

CONTRACT = """\
name: inspect-check
tasks:
  - task_id: france
    execution: {prompt: "Capital of France? End with 'Answer: <city>'."}
    evaluation:
      pass_threshold: 60
      criteria:
        - {id: city, weight: 40, grader: exact_match, prompt: Paris}
        - {id: polite, weight: 60, grader: llm_judge, prompt: The answer is polite}
  - task_id: sum
    execution: {prompt: "What is 2 + 3?"}
    evaluation:
      criteria:
        - {id: value, weight: 100, grader: numeric, prompt: "5"}
"""


def mock(reply: str, calls: list[str] | None = None) -> Model:
    """A mock model replying `reply` (with Paris made 5 when the prompt asks for 2 + 3)."""

    def answer(messages: Any, *_: Any) -> ModelOutput:
        if calls is not None:
            calls.append(messages[-1].text)
        text = reply.replace("Paris", "5") if "2 + 3" in messages[-1].text else reply
        output = ModelOutput.from_content(model="mockllm/model", content=text)
        output.usage = ModelUsage(input_tokens=20, output_tokens=5, total_tokens=25)
        return output

    return get_model("mockllm/model", memoize=False, custom_outputs=answer)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    return path


def run(bundle: Path, jury: list[Model], tmp_path: Path, **args: Any) -> EvalLog:
    task = contract(str(bundle), jury=jury, **args)  # type: ignore[arg-type]
    [log] = inspect_ai.eval(
        task,
        model=mock("Polite reply.\nAnswer: Paris"),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    return log


def scores(log: EvalLog) -> dict[str, dict[str, float]]:
    assert log.samples is not None
    return {str(s.id): s.scores["contract_scorer"].value for s in log.samples}  # type: ignore[index, misc]


@pytest.mark.slow
def test_a_tied_jury_fails_the_criterion(bundle: Path, tmp_path: Path) -> None:
    log = run(bundle, [mock("GRADE: C"), mock("GRADE: C\nno:\nGRADE: I")], tmp_path)
    assert scores(log) == {
        "france": {"score": 0.4, "passed": 0.0, "unread": 0.0},
        "sum": {"score": 1.0, "passed": 1.0, "unread": 0.0},
    }
    assert log.samples is not None
    metadata = log.samples[0].scores["contract_scorer"].metadata  # type: ignore[index]
    assert metadata["criteria"][1]["votes"] == {"C": 1, "I": 1, "unparsed": 0, "error": 0}
    assert log.results is not None
    metrics = {(s.name, m): v.value for s in log.results.scores for m, v in s.metrics.items()}
    assert metrics[("score", "mean")] == pytest.approx(0.7)
    assert metrics[("passed", "accuracy")] == pytest.approx(0.5)


@pytest.mark.slow
def test_a_strict_majority_passes_and_unreadable_votes_are_repaired_once(
    bundle: Path, tmp_path: Path
) -> None:
    log = run(bundle, [mock("GRADE: C"), mock("GRADE: I"), mock("GRADE: C")], tmp_path / "a")
    assert scores(log)["france"] == {"score": 1.0, "passed": 1.0, "unread": 0.0}
    mute_calls: list[str] = []
    log = run(bundle, [mock("GRADE: C"), mock("no idea", mute_calls)], tmp_path / "b")
    # C + unread = a tie; one vote of two unread
    assert scores(log)["france"] == {"score": 0.4, "passed": 0.0, "unread": 0.5}
    assert len(mute_calls) == 2 and "did not end with a verdict line" in mute_calls[1]


@pytest.mark.slow
def test_inspect_eval_command_finds_the_extension(bundle: Path, tmp_path: Path) -> None:
    submissions = tmp_path / "subs.jsonl"
    submissions.write_text(
        json.dumps({"task_id": "sum", "submission": "2 + 3 = 5", "candidate": "x"}) + "\n"
    )
    only_numeric = tmp_path / "numeric.yaml"
    only_numeric.write_text(
        CONTRACT[CONTRACT.index("  - task_id: sum") :].join(["name: n\ntasks:\n", ""])
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "inspect_ai",
            "eval",
            "eigenjury/contract",
            "-T",
            f"bundle={only_numeric}",
            "-T",
            f"submissions={submissions}",
            "--model",
            "mockllm/model",
            "--log-dir",
            str(tmp_path / "logs"),
            "--display",
            "none",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    [log_file] = (tmp_path / "logs").glob("*.eval")
    log = read_eval_log(str(log_file))
    assert log.eval.task == "eigenjury/contract"
    assert scores(log) == {"sum": {"score": 1.0, "passed": 1.0, "unread": 0.0}}


def test_the_inspect_extra_brings_the_openai_client_inspect_needs() -> None:
    """Inspect's openai/ and openai-api/ providers (OpenAI-compatible jurors) import the
    `openai` package, at least 3.4.0 for inspect-ai 0.3.285, which does not install it."""
    import tomllib
    from importlib.metadata import version

    from packaging.requirements import Requirement

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    for extra in ("inspect", "dev"):
        [openai] = [r for r in map(Requirement, extras[extra]) if r.name == "openai"]
        assert version("openai") in openai.specifier and "3.3.0" not in openai.specifier
    juror = get_model("openai-api/local/judge", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert juror.name == "local/judge"


@pytest.mark.slow
def test_a_served_juror_gives_structured_verdicts_and_unread_votes_are_a_metric(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The in-repo server as a served juror through Inspect's OpenAI-compatible
    provider. Where it enforces a JSON-schema verdict, every vote is read (the same
    structured verdict `eigenjury grade` asks for); where it refuses the schema (a 400
    naming the field), the juror is asked in text and its verdict line read; where it
    ignores the schema and answers in free text without a verdict line, the votes are
    unread, the `unread` metric says so and the explanation says the grade rests on
    unread votes."""
    from eigenjury.testing.server import Judging, ServerThread

    cases = (
        (Judging(response_format="enforce"), 0.0),
        (Judging(response_format="refuse", verdicts={"GRADE: C": 1.0}), 0.0),
        (Judging(response_format="ignore"), 1.0),
    )
    for judging, unread in cases:
        with ServerThread(judging=judging) as server:
            monkeypatch.setenv("LOCAL_BASE_URL", server.base_url)
            monkeypatch.setenv("LOCAL_API_KEY", "test-key")
            juror = get_model("openai-api/local/test", memoize=False)
            log = run(bundle, [juror], tmp_path / judging.response_format)
        assert log.samples is not None
        france = log.samples[0].scores["contract_scorer"]  # type: ignore[index]
        assert france.value["unread"] == unread  # type: ignore[index]
        assert log.results is not None
        metrics = {(s.name, m): v.value for s in log.results.scores for m, v in s.metrics.items()}
        assert metrics[("unread", "mean")] == pytest.approx(unread / 2)  # "sum" has no jury
        votes = france.metadata["criteria"][1]["votes"]  # type: ignore[index]
        if unread:
            assert votes["unparsed"] == 1
            assert (france.explanation or "").startswith("most jury votes were unread (1 of 1")
        else:
            assert votes["unparsed"] == 0 and votes["C"] + votes["I"] == 1
