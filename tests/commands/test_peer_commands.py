"""The `eigenjury` command: simulate -> fit end to end, and every bad input it must explain."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from eigenjury.cli import build_parser, main
from eigenjury.commands.peer import fit_settings
from eigenjury.peer.record import RankingRecord, TruthRecord
from eigenjury.peer.settings import FitSettings
from eigenjury.records import read_record

HEADER = "scenario,judge,first,second,verdict\n"


def _strict_json(path: Path) -> Any:
    """The file as JSON, refusing NaN and Infinity (which no JSON reader must accept)."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{path} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sim")
    assert (
        main(["simulate", "--out", str(out), "--models", "6", "--scenarios", "400", "--seed", "3"])
        == 0
    )
    return out


def test_simulate_then_fit_writes_the_documented_record(
    simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "result.json"
    code, out, err = _run(
        capsys,
        "fit",
        str(simulated / "verdicts.csv"),
        "--bootstrap",
        "20",
        "--ci",
        "0.9",
        "--truth",
        str(simulated / "truth.json"),
        "--cv",
        "3",
        "--out",
        str(result),
    )
    assert code == 0, err
    assert "Peer ranking" in out and "Kendall tau" in out
    record = _strict_json(result)
    assert [m["rank"] for m in record["models"]] == list(range(1, 7))
    for m in record["models"]:
        assert set(m) >= {"name", "elo", "elo_ci", "trust", "rank", "rank_ci"}
        assert m["elo_ci"][0] <= m["elo"] <= m["elo_ci"][1]
        assert m["rank_ci"][0] <= m["rank"] <= m["rank_ci"][1]
    assert {j["name"] for j in record["judges"]} == {m["name"] for m in record["models"]}
    assert set(record["judges"][0]) >= {"tie_propensity", "position_bias", "lens"}
    assert set(record["dispositions"]) == {m["name"] for m in record["models"]}
    fit = record["fit"]
    assert fit["converged"] and fit["dim"] == 2 and fit["verdicts"] == 400 * 12
    assert record["truth_recovery"]["kendall_tau"] > 0.7
    heldout = fit["heldout_loglik_per_verdict"]
    assert heldout["folds"] == 3 and -np.log(3) < heldout["mean"] < 0
    assert "held-out log-lik/verdict (3 scenario folds)" in out
    assert (
        list(record)[:4] == ["kind", "eigenjury", "schema_version", "created"]
        and record["kind"] == "ranking"
    )
    assert "run" not in record and "objective" not in record  # parts only `rank` has
    read = read_record(result, RankingRecord)  # written and read through the same model
    assert read.model_dump(mode="json") == record
    assert read.overview().name == "verdicts.csv" and read.overview().cost_usd is None


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_every_format_gives_the_same_fit(
    fmt: str, simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "simulate",
                "--out",
                str(tmp_path),
                "--models",
                "6",
                "--scenarios",
                "400",
                "--seed",
                "3",
                "--format",
                fmt,
            ]
        )
        == 0
    )
    capsys.readouterr()
    results = []
    for path in (simulated / "verdicts.csv", tmp_path / f"verdicts.{fmt}"):
        target = tmp_path / f"{path.suffix}.json"
        assert main(["fit", str(path), "--bootstrap", "0", "--out", str(target)]) == 0
        results.append(json.loads(target.read_text())["models"])
    assert results[0] == results[1]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BAD_INPUTS = {
    "unknown verdict": (
        "v.csv",
        HEADER + "s1,a,b,c,1\ns1,a,c,b,first\n",
        ["v.csv", "line 3", "column 'verdict'", "'first'", "0 (tie)"],
    ),
    "missing column": (
        "v.csv",
        "scenario,judge,first,verdict\ns1,a,b,1\n",
        ["v.csv", "missing column(s) second", "found scenario, judge, first, verdict"],
    ),
    "empty file": ("v.csv", "", ["v.csv", "the file is empty"]),
    "header only": ("v.csv", HEADER, ["v.csv", "no verdicts"]),
    "NaN verdict": (
        "v.csv",
        HEADER + "s1,a,b,c,1\ns2,a,b,c,NaN\n",
        ["v.csv", "line 3", "column 'verdict'", "missing value"],
    ),
    "NaN in JSONL": (
        "v.jsonl",
        '{"scenario": "s1", "judge": "a", "first": "b", "second": "c", "verdict": 1}\n'
        '{"scenario": "s1", "judge": NaN, "first": "b", "second": "c", "verdict": 1}\n',
        ["v.jsonl", "line 2", "column 'judge'", "missing value"],
    ),
    "broken JSON": (
        "v.jsonl",
        '{"scenario": "s1", "judge": "a",\n',
        ["v.jsonl", "line 1", "not valid JSON"],
    ),
    "ragged CSV": ("v.csv", HEADER + "s1,a,b,c\n", ["line 2", "4 fields", "header has 5"]),
    "same evaluee twice": (
        "v.csv",
        HEADER + "s1,a,b,b,1\n",
        ["line 2", "first and second are both 'b'"],
    ),
    "unknown extension": ("v.txt", HEADER, ["v.txt", "unknown file type '.txt'"]),
    "disconnected graph": (
        "v.csv",
        HEADER + "s1,a,a,b,1\ns2,b,b,a,2\ns3,c,c,d,1\ns4,d,d,c,0\n",
        ["v.csv", "disconnected groups", "{'a', 'b'}", "{'c', 'd'}"],
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_explained_with_exit_code_2(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, text, expected = BAD_INPUTS[case]
    path = _write(tmp_path, name, text)
    code, out, err = _run(capsys, "fit", str(path), "--bootstrap", "0")
    assert code == 2
    flat = " ".join(err.split())
    for fragment in expected:
        assert fragment in flat, f"{fragment!r} not in {flat!r}"
    assert "Traceback" not in err + out


def test_missing_file_and_bad_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "fit", str(tmp_path / "nope.csv"))
    assert code == 2 and "nope.csv: no such file" in " ".join(err.split())
    with pytest.raises(SystemExit) as stop:
        main(["fit", "x.csv", "--ci", "1.5"])
    assert stop.value.code == 2
    assert "--ci: 1.5 is outside (0.0, 1.0)" in capsys.readouterr().err


def test_criterion_rows_and_criterion_filter(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = []
    for s in range(40):
        for judge, first, second, verdicts in (
            ("a", "b", "c", "112"),
            ("b", "c", "a", "220"),
            ("c", "a", "b", "101"),
            ("a", "c", "b", "221"),
        ):
            for criterion, v in zip(("care", "honesty", "wit"), verdicts, strict=True):
                rows.append(f"s{s},{judge},{first},{second},{v},{criterion}\n")
    path = _write(
        tmp_path, "c.csv", "scenario,judge,first,second,verdict,criterion\n" + "".join(rows)
    )
    out = tmp_path / "r.json"
    assert main(["fit", str(path), "--bootstrap", "0", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["fit"]["verdicts"] == 160  # judgments, not rows
    assert (
        main(["fit", str(path), "--bootstrap", "0", "--criterion", "wit", "--out", str(out)]) == 0
    )
    assert json.loads(out.read_text())["fit"]["verdicts"] == 160
    capsys.readouterr()
    code, _, err = _run(capsys, "fit", str(path), "--criterion", "kindness")
    assert code == 2 and "no rows have criterion 'kindness'" in err


def test_thin_data_warns_and_names_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        f"s{s},{j},{a},{b},{(s + len(j)) % 3}\n"
        for s in range(30)
        for j, a, b in (("a", "b", "c"), ("b", "c", "a"), ("c", "a", "b"))
    ]
    rows += ["t1,a,b,d,1\n", "t2,b,d,c,2\n", "t3,d,a,b,0\n"]
    path = _write(tmp_path, "thin.csv", HEADER + "".join(rows))
    code, out, _ = _run(capsys, "fit", str(path), "--bootstrap", "0")
    assert code == 0
    assert "thin data: 'd'" in " ".join(out.split())


@pytest.mark.slow
def test_console_script_exits_2_without_a_traceback(tmp_path: Path) -> None:
    path = _write(tmp_path, "v.csv", HEADER + "s1,a,b,c,7\n")
    done = subprocess.run(
        [sys.executable, "-m", "eigenjury", "fit", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "line 2" in done.stderr and "Traceback" not in done.stderr


def test_unwritable_output_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = _write(tmp_path, "taken", "a file where a directory should go")
    code, out, err = _run(capsys, "simulate", "--out", str(blocker / "sim"))
    assert code == 2 and "taken" in err and "Traceback" not in err + out


def test_help_states_the_estimator_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    from eigenjury.stats.btd import DEFAULT_L2, DEFAULT_RESTARTS

    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert DEFAULT_L2 == 1e-6 and "1e-6" in text and f"default: {DEFAULT_RESTARTS}" in text


def test_the_parser_offers_every_verdict_format() -> None:
    from eigenjury.commands.peer import VERDICT_FORMATS
    from eigenjury.verdict_files import FORMATS

    assert set(VERDICT_FORMATS) == set(FORMATS.values())


def _all_pairs(names: list[str], scenarios: int, verdict: str) -> str:
    """Every judge compares every ordered pair in every scenario, always with `verdict`."""
    rows = [
        f"s{s},{j},{a},{b},{verdict}\n"
        for s in range(scenarios)
        for j in names
        for a in names
        for b in names
        if a != b
    ]
    return HEADER + "".join(rows)


def test_markup_in_names_paths_and_messages_is_printed_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "[/]"  # a folder "[" holding a folder "]"
    folder.mkdir(parents=True)
    rows = [
        f"s{s},{j},{a},{b},{(s + i) % 3}\n"
        for s in range(40)
        for i, (j, a, b) in enumerate(
            [("[/]", "[bold]x", "c"), ("[bold]x", "c", "[/]"), ("c", "[/]", "[bold]x")]
        )
    ]
    path = _write(folder, "v.csv", HEADER + "".join(rows))
    code, out, err = _run(
        capsys, "fit", str(path), "--bootstrap", "0", "--out", str(folder / "r.json")
    )
    assert code == 0, err
    names = [line.split("│")[3].strip() for line in out.splitlines() if line.count("│") > 7]
    assert set(names) == {"[/]", "[bold]x", "c"}
    assert f"wrote {folder / 'r.json'}" in out
    _write(folder, "v.csv", HEADER + "s1,[/],[bold]x,c,7\n")
    code, out, err = _run(capsys, "fit", str(path))
    assert code == 2 and f"{path}, line 2" in err and "Traceback" not in err + out
    # a file that is not Parquet is named, without a traceback
    code, _, err = _run(capsys, "fit", str(_write(tmp_path, "v.parquet", "")))
    assert code == 2 and "not a readable Parquet file" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "command",
    [
        "simulate --seed -1",
        "fit v.csv --seed -1",
        "bound measure d.jsonl --judge scripted:x --out p --seed -1",
        "bound apply s.csv --profile p --out o --tau 1 --delta 0.1 --seed -3",
    ],
)
def test_negative_seeds_are_refused(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(command.split())
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert "--seed" in err and "seeds are whole numbers from 0 up" in err


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("fit v.csv --cv 1", "use 0 (none) or at least 2"),
        ("fit v.csv --anchor-value inf", "'inf' is not a finite number"),
        (  # every Elo difference would vanish in floating point: all models tie
            "fit v.csv --anchor-value 1e21",
            "1e21 is too large an Elo: floating-point numbers that large are 1.31e+05 apart",
        ),
        ("fit v.csv --anchor-value=-1e10", "use a value from -1e+09 to 1e+09"),
        ("fit v.csv --l2 inf", "'inf' is not a finite number"),
        ("simulate --tie inf", "'inf' is not a finite number"),
        ("simulate --position-bias nan", "'nan' is not a number"),
        ("simulate --greenbeard-bonus=-inf", "'-inf' is not a finite number"),
        ("simulate --judge-noise Infinity", "'Infinity' is not a finite number"),
        (
            "bound certify --tau 1 --delta 0.1 --sensitivity inf --dim 3",
            "'inf' is not a finite number",
        ),
    ],
)
def test_options_outside_their_domain_are_refused(
    command: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(command.split())
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("rounds", "ci", "need"), [("1", "0.95", 40), ("19", "0.95", 40), ("50", "0.99", 200)]
)
def test_too_few_bootstrap_rounds_for_the_coverage_are_refused(
    rounds: str, ci: str, need: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "v.csv", _all_pairs(["a", "b", "c"], 5, "1"))
    code, out, err = _run(capsys, "fit", str(path), "--bootstrap", rounds, "--ci", ci)
    assert code == 2 and "Peer ranking" not in out
    flat = " ".join(err.split())
    assert "--bootstrap" in flat and f"at least {need}" in flat and "0 for no intervals" in flat


@pytest.mark.parametrize("verdict", ["0", "1"])
def test_models_the_verdicts_cannot_tell_apart_share_their_rank(
    verdict: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """All ties, or judges that always answer 'first' (uninformative in both orders):
    equal Elo, so every model is rank 1 with the interval 1-3, never 1-1, 2-2, 3-3."""
    path = _write(tmp_path, "v.csv", _all_pairs(["a", "b", "c"], 40, verdict))
    result = tmp_path / "r.json"
    code, out, err = _run(
        capsys, "fit", str(path), "--bootstrap", "40", "--jobs", "1", "--out", str(result)
    )
    assert code == 0, err
    record = _strict_json(result)
    assert [(m["rank"], m["rank_ci"]) for m in record["models"]] == [(1, [1, 3])] * 3
    assert out.count(" 1-3 ") == 3


def test_a_small_population_gets_a_fitting_default_group_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sim"
    code, _, err = _run(capsys, "simulate", "--models", "3", "--scenarios", "5", "--out", str(out))
    assert code == 0, err
    assert json.loads((out / "truth.json").read_text())["design"]["group_size"] == 3
    code, _, err = _run(capsys, "simulate", "--models", "3", "--group-size", "4", "--out", str(out))
    assert code == 2 and "--group-size 4 exceeds --models 3" in err


def test_fit_refuses_an_out_that_is_an_input_through_a_link(
    simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = tmp_path / "verdicts.csv"
    verdicts.write_bytes((simulated / "verdicts.csv").read_bytes())
    link = tmp_path / "link.json"
    link.symlink_to(verdicts)
    before = verdicts.read_bytes()
    code, out, err = _run(capsys, "fit", str(verdicts), "--bootstrap", "0", "--out", str(link))
    assert code == 2 and "link.json" in err and "verdict file" in err
    assert verdicts.read_bytes() == before and "Traceback" not in out + err


def test_a_truth_file_that_does_not_fit_its_population_is_refused(
    simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = json.loads((simulated / "truth.json").read_text())
    truth["population"]["lenses"] = truth["population"]["lenses"][:2]  # 2 rows for 6 models
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(truth))
    argv = ["fit", str(simulated / "verdicts.csv"), "--bootstrap", "0", "--truth", str(path)]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and "truth.json" in err and "lenses" in err
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["fit", "--dim", "7"], "dim) of 7 exceeds the 6 models"),
        (["simulate", "--models", "3", "--dim", "4"], "--dim 4 exceeds --models 3"),
        (["simulate", "--scenarios", "500000"], "more than the 5,000,000"),
        (["simulate", "--models", "1000", "--scenarios", "30000", "--group-size", "2"],
         "--scenarios 30000 x --models 1000"),
    ],
)  # fmt: skip
def test_sizes_past_what_the_data_or_memory_can_take_are_refused(
    argv: list[str],
    expected: str,
    simulated: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if argv[0] == "fit":
        argv = ["fit", str(simulated / "verdicts.csv"), "--bootstrap", "0", *argv[1:]]
    else:
        argv = [*argv, "--out", str(tmp_path / "sim")]
    code, out, err = _run(capsys, *argv)
    assert code == 2 and expected in " ".join(err.split()), err
    assert not (tmp_path / "sim").exists() and "Traceback" not in out + err


def test_the_truth_of_a_simulation_is_a_record_that_fit_reads(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = read_record(simulated / "truth.json", TruthRecord)
    assert truth.design.scenarios > 0 and len(truth.elo) == len(truth.population["models"])
    assert truth.overview().models == tuple(truth.population["models"])
    argv = ["fit", str(simulated / "verdicts.csv"), "--bootstrap", "0"]
    code, _, err = _run(capsys, *argv, "--truth", str(simulated / "truth.json"))
    assert code == 0, err


def test_fit_options_are_the_settings_a_rank_config_takes() -> None:
    options = ["--prior", "3,1,10", "--no-self-preference", "--style", "none"]
    options += ["--external-weight", "crowd=2", "--anchor-value", "1000", "--jobs", "1"]
    args = build_parser().parse_args(["fit", "v.csv", *options, "--cv", "2"])
    settings = fit_settings(args)
    assert settings == FitSettings(
        prior=(3, 1, 10),
        self_preference=False,
        style="none",
        external_weight={"crowd": 2.0},
        anchor_value=1000,
        jobs=1,
        cv=2,
    )
    assert fit_settings(build_parser().parse_args(["fit", "v.csv"])) == FitSettings()
    assert set(vars(args)) >= set(FitSettings.model_fields)


def test_fit_leaves_out_the_judges_it_is_told_to_and_names_one_it_cannot(
    simulated: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verdicts = str(simulated / "verdicts.csv")
    code, _, err = _run(capsys, "fit", verdicts, "--bootstrap", "0", "--exclude-judge", "nobody")
    assert code == 2
    assert err.startswith(f"error: {verdicts}, field '--exclude-judge': 'nobody' gave no verdicts")
    out = tmp_path / "fit.json"
    argv = ["fit", verdicts, "--bootstrap", "0", "--out", str(out)]
    code, _, _ = _run(capsys, *argv, "--exclude-judge", "model-1", "--exclude-judge", "model-2")
    assert code == 0
    record = json.loads(out.read_text())
    assert record["settings"]["exclude_judges"] == ["model-1", "model-2"]
    assert {"model-1", "model-2"} <= {m["name"] for m in record["models"]}
    assert {"model-1", "model-2"}.isdisjoint(j["name"] for j in record["judges"])


def test_outputs_are_the_kind_their_names_say(
    simulated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON record's --out gets .json when it has no suffix and refuses another
    format's; a folder's --out never takes a file's name (simulate --out sim.csv made a
    folder called sim.csv). Refusals exit 2, name the path and make nothing."""
    verdicts = str(simulated / "verdicts.csv")
    code, out, _ = _run(capsys, "fit", verdicts, "--bootstrap", "0", "--out", "arena-fit")
    assert code == 0 and "wrote arena-fit.json" in out
    assert isinstance(read_record(Path("arena-fit.json"), RankingRecord), RankingRecord)
    assert not Path("arena-fit").exists()
    code, _, err = _run(capsys, "fit", verdicts, "--bootstrap", "0", "--out", "fit.csv")
    assert code == 2 and "fit.csv: this writes a JSON record" in err and "fit.json" in err
    code, _, err = _run(capsys, "agreement", verdicts, "--reference", "m0", "--out", "t.parquet")
    assert code == 2 and "t.parquet" in err and "t.json" in err
    code, _, err = _run(capsys, "simulate", "--out", "sim.csv")
    assert code == 2 and "sim.csv: this names a .csv file" in err and "such as sim" in err
    assert not Path("sim.csv").exists() and not Path("fit.csv").exists()
    Path("taken").write_text("a file\n")
    code, _, err = _run(capsys, "simulate", "--out", "taken")
    assert code == 2 and "taken: this is a file" in err


def test_export_leaderboard_writes_markdown_and_csv_of_a_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The leaderboard as a plain table: Markdown with the notes that qualify it (a
    pipe in a model's name escaped, so the table keeps its columns), CSV with the
    record's values; the format follows --out's suffix and a mismatch is refused."""
    rows = [
        f"{s},{judge},{a},{b},{1 if (s + i) % 4 else 2}\n"
        for s in range(60)
        for i, (a, b) in enumerate([("x|y", "plain"), ("plain", "x|y"), ("third", "x|y")])
        for judge in ("x|y", "plain", "third")
    ]
    verdicts = tmp_path / "v.csv"
    verdicts.write_text(HEADER + "".join(rows))
    (tmp_path / "run").mkdir()
    result = tmp_path / "run" / "results.json"
    assert main(["fit", str(verdicts), "--bootstrap", "50", "--out", str(result)]) == 0
    record = read_record(result, RankingRecord)
    capsys.readouterr()
    assert main(["export-leaderboard", str(result)]) == 0
    markdown = capsys.readouterr().out.splitlines()
    table = [line for line in markdown if line.startswith("|")]
    assert len(table) == 2 + len(record.models)
    assert all(line.replace("\\|", "").count("|") == 8 for line in table)
    assert "x\\|y" in "\n".join(table) and "- Elo 95%: scenario-bootstrap" in markdown[-4]
    assert main(["export-leaderboard", str(result.parent), "--out", "board.csv"]) == 0
    with Path("board.csv").open(newline="") as f:
        board = list(csv.DictReader(f))
    assert [r["model"] for r in board] == [m.name for m in record.models]
    assert [float(r["elo"]) for r in board] == [m.elo for m in record.models]
    assert [float(r["elo_low_95"]) for r in board] == [m.elo_ci[0] for m in record.models]
    code, _, err = _run(capsys, "export-leaderboard", str(result), "--format", "csv", "--out",
                        "board.md")  # fmt: skip
    assert code == 2 and "a CSV table goes in a .csv file" in err and "board.csv" in err
    code, _, err = _run(capsys, "export-leaderboard", str(simulated_truth(tmp_path)))
    assert code == 2 and "not a ranking record" in err


def simulated_truth(tmp_path: Path) -> Path:
    assert main(["simulate", "--out", str(tmp_path / "sim"), "--models", "3"]) == 0
    return tmp_path / "sim" / "truth.json"
