"""A HealthBench-sized rubric set graded through the engine (BENCHMARKS.md section 24).

A rubric set written here in HealthBench's format (multi-turn conversations, 12
criteria each with positive and negative points, axis and theme tags), one submission
per example, graded by three served jurors on the in-repo test server (in a thread of this process,
50 ms a request, enforcing the verdict schema: each juror's structured verdict drawn by
a hash of the request, so a rerun gets the same votes):

- `eigenjury grade FILE.jsonl --submissions ... --jury a=... --jury b=... --jury c=...`
  in a child process on a fresh store, at 100 and at 500 examples: wall seconds, calls,
  peak resident memory (the child's ru_maxrss from os.wait4), and the same command
  again on the same store (every call from the store).
- Kill -9 and resume at 500 examples: the command started on a fresh store, killed
  (SIGKILL) once the store holds a third of the calls, then run again to the end; its
  results.json is compared with the uninterrupted run's, task by task and vote by vote
  (scores, outcomes, C shares, pass probabilities, agreement), and the calls the
  resumed run made are counted.

    python benchmarks/rubric_scale.py [--examples 500] [--small 100]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import environment, table
from eigenjury.testing.server import Judging, ServerThread

AXES = ("accuracy", "completeness", "context_awareness", "communication_quality")
THEMES = ("emergency_referrals", "context_seeking", "global_health", "hedging")
CRITERIA = 12


def write_rubrics(folder: Path, examples: int) -> tuple[Path, Path]:
    """A HealthBench-format file of `examples` and a submissions file for it."""
    lines, submissions = [], []
    for k in range(examples):
        rubrics = [
            {
                "criterion": f"Criterion {j} of example {k}: the reply does thing {j}.",
                "points": -(1 + (j % 5)) if j % 4 == 3 else 1 + (j * 7 + k) % 10,
                "tags": [f"axis:{AXES[j % len(AXES)]}", "level:example"],
            }
            for j in range(CRITERIA)
        ]
        lines.append(
            {
                "prompt": [
                    {"role": "user", "content": f"Question {k}: I have symptom {k % 17}."},
                    {"role": "assistant", "content": "How long has it lasted?"},
                    {"role": "user", "content": f"{1 + k % 9} days. What should I do?"},
                ],
                "rubrics": rubrics,
                "example_tags": [f"theme:{THEMES[k % len(THEMES)]}"],
                "ideal_completions_data": None,
                "prompt_id": f"ex-{k:05d}",
            }
        )
        submissions.append({"task_id": f"ex-{k:05d}", "submission": f"Reply {k}: rest."})
    rubric_file, submission_file = folder / "rubrics.jsonl", folder / "submissions.jsonl"
    rubric_file.write_text("".join(json.dumps(x) + "\n" for x in lines))
    submission_file.write_text("".join(json.dumps(x) + "\n" for x in submissions))
    return rubric_file, submission_file


def command(url: str, rubrics: Path, submissions: Path, store: Path, out: Path) -> list[str]:
    jurors = [f"--jury={name}=openai-compatible:juror-{name}@{url}" for name in "abc"]
    return [sys.executable, "-m", "eigenjury", "grade", str(rubrics), "--submissions",
            str(submissions), *jurors, "--juror-temperature", "0.7", "--store", str(store),
            "--out", str(out), "--concurrency", "64", "--no-progress"]  # fmt: skip


def run(cmd: list[str], log: Path) -> tuple[float, float]:
    """Wall seconds and peak resident MB of the command, which must succeed."""
    with log.open("w") as printed:
        start = time.perf_counter()
        process = subprocess.Popen(cmd, stdout=printed, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"grade exited with {code}: {log.read_text()[-2000:]}")
    return wall, usage.ru_maxrss / 1024


def stored_calls(store: Path) -> int:
    if not store.exists():
        return 0
    try:
        with sqlite3.connect(store, timeout=5) as db:
            return int(db.execute("select count(*) from results").fetchone()[0])
    except sqlite3.OperationalError:  # not created yet
        return 0


def killed_and_resumed(cmd: list[str], store: Path, log: Path, calls: int) -> tuple[int, float]:
    """Start `cmd`, SIGKILL it once the store holds a third of `calls`, run it again to
    the end; the calls the store held when killed, and the resumed run's seconds."""
    with log.open("w") as printed:
        process = subprocess.Popen(cmd, stdout=printed, stderr=subprocess.STDOUT)
        while process.poll() is None and stored_calls(store) < calls // 3:
            time.sleep(0.2)
        process.send_signal(signal.SIGKILL)
        process.wait()
    held = stored_calls(store)
    wall, _ = run(cmd, log)
    return held, wall


def comparable(results: Path) -> list[Any]:
    """What grading decided, without timings or cache marks."""
    record = json.loads(results.read_text())
    tasks = [
        {k: v for k, v in t.items() if not k.startswith(("jury_", "candidate_"))}
        for t in record["tasks"]
    ]
    return [tasks, record["summary"], record.get("agreement")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--small", type=int, default=100)
    args = parser.parse_args()
    rows = []
    judging = Judging(response_format="enforce")
    with (
        tempfile.TemporaryDirectory() as tmp_,
        ServerThread(latency_s=0.05, judging=judging) as server,
    ):
        tmp = Path(tmp_)
        for size in (args.small, args.examples):
            folder = tmp / f"n{size}"
            folder.mkdir()
            rubrics, submissions = write_rubrics(folder, size)
            store = folder / "store.sqlite"
            cmd = command(server.base_url, rubrics, submissions, store, folder / "out")
            wall, rss = run(cmd, folder / "first.log")
            again, rss_again = run(cmd, folder / "again.log")
            calls = stored_calls(store)
            rows.append([size, size * CRITERIA, calls, f"{wall:.1f}", f"{calls / wall:.0f}",
                         f"{rss:.0f}", f"{again:.1f}", f"{rss_again:.0f}"])  # fmt: skip
        folder = tmp / f"n{args.examples}"
        store = folder / "killed.sqlite"
        rubrics, submissions = folder / "rubrics.jsonl", folder / "submissions.jsonl"
        cmd = command(server.base_url, rubrics, submissions, store, folder / "resumed")
        held, resumed = killed_and_resumed(cmd, store, folder / "killed.log", calls)
        same = comparable(folder / "resumed" / "results.json") == comparable(
            folder / "out" / "results.json"
        )
        total = stored_calls(store)
    print(environment("numpy", "pydantic", "aiohttp"))
    columns = ["examples", "criteria", "juror calls", "seconds", "calls/s", "peak MB",
               "rerun s", "rerun MB"]  # fmt: skip
    print(table(columns, rows))
    print(
        f"\nkill -9 at {args.examples} examples: the store held {held:,} of {calls:,} calls "
        f"when killed; the rerun made the other {total - held:,} in {resumed:.1f} s and "
        f"its results.json {'equals' if same else 'DIFFERS FROM'} the uninterrupted run's "
        "(every task, vote share, pass probability, summary and agreement)"
    )


if __name__ == "__main__":
    main()
