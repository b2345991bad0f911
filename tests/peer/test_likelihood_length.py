"""Likelihood verdicts on the real bundled SmolLM2 judge, through the collector a run
uses: two flat sentences appended to a reply do not decide its verdict, and the kind
reply still beats the unkind one.

The replies and sentences are the ones written for benchmarks/likelihood_length.py
(BENCHMARKS.md, section 16c), on its first 16 scenarios, judged as the demo's
warm-smol member judges (its persona, the demo's constitution). The share is of
verdicts, the single answer a judge gives. When a score was the log-ratio summed over
the reply's tokens, flat sentences lowered it (each is a little likelier from the
speaker who breaks the constitution) and the reply without them got 68% of the
verdicts; per token the reply with them gets 49%. (Polite closings, "I hope this helps", are a
different matter: the judge reads them, per token, as kinder than the kind replies
themselves, so it prefers the reply that has them; the benchmark reports them.)
"""

from __future__ import annotations

import asyncio
import json
import os
from importlib import resources
from pathlib import Path

import pytest
import yaml

from eigenjury.engine.engine import Engine
from eigenjury.engine.store import Store
from eigenjury.peer.collect import Collector
from eigenjury.peer.config import Judging, Member
from eigenjury.peer.data import load_constitution, load_scenarios
from eigenjury.peer.designs import Comparison
from eigenjury.peer.outcomes import Outcomes
from eigenjury.stats.verdicts import FIRST

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")

pytestmark = pytest.mark.local

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
SCENARIOS = 16
JUDGE = "warm-smol"


def test_flat_sentences_do_not_decide_a_likelihood_verdict(tmp_path: Path) -> None:
    demo_file = resources.files("eigenjury") / "data" / "configs" / "demo.yaml"
    demo = yaml.safe_load(demo_file.read_text(encoding="utf-8"))
    judge = next(m for m in demo["population"] if m["name"] == JUDGE)
    constitution = load_constitution(demo["constitution"], tmp_path)
    texts = {s.id: s.text for s in load_scenarios("everyday", tmp_path)}
    written = [
        json.loads(line)
        for line in (DATA / "kind_unkind_replies.jsonl").read_text(encoding="utf-8").splitlines()
    ][:SCENARIOS]
    flat = json.loads((DATA / "neutral_sentences.json").read_text(encoding="utf-8"))["flat"]

    # each written reply, and each with a flat padding, is an evaluee's reply
    responses = {}
    for row in written:
        for tone in ("kind", "unkind"):
            responses[tone, row["scenario"]] = row[tone]
            for name, sentences in flat.items():
                responses[f"{tone}+{name}", row["scenario"]] = f"{row[tone]} {sentences}"
    padded = [
        Comparison(row["scenario"], JUDGE, f"{tone}+{name}", tone)
        for row in written
        for tone in ("kind", "unkind")
        for name in flat
    ]
    kind_first = [Comparison(row["scenario"], JUDGE, "kind", "unkind") for row in written]
    model = judge["model"]
    members = {name: Member(name=name, model=model) for name, _ in responses}
    members[JUDGE] = Member(name=JUDGE, model=model, persona=judge["persona"])

    async def collect() -> Outcomes:
        async with Engine(Store(tmp_path / "store.sqlite"), progress=False) as engine:
            collector = Collector(
                engine=engine,
                members=members,
                constitution=constitution,
                scenarios={row["scenario"]: texts[row["scenario"]] for row in written},
                judging=Judging(mode="likelihood", reflections=False, ties=False),
                persona=lambda member, role: members[member].persona,
                responses=dict(responses),
            )
            return await collector.collect([*padded, *kind_first])

    outcomes = list(asyncio.run(collect()))
    assert all(o.failure is None and o.verdicts for o in outcomes)
    first_wins = [o.verdicts == [FIRST] for o in outcomes]
    longer = sum(first_wins[: len(padded)]) / len(padded)
    kind = sum(first_wins[len(padded) :]) / len(kind_first)
    assert 0.4 <= longer <= 0.6, f"the padded reply got {longer:.0%} of {len(padded)} verdicts"
    assert kind >= 0.6, f"the kind reply got {kind:.0%} of {len(kind_first)} verdicts"
