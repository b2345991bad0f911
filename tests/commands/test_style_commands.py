"""Style control through the commands: simulate -> fit, rank on replies that differ in
length, arena battles, and every bad input it must explain."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from eigenjury.cli import main
from eigenjury.jobs import run_rank
from peer_scripts import config

QUALITY = {"ada": 1.0, "bo": 0.5, "cy": 0.0, "di": -0.5, "ed": -1.0}
VERBOSITY = {"ada": 0.3, "bo": 2.0, "cy": 1.0, "di": 1.0, "ed": 0.3}


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("styled")
    argv = ["simulate", "--out", str(out), "--models", "5", "--scenarios", "300"]
    argv += ["--judges-per-scenario", "2", "--verbosity", "0.7", "--style-effect", "1.5"]
    assert main(argv) == 0
    return out


def _fit(simulated: Path, tmp_path: Path, *options: str) -> dict:  # type: ignore[type-arg]
    out = tmp_path / f"fit{len(list(tmp_path.iterdir()))}.json"
    argv = ["fit", str(simulated / "verdicts.csv"), "--truth", str(simulated / "truth.json")]
    assert main([*argv, "--out", str(out), *options]) == 0
    data: dict = json.loads(out.read_text())  # type: ignore[type-arg]
    return data


@pytest.mark.slow
def test_fit_controls_for_the_lengths_a_file_carries_and_recovers_the_truth(
    simulated: Path, tmp_path: Path
) -> None:
    header = (simulated / "verdicts.csv").read_text().splitlines()[0]
    assert header.endswith(",first_length,second_length")
    controlled = _fit(simulated, tmp_path, "--bootstrap", "100")
    plain = _fit(simulated, tmp_path, "--bootstrap", "0", "--style", "none")
    assert controlled["settings"]["style"] == ["length"]
    style = controlled["style"]
    assert style["features"] == ["length"] and style["dropped"] == {}
    (coefficient,) = style["coefficients"]
    low, high = coefficient["ci"]
    assert 0 < low < coefficient["coefficient"] < high  # judges favour the longer reply
    planted = 1.5 * style["scale"]["length"]  # per standard deviation of the difference
    assert low <= planted <= high
    for model in controlled["models"]:
        assert {"elo_uncontrolled", "rank_change"} <= model.keys()
    assert "style" not in plain and "elo_uncontrolled" not in plain["models"][0]
    good, bad = controlled["truth_recovery"], plain["truth_recovery"]
    assert good["max_abs_elo_error"] < bad["max_abs_elo_error"] / 2
    assert good["kendall_tau"] >= bad["kendall_tau"]


def test_per_judge_coefficients_are_a_row_per_judge(simulated: Path, tmp_path: Path) -> None:
    record = _fit(simulated, tmp_path, "--bootstrap", "0", "--style-per-judge")
    rows = record["style"]["coefficients"]
    assert record["style"]["per_judge"] is True
    assert sorted(r["judge"] for r in rows) == [f"model-{i}" for i in range(5)]
    assert all(r["coefficient"] > 0 and r["ci"] is None for r in rows)


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "v.csv"
    path.write_text(text)
    return path


ROWS = [
    ("s1", "j", "a", "b", 1, 10, 4),
    ("s1", "j", "b", "a", 2, 4, 10),
    ("s2", "j", "a", "b", 0, 3, 9),
    ("s2", "j", "b", "a", 1, 9, 3),
]


def _verdicts(tmp_path: Path, rows: list[tuple[object, ...]] = ROWS) -> Path:
    header = "scenario,judge,first,second,verdict,first_length,second_length"
    return _file(tmp_path, "\n".join([header, *(",".join(map(str, r)) for r in rows)]) + "\n")


def _exit_code(argv: list[str]) -> int:
    """What `eigenjury` exits with (argparse exits on a bad option value)."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (["--style", "length,length"], ["--style", "length named more than once"]),
        (["--style", "length,"], ["--style", "empty feature"]),
        (["--style", "bold"], ["v.csv", "no style feature 'bold'", "first_bold"]),
    ],
)
def test_bad_style_options_are_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], words: list[str]
) -> None:
    assert _exit_code(["fit", str(_verdicts(tmp_path)), "--bootstrap", "0", *options]) == 2
    err = " ".join(capsys.readouterr().err.split())
    for word in words:
        assert word in err


@pytest.mark.parametrize(
    ("value", "style", "problem"),
    [
        ("ten", [], "not a number"),
        ("inf", [], "not a finite number"),
        ("", ["--style", "length"], "missing value"),
    ],
)
def test_a_bad_feature_value_is_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str, style: list[str], problem: str
) -> None:
    rows = [*ROWS[:2], ("s2", "j", "a", "b", 0, value, 9), ROWS[3]]
    assert main(["fit", str(_verdicts(tmp_path, rows)), "--bootstrap", "0", *style]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "line 4" in err and "first_length" in err and problem in err


@pytest.mark.fuzz
def test_feature_values_near_the_float_limit_are_fitted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """1e308 against -1e308: finite values whose difference overflows; their normalised
    difference (1) is fitted, not NaN."""
    rows = [*ROWS[:2], ("s2", "j", "a", "b", 0, 1e308, -1e308), ("s2", "j", "b", "a", 1, 9, 1e308)]
    out = tmp_path / "fit.json"
    code = main(["fit", str(_verdicts(tmp_path, rows)), "--bootstrap", "0", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    record = json.loads(out.read_text())
    assert record["style"]["features"] == ["length"]
    assert all(np.isfinite(m["elo"]) for m in record["models"])


def test_an_unknown_value_of_a_default_feature_stops_the_fit_that_needs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [*ROWS[:2], ("s2", "j", "a", "b", 0, "", 9), ROWS[3]]
    path = str(_verdicts(tmp_path, rows))
    assert main(["fit", path, "--bootstrap", "0"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "--style" in err and "'length' is unknown for 1 of 4 verdicts" in err
    assert main(["fit", path, "--bootstrap", "0", "--style", "none"]) == 0


def test_a_named_feature_that_cannot_be_told_apart_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every reply of a model equally long: the effect of length is the models' own."""
    rows = [
        (s, "j", a, b, v, {"a": 9, "b": 3}[a], {"a": 9, "b": 3}[b]) for s, _, a, b, v, *_ in ROWS
    ]
    out = tmp_path / "fit.json"
    argv = ["fit", str(_verdicts(tmp_path, rows)), "--bootstrap", "0", "--out", str(out)]
    assert main([*argv, "--style", "length"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "left out" in text and "one difference per pair of evaluees" in text
    record = json.loads(out.read_text())
    assert record["style"]["features"] == [] and "length" in record["style"]["dropped"]
    assert any("left out of style control" in w for w in record["warnings"])


def test_arena_battles_with_lengths_are_style_controlled(tmp_path: Path) -> None:
    """One crowd judge (external), battles with length_a and length_b: LMArena's case."""
    rng = np.random.default_rng(0)
    strength = {"m1": 1.0, "m2": 0.4, "m3": 0.0, "m4": -0.6}
    habit = {"m1": 200, "m2": 600, "m3": 300, "m4": 400}
    lines = ["question_id,model_a,model_b,winner,length_a,length_b"]
    names = list(strength)
    for q in range(3000):
        a, b = rng.choice(names, size=2, replace=False)
        la, lb = (int(habit[m] * rng.lognormal(0, 0.4)) for m in (a, b))
        logit = strength[a] - strength[b] + 2.0 * (la - lb) / (la + lb)
        winner = "model_a" if rng.random() < 1 / (1 + np.exp(-logit)) else "model_b"
        lines.append(f"q{q},{a},{b},{winner},{la},{lb}")
    path = _file(tmp_path, "\n".join(lines) + "\n")
    out = tmp_path / "fit.json"
    assert main(["fit", str(path), "--bootstrap", "40", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert [j["name"] for j in record["judges"]] == ["crowd"] and record["judges"][0]["external"]
    assert record["style"]["features"] == ["length"]
    (coefficient,) = record["style"]["coefficients"]
    planted = 2.0 * record["style"]["scale"]["length"]
    assert coefficient["ci"][0] <= planted <= coefficient["ci"][1]
    ranked = [m["name"] for m in record["models"]]
    assert ranked == ["m1", "m2", "m3", "m4"]
    wordy = next(m for m in record["models"] if m["name"] == "m2")
    assert wordy["elo_uncontrolled"] > wordy["elo"]  # its length had been paying


@pytest.mark.slow
def test_rank_measures_the_replies_and_fit_on_its_verdicts_agrees(tmp_path: Path) -> None:
    population = [
        {
            "name": name,
            "model": "scripted:verbose-truth",
            "persona": f"[quality {QUALITY[name]}] [verbosity {VERBOSITY[name]}] "
            "[loves length 3.0]",
        }
        for name in QUALITY
    ]
    run = run_rank(
        config(
            tmp_path,
            population=population,
            judging={"reflections": False},
            scenarios={"limit": 60},
            fit={"bootstrap": 40, "ci": 0.95},
        ),
        progress=False,
    )
    style = run.record.style
    assert style is not None and "length" in style.features
    assert {"headers", "lists", "bold"} <= style.dropped.keys()  # no markdown anywhere
    (length,) = (c for c in style.coefficients if c.feature == "length")
    assert length.ci is not None and length.ci[0] > 0  # judges love length, and it shows
    elo = {m.name: m.elo for m in run.record.models}
    assert max(elo, key=elo.__getitem__) == "ada"
    header = (run.out / "verdicts.csv").read_text().splitlines()[0].split(",")
    assert header[5:7] == ["first_length", "second_length"]
    out = tmp_path / "refit.json"
    assert main(["fit", str(run.out / "verdicts.csv"), "--bootstrap", "0", "--out", str(out)]) == 0
    refit = {m["name"]: m["elo"] for m in json.loads(out.read_text())["models"]}
    assert refit == pytest.approx(elo, abs=0.05)


@pytest.mark.parametrize(
    ("style", "words"),
    [
        (["length", "length"], ["fit.style", "length named more than once"]),
        (["tone"], ["fit.style", "'tone' is not a feature rank measures (length, headers"]),
        ("some", ["fit.style", "expected 'default', 'none' or a list of features"]),
    ],
)
def test_a_rank_config_with_a_bad_style_is_refused_before_anything_is_spent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], style: object, words: list[str]
) -> None:
    path = config(tmp_path, fit={"style": style})
    assert main(["rank", str(path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert all(word in err for word in words), err
    assert not (tmp_path / "run").exists()


def test_rank_without_style_control(tmp_path: Path) -> None:
    path = config(tmp_path, fit={"style": "none", "bootstrap": 0}, scenarios={"limit": 6})
    run = run_rank(path, progress=False)
    assert run.record.style is None and run.record.settings.style is None
    assert all(m.elo_uncontrolled is None for m in run.record.models)
