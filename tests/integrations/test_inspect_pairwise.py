"""The Inspect pairwise scorer: each sample's output judged against a baseline's answer
in both orders, inside `inspect eval`, with the win rate and an Elo metric."""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai")
from inspect_ai import Task  # noqa: E402
from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.log import EvalLog  # noqa: E402
from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model  # noqa: E402
from inspect_ai.solver import generate  # noqa: E402

from answer_files import alpaca_eval, table  # noqa: E402
from eigenjury.integrations.inspect_extension import pairwise_scorer  # noqa: E402

QUALITY = re.compile(r"Reply ([AB]):\n<reply>\n.*?\[quality (-?[\d.]+)\]", re.S)
SAMPLES = [
    Sample(id=f"q{i}", input=f"Question {i}?", target="Plain [quality 0]") for i in range(12)
]


def mock(reply: Any) -> Model:
    def answer(messages: Any, *_: Any) -> ModelOutput:
        text = reply(messages[-1].text) if callable(reply) else reply
        output = ModelOutput.from_content("mockllm/model", text)
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
        return output

    return get_model("mockllm/model", memoize=False, custom_outputs=answer)


def judging(prompt: str) -> str:
    """A judge that prefers the reply of higher hidden quality 80% of the time (a draw
    seeded by the prompt) and says so in a verdict tag after its reasons."""
    quality = {label: float(q) for label, q in QUALITY.findall(prompt)}
    better = "A" if quality["A"] > quality["B"] else "B"
    worse = "B" if better == "A" else "A"
    draw = int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) / 16**8
    return f"Reply {better} is exact.\n<verdict>{better if draw < 0.8 else worse}</verdict>"


def run(tmp_path: Path, **scorer: Any) -> EvalLog:
    [log] = inspect_ai.eval(
        Task(dataset=SAMPLES, solver=generate(), scorer=pairwise_scorer(**scorer)),
        model=mock("A careful answer [quality 1.5]"),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.status == "success", log.error
    return log


def metrics(log: EvalLog) -> dict[str, float]:
    assert log.results is not None
    return {
        f"{s.name}/{name}": m.value for s in log.results.scores for name, m in s.metrics.items()
    }


def test_outputs_are_judged_against_the_target_in_both_orders(tmp_path: Path) -> None:
    log = run(tmp_path, baseline="target", judge=[mock(judging)])
    got = metrics(log)
    assert 0.6 < got["win/mean"] < 0.95 and got["win/stderr"] > 0
    assert got["unread/mean"] == 0
    assert got["win/eigenjury/elo_vs_baseline"] > 100  # the output is the better reply
    assert log.samples is not None
    for sample in log.samples:
        verdicts = sample.scores["pairwise_scorer"].metadata["verdicts"]  # type: ignore[index]
        assert sorted(v["first"] for v in verdicts) == ["baseline", "output"]  # both orders


def test_a_baseline_answer_file_is_matched_by_sample_id_and_a_missing_one_unscored(
    tmp_path: Path,
) -> None:
    answers = {"gpt-4-0314": {f"q{i}": "Baseline [quality 0]" for i in range(1, 12)}}
    path = table(tmp_path / "base.csv", answers, {f"q{i}": f"Question {i}?" for i in range(12)})
    log = run(tmp_path, baseline=str(path), judge=[mock(judging)])
    assert log.samples is not None
    missing = next(s for s in log.samples if s.id == "q0").scores["pairwise_scorer"]  # type: ignore[index]
    assert math.isnan(missing.value["win"])  # type: ignore[index]
    assert "no answer to sample q0" in str(missing.explanation)
    assert metrics(log)["win/mean"] > 0.6


def test_alpaca_eval_baselines_are_matched_by_the_samples_text(tmp_path: Path) -> None:
    outputs = {f"Question {i}?": "Baseline [quality 0]" for i in range(12)}
    path = alpaca_eval(tmp_path / "gpt4_turbo.json", "gpt4_turbo", outputs)
    got = metrics(run(tmp_path, baseline=str(path), judge=[mock(judging)]))
    assert got["win/mean"] > 0.6  # every sample scored: ids are the instructions' hashes


def test_unreadable_judges_are_unread_never_ties(tmp_path: Path) -> None:
    log = run(tmp_path, baseline="target", judge=[mock("I cannot decide.")])
    got = metrics(log)
    assert got["unread/mean"] == 1.0
    assert log.samples is not None
    verdicts = log.samples[0].scores["pairwise_scorer"].metadata["verdicts"]  # type: ignore[index]
    assert all(v["verdict"] is None and v["repair"] == "I cannot decide." for v in verdicts)


@pytest.mark.slow
def test_inspect_score_rescores_a_log_with_the_registered_scorer(tmp_path: Path) -> None:
    """`inspect score LOG --scorer eigenjury/pairwise_scorer`: the scorer is found through
    the entry point and its metrics are in the rescored log."""
    [log] = inspect_ai.eval(
        Task(dataset=SAMPLES[:3], solver=generate()),
        model=mock("An answer [quality 1]"),
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    assert log.location
    out = tmp_path / "scored.eval"
    done = subprocess.run(
        [sys.executable, "-m", "inspect_ai", "score", log.location, "--scorer",
         "eigenjury/pairwise_scorer", "-S", "baseline=target", "-S", "judge=mockllm/model",
         "--output-file", str(out), "--overwrite"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    scored = json.loads(
        subprocess.run(
            [sys.executable, "-m", "inspect_ai", "log", "dump", str(out)],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    names = {m for s in scored["results"]["scores"] for m in s["metrics"]}
    assert {"mean", "stderr", "eigenjury/elo_vs_baseline"} <= names
