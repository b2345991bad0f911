"""`eigenjury agreement` and `fit --agreement`: the table, the record, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eigenjury.cli import main
from eigenjury.peer.record import JudgeAgreementRecord, RankingRecord
from eigenjury.records import find_records, read_any_record, read_record
from strength_verdicts import REFERENCES, draw, renamed_and_shuffled

# The crowd (the reference) and two judges, one of them named like rich markup.
VERDICTS = """scenario,judge,first,second,verdict
s1,crowd,a,b,1
s1,[red]J[/red],a,b,1
s1,K,b,a,1
s2,crowd,a,b,0
s2,[red]J[/red],b,a,0
s2,K,a,b,1
s3,crowd,b,a,2
s3,[red]J[/red],a,b,1
s3,K,b,a,2
"""


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def verdicts(tmp_path: Path) -> Path:
    path = tmp_path / "verdicts.csv"
    path.write_text(VERDICTS)
    return path


def test_agreement_prints_the_table_and_writes_a_record_that_reads_back(
    verdicts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "out" / "agreement.json"
    code, out, err = _run(
        capsys, "agreement", str(verdicts), "--reference", "crowd", "--bootstrap", "50",
        "--out", str(out_file),
    )  # fmt: skip
    assert code == 0, err
    assert "Agreement with the reference majority (crowd)" in out
    assert "[red]J[/red]" in out  # a name is text, never markup
    assert "a tie is a third outcome" in out and "0.5 = no position bias" in out
    data = json.loads(out_file.read_text())
    assert list(data)[:4] == ["kind", "eigenjury", "schema_version", "created"]
    assert data["kind"] == "judge-agreement"
    rows = {r["judge"]: r for r in data["agreement"]["judges"]}
    # J says a, tie, a where the crowd says a, tie, a; K says b, a, a
    assert rows["[red]J[/red]"]["agreement"]["value"] == 1.0
    assert rows["K"]["agreement"]["value"] == pytest.approx(1 / 3, abs=1e-4)  # 4 digits
    assert rows["crowd"]["reference"] and rows["crowd"]["agreement"]["value"] is None
    assert [r["judge"] for r in data["agreement"]["judges"]] == ["[red]J[/red]", "K", "crowd"]
    record = read_record(out_file, JudgeAgreementRecord)
    assert record.model_dump(mode="json") == data
    assert read_any_record(out_file) == record
    assert record.overview().name == "verdicts.csv"
    found = find_records([tmp_path])  # what `eigenjury view` lists
    assert [(f.path, f.problem) for f in found] == [(out_file, None)]


def test_renamed_models_and_shuffled_rows_give_the_same_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # names in strength order: the case where kappa once depended on the names
    verdicts = draw(scenarios=12, seed=31)
    names, order = renamed_and_shuffled(verdicts, seed=32)
    tables = []
    for label, csv, references in (
        ("ordered", verdicts.csv(), REFERENCES),
        ("renamed", verdicts.csv(names, order), [names[r] for r in REFERENCES]),
    ):
        path, out_file = tmp_path / f"{label}.csv", tmp_path / f"{label}.json"
        path.write_text(csv)
        code, out, err = _run(
            capsys, "agreement", str(path), "--reference", ",".join(references),
            "--bootstrap", "100", "--seed", "4", "--out", str(out_file),
        )  # fmt: skip
        assert code == 0, err
        tables.append(json.loads(out_file.read_text())["agreement"])
    ordered, renamed = tables
    back = {new: old for old, new in names.items()}
    renamed["references"] = [back[r] for r in renamed["references"]]
    for row in renamed["judges"]:
        row["judge"] = back[row["judge"]]
    assert renamed == ordered  # every number, intervals included, and the order of rows
    assert all(r["kappa"]["ci"][0] is not None for r in ordered["judges"])
    assert "each comparison counted in both orientations" in out  # says what kappa is now


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("nobody", ["verdicts.csv", "--reference", "no judge named 'nobody'", "K, [red]J[/red]"]),
        (" , ", ["--reference", "no reference judge given"]),
        ("a", ["no judge named 'a'"]),
    ],
)
def test_a_reference_the_data_cannot_support_exits_2_located(
    reference: str, expected: list[str], verdicts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "agreement", str(verdicts), "--reference", reference)
    assert code == 2 and "Traceback" not in err
    for text in expected:
        assert text in err


def test_a_judge_with_commas_in_its_name_is_one_reference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each --reference is one judge, so "Smith, J." can be given; a value that names
    no judge is still split at its commas (the older form)."""
    path = tmp_path / "v.csv"
    path.write_text(VERDICTS.replace("crowd", '"Smith, J."'))
    tables = {}
    for label, references in (
        ("one", ["Smith, J."]),
        ("two", ["Smith, J.", "K"]),
        ("old form", ["K,[red]J[/red]"]),
    ):
        out_file = tmp_path / f"{label}.json"
        argv = [x for r in references for x in ("--reference", r)]
        code, _, err = _run(
            capsys, "agreement", str(path), *argv, "--bootstrap", "0", "--out", str(out_file)
        )
        assert code == 0, err
        tables[label] = json.loads(out_file.read_text())["agreement"]
    assert tables["one"]["references"] == ["Smith, J."]
    assert tables["two"]["references"] == ["Smith, J.", "K"]
    assert tables["old form"]["references"] == ["K", "[red]J[/red]"]
    rows = {r["judge"]: r for r in tables["one"]["judges"]}
    assert rows["[red]J[/red]"]["agreement"]["value"] == 1.0  # as with the crowd above
    code, _, err = _run(
        capsys, "fit", str(path), "--agreement", "Smith, J.", "--agreement", "K",
        "--bootstrap", "0", "--style", "none",
    )  # fmt: skip
    assert code == 0, err


def test_a_reference_sharing_no_comparison_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "v.csv"
    path.write_text(VERDICTS + "s4,lonely,a,b,1\n")
    code, _, err = _run(capsys, "agreement", str(path), "--reference", "lonely")
    assert code == 2 and "'lonely' shares no comparison with any other judge" in err
    code, _, err = _run(capsys, "agreement", str(path), "--reference", "crowd", "--bootstrap", "5")
    assert code == 2 and "field '--bootstrap'" in err  # too few rounds for a 95% interval


def test_fit_adds_the_agreement_table_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sim = tmp_path / "sim"
    assert main(["simulate", "--out", str(sim), "--models", "4", "--scenarios", "60",
                 "--judges-per-scenario", "3", "--seed", "1"]) == 0  # fmt: skip
    capsys.readouterr()
    with_table, without = tmp_path / "with.json", tmp_path / "without.json"
    code, out, err = _run(
        capsys, "fit", str(sim / "verdicts.csv"), "--bootstrap", "0",
        "--agreement", "model-0,model-1", "--out", str(with_table),
    )  # fmt: skip
    assert code == 0, err
    assert "Agreement with the reference majority (model-0, model-1)" in out
    record = read_record(with_table, RankingRecord)
    assert record.agreement is not None and record.agreement.references == ["model-0", "model-1"]
    assert {r.judge for r in record.agreement.judges} == {f"model-{i}" for i in range(4)}
    assert main(["fit", str(sim / "verdicts.csv"), "--bootstrap", "0", "--out", str(without)]) == 0
    assert "agreement" not in json.loads(without.read_text())  # as before the option existed
    code, _, err = _run(capsys, "fit", str(sim / "verdicts.csv"), "--agreement", "m9")
    assert code == 2 and "field '--agreement'" in err and "no judge named 'm9'" in err
