"""Graded verdicts on Arena-Hard's five points: read as judges write them, a strong one
counted as `strong_weight` verdicts, and kept as given so a refit can weigh them anew."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from answer_files import table
from eigenjury.cli import main
from eigenjury.jobs import run_rank
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest
from eigenjury.peer.parsing import parse_graded
from eigenjury.stats.consensus import PeerRanking
from eigenjury.verdict_files import read_verdicts

QUALITY = re.compile(r"Reply ([AB]):\n<reply>\n.*?\[quality (-?[\d.]+)\]", re.S)


def graded_truth(request: ChatRequest) -> str:
    """A judge that grades by the gap in the replies' hidden qualities, in Arena-Hard's
    words: much better beyond a gap of 1, better beyond 0.3, else as good."""
    quality = {label: float(q) for label, q in QUALITY.findall(request.messages[-1].content)}
    gap = quality.get("A", 0.0) - quality.get("B", 0.0)
    label = "A>>B" if gap > 1 else "A>B" if gap > 0.3 else "B>>A" if gap < -1 else "B>A"
    label = "A=B" if abs(gap) <= 0.3 else label
    return f"Both are fine, but one is better.\n\nMy final verdict is [[{label}]]."


register_script("graded-truth", graded_truth)


@pytest.mark.parametrize(
    ("reply", "ties", "read"),
    [
        ("<verdict>A>>B</verdict>", True, (1, True)),
        ("Reasons... My final verdict is [[B>A]].", True, (2, False)),  # Arena-Hard's form
        ("A=B", True, (0, False)),
        ("A=B", False, None),  # a tie where ties are not allowed
        ('{"reasoning": "B is exact", "verdict": "B>>A"}', True, (2, True)),  # structured
        ("[[a>>b]]", True, (1, True)),
        ("<verdict>A</verdict>", True, None),  # the three-label form is not a grade
        ("<verdict>A=B</verdict> on reflection <verdict>B>>A</verdict>", True, (2, True)),
        ("no verdict at all", True, None),
        ("My final verdict: [[A > B]]", True, (1, False)),  # spaces around the sign
        ("<verdict>B &gt;&gt; A</verdict>", True, (2, True)),  # escaped markup
        ("[[A>A]]", True, None),
    ],
)
def test_graded_verdicts_are_read_as_judges_write_them(
    reply: str, ties: bool, read: tuple[int, bool] | None
) -> None:
    assert parse_graded(reply, ties=ties) == read


def _verdict_file(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_strong_verdict_at_weight_w_fits_as_w_plain_verdicts(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    models = ["a", "b", "c", "d"]
    rows = []
    for s in range(60):
        first, second = rng.choice(models, 2, replace=False)
        for judge in ("j1", "j2"):
            verdict = int(rng.integers(0, 3))
            strong = verdict != 0 and rng.random() < 0.4
            pair = {"first": str(first), "second": str(second)}
            row = {"scenario": f"s{s}", "judge": judge, **pair, "verdict": verdict}
            rows.append({**row, "strength": 2 if strong else 1})
    graded = _verdict_file(tmp_path / "graded.jsonl", rows)
    replicated = [
        {k: v for k, v in r.items() if k != "strength"}
        for r in rows
        for _ in range(2 if r["strength"] == 2 else 1)
    ]
    plain = _verdict_file(tmp_path / "plain.jsonl", replicated)

    def elo(path: Path, **weight: float) -> np.ndarray:
        table = read_verdicts(path, collapse="scenarios", features=None, **weight)
        ranking = PeerRanking(1, bootstrap=0, seed=0).fit(table)
        return np.asarray(ranking.elo_)

    assert np.allclose(elo(graded, strong_weight=2.0), elo(plain), atol=1e-6)
    assert not np.allclose(elo(graded, strong_weight=1.0), elo(plain), atol=1.0)


def test_a_strength_that_is_not_1_or_2_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"scenario": "s", "judge": "j", "first": "a", "second": "b", "verdict": 1}
    path = _verdict_file(tmp_path / "v.jsonl", [{**row, "strength": 1}, {**row, "strength": 3}])
    assert main(["fit", str(path), "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert "line 2" in err and "column 'strength'" in err and "strength 3" in err


def test_a_graded_run_keeps_each_verdicts_strength_for_a_refit(tmp_path: Path) -> None:
    qualities = {"base": 0.0, "near": 0.5, "far": 2.0, "low": -1.5}
    answers = {
        m: {f"q{i}": f"Answer [quality {x}]" for i in range(10)} for m, x in qualities.items()
    }
    table(tmp_path / "answers.csv", answers, {f"q{i}": f"Question {i}?" for i in range(10)})
    config = {
        "population": [{"name": m, "answers": "answers.csv"} for m in qualities],
        "judges": ["scripted:graded-truth"],
        "sampling": {"design": "baseline", "baseline": "base"},
        "judging": {"reflections": False, "graded": True},
        "fit": {"bootstrap": 0, "style": "none"},
        "output": "run",
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    ran = run_rank(tmp_path / "c.yaml", progress=False)
    record = json.loads((ran.out / "results.json").read_text())
    assert record["run"]["judging"]["graded"] is True
    assert record["run"]["judging"]["strong_weight"] == 3.0
    elo = dict(zip(ran.ranking.models_, ran.ranking.elo_, strict=True))
    assert sorted(elo, key=elo.get) == ["low", "base", "near", "far"]  # type: ignore[arg-type]
    wins = {r["model"]: (r["wins"], r["ties"], r["losses"]) for r in record["baseline"]["models"]}
    # a win rate counts each verdict once, strong or not (the fit weighs it)
    assert wins == {"far": (20, 0, 0), "near": (20, 0, 0), "low": (0, 0, 20)}
    lines = (ran.out / "verdicts.csv").read_text().splitlines()
    header = lines[0].split(",")
    strengths = [line.split(",")[header.index("strength")] for line in lines[1:]]
    assert strengths.count("2") == 40 and strengths.count("1") == 20  # far and low: strong
    prompt = json.loads((ran.out / "transcripts.jsonl").read_text().splitlines()[-1])
    assert "<verdict>A>>B</verdict> if reply A is much better" in prompt["messages"][-1][1]
    # the file refits as the run fitted, and with another weight differently
    out = tmp_path / "fit.json"
    assert main(["fit", str(ran.out / "verdicts.csv"), "--bootstrap", "0", "--style", "none",
                 "--out", str(out)]) == 0  # fmt: skip
    refit = {m["name"]: m["elo"] for m in json.loads(out.read_text())["models"]}
    assert refit == pytest.approx({m: round(e, 2) for m, e in elo.items()}, abs=0.02)
    assert main(["fit", str(ran.out / "verdicts.csv"), "--bootstrap", "0", "--style", "none",
                 "--strong-weight", "1", "--out", str(out)]) == 0  # fmt: skip
    plain = {m["name"]: m["elo"] for m in json.loads(out.read_text())["models"]}
    assert plain["far"] < refit["far"]


def test_graded_verdicts_refuse_modes_that_cannot_carry_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "population": [{"name": n, "model": "scripted:echo"} for n in ("a", "b", "c")],
        "judging": {"graded": True, "mode": "criteria"},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["rank", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert "field 'judging.graded'" in err and "mode single, without soft" in err
