"""Names that round-trip: every name `rank` accepts is written to verdicts.csv so that
`fit` reads it back as the same name, and the names it refuses are exactly those a
verdict file cannot hold."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import yaml

import peer_scripts  # noqa: F401  (registers the scripted population)
from eigenjury.cli import main
from eigenjury.errors import InputError
from eigenjury.names import MISSING_WORDS, name_problem
from eigenjury.stats.verdicts import VerdictTable
from eigenjury.verdict_files import read_verdicts, write_verdicts
from peer_scripts import QUALITIES, config

# Names a person might give that look like trouble but read back as written.
AWKWARD = [
    "Smith, J.",
    'say "hi"',
    "multi\nline",
    "tab\tinside",
    "nan-ish",
    "NA2",
    "1",
    "0.50",
    "true",
    "=SUM(A1)",
    "#hash",
    "ünïcödé",
    "a\u2028b",
]
# Names a verdict file cannot hold: read back trimmed, or as a missing value.
UNREADABLE = ["ann ", " ann", "\tann", "ann\n", "ann\u00a0", "NA", "None", "null", "nan", "N/A", ""]


def _round_trips(name: str, suffix: str, folder: Path) -> bool:
    """Whether a verdict file with `name` as a judge and an evaluee reads it back."""
    models = tuple(sorted({name, "zz-other", "zz-judge"}))
    code = {m: i for i, m in enumerate(models)}
    table = VerdictTable(
        scenario=np.array([0, 0]),
        judge=np.array([code["zz-judge"], code[name]]),
        first=np.array([code[name], code["zz-other"]]),
        second=np.array([code["zz-other"], code[name]]),
        verdict=np.array([1, 2]),
        models=models,
        scenarios=("s",),
        weight=np.ones(2),
    )
    path = folder / f"v{suffix}"
    write_verdicts(table, path)
    try:
        return set(read_verdicts(path).models) == set(models)
    except InputError:  # a missing value where a name must be
        return False


def _random_names(count: int, seed: int) -> list[str]:
    """Short names from an alphabet of the characters that make trouble in files."""
    alphabet = ["a", "N", "n", "A", "/", " ", "\t", "\n", ",", '"', "'", "\u00a0", "\u3000", "é"]
    alphabet += ["ull", "one", "an"]
    rng = random.Random(seed)
    return ["".join(rng.choices(alphabet, k=rng.randint(1, 4))) for _ in range(count)]


@pytest.mark.fuzz
@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_the_name_rule_is_exactly_what_verdict_files_read_back(suffix: str, tmp_path: Path) -> None:
    names = [*AWKWARD, *UNREADABLE, *MISSING_WORDS, *_random_names(150, seed=7)]
    names += [w.upper() for w in MISSING_WORDS] + [w.title() for w in MISSING_WORDS]
    for name in dict.fromkeys(names):
        if name in ("zz-other", "zz-judge"):
            continue
        accepted = name_problem(name) is None
        assert accepted == _round_trips(name, suffix, tmp_path), repr(name)
    assert all(name_problem(n) is None for n in AWKWARD)
    assert all(name_problem(n) is not None for n in UNREADABLE)


def _population(*names: str) -> list[dict[str, str]]:
    return [
        {"name": n, "model": "scripted:peer-truth", "persona": f"[quality {q}]"}
        for n, q in zip(names, QUALITIES.values(), strict=False)
    ]


@pytest.mark.parametrize("name", ["ann ", " ann", "ann\t", "NA", "None", "null", "nan", "N/A"])
def test_rank_refuses_a_member_name_its_verdicts_could_not_give_back(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = config(tmp_path, population=_population("ann", "bo", name, "cy"))
    assert main(["rank", str(path), "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "config.yaml" in err and "field 'population.2.name'" in err and "Traceback" not in err
    assert "whitespace" in err or "missing value" in err
    assert not (tmp_path / "run").exists()  # refused before anything was spent


def test_rank_refuses_a_scenario_id_read_back_as_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenarios = tmp_path / "scenarios.jsonl"
    rows = [{"id": "s1", "text": "Hello?"}, {"id": "NA", "text": "Goodbye?"}]
    scenarios.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = config(tmp_path, scenarios={"source": str(scenarios), "limit": None})
    assert main(["rank", str(path), "--no-progress"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "scenarios.jsonl, line 2, field 'id'" in err and "missing value" in err


def test_every_name_rank_accepts_is_read_back_by_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = ["Smith, J.", 'say "hi"', "multi\nline", "nan-ish", "=SUM(A1)"]
    scenarios = tmp_path / "scenarios.jsonl"
    rows = [{"id": "N/A-1", "text": "Hello?"}, {"id": 2, "text": "Goodbye?"}]
    scenarios.write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = config(
        tmp_path,
        population=_population(*names),
        scenarios={"source": str(scenarios), "limit": None},
        sampling={"design": "all"},
        judging={"reflections": False},
        fit={"bootstrap": 0},
    )
    assert yaml.safe_load(path.read_text())["population"][2]["name"] == "multi\nline"
    assert main(["rank", str(path), "--no-progress"]) == 0, capsys.readouterr().err
    verdicts = tmp_path / "run" / "verdicts.csv"
    table = read_verdicts(verdicts)
    assert set(table.models) == set(names)
    assert set(table.scenarios) == {"N/A-1", "2"}
    out = tmp_path / "fit.json"
    code = main(["fit", str(verdicts), "--bootstrap", "0", "--style", "none", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert {m["name"] for m in json.loads(out.read_text())["models"]} == set(names)
