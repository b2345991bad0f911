"""The bundled demo configuration, on the real bundled models at a reduced size: its
likelihood verdicts are single verdicts for the reply with the higher score per token
(never probabilities), the transcript holds the scores they came from, the base Gemma
members are ranked but do not judge, and the output says so."""

from __future__ import annotations

import csv
import html
import json
import os
from importlib import resources
from pathlib import Path

import pytest
import yaml

from eigenjury.jobs import run_rank
from eigenjury.peer.data import load_constitution
from eigenjury.peer.prompts import speaker_request
from eigenjury.reports.ranking import meaning

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")

pytestmark = pytest.mark.local


def test_the_demo_configuration_gives_likelihood_verdicts_on_the_bundled_models(
    tmp_path: Path,
) -> None:
    bundled = resources.files("eigenjury") / "data" / "configs" / "demo.yaml"
    config = yaml.safe_load(bundled.read_text(encoding="utf-8"))
    config["scenarios"]["limit"] = 2
    config["fit"]["bootstrap"] = 20
    config["fit"]["ci"] = 0.9
    config["output"] = str(tmp_path / "demo")
    path = tmp_path / "demo.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")

    run = run_rank(path, progress=False, seed=3)
    record, summary = run.record, run.record.run
    assert summary is not None
    assert summary.judging.mode == "likelihood"
    judges = {m.name for m in summary.members if m.evaluee_only is None}
    silent = {m.name: m.evaluee_only for m in summary.members if m.evaluee_only is not None}
    assert judges == {"warm-smol", "cold-smol"}
    assert set(silent) == {"warm-gemma", "cold-gemma"}
    assert all("does not judge" in (reason or "") for reason in silent.values())
    # 2 scenarios x 12 ordered pairs per judge, every one a single verdict
    assert summary.soft_verdicts_by_judge is None
    assert summary.verdicts == 48 and summary.failures == {}
    assert {m.name for m in record.models} == judges | set(silent)
    with (run.out / "verdicts.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 48
    assert "p_first" not in rows[0]  # no probabilities are claimed
    # both presentation orders of a pair prefer the same reply: no position bias
    preferred = {
        (r["scenario"], r["judge"], r["first"], r["second"]): (
            r["first"] if r["verdict"] == "1" else r["second"]
        )
        for r in rows
    }
    for (scenario, judge, first, second), winner in preferred.items():
        assert preferred[scenario, judge, second, first] == winner

    # each verdict is the higher of the two replies' scores, and each score is the
    # follows-minus-breaks log-likelihood of its scoring calls, per token of the reply
    lines = [json.loads(line) for line in (run.out / "transcripts.jsonl").open(encoding="utf-8")]
    constitution = load_constitution(config["constitution"], tmp_path)
    scored: dict[tuple[str, str, str], dict[str, float]] = {}
    tokens: dict[tuple[str, str, str], int] = {}
    for line in lines:
        if line["role"] != "score":
            continue
        key = (line["member"], line["evaluee"], line["scenario"])
        ((reply, logprob),) = line["choice_logprobs"].items()
        persona = next(m.persona for m in summary.members if m.name == line["member"])
        follows = speaker_request(persona, constitution, "", reply, "follows")
        speaker = "follows" if line["messages"][0][1] == follows.messages[0].content else "breaks"
        scored.setdefault(key, {})[speaker] = logprob
        assert tokens.setdefault(key, line["tokens"]) == line["tokens"] > 0
    assert all(set(both) == {"follows", "breaks"} for both in scored.values())
    compared = [line for line in lines if line["role"] == "comparison"]
    assert len(compared) == 48
    for line in compared:
        keys = [(line["member"], m, line["scenario"]) for m in (line["first"], line["second"])]
        expected = [(scored[k]["follows"] - scored[k]["breaks"]) / tokens[k] for k in keys]
        assert [line["scores"]["A"], line["scores"]["B"]] == pytest.approx(expected)
        assert line["verdicts"] == [1 if expected[0] > expected[1] else 2]

    said = " ".join(meaning(record))
    assert "warm-gemma and cold-gemma were evaluees only" in said or (
        "cold-gemma and warm-gemma were evaluees only" in said
    )
    assert "a score, not a probability" in said
    page = (run.out / "report.html").read_text()
    assert "nats per token; not probabilities" in page
    # the sample judgments: both judges, both scenarios, each with the message and the
    # two replies it judged, not an empty prompt
    assert {s.judgment.member for s in run.samples} == judges
    assert len({s.judgment.scenario for s in run.samples}) == 2
    for sample in run.samples:
        assert sample.question and sample.first_reply and sample.second_reply
        assert html.escape(sample.first_reply) in page
    # members that never judge are described one way: the warning and the report's
    # trust matrix caption; their rows in the matrix are empty
    [warning] = [w for w in record.warnings if "never judge" in w]
    assert "their own trust comes from the verdicts on them" in warning
    assert "pass on evenly to every evaluee" in warning
    assert "Empty rows: members that never judge" in page
    rows = dict(zip(record.trust_matrix.judges, record.trust_matrix.rows, strict=True))
    assert not any(rows["warm-gemma"]) and not any(rows["cold-gemma"])
