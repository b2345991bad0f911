"""`eigenjury batch`: end to end against the test server, bad input, and kill -9 resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from eigenjury.cli import main
from eigenjury.engine import Store
from eigenjury.testing.server import Faults, ServerThread


def write_requests(path: Path, n: int, prefix: str = "q") -> Path:
    with path.open("w") as f:
        for i in range(n):
            line = {
                "id": f"r{i}",
                "messages": [{"role": "user", "content": f"{prefix} {i}"}],
                "temperature": 0,
            }
            f.write(json.dumps(line) + "\n")
    return path


def read_results(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def essence(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What must be identical between runs (timings and cache flags may differ)."""
    return [(r["id"], r["text"], json.dumps(r["usage"]), json.dumps(r["error"])) for r in rows]


def test_batch_runs_then_reuses_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 50)
    with ServerThread(latency_s=0.005, faults=Faults.uniform(0.2, hang_s=2.0), seed=2) as server:
        args = [
            "batch",
            str(requests),
            "--model",
            f"openai-compatible:test@{server.base_url}",
            "--out",
            str(tmp_path / "out.jsonl"),
            "--store",
            str(tmp_path / "s.sqlite"),
            "--timeout",
            "0.5",
            "--max-attempts",
            "10",
            "--no-progress",
        ]
        assert main(args) == 0
        first = read_results(tmp_path / "out.jsonl")
        sent = server.requests
        assert main(args) == 0
        assert server.requests == sent  # the second run sent nothing
    second = read_results(tmp_path / "out.jsonl")
    assert [r["text"] for r in first] == [f"reply to: q {i}" for i in range(50)]
    assert essence(first) == essence(second)
    assert all(r["cached"] for r in second) and not any(r["cached"] for r in first)
    assert "Calls and cost" in capsys.readouterr().out


def test_export_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 5)
    store = str(tmp_path / "s.sqlite")
    assert (
        main(
            [
                "batch",
                str(requests),
                "--model",
                "scripted:echo",
                "--out",
                str(tmp_path / "o.jsonl"),
                "--store",
                store,
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["export", str(tmp_path / "all.jsonl"), "--store", store]) == 0
    rows = read_results(tmp_path / "all.jsonl")
    assert len(rows) == 5 and {r["text"] for r in rows} == {f"echo: q {i}" for i in range(5)}


@pytest.mark.parametrize(
    ("lines", "model", "expected"),
    [
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n'
            '{"id": 2, "messages": []}\n',
            "scripted:echo",
            ["req.jsonl", "line 2", "field 'messages'", "at least 1"],
        ),
        (
            '{"id": 1, "messages": [{"role": "robot", "content": "hi"}]}\n',
            "scripted:echo",
            ["line 1", "field 'messages.0.role'", "'system', 'user' or 'assistant'"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}], "temprature": 0}\n',
            "scripted:echo",
            ["line 1", "field 'temprature'", "Extra inputs"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]\n',
            "scripted:echo",
            ["line 1", "not valid JSON"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "a"}]}\n'
            '{"id": 1, "messages": [{"role": "user", "content": "b"}]}\n',
            "scripted:echo",
            ["line 2", "id '1' was already used on line 1"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n',
            "opnai:gpt-4o",
            ["unknown provider 'opnai'"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n',
            "anthropic:claude-x",
            ["set the environment variable ANTHROPIC_API_KEY"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n',
            "scripted:nobody",
            ["no scripted model 'nobody'"],
        ),
    ],
)
def test_bad_input_exits_2_with_a_located_message(
    lines: str,
    model: str,
    expected: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    (tmp_path / "req.jsonl").write_text(lines)
    code = main(
        [
            "batch",
            str(tmp_path / "req.jsonl"),
            "--model",
            model,
            "--out",
            str(tmp_path / "o.jsonl"),
            "--store",
            str(tmp_path / "s.sqlite"),
        ]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2
    for fragment in expected:
        assert fragment in err, f"{fragment!r} not in {err!r}"
    assert "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()


def test_unreachable_endpoint_exits_2_and_keeps_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "s.sqlite")
    requests = write_requests(tmp_path / "req.jsonl", 4)
    assert (
        main(
            [
                "batch",
                str(requests),
                "--model",
                "scripted:echo",
                "--out",
                str(tmp_path / "o.jsonl"),
                "--store",
                store,
                "--no-progress",
            ]
        )
        == 0
    )
    with ServerThread() as server:
        dead = server.base_url
    code = main(
        [
            "batch",
            str(requests),
            "--model",
            f"openai-compatible:test@{dead}",
            "--out",
            str(tmp_path / "o2.jsonl"),
            "--store",
            store,
        ]
    )
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "cannot reach" in err and "is the server running" in err
    with Store(store) as kept:
        assert kept.counts() == {"ok": 4}


def test_some_failures_exit_1_and_are_in_the_output(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 6)
    with ServerThread(faults=Faults(server_error=1.0)) as server:
        code = main(
            [
                "batch",
                str(requests),
                "--model",
                f"openai-compatible:test@{server.base_url}",
                "--out",
                str(tmp_path / "o.jsonl"),
                "--store",
                str(tmp_path / "s.sqlite"),
                "--max-attempts",
                "2",
                "--no-progress",
            ]
        )
    rows = read_results(tmp_path / "o.jsonl")
    assert code == 1
    assert all(r["error"]["kind"] == "server" and r["text"] is None for r in rows)


def _committed_any(path: Path) -> bool:
    if not path.exists():
        return False
    with Store(path) as store:
        return store.counts().get("ok", 0) > 0


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume(tmp_path: Path) -> None:
    """A batch killed with SIGKILL resumes to the same output, asking nothing twice that
    was already committed."""
    requests = write_requests(tmp_path / "req.jsonl", 600)
    rng = random.Random(7)
    with ServerThread(latency_s=0.02, faults=Faults.uniform(0.1, hang_s=2.0), seed=5) as server:

        def batch(store: Path, out: Path) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "eigenjury",
                    "batch",
                    str(requests),
                    "--model",
                    f"openai-compatible:test@{server.base_url}",
                    "--out",
                    str(out),
                    "--store",
                    str(store),
                    "--concurrency",
                    "8",
                    "--timeout",
                    "0.5",
                    "--max-attempts",
                    "10",
                    "--no-progress",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

        reference = tmp_path / "reference.jsonl"
        assert batch(tmp_path / "ref.sqlite", reference).wait(120) == 0
        for trial in range(3):
            store, out = tmp_path / f"s{trial}.sqlite", tmp_path / f"out{trial}.jsonl"
            process = batch(store, out)
            deadline = time.monotonic() + 60
            while not _committed_any(store) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 0.4))  # somewhere in the middle of the run
            assert process.poll() is None, "the batch finished before it could be killed"
            os.kill(process.pid, signal.SIGKILL)
            process.wait(10)
            with Store(store) as kept:
                committed = {json.loads(r.request)["messages"][-1][1] for r in kept if r.ok}
            before = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
            assert batch(store, out).wait(120) == 0
            assert essence(read_results(out)) == essence(read_results(reference))
            after = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
            assert after == before, "a committed call was made again"
            assert 0 < len(committed) < 600


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path: Path) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 400)
    store = tmp_path / "s.sqlite"
    with ServerThread(latency_s=0.05) as server:
        command = [
            sys.executable,
            "-m",
            "eigenjury",
            "batch",
            str(requests),
            "--model",
            f"openai-compatible:test@{server.base_url}",
            "--out",
            str(tmp_path / "o.jsonl"),
            "--store",
            str(store),
            "--concurrency",
            "4",
            "--no-progress",
        ]
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while not _committed_any(store) and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert "rerun the same command" in out and "Traceback" not in err
        with Store(store) as kept:
            finished = kept.counts()["ok"]
        assert 0 < finished < 400
        sent = server.requests
        assert subprocess.run(command, capture_output=True, check=False).returncode == 0
        assert server.requests - sent == 400 - finished  # only the rest was sent
    assert len(read_results(tmp_path / "o.jsonl")) == 400
