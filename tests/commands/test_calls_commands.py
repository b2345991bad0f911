"""`eigenjury batch`: end to end against the test server, bad input, and kill -9 resume."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from batch_scripts import essence, read_results, write_requests
from eigenjury.batch import RequestLine
from eigenjury.cli import main
from eigenjury.engine import Store, StoredResult
from eigenjury.engine import store as store_module
from eigenjury.errors import InputError
from eigenjury.files import (
    atomic_writer,
    lines,
    read_csv,
    read_json_lines,
    read_jsonl,
    read_text,
    write_text,
)
from eigenjury.models import Completion
from eigenjury.testing.server import Faults, Judging, ServerThread


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
        (  # beyond a SQLite INTEGER
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n'
            '{"id": 2, "messages": [{"role": "user", "content": "hi"}], '
            '"sample": 18446744073709551616}\n',
            "scripted:echo",
            ["req.jsonl", "line 2", "field 'sample'", "less than or equal to 9223372036854775807"],
        ),
        (  # -1 means "a random seed" to llama.cpp servers
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}], "seed": -1}\n',
            "scripted:echo",
            ["line 1", "field 'seed'", "greater than or equal to 0"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}], '
            '"max_tokens": 20000000000000000000}\n',
            "scripted:echo",
            ["line 1", "field 'max_tokens'"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n' + "[" * 100_000 + "\n",
            "scripted:echo",
            ["line 2", "not valid JSON", "recursion limit"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n',
            "openai-compatible:m@http://localhost:99999/v1",
            ["openai-compatible:m@http://localhost:99999/v1", "Port out of range"],
        ),
        (
            '{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n',
            "openai-compatible:m@http://[::1/v1",
            ["openai-compatible:m@http://[::1/v1", "Invalid IPv6 URL"],
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
    if "line 2" in expected:  # line 1 was run and kept before line 2 was read
        assert "the result before it is in the store" in err
        with Store(tmp_path / "s.sqlite", create=False) as kept:
            assert kept.counts() == {"ok": 1}
    else:
        assert not (tmp_path / "s.sqlite").exists()  # refused before the store was opened


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


def strict_json(text: str) -> Any:
    """JSON as the standard has it: NaN and Infinity are not JSON."""

    def refuse(constant: str) -> Any:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.fuzz
@pytest.mark.parametrize("bad", [float("nan"), float("-inf"), float("inf")])
def test_a_server_sending_non_finite_label_scores_gives_malformed_replies(
    tmp_path: Path, bad: float
) -> None:
    """Log-probabilities that are not finite numbers make a malformed reply (tried again,
    then an error), never a stored success: the output and the export stay JSON."""
    requests = tmp_path / "req.jsonl"
    requests.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "messages": [{"role": "user", "content": f"q {i}"}],
                    "choices": ["A", "B", "tie"],
                    "logprobs": True,
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    judging = Judging("enforce", {"A": 0.6, "B": 0.4}, logprobs=True, broken_logprob=bad)
    store = str(tmp_path / "s.sqlite")
    with ServerThread(judging=judging) as server:
        args = ["batch", str(requests), "--model", f"openai-compatible:test@{server.base_url}"]
        args += ["--out", str(tmp_path / "o.jsonl"), "--store", store, "--max-attempts", "2"]
        assert main([*args, "--no-progress"]) == 1
        assert server.requests == 4 * 2  # malformed replies are tried again
    rows = [strict_json(x) for x in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["choice_logprobs"] is None for r in rows)
    assert all(r["error"]["kind"] == "malformed" for r in rows)
    assert all("not all finite" in r["error"]["message"] for r in rows)
    assert main(["export", str(tmp_path / "e.jsonl"), "--store", store]) == 0
    exported = [strict_json(x) for x in (tmp_path / "e.jsonl").read_text().splitlines()]
    assert [r["status"] for r in exported] == ["error"] * 4


def _committed(path: Path) -> int:
    """How many calls a store holds as answered, read while a batch writes to it: read
    only (opened as a Store every 50 ms, it slowed the batch about fivefold)."""
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return int(db.execute("SELECT count(*) FROM results WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:  # not made yet
        return 0
    finally:
        db.close()


@pytest.mark.slow
def test_kill_9_at_random_points_then_resume(tmp_path: Path) -> None:
    """A batch killed with SIGKILL resumes to the same output, asking nothing twice that
    was already committed. The server holds every request after its first 300 until the
    kill, so the batch (600 calls) is still running when it comes, however slow the
    machine; the kill still lands at a random point, writes in flight or not."""
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
            server.hold(after=300)
            process = batch(store, out)
            try:
                deadline = time.monotonic() + 60
                while not _committed(store) and time.monotonic() < deadline:
                    time.sleep(0.05)
                time.sleep(rng.uniform(0.0, 0.4))  # somewhere in the middle of the run
                assert process.poll() is None, "the batch ended before it could be killed"
                os.kill(process.pid, signal.SIGKILL)
                process.wait(10)
            finally:
                server.release()
                if process.poll() is None:
                    process.kill()
                    process.wait()
            with Store(store) as kept:
                committed = {json.loads(r.request)["messages"][-1][1] for r in kept if r.ok}
            before = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
            assert batch(store, out).wait(120) == 0
            assert essence(read_results(out)) == essence(read_results(reference))
            after = {p: server.successes_by_prompt[f"reply to: {p}"] for p in committed}
            assert after == before, "a committed call was made again"
            assert 0 < len(committed) < 600


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path: Path) -> None:
    """Ctrl-C in the middle of a batch: exit 130 with a word on how to resume, no output,
    not even half a file, every finished call kept, and the rerun sends only the rest.
    The server answers the first ANSWERED requests and holds the others until the batch
    has been stopped; the signal comes once those are committed and the batch waits on
    the server, so it cannot finish first, however slow the machine."""
    answered, n = 20, 100
    requests = write_requests(tmp_path / "req.jsonl", n)
    store = tmp_path / "s.sqlite"
    with ServerThread() as server:
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
        server.hold(after=answered)
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            deadline = time.monotonic() + 120
            while not (server.held and _committed(store) == answered):
                assert process.poll() is None, f"the batch ended first: {process.communicate()}"
                assert time.monotonic() < deadline, "the batch never reached its middle"
                time.sleep(0.05)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
        finally:
            server.release()
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 130, err
        assert "rerun the same command" in err and "Traceback" not in err
        left = [p.name for p in tmp_path.iterdir()]
        assert not any("o.jsonl" in name for name in left)  # no results, not even half a file
        with Store(store) as kept:
            assert kept.counts() == {"ok": answered}  # (a held call is no error)
        sent = server.requests
        assert subprocess.run(command, capture_output=True, check=False).returncode == 0
        assert server.requests - sent == n - answered  # only the rest was sent
    assert len(read_results(tmp_path / "o.jsonl")) == n


def batch_args(requests: Path, out: Path, store: Path) -> list[str]:
    model = "scripted:echo"
    return ["batch", str(requests), "--model", model, "--out", str(out), "--store", str(store)]


def test_a_store_locked_by_another_program_keeps_every_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another connection holds a write transaction while a batch runs: the batch waits,
    says which store it waits for, and loses nothing."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 20)  # each try gives up fast
    monkeypatch.setattr(store_module, "LOCK_REPORT_S", 0.1)
    requests = write_requests(tmp_path / "req.jsonl", 60)
    store = tmp_path / "s.sqlite"
    Store(store).close()
    other = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    threading.Timer(0.6, other.close).start()
    code = main([*batch_args(requests, tmp_path / "o.jsonl", store), "--no-progress"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 0
    assert f"{store}: another program holds a lock on this store" in err
    assert len(read_results(tmp_path / "o.jsonl")) == 60
    with Store(store) as kept:
        assert kept.counts() == {"ok": 60}


def _junk(path: Path) -> None:
    path.write_bytes(b"\x00\xffnot a database" * 300)


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE invoices (amount REAL)")
    db.commit()
    db.close()


def _damaged(path: Path) -> None:
    with Store(path) as store:
        store.put_many(
            [
                StoredResult(f"k{i}", "scripted:echo", "{}", 0, Completion("x" * 500, "stop"))
                for i in range(200)
            ]
        )
    data = bytearray(path.read_bytes())
    data[5000:9000] = b"\x13" * 4000
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("command", ["batch", "export"])
@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (_junk, "not an eigenjury store"),
        (Path.mkdir, "this is a folder"),
        (_foreign, "database of another program (tables: invoices)"),
        (_damaged, "damaged"),
    ],
)
def test_a_store_that_is_not_one_exits_2_naming_it(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    make: Callable[[Path], Any],
    expected: str,
) -> None:
    store = tmp_path / "s.sqlite"
    make(store)
    requests = write_requests(tmp_path / "req.jsonl", 3)
    if command == "batch":
        args = batch_args(requests, tmp_path / "o.jsonl", store)
    else:
        args = ["export", str(tmp_path / "o.jsonl"), "--store", str(store)]
    code = main(args)
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"{store}: " in err and expected in err, err
    assert "--store" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("target", ["requests", "link to requests", "store", "new store"])
def test_out_never_overwrites_the_requests_or_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 3)
    store = tmp_path / "s.sqlite"
    if target == "store":
        main([*batch_args(requests, tmp_path / "first.jsonl", store), "--no-progress"])
    before = {p: p.read_bytes() for p in (requests, store) if p.exists()}
    out = {"requests": requests, "store": store, "new store": store}.get(
        target, tmp_path / "link.jsonl"
    )
    if target == "link to requests":
        out.symlink_to(requests)
    code = main([*batch_args(requests, out, store), "--no-progress"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"{out}: this is also the" in err and "give --out another path" in err
    assert {p: p.read_bytes() for p in before} == before
    if target != "store":
        assert not store.exists()  # refused before the store was opened or any call made


def test_export_reads_a_store_and_never_makes_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.sqlite"
    empty.touch()  # SQLite would take it for a new database and write a store into it
    for store, expected in (
        (empty, "this file holds no results"),
        (tmp_path / "none.sqlite", "no such"),
    ):
        code = main(["export", str(tmp_path / "all.jsonl"), "--store", str(store)])
        err = " ".join(capsys.readouterr().err.split())
        assert code == 2 and f"{store}: {expected}" in err
    assert empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.sqlite"]


def test_out_as_a_folder_is_refused_up_front_and_leaves_nothing_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 3)
    folder = tmp_path / "results"
    folder.mkdir()
    code = main(batch_args(requests, folder, tmp_path / "s.sqlite"))
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"{folder}: this is a folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["req.jsonl", "results"]


def test_atomic_writes_name_the_target_and_never_leave_a_temporary_file(tmp_path: Path) -> None:
    folder = tmp_path / "out.jsonl"
    folder.mkdir()
    with pytest.raises(InputError, match="this is a folder") as caught:
        write_text(folder, "x")
    assert caught.value.path == str(folder)
    target = tmp_path / "o.jsonl"
    with pytest.raises(RuntimeError), atomic_writer(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("the writer failed half way")
    blocked = tmp_path / "blocked.jsonl"
    blocked.with_name(f".{blocked.name}.lock").mkdir()  # the lock's name is taken
    with pytest.raises(InputError) as caught:
        write_text(blocked, "x")
    assert caught.value.path == str(blocked) and ".lock" not in caught.value.message
    assert sorted(p.name for p in tmp_path.iterdir()) == [".blocked.jsonl.lock", "out.jsonl"]


@pytest.mark.parametrize("rate", [["--rpm", "1e-300"], ["--tpm", "1e-300"], ["--rpm", "0.01"]])
def test_rates_too_slow_to_make_progress_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rate: list[str]
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 3)
    code = main([*batch_args(requests, tmp_path / "o.jsonl", tmp_path / "s.sqlite"), *rate])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and rate[0][2:] in err and "at least 1/60 (one an hour)" in err


OK_LINE = b'{"id": 1, "messages": [{"role": "user", "content": "hi"}]}\n'


def test_readers_name_the_line_of_a_byte_that_is_not_utf8(tmp_path: Path) -> None:
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_bytes(OK_LINE * 2 + b'{"id": 3, "note": "caf\xe9"}\n')
    table = tmp_path / "t.csv"
    table.write_bytes(b"a,b\n1,2\n3,caf\xe9\n")
    readers: list[Callable[[], object]] = [
        lambda: read_text(jsonl),
        lambda: list(lines(jsonl)),
        lambda: list(read_json_lines(jsonl)),
        lambda: list(read_jsonl(jsonl, RequestLine)),
        lambda: list(read_csv(table, ["a"], "a table")),
    ]
    for read in readers:
        with pytest.raises(InputError, match="not UTF-8 text") as caught:
            read()
        assert caught.value.line == 3, caught.value
        assert "0xe9" in caught.value.message


def test_readers_accept_a_bom_and_locate_deep_nesting(tmp_path: Path) -> None:
    bom = b"\xef\xbb\xbf"
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_bytes(bom + OK_LINE)
    table = tmp_path / "t.csv"
    table.write_bytes(bom + b"a,b\n1,2\n")
    assert read_text(jsonl) == OK_LINE.decode()
    assert [n for n, _ in lines(jsonl)] == [1]
    assert [r["id"] for _, r in read_json_lines(jsonl)] == [1]
    assert [r.id for _, r in read_jsonl(jsonl, RequestLine)] == [1]
    assert list(read_csv(table, ["a"], "a table")) == [(2, {"a": "1", "b": "2"})]
    jsonl.write_bytes(OK_LINE + b"[" * 100_000 + b"\n")
    with pytest.raises(InputError, match="nested too deeply") as caught:
        list(read_json_lines(jsonl))
    assert caught.value.line == 2


def test_readers_say_a_folder_is_not_a_file(tmp_path: Path) -> None:
    folder = tmp_path / "data.jsonl"
    folder.mkdir()
    readers: list[Callable[[], object]] = [
        lambda: read_text(folder),
        lambda: list(lines(folder)),
        lambda: list(read_csv(folder, ["a"], "a table")),
    ]
    for read in readers:
        with pytest.raises(InputError, match="this is a folder") as caught:
            read()
        assert caught.value.path == str(folder)


@pytest.mark.parametrize("where", ["--out", "--store"])
def test_a_path_under_a_regular_file_is_refused_before_any_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    requests = write_requests(tmp_path / "req.jsonl", 3)
    (tmp_path / "afile").write_text("not a folder")
    under = tmp_path / "afile" / "x.jsonl"
    out, store = (under, tmp_path / "s.sqlite") if where == "--out" else (tmp_path / "o", under)
    code = main([*batch_args(requests, out, store), "--no-progress"])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and f"{under}: " in err and "afile" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "req.jsonl"]  # no calls made


def test_the_commands_and_the_records_load_neither_engine_nor_statistics() -> None:
    """Every command starts without scipy, numpy or the engine (aiohttp): the command
    modules import what a handler needs only when it runs, their options come from the
    light engine settings, and records are plain pydantic."""
    code = (
        "import sys\n"
        "from eigenjury.cli import build_parser\n"
        "from eigenjury.records import kinds\n"
        "build_parser(); kinds()\n"
        "heavy = ('scipy', 'numpy', 'aiohttp', 'eigenjury.engine.engine')\n"
        "print(sorted(m for m in sys.modules if m in heavy or m.split('.')[0] == 'scipy'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
