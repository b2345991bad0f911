"""Harbor export: the task layout, and the generated verifier run against a temporary root
(no Harbor, no Docker), with jurors on the in-repo test server over real HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from eigenjury.cli import main
from eigenjury.testing.server import ServerThread

CONTRACT = """\
name: harbor-check
tasks:
  - task_id: capital/france
    execution:
      prompt: "What is the capital of France? End with 'Answer: <city>'."
      reference_file: hint.txt
    evaluation:
      pass_threshold: 50
      criteria:
        - {id: city, weight: 50, grader: exact_match, prompt: Paris}
        - {id: polite, weight: 50, grader: llm_judge, prompt: The answer is polite}
"""
SECRET = "sk-test-never-on-disk-4242"


def export(tmp_path: Path, base_url: str) -> Path:
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "hint.txt").write_text("It is on the Seine.")
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    code = main(
        [
            "contracts",
            "export-harbor",
            str(tmp_path / "contract.yaml"),
            str(tmp_path / "harbor"),
            "--jury",
            f"openai-compatible:judge@{base_url}",
        ]
    )
    assert code == 0
    return tmp_path / "harbor" / "capital-france"


def run_verifier(task_dir: Path, root: Path, answer: str | None) -> dict[str, object]:
    shutil.copytree(task_dir / "tests", root / "tests")
    if answer is not None:
        (root / "app").mkdir(parents=True)
        (root / "app" / "answer.txt").write_text(answer)
    env = {
        **os.environ,
        "EIGENJURY_HARBOR_ROOT": str(root),
        "OPENAI_COMPATIBLE_API_KEY": SECRET,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": "",  # only the vendored copy may be imported
    }
    done = subprocess.run(
        ["bash", str(root / "tests" / "test.sh")], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads((root / "logs" / "verifier" / "reward.json").read_text())  # type: ignore[no-any-return]


def test_exported_task_layout(tmp_path: Path) -> None:
    task = export(tmp_path, "http://127.0.0.1:9/v1")
    config = tomllib.loads((task / "task.toml").read_text())
    assert config["verifier"]["env"] == {
        "OPENAI_COMPATIBLE_API_KEY": "${OPENAI_COMPATIBLE_API_KEY}"
    }
    assert config["metadata"]["eigenjury_task_id"] == "capital/france"
    assert config["environment"]["cpus"] == 1
    instruction = (task / "instruction.md").read_text()
    assert "capital of France" in instruction and "/app/answer.txt" in instruction
    assert "Paris" not in instruction  # evaluation inputs never reach the solver
    assert (task / "environment" / "refs" / "hint.txt").read_text() == "It is on the Seine."
    dockerfile = (task / "environment" / "Dockerfile").read_text()
    assert "aiohttp==" in dockerfile and "COPY refs/ /app/refs/" in dockerfile
    assert "regex==" in dockerfile  # the regex grader's time limit needs it in the verifier
    assert (task / "tests" / "vendor" / "eigenjury" / "contracts" / "rules.py").is_file()
    assert os.access(task / "tests" / "test.sh", os.X_OK)


@pytest.mark.slow
def test_generated_verifier_grades_on_a_temporary_root(tmp_path: Path) -> None:
    with ServerThread(latency_s=0.0) as server:
        task = export(tmp_path, server.base_url)
        right = run_verifier(task, tmp_path / "root1", "Bonjour!\nAnswer: Paris")
        wrong = run_verifier(task, tmp_path / "root2", "Answer: Rome")
        missing = run_verifier(task, tmp_path / "root3", None)
        asked = server.requests
    # The echoing test server never gives a verdict line: the jury criterion fails with an
    # unparseable vote after one repair request; the exact-match criterion decides.
    assert right == {"reward": 0.5, "passed": 1}
    assert wrong == {"reward": 0.0, "passed": 0}
    assert missing == {"reward": 0.0, "passed": 0}
    assert asked >= 6  # three answers x (grading call + repair) over HTTP
    logs = tmp_path / "root1" / "logs" / "verifier"
    result = json.loads((logs / "result.json").read_text())
    assert result["score"] == 50 and result["criteria"][1]["votes"]["unparsed"] == 1
    trace = [json.loads(line) for line in (logs / "trace.jsonl").read_text().splitlines()]
    assert [row["criterion_id"] for row in trace] == ["city", "polite"]
    assert trace[1]["attempts"] == 2 and trace[1]["grade"] is None
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
def test_a_crashing_verifier_still_leaves_a_reward(tmp_path: Path) -> None:
    task = export(tmp_path, "http://127.0.0.1:9/v1")
    (task / "tests" / "jury.json").write_text("{broken")
    assert run_verifier(task, tmp_path / "root", "Answer: Paris") == {"reward": 0.0, "passed": 0}


# --- bad input --------------------------------------------------------------------------


def export_rules(
    tmp_path: Path, task_ids: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """Export a contract whose tasks need no jury; (exit code, what was printed)."""
    tasks = "".join(
        f"  - task_id: {json.dumps(t)}\n"
        "    execution: {prompt: 'Capital of France?'}\n"
        "    evaluation:\n"
        "      criteria: [{id: city, weight: 100, grader: exact_match, prompt: Paris}]\n"
        for t in task_ids
    )
    (tmp_path / "contract.yaml").write_text(f"name: rules\ntasks:\n{tasks}")
    args = ["contracts", "export-harbor", str(tmp_path / "contract.yaml"), str(tmp_path / "out")]
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@pytest.mark.parametrize(
    ("first", "second"), [("a/b", "a-b"), ("Paris", "paris"), (".", "-"), ("x y", "x?y")]
)
def test_task_ids_sharing_a_folder_are_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str, second: str
) -> None:
    code, out = export_rules(tmp_path, ["ok", first, second], capsys)
    assert code == 2 and "Traceback" not in out
    assert f"tasks '{first}' and '{second}'" in out and "rename one" in out
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_contract_without_jury_criteria_exports_and_verifies_without_a_jury(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = export_rules(tmp_path, ["..", "[bold]x"], capsys)
    assert code == 0, out
    assert "wrote 2 Harbor task(s)" in out
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["--", "-bold-x"]
    config = tomllib.loads((tmp_path / "out" / "--" / "task.toml").read_text())
    assert config["metadata"]["eigenjury_task_id"] == ".." and config["verifier"]["env"] == {}
    reward = run_verifier(tmp_path / "out" / "--", tmp_path / "root", "Answer: Paris")
    assert reward == {"reward": 1.0, "passed": 1}


def test_a_jury_is_asked_for_only_where_a_criterion_needs_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "hint.txt").write_text("It is on the Seine.")
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    code = main(
        ["contracts", "export-harbor", str(tmp_path / "contract.yaml"), str(tmp_path / "out")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "task 'capital/france' criterion 'polite'" in err and "--jury" in err
    assert not (tmp_path / "out").exists()


def test_a_reference_linked_from_outside_refs_is_not_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "secret.txt").write_text("private")
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "hint.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    args = ["contracts", "export-harbor", str(tmp_path / "contract.yaml"), str(tmp_path / "out")]
    code = main([*args, "--jury", "openai-compatible:judge@http://127.0.0.1:9/v1"])
    err = capsys.readouterr().err
    assert code == 2 and "task 'capital/france'" in err and "outside" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_python_grader_travels_with_the_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The verifier runs where the user's modules are not installed: the grader's module
    is copied into the task, and grades there as it does here."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "harbor_checks_here.py").write_text(
        "def says_paris(submission, task, criterion):\n    return 'Paris' in submission\n"
    )
    monkeypatch.syspath_prepend(str(lib))
    (tmp_path / "contract.yaml").write_text(
        "name: py\ntasks:\n  - task_id: t\n    execution: {prompt: 'Capital of France?'}\n"
        "    evaluation:\n      criteria:\n"
        "        - {id: city, weight: 100, grader: python,\n"
        "           prompt: 'harbor_checks_here:says_paris'}\n"
    )
    args = ["contracts", "export-harbor", str(tmp_path / "contract.yaml"), str(tmp_path / "out")]
    assert main(args) == 0, capsys.readouterr().err
    assert (tmp_path / "out" / "t" / "tests" / "vendor" / "harbor_checks_here.py").is_file()
    reward = run_verifier(tmp_path / "out" / "t", tmp_path / "root", "It is Paris.")
    assert reward == {"reward": 1.0, "passed": 1}
