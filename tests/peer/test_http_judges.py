"""Judges served over HTTP give their verdicts in a form the server enforces, and the run
says, per judge, how its first replies came."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from eigenjury.errors import InputError
from eigenjury.jobs import run_rank
from eigenjury.stats.verdicts import FIRST
from eigenjury.testing.server import Judging, ServerThread

MEMBERS = ("kind", "curt", "plain")
TAG_A = "<verdict>A</verdict>"  # a free-text verdict of the test server, as judges give it


def served_config(tmp_path: Path, base: str, **judging: Any) -> Path:
    config = {
        "population": [
            {"name": name, "model": f"openai-compatible:m@{base}", "persona": f"You are {name}."}
            for name in MEMBERS
        ],
        "constitution": "kindness",
        "scenarios": {"source": "everyday", "limit": 3, "seed": 0},
        "sampling": {"design": "all"},
        "judging": {"reflections": False, "ties": True, **judging},
        "fit": {"bootstrap": 0, "style": "none"},
        "engine": {"store": "store.sqlite", "concurrency": 4},
    }
    path = tmp_path / "rank.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def requests_by_role(server: Any) -> dict[str, list[dict[str, Any]]]:
    """The bodies the server received, by what they asked (a comparison or a repair)."""
    out: dict[str, list[dict[str, Any]]] = {"comparison": [], "repair": [], "evaluee": []}
    for body in server.bodies or []:
        last = body["messages"][-1]["content"]
        role = (
            "repair"
            if "did not end with" in last
            else "comparison"
            if "Reply A:" in last
            else "evaluee"
        )
        out[role].append(body)
    return out


def test_judges_on_an_enforcing_server_give_every_verdict_at_once(tmp_path: Path) -> None:
    verdicts = {"A": 0.5, "B": 0.3, "tie": 0.2}
    with ServerThread(
        keep_bodies=True, judging=Judging("enforce", verdicts, logprobs=True)
    ) as server:
        run = run_rank(served_config(tmp_path, server.base_url, soft=True), progress=False)
        asked = requests_by_role(server)
    summary = run.record.run
    assert summary is not None
    assert summary.comparisons == 54 and summary.verdicts == 54 and not summary.failures
    assert not asked["repair"]
    assert summary.verdicts_by_judge is not None
    assert {j: v.line() for j, v in summary.verdicts_by_judge.items()} == dict.fromkeys(
        MEMBERS, "18 structured; unread 0%"
    )
    # each comparison asked for a schema verdict among the labels, and label scores
    body = asked["comparison"][0]
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["verdict"]["enum"] == ["A", "B", "tie"]
    assert body["logprobs"] is True
    # soft verdicts over HTTP: the server's own label probabilities
    assert summary.soft_verdicts_by_judge == dict.fromkeys(sorted(MEMBERS), 18)
    assert run.table.probs is not None
    expected = [verdicts["tie"], verdicts["A"], verdicts["B"]]
    assert run.table.probs.tolist()[0] == pytest.approx(expected, abs=1e-6)
    transcript = [json.loads(x) for x in (run.out / "transcripts.jsonl").read_text().splitlines()]
    judged = [t for t in transcript if t["role"] == "comparison"]
    assert all(json.loads(t["reply"])["verdict"] in ("A", "B", "tie") for t in judged)


def test_a_server_that_ignores_the_schema_falls_back_to_text_and_says_so(tmp_path: Path) -> None:
    """The server answers in free text whatever is asked (a verdict tag after its echo of
    the prompt): after the first reply shows the schema is ignored, no request asks for
    it again, and the run counts text replies."""
    judging = Judging("ignore", {TAG_A: 1.0})
    with ServerThread(keep_bodies=True, judging=judging) as server:
        run = run_rank(served_config(tmp_path, server.base_url), progress=False)
        asked = requests_by_role(server)
    # (the echoed replies are alike, so many comparisons share one request)
    schema = ["response_format" in b for b in asked["comparison"]]
    assert len(schema) > 1 and schema == [True] + [False] * (len(schema) - 1)
    assert run.record.run is not None
    modes = run.record.run.verdicts_by_judge or {}
    assert {j: (v.text, v.structured, v.unread) for j, v in modes.items()} == dict.fromkeys(
        MEMBERS, (18, 0, 0)
    )


def test_forced_text_sends_no_schema_and_counts_text_replies(tmp_path: Path) -> None:
    with ServerThread(keep_bodies=True, judging=Judging("enforce", {TAG_A: 1.0})) as server:
        path = served_config(tmp_path, server.base_url, verdict_format="text")
        run = run_rank(path, progress=False)
        asked = requests_by_role(server)
    assert asked["comparison"] and not any("response_format" in b for b in asked["comparison"])
    assert run.record.run is not None
    modes = run.record.run.verdicts_by_judge or {}
    assert {j: (v.text, v.structured, v.unread) for j, v in modes.items()} == dict.fromkeys(
        MEMBERS, (18, 0, 0)
    )


def comparison_verdicts(run: Any) -> Counter[tuple[int, ...]]:
    lines = [json.loads(x) for x in (run.out / "transcripts.jsonl").read_text().splitlines()]
    return Counter(tuple(t["verdicts"] or ()) for t in lines if t["role"] == "comparison")


@pytest.mark.parametrize("ties", [True, False])
def test_a_judge_that_repeats_the_format_after_its_verdict_is_read_by_its_verdict(
    tmp_path: Path, ties: bool
) -> None:
    """Every judge says A, then repeats the format it was shown (which ends with the tie
    tag, or with B without ties): every verdict is A, none needs repair."""
    judging = Judging("ignore", {TAG_A: 1.0}, echo=True)
    with ServerThread(keep_bodies=True, judging=judging) as server:
        run = run_rank(served_config(tmp_path, server.base_url, ties=ties), progress=False)
        asked = requests_by_role(server)
    assert not asked["repair"]
    assert comparison_verdicts(run) == {(FIRST,): 54}
    assert run.record.run is not None  # (always the slot shown first: never consistent)
    consistency = run.record.run.order_consistency.values()
    assert all(o.consistent == 0.0 and o.same_slot == 1.0 for o in consistency)
    modes = run.record.run.verdicts_by_judge or {}
    assert {j: (v.text, v.unread) for j, v in modes.items()} == dict.fromkeys(MEMBERS, (18, 0))


SOFT = {"A": 0.5, "B": 0.3, "tie": 0.2}


@pytest.mark.fuzz
def test_non_finite_label_scores_never_become_verdicts_and_stores_holding_them_still_rank(
    tmp_path: Path,
) -> None:
    """A server sending NaN log-probabilities gives malformed replies: the run stops with
    a clear message, and once the server is sound a rerun asks for those again. A store
    that already holds such replies as successes (as an older version kept them) is read
    without crashing: they are asked again and replaced."""
    path = served_config(tmp_path, "BASE", soft=True)
    config = yaml.safe_load(path.read_text())
    config["engine"]["max_attempts"] = 2
    with ServerThread(judging=Judging("enforce", SOFT, logprobs=True)) as server:
        config["population"] = [
            {**m, "model": m["model"].replace("BASE", server.base_url)}
            for m in config["population"]
        ]
        path.write_text(yaml.safe_dump(config))
        server.judging = Judging("enforce", SOFT, logprobs=True, broken_logprob=math.nan)
        with pytest.raises(InputError, match="judge error"):
            run_rank(path, progress=False)
        server.judging = Judging("enforce", SOFT, logprobs=True)
        first = run_rank(path, progress=False)
        assert first.table.probs is not None and np.isfinite(first.table.probs).all()
        with sqlite3.connect(tmp_path / "store.sqlite") as db:  # as an older version kept them
            damaged = db.execute(
                'UPDATE results SET choice_logprobs = \'{"A":NaN,"B":-1.2,"tie":-1.6}\' '
                "WHERE choice_logprobs IS NOT NULL"
            ).rowcount
        db.close()
        asked = server.requests
        again = run_rank(path, progress=False)
        assert damaged > 0 and server.requests - asked == damaged
    assert again.table.probs is not None and np.isfinite(again.table.probs).all()
    assert again.table.probs.tolist() == first.table.probs.tolist()
