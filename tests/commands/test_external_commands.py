"""`eigenjury fit` on a file that mixes external judges (people, a crowd) with peer
judges: accepted, marked, weighted and damped as asked, and bad weights explained."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eigenjury.cli import main
from eigenjury.peer.record import RankingRecord
from eigenjury.records import read_record
from eigenjury.stats import make_population, simulate_verdicts

# names may hold '=' and markup: split on the last '=', printed as written
CROWD, ALICE = "crowd=x", "human:alice [b]"
RENAMED = {"judge-0": CROWD, "judge-1": ALICE}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 models that judge each other, and two external judges, in one CSV; with the
    truth `eigenjury simulate` would write."""
    folder = tmp_path_factory.mktemp("mixed")
    population = make_population(6, 2, external=2, seed=21)
    table = simulate_verdicts(population, n_scenarios=400, seed=22)
    names = [RENAMED.get(n, n) for n in table.models]
    lines = ["scenario,judge,first,second,verdict"]
    lines += [
        f"{table.scenarios[s]},{names[j]},{names[a]},{names[b]},{v}"
        for s, j, a, b, v in zip(
            table.scenario, table.judge, table.first, table.second, table.verdict, strict=True
        )
    ]
    (folder / "verdicts.csv").write_text("\n".join(lines) + "\n")
    truth = population.to_dict()
    truth["models"] = [RENAMED.get(n, n) for n in truth["models"]]
    truth["external"] = [RENAMED[n] for n in truth["external"]]
    (folder / "truth.json").write_text(json.dumps({"population": truth}))
    return folder


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_mixed_file_is_fitted_with_external_judges_marked(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "result.json"
    code, out, err = _run(
        capsys,
        "fit",
        str(mixed / "verdicts.csv"),
        "--bootstrap",
        "40",
        "--external-weight",
        f"{CROWD}=3",
        "--damping",
        "0.3",
        "--truth",
        str(mixed / "truth.json"),
        "--out",
        str(result),
    )
    assert code == 0, err
    flat = " ".join(out.split())
    assert f"{CROWD} (external)" in flat and f"{ALICE} (external)" in flat
    assert (
        "trust: 6 peer judges (EigenTrust) damped toward the consensus of 2 external judges "
        f"(weights {CROWD} 3, {ALICE} 1), a = 0.3" in flat
    )
    record = json.loads(result.read_text())
    assert record["settings"]["damping"] == 0.3
    assert record["settings"]["external_weights"] == {CROWD: 3.0, ALICE: 1.0}
    models = {m["name"] for m in record["models"]}
    assert models == {f"model-{i}" for i in range(6)} == set(record["dispositions"])
    external = {j["name"] for j in record["judges"] if j.get("external")}
    assert external == {CROWD, ALICE}
    assert all("external" not in j for j in record["judges"] if j["name"] in models)
    matrix = record["trust_matrix"]
    assert set(matrix["judges"]) == models | external and set(matrix["evaluees"]) == models
    assert len(matrix["rows"]) == 8 and all(len(r) == 6 for r in matrix["rows"])
    assert record["truth_recovery"]["kendall_tau"] >= 0.7
    read = read_record(result, RankingRecord)
    assert read.model_dump(mode="json") == record


def test_defaults_with_external_judges_and_a_record_without_them(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = tmp_path / "result.json"
    code, out, err = _run(
        capsys, "fit", str(mixed / "verdicts.csv"), "--bootstrap", "0", "--out", str(result)
    )
    assert code == 0, err
    assert "consensus of 2 external judges, a = 0.5" in " ".join(out.split())
    settings = json.loads(result.read_text())["settings"]
    assert settings["damping"] == 0.5
    assert settings["external_weights"] == {CROWD: 1.0, ALICE: 1.0}

    # a peer population alone: the record has no trace of external judges
    peers_only = tmp_path / "peers.csv"
    keep = [
        line
        for line in (mixed / "verdicts.csv").read_text().splitlines()
        if CROWD not in line and ALICE not in line
    ]
    peers_only.write_text("\n".join(keep) + "\n")
    plain = tmp_path / "plain.json"
    code, out, err = _run(capsys, "fit", str(peers_only), "--bootstrap", "0", "--out", str(plain))
    assert code == 0, err
    assert "trust:" not in out
    record = json.loads(plain.read_text())
    assert record["settings"]["damping"] == 0.0 and "external_weights" not in record["settings"]
    assert not any("external" in j for j in record["judges"])


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("crowd", "'crowd' is not JUDGE=WEIGHT"),
        ("=2", "'=2' is not JUDGE=WEIGHT"),
        (f"{CROWD}=heavy", "the weight of 'crowd=x' must be a number >= 0"),
        (f"{CROWD}=-1", "the weight of 'crowd=x' must be a number >= 0"),
        (f"{CROWD}=nan", "the weight of 'crowd=x' must be a number >= 0"),
        ("model-2=1", "'model-2' is an evaluee, not an external judge"),
        ("nobody=1", "'nobody' is not a judge in the verdicts"),
    ],
)
def test_bad_external_weights_are_located(
    value: str, expected: str, mixed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(
        capsys,
        "fit",
        str(mixed / "verdicts.csv"),
        "--bootstrap",
        "0",
        "--external-weight",
        value,
    )
    assert code == 2
    flat = " ".join(err.split())
    assert "field '--external-weight'" in flat and expected in flat, flat
    assert "Traceback" not in err


def test_a_weight_for_every_external_judge_of_zero_and_twice_one_judge(
    mixed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["fit", str(mixed / "verdicts.csv"), "--bootstrap", "0"]
    code, _, err = _run(
        capsys, *args, "--external-weight", f"{CROWD}=0", "--external-weight", f"{ALICE}=0"
    )
    assert code == 2 and "every external judge has weight 0" in err
    code, _, err = _run(
        capsys, *args, "--external-weight", f"{CROWD}=1", "--external-weight", f"{CROWD}=2"
    )
    assert code == 2 and "'crowd=x' is weighted twice" in err


def test_damping_that_cannot_apply_is_explained(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    voters = tmp_path / "voters.csv"
    lines = (mixed / "verdicts.csv").read_text().splitlines()
    voters.write_text(
        "\n".join(lines[:1] + [x for x in lines[1:] if CROWD in x or ALICE in x]) + "\n"
    )
    code, out, err = _run(capsys, "fit", str(voters), "--bootstrap", "0")
    assert code == 0, err
    assert "trust: the consensus of 2 external judges" in " ".join(out.split())
    code, _, err = _run(capsys, "fit", str(voters), "--bootstrap", "0", "--damping", "0.5")
    assert code == 2 and "field '--damping': damping 0.5 cannot apply" in " ".join(err.split())
    code, _, err = _run(capsys, "fit", str(voters), "--bootstrap", "0", "--anchor", CROWD)
    assert code == 2 and "field '--anchor': anchor model 'crowd=x' is an external judge" in (
        " ".join(err.split())
    )


def test_the_html_report_marks_external_judges_and_escapes_their_names(
    mixed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.reports.ranking import render

    result = tmp_path / "result.json"
    code, _, err = _run(
        capsys, "fit", str(mixed / "verdicts.csv"), "--bootstrap", "0", "--out", str(result)
    )
    assert code == 0, err
    record = read_record(result, RankingRecord)
    alice = next(j for j in record.judges if j.name == ALICE)
    alice.name = "<script>alert(1)</script>"
    page = render(record, [])
    assert "&lt;script&gt;alert(1)&lt;/script&gt; (external)" in page
    assert f"{CROWD} (external)" in page
    assert "damped toward the consensus of 2 external judges, a = 0.5" in page
    assert "<script>alert" not in page


def _crowd_battles(path: Path, voters: int, battles: int = 6000) -> None:
    """Arena battles over 5 models whose judge column names each voter."""
    models = ["m-a", "m-b", "m-c", "m-d", "m-e"]
    winners = ["model_a", "model_b", "tie", "tie (bothbad)", "model_a"]
    lines = ["model_a,model_b,winner,judge"]
    for i in range(battles):
        a, b = models[i % 5], models[(i // 5 + i + 1) % 5]
        if a == b:
            b = models[(i + 2) % 5]
        lines.append(f"{a},{b},{winners[(i * 7) % 5]},arena_user_{i % voters}")
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.slow
def test_a_crowd_of_voters_is_pooled_into_one_external_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    battles = tmp_path / "battles.csv"
    _crowd_battles(battles, voters=600)
    code, out, _ = _run(capsys, "fit", str(battles), "--bootstrap", "0")
    assert code == 0
    assert "600 external judges gave a median of 10 verdicts" in out
    assert "--pool-judges PATTERN (e.g. 'arena_user_*')" in out
    record_path = tmp_path / "pooled.json"
    code, out, _ = _run(
        capsys, "fit", str(battles), "--bootstrap", "0", "--pool-judges", "arena_user_*",
        "--out", str(record_path),
    )  # fmt: skip
    assert code == 0
    record = read_record(record_path, RankingRecord)
    assert [(j.name, j.external, j.verdicts) for j in record.judges] == [
        ("arena_user_*", True, 6000.0)
    ]
    assert {m.name for m in record.models} == {"m-a", "m-b", "m-c", "m-d", "m-e"}


def test_pooling_is_refused_for_judged_models_and_names_without_a_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    battles = tmp_path / "battles.csv"
    _crowd_battles(battles, voters=3, battles=300)
    code, _, err = _run(capsys, "fit", str(battles), "--bootstrap", "0", "--pool-judges", "m-*")
    assert code == 2
    assert "field '--pool-judges'" in err and "'m-a'" in err and "are judged" in err
    code, _, err = _run(capsys, "agreement", str(battles), "--reference", "x",
                        "--pool-judges", "nobody*")  # fmt: skip
    assert code == 2 and "no judge matches 'nobody*'" in err
    assert "Traceback" not in err


def test_more_names_than_the_fit_can_hold_are_refused_before_fitting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import eigenjury.stats.verdicts as verdicts

    monkeypatch.setattr(verdicts, "MAX_NAMES", 50)
    battles = tmp_path / "battles.csv"
    _crowd_battles(battles, voters=200, battles=2000)
    code, _, err = _run(capsys, "fit", str(battles), "--bootstrap", "0")
    assert code == 2
    assert "205 judges and evaluees" in err and "at most 50 can be fitted" in err
    assert "--pool-judges PATTERN (e.g. 'arena_user_*')" in err
