"""Hostile conditions around what commands write and the processes they start: two
writers on one output, outputs that are links, named pipes or devices, and SIGTERM or
SIGKILL in the middle of a run.

Every run is a real `eigenjury` process (signals and locks act on processes) against
the in-repo test server or scripted models, in a fresh folder. Decided here:
- Two writers of one output: the second is refused before it spends anything, with a
  message naming the output and the process that holds it; the first finishes whole.
- An output that is a symbolic link is written through: the link stays and the file it
  leads to gets the output (as a shell's `>` does). A named pipe, a device or a link to
  one is refused by name: an output is written whole and renamed into place, which
  only a regular file allows (and root must never replace /dev/stdout).
- SIGTERM is Ctrl-C: exit 143, a line saying where the finished calls are, no
  temporary file. After SIGKILL nothing can be cleaned at once: the next run of the
  same command removes what the killed one left and sends only what is missing.
- No process a command started outlives it by more than ORPHAN_S seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from batch_scripts import read_results, write_requests
from contract_scripts import CONTRACT, write_submissions
from eigenjury.testing.server import FaultServer, Judging, ServerThread

pytestmark = pytest.mark.fuzz

ORPHAN_S = 5.0  # the check: no process of a killed command alive this much later
MIDDLE = 5  # calls the server answers a run before it holds the rest, until it is stopped
START_S = 120.0  # how long a run may take to reach the middle, before the test gives up
LEFT_OVER = re.compile(r"\.(tmp|lock|part)$")


def eigenjury(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "eigenjury", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = process.communicate(timeout=START_S)
    assert "Traceback" not in err, err
    return process.returncode, out, err


def left_over(folder: Path) -> list[str]:
    """Temporary files and locks under `folder`."""
    return sorted(
        str(path.relative_to(folder)) for path in folder.rglob("*") if LEFT_OVER.search(path.name)
    )


def committed(store: Path) -> set[str]:
    """The keys of the successful results in a store (read while another process writes)."""
    if not store.exists():
        return set()
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        return {key for (key,) in db.execute("SELECT key FROM results WHERE status = 'ok'")}
    except sqlite3.OperationalError:  # not made yet
        return set()
    finally:
        db.close()


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the name (state first, then the parent)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def descendants(pid: int) -> set[int]:
    """Every living process below `pid`."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat(int(entry)) if entry.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"  # (a zombie has exited)


def orphans_after(pids: set[int]) -> set[int]:
    """Those of `pids` still alive ORPHAN_S seconds from now (checked as they go)."""
    deadline = time.monotonic() + ORPHAN_S
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return {p for p in pids if alive(p)}


def wait_until(condition: Callable[[], bool], process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_S
    while not condition():
        assert process.poll() is None, f"the run ended first: {process.communicate()}"
        assert time.monotonic() < deadline, "the run never reached its middle"
        time.sleep(0.05)


def kill_all(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


# --- runs to interrupt ------------------------------------------------------------------


@dataclass
class Run:
    """A command to start in `folder`, the store it commits to (None: it calls no model)
    and what it writes when it finishes."""

    args: list[str]
    folder: Path
    store: Path | None
    outputs: list[Path]

    def start(self) -> subprocess.Popen[str]:
        return eigenjury(*self.args, cwd=self.folder)


def batch_run(folder: Path, server: FaultServer, n: int = 400) -> Run:
    write_requests(folder / "requests.jsonl", n)
    model = f"openai-compatible:test@{server.base_url}"
    args = ["batch", "requests.jsonl", "--model", model, "--out", "out.jsonl"]
    args += ["--store", "store.sqlite", "--concurrency", "4", "--no-progress"]
    return Run(args, folder, folder / "store.sqlite", [folder / "out.jsonl"])


def rank_run(folder: Path, server: FaultServer, scenarios: int = 8) -> Run:
    config = {
        "population": [
            {"name": name, "model": f"openai-compatible:m@{server.base_url}",
             "persona": f"You are {name}."}
            for name in ("kind", "curt", "plain")
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": scenarios, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {"reflections": False, "ties": True},
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "concurrency": 2},
    }  # fmt: skip
    (folder / "rank.yaml").write_text(yaml.safe_dump(config))
    args = ["rank", "rank.yaml", "--out", "run", "--no-progress"]
    names = ("results.json", "verdicts.csv", "transcripts.jsonl", "report.html")
    return Run(args, folder, folder / "store.sqlite", [folder / "run" / n for n in names])


def grade_run(folder: Path, server: FaultServer, candidates: int = 60) -> Run:
    (folder / "contract.yaml").write_text(CONTRACT)
    rows = [
        {"task_id": "france", "submission": f"Paris, lovely {i}", "candidate": f"c{i}"}
        for i in range(candidates)
    ]
    write_submissions(folder / "subs.jsonl", rows)
    args = ["grade", "contract.yaml", "--submissions", "subs.jsonl", "--out", "graded"]
    for juror in ("j1", "j2", "j3"):
        args += ["--jury", f"openai-compatible:{juror}@{server.base_url}"]
    args += ["--store", "store.sqlite", "--concurrency", "2", "--no-progress"]
    return Run(args, folder, folder / "store.sqlite", [folder / "graded" / "results.json"])


def fit_run(folder: Path) -> Run:
    made = subprocess.run(
        [sys.executable, "-m", "eigenjury", "simulate", "--out", "sim", "--models", "8",
         "--scenarios", "300", "--seed", "1"],
        cwd=folder, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    args = ["fit", "sim/verdicts.csv", "--jobs", "2", "--bootstrap", "400", "--out", "fit.json"]
    return Run(args, folder, None, [folder / "fit.json"])


@pytest.fixture(scope="module")
def server() -> Iterator[FaultServer]:
    judging = Judging("enforce", {"A": 0.5, "B": 0.3, "tie": 0.2, "GRADE: C": 1.0})
    with ServerThread(latency_s=0.03, judging=judging) as served:
        yield served


RUNS: dict[str, Callable[[Path, FaultServer], Run]] = {
    "batch": batch_run,
    "rank": rank_run,
    "grade": grade_run,
    "fit --jobs 2": lambda folder, server: fit_run(folder),
}


@contextlib.contextmanager
def holding(server: FaultServer, run: Run) -> Iterator[None]:
    """While in this block, the server answers MIDDLE requests, then holds the rest: a run
    that calls models cannot finish before the test stops it, however slow the machine."""
    if run.store is not None:
        server.hold(after=MIDDLE)
    try:
        yield
    finally:
        server.release()


def in_the_middle(run: Run, process: subprocess.Popen[str], server: FaultServer) -> set[int]:
    """Wait until `run` is in its middle: it has committed the MIDDLE calls answered and
    waits on the server for the others (see `holding`), or, for `fit`, it has started its
    workers. The processes below it then."""
    if run.store is not None:
        store = run.store
        wait_until(lambda: server.held > 0 and len(committed(store)) >= MIDDLE, process)
    else:
        wait_until(lambda: len(descendants(process.pid)) >= 2, process)
    below = descendants(process.pid)
    assert process.poll() is None, "the run finished before it could be stopped"
    return below


@pytest.mark.parametrize("command", list(RUNS))
def test_sigterm_stops_a_run_as_ctrl_c_does(
    tmp_path: Path, server: FaultServer, command: str
) -> None:
    """SIGTERM (a scheduler, a timeout, `kill`) used to end `batch` and `rank` with 143
    and no word, leaving .tmp and .part files, and left `fit`'s workers running."""
    run = RUNS[command](tmp_path, server)
    with holding(server, run):
        process = run.start()
        try:
            below = in_the_middle(run, process, server)
            process.send_signal(signal.SIGTERM)
            code, _, err = finish(process)
        finally:
            kill_all([process])
    assert code == 143, err
    assert err.startswith("terminated (SIGTERM)"), err
    if run.store is not None:
        assert f"finished calls are in {run.store.name}; rerun the same command" in err
    assert not orphans_after(below)
    assert left_over(tmp_path) == [] and not any(path.exists() for path in run.outputs)
    if run.store is not None:  # what finished is kept: the rerun sends only the rest
        kept = committed(run.store)
        assert kept
        assert finish(run.start())[0] == 0
        assert kept <= committed(run.store) and left_over(tmp_path) == []


@pytest.mark.parametrize("command", list(RUNS))
def test_after_kill_9_nothing_outlives_the_run_and_the_next_run_cleans_up(
    tmp_path: Path, server: FaultServer, command: str
) -> None:
    """SIGKILL cannot be handled: the run's children die with it (fit's forked workers
    used to live on under PID 1), and the next run of the same command removes what the
    killed one left, keeps every committed call and sends only the rest."""
    run = RUNS[command](tmp_path, server)
    with holding(server, run):
        process = run.start()
        try:
            below = in_the_middle(run, process, server)
            process.kill()
            process.wait(30)
        finally:
            kill_all([process])
    assert not orphans_after(below)
    kept = committed(run.store) if run.store is not None else set()
    before = server.requests
    code, _, err = finish(run.start())
    assert code == 0, err
    assert left_over(tmp_path) == [] and all(path.is_file() for path in run.outputs)
    if run.store is not None:
        assert kept and kept <= committed(run.store)
        assert server.requests - before <= len(committed(run.store)) - len(kept)


# --- two writers --------------------------------------------------------------------------


def _check_two_writers(outcomes: list[tuple[int, str, str]], out: Path) -> bool:
    """One or both succeeded; a refused one said why, naming the output. Whether one
    was refused."""
    codes = sorted(code for code, _, _ in outcomes)
    assert codes in ([0, 0], [0, 2]), outcomes
    for code, _, err in outcomes:
        if code == 2:
            message = " ".join(err.split())
            assert f"{out}: another eigenjury process (pid " in message, message
            assert "is writing this file now" in message
    return codes == [0, 2]


def test_two_batches_writing_one_output_never_tear_it(tmp_path: Path) -> None:
    """Two runs of one batch used to share one temporary file: the one that ended with
    exit 0 and "wrote 3000 results" left torn lines and missing results. 20 times, the
    second started up to half a second after the first: the output is always whole, and
    the later writer is refused (or, once the first is done, runs again)."""
    write_requests(tmp_path / "requests.jsonl", 3000)
    args = ["batch", "requests.jsonl", "--model", "scripted:echo", "--out", "out.jsonl"]
    rng = random.Random(27)
    refused = 0
    for attempt in range(20):
        store = tmp_path / f"store-{attempt}.sqlite"
        first = eigenjury(*args, "--store", store.name, "--no-progress", cwd=tmp_path)
        time.sleep(rng.uniform(0.0, 0.5))
        second = eigenjury(*args, "--store", store.name, "--no-progress", cwd=tmp_path)
        try:
            outcomes = [finish(first), finish(second)]
        finally:
            kill_all([first, second])
        refused += _check_two_writers(outcomes, Path("out.jsonl"))
        rows = read_results(tmp_path / "out.jsonl")  # every line is whole JSON
        assert [row["id"] for row in rows] == [f"r{i}" for i in range(3000)]
        assert left_over(tmp_path) == []
    assert refused, "the two runs never overlapped: the test tested nothing"


def test_two_ranks_writing_one_folder_never_mix_it(tmp_path: Path, server: FaultServer) -> None:
    """The second rank into a folder another is writing is refused at once (it used to
    interleave its transcript lines with the first's)."""
    scenarios = 8
    run = rank_run(tmp_path, server, scenarios=scenarios)
    store = tmp_path / "store.sqlite"
    rng = random.Random(6)
    refused = 0
    for _ in range(3):
        for part in ("", "-wal", "-shm"):  # each time, calls to make
            store.with_name(store.name + part).unlink(missing_ok=True)
        first = run.start()
        time.sleep(rng.uniform(0.0, 0.5))
        second = run.start()
        try:
            outcomes = [finish(first), finish(second)]
        finally:
            kill_all([first, second])
        refused += _check_two_writers(outcomes, Path("run/transcripts.jsonl"))
        lines = (tmp_path / "run" / "transcripts.jsonl").read_text().splitlines()
        comparisons = scenarios * 3 * 2 * 3  # each pair both ways, by each judge
        assert len(lines) == scenarios * 3 + comparisons  # and each member's replies
        assert all(isinstance(json.loads(line), dict) for line in lines)
        record = json.loads((tmp_path / "run" / "results.json").read_text())
        assert record["run"]["comparisons"] == comparisons
        assert left_over(tmp_path) == []
    assert refused, "the two runs never overlapped: the test tested nothing"


# --- outputs that are links, pipes or devices -------------------------------------------------


def _device(path: Path) -> None:
    """A character device node like /dev/null, in the test's own folder (root only)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root")


def _loop(path: Path, real: Path) -> None:
    """Two links that lead to each other."""
    path.with_name("other").symlink_to(path.name)
    path.symlink_to("other")


# How each hostile output is made at PATH (with `real` a file beside it to link to), and
# whether it is written through (True) or refused (the words the refusal must use).
HOSTILE: dict[str, tuple[Callable[[Path, Path], None], bool | str]] = {
    "a link to a file": (lambda path, real: (real.write_text("old"), path.symlink_to(real)), True),
    "a link to a link to a file": (
        lambda path, real: (
            real.write_text("old"),
            path.with_name("hop").symlink_to(real),
            path.symlink_to("hop"),
        ),
        True,
    ),
    "a link to a file not there yet": (lambda path, real: path.symlink_to(real), True),
    "a link to a file in another folder": (
        lambda path, real: path.symlink_to(real.parent / "elsewhere" / real.name),
        True,
    ),
    "a named pipe": (lambda path, real: os.mkfifo(path), "this is a named pipe"),
    "a link to a named pipe": (
        lambda path, real: (os.mkfifo(real), path.symlink_to(real)),
        "this is a named pipe",
    ),
    "a device": (lambda path, real: _device(path), "this is a device"),
    "a link to a device": (
        lambda path, real: (_device(real), path.symlink_to(real)),
        "this is a device",
    ),
    "a link to a folder": (lambda path, real: (real.mkdir(), path.symlink_to(real)), "folder"),
    "a loop of links": (_loop, "cannot write this file (Too many levels of symbolic links)"),
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with requests, a store to export and verdicts to fit."""
    folder = tmp_path_factory.mktemp("inputs")
    write_requests(folder / "requests.jsonl", 20)
    batch = ["batch", "requests.jsonl", "--model", "scripted:echo", "--out", "seed.jsonl"]
    assert eigenjury(*batch, "--store", "store.sqlite", cwd=folder).wait(START_S) == 0
    simulate = ["simulate", "--out", "sim", "--models", "4", "--scenarios", "40"]
    assert eigenjury(*simulate, cwd=folder).wait(START_S) == 0
    return folder


def _outputs(folder: Path, server: FaultServer) -> dict[str, tuple[list[str], Path]]:
    """Commands that write a file, each as (arguments, the file): every kind of output
    writer (streamed results, a store export, a record, a run folder)."""
    model = ["--model", "scripted:echo", "--store", "store.sqlite", "--no-progress"]
    fit = ["fit", "sim/verdicts.csv", "--bootstrap", "0", "--out", "OUT.json"]
    return {
        "batch": (["batch", "requests.jsonl", *model, "--out", "OUT.jsonl"], Path("OUT.jsonl")),
        "export": (["export", "OUT.jsonl", "--store", "store.sqlite"], Path("OUT.jsonl")),
        "fit --out": (fit, Path("OUT.json")),
        "rank's results.json": (rank_run(folder, server, 2).args, Path("run/results.json")),
    }


@pytest.mark.parametrize("hostile", list(HOSTILE))
def test_outputs_are_written_through_links_and_never_onto_pipes_or_devices(
    tmp_path: Path, inputs: Path, server: FaultServer, hostile: str
) -> None:
    """An --out that is a symbolic link used to have the link replaced by a file and its
    target never written; a named pipe or a device (as root, /dev/stdout) was replaced
    by a regular file."""
    make, expected = HOSTILE[hostile]
    shutil.copytree(inputs, tmp_path, dirs_exist_ok=True)
    (tmp_path / "run").mkdir()
    for name, (args, out) in _outputs(tmp_path, server).items():
        path = tmp_path / out
        real = tmp_path / "targets" / name.replace(" ", "-").replace("'", "") / path.name
        (real.parent / "elsewhere").mkdir(parents=True)
        for leftover in (path, path.with_name("hop"), path.with_name("other")):
            if leftover.is_symlink() or leftover.exists():
                leftover.unlink()
        make(path, real)
        before = os.lstat(path).st_mode
        code, out_text, err = finish(eigenjury(*args, cwd=tmp_path))
        assert os.lstat(path).st_mode == before, f"{name}: the path itself was replaced"
        if expected is True:
            assert code == 0, f"{name}: {err}"
            target = Path(os.path.realpath(path))
            written = target.read_text()  # (the test's own link targets are never loops)
            assert written not in ("", "old"), name
            assert path.suffix != ".json" or json.loads(written), name
        else:
            assert code == 2, f"{name}: exit {code}\n{out_text}\n{err}"
            message = " ".join(err.split())
            assert f"{out}: " in message and str(expected) in message, f"{name}: {message}"
        assert left_over(tmp_path) == [], name
