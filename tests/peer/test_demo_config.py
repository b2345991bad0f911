"""The bundled demo configuration, on the real bundled models at a reduced size: its
verdicts are soft (likelihood verdicts: probabilities, never a single drawn label),
the base Gemma members are ranked but do not judge, and the output says so."""

from __future__ import annotations

import csv
import os
from importlib import resources
from pathlib import Path

import pytest
import yaml

from eigenjury.commands.peer import run_rank
from eigenjury.reports.ranking import meaning

if not os.environ.get("EIGENJURY_REQUIRE_LOCAL"):
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")

pytestmark = pytest.mark.local


def test_the_demo_configuration_gives_soft_verdicts_on_the_bundled_models(
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
    # every verdict of every judge came as probabilities: 2 scenarios x 12 ordered pairs
    assert summary.soft_verdicts_by_judge == {"cold-smol": 24, "warm-smol": 24}
    assert summary.verdicts == 48 and summary.failures == {}
    assert {m.name for m in record.models} == judges | set(silent)
    with (run.out / "verdicts.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 48
    p_first = [float(r["p_first"]) for r in rows]
    assert all(0.0 < p < 1.0 for p in p_first)  # soft: never a certain verdict
    assert all(float(r["p_tie"]) == 0.0 for r in rows)
    # both presentation orders of a pair give the same verdict: no position bias
    by_order = {
        (r["scenario"], r["judge"], r["first"], r["second"]): p
        for r, p in zip(rows, p_first, strict=True)
    }
    for (scenario, judge, first, second), p in by_order.items():
        assert by_order[scenario, judge, second, first] == pytest.approx(1 - p, abs=1e-5)
    said = " ".join(meaning(record))
    assert "warm-gemma and cold-gemma were evaluees only" in said or (
        "cold-gemma and warm-gemma were evaluees only" in said
    )
    assert "probabilities" in said
