"""Hostile python graders: each runs in a child process and ends as its criterion's
error (never a pass, never a hang, never the run's end), through `grade` and through
`contracts check`, which tries each grader once on an empty submission."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from eigenjury.cli import main
from eigenjury.contracts.bundle import load_contract
from eigenjury.contracts.sandbox import GraderOutcome, GraderSandbox
from eigenjury.exit_codes import EXIT_SOME_FAILED, EXIT_USAGE

GRADERS = """\
import os
import sys
import time

import numpy as np


def good(submission, task, criterion):
    return "hi" in submission, "looked for hi"


def as_number(submission, task, criterion):
    return np.int64(len(submission))


async def coroutine(submission, task, criterion):
    return False


def array(submission, task, criterion):
    return np.array([True, True])


class Unreadable:
    def __bool__(self):
        raise RuntimeError("no truth value")

    def __str__(self):
        raise RuntimeError("no text")

    __repr__ = __str__


def unreadable(submission, task, criterion):
    return Unreadable()


class Shy(Exception):
    def __str__(self):
        raise RuntimeError("no text")


def shy(submission, task, criterion):
    raise Shy()


def nothing(submission, task, criterion):
    return None


def nan(submission, task, criterion):
    return float("nan")


def odd_reason(submission, task, criterion):
    return True, Unreadable()


def loops(submission, task, criterion):
    while True:
        pass


def sleeps(submission, task, criterion):
    time.sleep(3600)


def exits(submission, task, criterion):
    sys.exit(0)


def aborts(submission, task, criterion):
    os.abort()


def quits_hard(submission, task, criterion):
    os._exit(0)


def starts_a_process_and_loops(submission, task, criterion):
    import subprocess

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(submission, "w") as f:
        f.write(str(child.pid))
    while True:
        pass


def says_where_and_loops(submission, task, criterion):
    with open(submission, "w") as f:
        f.write(str(os.getpid()))
    while True:
        pass
"""

TIMEOUT = "2"  # seconds a grader has: hostile ones loop forever; good ones need milliseconds
# grader -> what its criterion's error says
HOSTILE = {
    "coroutine": "returned a coroutine: an `async def` grader is never run to its end",
    "array": "returned numpy.ndarray, not a bool or a number",
    "unreadable": "returned graders_here.Unreadable, not a bool or a number",
    "shy": "raised Shy: (its message could not be shown)",
    "nothing": "returned NoneType, not a bool or a number",
    "nan": "returned NaN, which is neither a pass nor a fail",
    "odd_reason": "returned a reason of type graders_here.Unreadable",
    "loops": "did not finish grading this submission within 2 s and was stopped",
    "sleeps": "did not finish grading this submission within 2 s and was stopped",
    "exits": "called sys.exit(0); a grader must return its result",
    "aborts": "ended its process while grading this submission (killed by SIGABRT)",
    "quits_hard": "ended its process while grading this submission (exit status 0)",
}

CONTRACT = """\
name: hostile
tasks:
  - task_id: greet
    execution: {prompt: "Say hi."}
    evaluation:
      criteria:
        - {id: says-hi, weight: 50, grader: regex, prompt: "hi"}
        - {id: checked, weight: 50, grader: python, prompt: "graders_here:GRADER"}
  - task_id: other
    execution: {prompt: "Say bye."}
    evaluation:
      criteria:
        - {id: says-bye, weight: 100, grader: regex, prompt: "bye"}
"""


@pytest.fixture
def graders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "graders"
    folder.mkdir()
    (folder / "graders_here.py").write_text(GRADERS)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _contract(tmp_path: Path, grader: str) -> Path:
    path = tmp_path / f"{grader}.yaml"
    path.write_text(CONTRACT.replace("GRADER", grader))
    return path


def _submissions(tmp_path: Path) -> Path:
    path = tmp_path / "subs.jsonl"
    rows = [
        {"task_id": "greet", "submission": "hi there", "candidate": "a"},
        {"task_id": "other", "submission": "bye now", "candidate": "a"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _grade(tmp_path: Path, grader: str) -> tuple[int, Path]:
    out = tmp_path / f"out-{grader}"
    code = main(
        [
            "grade",
            str(_contract(tmp_path, grader)),
            "--submissions",
            str(_submissions(tmp_path)),
            "--grader-timeout",
            TIMEOUT,
            "--out",
            str(out),
            "--store",
            str(tmp_path / "store.sqlite"),
            "--no-progress",
        ]
    )
    return code, out


def test_good_graders_decide_in_the_child(
    graders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = load_contract(_contract(tmp_path, "good")).contract.tasks[0]
    criterion = task.evaluation.criteria[1]
    number = criterion.model_copy(update={"prompt": "graders_here:as_number"})
    with GraderSandbox() as sandbox:
        assert sandbox.load_problem(criterion) is None
        assert sandbox.grade(criterion, "hi", task) == GraderOutcome(True, "looked for hi")
        assert sandbox.grade(criterion, "yo", task) == GraderOutcome(False, "looked for hi")
        assert sandbox.grade(number, "", task).passed is False  # 0 fails
        assert sandbox.grade(number, "ab", task).passed is True  # a non-zero number passes
    assert main(["contracts", "check", str(_contract(tmp_path, "good"))]) == 0
    code, out = _grade(tmp_path, "good")
    assert code == 0, capsys.readouterr()
    record = json.loads((out / "results.json").read_text())
    assert [t["score"] for t in record["tasks"]] == [100, 100]


@pytest.mark.fuzz
@pytest.mark.parametrize("grader", sorted(HOSTILE))
def test_a_hostile_grader_is_its_criterions_error_and_the_run_goes_on(
    grader: str, graders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _grade(tmp_path, grader)
    printed = capsys.readouterr()
    assert code == EXIT_SOME_FAILED, printed
    assert "Traceback" not in printed.err + printed.out
    assert "failed to decide" in printed.out
    record = json.loads((out / "results.json").read_text())
    greet, other = record["tasks"]
    # the failing grader is never a pass: the regex criterion alone scores
    assert (greet["score"], greet["passed"], greet["complete"]) == (50, False, False)
    checked = greet["criteria"][1]
    assert checked["passed"] is False and HOSTILE[grader] in checked["error"]
    assert checked["error"].startswith(f"graders_here:{grader} ")
    assert (other["score"], other["complete"]) == (100, True)  # the rest of the run is there
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    line = next(j for j in trace if j["criterion_id"] == "checked")
    assert line["grade"] is None and HOSTILE[grader] in line["error"]
    assert HOSTILE[grader] in (out / "criteria.csv").read_text()
    assert "grader error" in (out / "report.html").read_text()


@pytest.mark.fuzz
@pytest.mark.parametrize("grader", sorted(HOSTILE))
def test_contracts_check_runs_each_grader_once_and_names_the_criterion(
    grader: str, graders: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _contract(tmp_path, grader)
    code = main(["contracts", "check", str(path), "--grader-timeout", TIMEOUT])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "Traceback" not in err
    assert "task 'greet', criterion 'checked'" in err and HOSTILE[grader] in err


@pytest.mark.fuzz
def test_the_sandbox_recovers_after_each_hostile_grader(graders: Path, tmp_path: Path) -> None:
    task = load_contract(_contract(tmp_path, "good")).contract.tasks[0]
    good = task.evaluation.criteria[1]
    with GraderSandbox(timeout_s=float(TIMEOUT)) as sandbox:
        for grader, expected in HOSTILE.items():
            hostile = good.model_copy(update={"prompt": f"graders_here:{grader}"})
            got = sandbox.grade(hostile, "hi", task)
            assert not got.passed and got.error is not None and expected in got.error
            assert sandbox.grade(good, "hi", task) == GraderOutcome(True, "looked for hi")


@pytest.mark.fuzz
@pytest.mark.parametrize(
    ("module", "expected"),
    [
        ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
        ("while True:\n    pass\n", "did not finish importing it within 2 s"),
        ("import os\nos._exit(0)\n", "ended its process while importing it (exit status 0)"),
        ("raise ValueError('at import')\n", "raised ValueError: at import"),
    ],
)
def test_a_module_that_misbehaves_on_import_is_an_input_error(
    module: str,
    expected: str,
    graders: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (graders / "bad_module.py").write_text(module + "def fn(s, t, c):\n    return True\n")
    path = tmp_path / "c.yaml"
    path.write_text(CONTRACT.replace("graders_here:GRADER", "bad_module:fn"))
    code = main(["contracts", "check", str(path), "--grader-timeout", TIMEOUT])
    err = capsys.readouterr().err
    assert code == EXIT_USAGE and "Traceback" not in err
    assert "task 'greet', criterion 'checked'" in err and expected in err


def _gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie waiting to be reaped runs nothing)."""
    for _ in range(200):  # the kill is at once; allow a loaded machine
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    return False


@pytest.mark.fuzz
def test_a_stopped_grader_takes_the_processes_it_started_with_it(
    graders: Path, tmp_path: Path
) -> None:
    task = load_contract(_contract(tmp_path, "starts_a_process_and_loops")).contract.tasks[0]
    pid_file = tmp_path / "started.pid"
    with GraderSandbox(timeout_s=float(TIMEOUT)) as sandbox:
        got = sandbox.grade(task.evaluation.criteria[1], str(pid_file), task)
    assert got.error is not None and "did not finish grading" in got.error
    assert _gone(int(pid_file.read_text())), "the grader's own process outlived it"


@pytest.mark.fuzz
def test_the_graders_child_dies_with_its_parent(graders: Path, tmp_path: Path) -> None:
    """A grader stuck in a loop does not outlive the process that ran it, even one
    killed by SIGKILL (which runs no clean-up of its own)."""
    import subprocess
    import sys

    pid_file = tmp_path / "grader.pid"
    script = tmp_path / "run.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(graders)!r})\n"
        "from eigenjury.contracts.bundle import load_contract\n"
        "from eigenjury.contracts.sandbox import GraderSandbox\n"
        f"path = {str(_contract(tmp_path, 'says_where_and_loops'))!r}\n"
        "task = load_contract(path).contract.tasks[0]\n"
        "sandbox = GraderSandbox(timeout_s=3600)\n"
        f"sandbox.grade(task.evaluation.criteria[1], {str(pid_file)!r}, task)\n"
    )
    parent = subprocess.Popen([sys.executable, str(script)])
    try:
        while not pid_file.exists() or not pid_file.read_text():
            assert parent.poll() is None, "the run ended before its grader started"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        os.kill(parent.pid, signal.SIGKILL)
    finally:
        parent.kill()
        parent.wait()
    assert _gone(child), "the grader's child outlived its parent"
