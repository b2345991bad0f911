"""The one output writer (files.OutputFile): one writer at a time, leftovers of killed
writers removed, a run folder written all or nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from eigenjury.errors import InputError
from eigenjury.files import OutputFile, write_text
from eigenjury.records import Record
from eigenjury.reports.output import Outputs, write_outputs


@pytest.mark.fuzz
def test_a_second_writer_is_refused_naming_the_first_and_the_lock_goes_with_it(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out.jsonl"
    with OutputFile(out) as first:
        with pytest.raises(InputError) as refused:
            OutputFile(out).__enter__()
        assert refused.value.path == str(out)
        assert f"another eigenjury process (pid {os.getpid()}) is writing" in str(refused.value)
        first.write("first\n")
        first.commit()
    assert out.read_text() == "first\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"]  # no lock left
    write_text(out, "second\n")  # free again
    assert out.read_text() == "second\n"


@pytest.mark.fuzz
def test_a_waiting_writer_writes_once_the_first_has_finished(tmp_path: Path) -> None:
    """`wait` (eigenjury's own short writes, such as a cache) queues instead of refusing;
    each write is whole, the last one wins."""
    out = tmp_path / "cache.json"
    holding = OutputFile(out)
    holding.__enter__()
    waiter = threading.Thread(target=write_text, args=(out, "later\n"), kwargs={"wait": True})
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and not out.exists()  # waiting for the lock, nothing written
    holding.write("first\n")
    holding.commit()
    holding.__exit__(None, None, None)
    waiter.join(30)
    assert not waiter.is_alive() and out.read_text() == "later\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]


def test_what_a_killed_writer_left_is_removed_by_the_next_writer(tmp_path: Path) -> None:
    """kill -9 leaves the temporary file and the lock file; the next writer of the same
    output, holding the lock, removes them (and never a user's file of a similar name)."""
    out = tmp_path / "out.jsonl"
    for left in (".out.jsonl.0123abcd.tmp", ".out.jsonl.lock"):
        (tmp_path / left).write_text("from a killed run")
    for kept in (".out.jsonl.notes.tmp", ".other.jsonl.0123abcd.tmp"):
        (tmp_path / kept).write_text("not ours")
    write_text(out, "whole\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".other.jsonl.0123abcd.tmp",
        ".out.jsonl.notes.tmp",
        "out.jsonl",
    ]


class _Note(Record):
    """A record of no registered kind (KIND empty), so no other test ever meets it."""

    text: str


def test_a_run_folder_is_written_all_or_nothing(tmp_path: Path) -> None:
    """Every file of a run is written before any is moved into place: one that cannot
    be written leaves the folder as it was (here, as it was not)."""
    folder = tmp_path / "run"
    (folder / "blocked.csv").mkdir(parents=True)
    note = _Note(kind="note", text="x")
    outputs = Outputs(note, files={"a.csv": "a", "blocked.csv": "b"}, record_file="note.json")
    with pytest.raises(InputError, match="this is a folder") as caught:
        write_outputs(folder, outputs)
    assert caught.value.path == str(folder / "blocked.csv")
    assert sorted(p.name for p in folder.iterdir()) == ["blocked.csv"]
    (folder / "blocked.csv").rmdir()
    written = write_outputs(folder, outputs)
    assert [p.name for p in written] == ["note.json", "a.csv", "blocked.csv"]
    assert sorted(p.name for p in folder.iterdir()) == ["a.csv", "blocked.csv", "note.json"]


# Looks at /dev/stdout as an output, in a process whose stdout is a pipe, and says why it
# is refused. Only looked at, never written: as root, a writer that regressed would
# replace the system's /dev/stdout.
STDOUT_AS_OUTPUT = """
from pathlib import Path
from eigenjury.errors import InputError
from eigenjury.files import output_target
try:
    output_target(Path("/dev/stdout"))
except InputError as exc:
    print(exc)
"""


@pytest.mark.fuzz
def test_dev_stdout_is_refused_as_an_output_never_replaced() -> None:
    """As root, `--out /dev/stdout` used to replace the system's /dev/stdout with a
    regular file (and print nothing)."""
    shown = subprocess.run(
        [sys.executable, "-c", STDOUT_AS_OUTPUT], capture_output=True, text=True, check=True
    )
    assert shown.stdout.startswith("/dev/stdout: this is a named pipe, not a regular file")
    assert os.path.islink("/dev/stdout") or not os.path.isfile("/dev/stdout")
