"""Plans against the runs they plan (issue 31's `--plan`; BENCHMARKS.md section 26).

Each case is a command run on the in-repo test server (in a thread of this process),
whose replies are written as a model writes them (`Judging(words=...)`: a length drawn
by the request's hash, whatever the prompt's; verdict schemas enforced, so no repair is
needed), with a price table for its models. For each case, on a fresh store:

1. a pilot run on other inputs, so the store has each model's history;
2. `--plan`: the calls per model and role, the tokens and dollars, nothing sent (the
   server's request count is checked);
3. the run itself; what it sent is read from the store (the rows it added).

Reported: calls planned for certain and allowed (repairs, escalations) against calls
sent (exact where no allowance is used); input and output tokens planned against used
(the ratio); dollars used against the planned range. And, for the first plan of a
model with no history at all, the same ratios (the stated proxy: four characters a
token, every reply at its cap).

    python benchmarks/plan_accuracy.py
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from _common import environment, table
from eigenjury.cli import main
from eigenjury.records import PlanRecord, read_record
from eigenjury.testing.server import Judging, ServerThread
from rubric_scale import write_rubrics

PRICES = {"input": 2.5, "output": 10.0}  # USD per million tokens, for every test model
MODELS = ("b", "m-kind", "m-curt", "m-plain", "m-wry", "j1", "j2", "j3", "c1", "c2", "c3", "c4",
          "e1", "e2", "e3", "e4", "e5", "a1", "a2", "b1", "b2", "b3")  # fmt: skip


def added(store: Path, since: float) -> tuple[int, int, int, float]:
    """Calls, input and output tokens and dollars of the results stored since `since`."""
    with sqlite3.connect(store) as db:
        row = db.execute(
            "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost_usd) FROM results "
            "WHERE created_at >= ?",
            (since,),
        ).fetchone()
    return row[0], row[1] or 0, row[2] or 0, row[3] or 0.0


def cli(args: list[str]) -> None:
    code = main(args)
    if code not in (0, 1):
        raise SystemExit(f"exit {code}: eigenjury {' '.join(args)}")


def requests(path: Path, start: int, n: int) -> Path:
    with path.open("w") as f:
        for i in range(start, start + n):
            words = " ".join(f"w{(i * 13 + k) % 97}" for k in range(10 + i % 60))
            line = {"id": f"r{i}", "messages": [{"role": "user", "content": f"{i}: {words}"}]}
            f.write(json.dumps({**line, "max_tokens": 400}) + "\n")
    return path


def rank_config(folder: Path, base: str, seed: int, limit: int) -> Path:
    config = {
        "population": [
            {"name": name, "model": f"openai-compatible:m-{name}@{base}", "persona": f"Be {name}."}
            for name in ("kind", "curt", "plain", "wry")
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": limit, "seed": seed},
        "sampling": {"design": "all"},
        "judging": {"reflections": True, "ties": True},
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "prices": "prices.toml"},
    }
    path = folder / f"rank-{seed}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def jury(base: str, *names: str, flag: str = "--jury") -> list[str]:
    return [a for n in names for a in (flag, f"openai-compatible:{n}@{base}")]


Case = tuple[str, Callable[[Path, str], tuple[list[str], list[str]]]]


def batch(folder: Path, base: str) -> tuple[list[str], list[str]]:
    common = ["--model", f"openai-compatible:b@{base}", "--no-progress"]
    pilot = ["batch", str(requests(folder / "pilot.jsonl", 0, 300)), "--out", "p.jsonl"]
    real = ["batch", str(requests(folder / "run.jsonl", 5000, 600)), "--out", "r.jsonl"]
    return [*pilot, *common], [*real, *common]


def rank(folder: Path, base: str) -> tuple[list[str], list[str]]:
    return (
        ["rank", str(rank_config(folder, base, 1, 20)), "--no-progress", "--out", "pilot"],
        ["rank", str(rank_config(folder, base, 2, 30)), "--no-progress", "--out", "run"],
    )


def rubric_sets(folder: Path) -> tuple[str, str]:
    """A pilot rubric set of 25 HealthBench-format examples and one of 40 to plan (12
    criteria each; the first 25 examples alike, answered anew at another temperature)."""
    (folder / "pilot").mkdir()
    (folder / "run").mkdir()
    return str(write_rubrics(folder / "pilot", 25)[0]), str(write_rubrics(folder / "run", 40)[0])


CANDIDATES = ("c1", "c2", "c3", "c4")


def grade(cascade: bool) -> Callable[[Path, str], tuple[list[str], list[str]]]:
    def case(folder: Path, base: str) -> tuple[list[str], list[str]]:
        pilot_set, run_set = rubric_sets(folder)
        common = [
            *jury(base, "j1", "j2", "j3"), *jury(base, *CANDIDATES, flag="--candidate"),
            "--no-progress", "--juror-max-tokens", "300", "--candidate-max-tokens", "500",
        ]  # fmt: skip
        if cascade:
            common += jury(base, "e1", "e2", "e3", "e4", "e5", flag="--escalate-to")
        pilot = ["grade", pilot_set, *common, "--candidate-temperature", "0.3", "--out", "p"]
        run = ["grade", run_set, *common, "--candidate-temperature", "0.9", "--out", "run"]
        return pilot, run

    return case


def compare(folder: Path, base: str) -> tuple[list[str], list[str]]:
    pilot_set, run_set = rubric_sets(folder)
    common = [
        *jury(base, "a1", "a2", flag="--pool-a"), *jury(base, "b1", "b2", "b3", flag="--pool-b"),
        *jury(base, *CANDIDATES, flag="--candidate"), "--no-progress", "--rounds", "50",
    ]  # fmt: skip
    return (
        ["juries", "compare", pilot_set, *common, "--candidate-temperature", "0.3"],
        ["juries", "compare", run_set, *common, "--candidate-temperature", "0.9"],
    )


CASES: list[Case] = [
    ("batch, 600 requests", batch),
    ("rank, 4 members, 30 scenarios, reflections", rank),
    ("grade, 40 examples x 12 criteria, 4 candidates, jury of 3", grade(False)),
    ("the same, escalating to a jury of 5", grade(True)),
    ("juries compare, 2 jurors against 3", compare),
]


def ratio(planned: Any, used: float) -> str:
    return "-" if planned is None or not used else f"{planned.planned / used:.3f}"


def one(name: str, case: Callable[[Path, str], tuple[list[str], list[str]]]) -> list[Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        ServerThread(judging=Judging("enforce", words=120)) as server,
    ):
        folder = Path(tmp)
        (folder / "prices.toml").write_text(
            "".join(
                f'"openai-compatible:{m}" = {{input = {PRICES["input"]}, output = '
                f"{PRICES['output']}}}\n"
                for m in MODELS
            )
        )
        os.chdir(folder)
        os.environ["EIGENJURY_DATA_DIR"] = str(folder / "data")
        pilot, run = case(folder, server.base_url)
        prices = [] if run[0] == "rank" else ["--prices", "prices.toml"]
        store = ["--store", "store.sqlite"] if run[0] != "rank" else []
        cli([*run, *prices, *store, "--plan", "first.json"])  # no history: the proxy
        cli([*pilot, *prices, *store])
        before = server.requests
        cli([*run, *prices, *store, "--plan", "plan.json"])
        assert server.requests == before, "a plan sent a request"
        since = time.time()
        cli([*run, *prices, *store])
        calls, tokens_in, tokens_out, cost = added(folder / "store.sqlite", since)
        plan = read_record(folder / "plan.json", PlanRecord)
        first = read_record(folder / "first.json", PlanRecord)
        total = plan.total
        cost_plan = total.cost_usd
        assert cost_plan is not None and total.cost_usd_most is not None
        # the certain calls' range, or up to the most where allowances were used
        high = cost_plan.high if calls == total.to_send else total.cost_usd_most
        inside = cost_plan.low <= cost <= high
        return [
            name,
            f"{total.to_send} + {total.allowance_calls}",
            calls,
            ratio(total.input_tokens, tokens_in),
            ratio(total.output_tokens, tokens_out),
            f"{cost:.2f}",
            f"{cost_plan.planned:.2f} ({cost_plan.low:.2f}-{cost_plan.high:.2f})",
            f"{total.cost_usd_most:.2f}",
            "yes" if inside else "NO",
            f"{ratio(first.total.input_tokens, tokens_in)} / "
            f"{ratio(first.total.output_tokens, tokens_out)}",
        ]


def run_all() -> None:
    rows = [one(name, case) for name, case in CASES]
    print(environment())
    print(f"    {sys.executable} benchmarks/plan_accuracy.py\n")
    print(
        table(
            [
                "case",
                "calls planned (+ at most)",
                "calls sent",
                "tokens in planned/used",
                "tokens out planned/used",
                "USD used",
                "USD planned (range)",
                "USD at most",
                "in range",
                "no history: in / out",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    run_all()
