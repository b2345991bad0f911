"""Children that never outlive their parent (processes.py), even under kill -9."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.fuzz

ORPHAN_S = 5.0  # the check: nothing a killed command started alive this much later

# A parent that starts a long-lived child as llama_server starts its server (Popen, the
# child dying with its parent), prints the child's pid, and waits.
PARENT = """
import functools, os, subprocess, sys, time
from eigenjury.processes import die_with_parent
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    preexec_fn=functools.partial(die_with_parent, os.getpid()),
)
print(child.pid, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # (a zombie has exited)


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_a_started_server_dies_with_its_parent(how: signal.Signals) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert alive(child)
        os.kill(parent.pid, how)
        parent.wait(30)
        deadline = time.monotonic() + ORPHAN_S
        while alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(child), "the child outlived its parent"
    finally:
        parent.kill()
        parent.wait()
