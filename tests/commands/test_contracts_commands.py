"""`eigenjury grade` and `eigenjury juries compare` end to end, and the comparison arithmetic."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from contract_scripts import CONTRACT, XSS, write_submissions
from eigenjury.cli import main
from eigenjury.contracts.compare import compare_pools
from eigenjury.contracts.grading import CriterionResult, Submission, TaskResult
from eigenjury.contracts.jury import Jury, Vote
from eigenjury.contracts.record import GradingRecord, JuryComparisonRecord
from eigenjury.contracts.schema import Criterion
from eigenjury.errors import InputError
from eigenjury.records import read_any_record, read_record
from eigenjury.reports.grading import render_comparison
from eigenjury.testing.server import Faults, ServerThread


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    return path


def grade_args(contract: Path, tmp_path: Path, *extra: str) -> list[str]:
    return [
        "grade",
        str(contract),
        "--out",
        str(tmp_path / "out"),
        "--store",
        str(tmp_path / "store.sqlite"),
        "--no-progress",
        *extra,
    ]


def test_grade_submissions_writes_results_trace_and_report(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(
        tmp_path / "subs.jsonl",
        [
            {
                "task_id": "france",
                "submission": f"Lovely city {XSS}\nAnswer: Paris",
                "candidate": "a",
            },
            {"task_id": "italy", "submission": "Answer: Milan", "candidate": "a"},
            {"task_id": "france", "submission": "Answer: Lyon", "candidate": "b"},
        ],
    )
    jury = [
        "--jury",
        "scripted:juror-keyword",
        "--jury",
        "scripted:juror-keyword",
        "--jury",
        "scripted:juror-no",
    ]
    code = main(grade_args(contract, tmp_path, "--submissions", str(subs), *jury))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "mean score" in out
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    tasks = {(t["task_id"], t["candidate"]): t for t in record["tasks"]}
    first = tasks[("france", "a")]
    assert (first["score"], first["passed"], first["reward"]) == (100, True, 1.0)
    assert first["criteria"][1] == {
        "id": "lovely",
        "grader": "llm_judge",
        "weight": 50,
        "passed": True,
        "awarded": 50,
        "votes": {"C": 2, "I": 1, "unparsed": 0, "error": 0},
        "split": True,
        "c_share": 0.6667,
        "pass_probability": 0.7407,  # (2/3)^3 + 3 (2/3)^2 (1/3) = 20/27
        "undecided": False,
    }
    assert tasks[("italy", "a")]["score"] == 0 and tasks[("france", "b")]["score"] == 0
    assert record["jury"]["jurors"] == [
        "scripted:juror-keyword",
        "scripted:juror-keyword#2",
        "scripted:juror-no",
    ]
    summary = {s["candidate"]: s for s in record["summary"]}
    assert summary["a"]["mean_score"]["value"] == 50 and summary["a"]["tasks"] == 2
    out_dir = tmp_path / "out"
    with (out_dir / "judgements.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 * (1 + 3) + 1  # 2 france x (1 grader + 3 votes) + italy x 1 grader
    assert {r["stage"] for r in rows} == {"exact_match", "jury"}
    criteria = list(csv.DictReader((out_dir / "criteria.csv").open()))
    assert len(criteria) == 5 and {"votes_C", "split", "explanation"} <= set(criteria[0])
    trace = [json.loads(line) for line in (out_dir / "trace.jsonl").read_text().splitlines()]
    assert any("GRADE: C" in (row["text"] or "") for row in trace)
    html = (out_dir / "report.html").read_text()
    assert XSS not in html and "&lt;script&gt;" in html
    assert 'class="split"' in html  # the 2-1 criterion is highlighted
    # the results feed `eigenjury bound apply` as they are
    from eigenjury.bounds.scores import read_scores

    assert read_scores(out_dir / "results.json").dim == 3
    assert read_scores(out_dir / "results.json", level="criterion").dim == 5


def test_the_grading_record_reads_back_old_files_and_refuses_damaged_or_foreign_ones(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.bounds.scores import read_scores

    subs = write_submissions(
        tmp_path / "subs.jsonl",
        [{"task_id": "france", "submission": "lovely\nAnswer: Paris", "candidate": "a"}],
    )
    args = grade_args(
        contract, tmp_path, "--submissions", str(subs), "--jury", "scripted:juror-yes"
    )
    assert main(args) == 0
    path = tmp_path / "out" / "results.json"
    written = json.loads(path.read_text())
    assert (
        list(written)[:4] == ["kind", "eigenjury", "schema_version", "created"]
        and written["kind"] == "grading"
    )
    record = read_record(path, GradingRecord)
    assert record.model_dump(mode="json") == written  # the trace is not in results.json
    assert not list(record.judgements) and record.tasks[0].submission == "lovely\nAnswer: Paris"
    overview = record.overview()
    assert (overview.name, overview.models) == (str(contract), ("a",))
    assert overview.cost_usd == record.accounting.total.cost_usd  # type: ignore[union-attr]
    # as eigenjury 0.1 wrote it: no kind, no creation time, no submission text
    old = {k: v for k, v in written.items() if k not in ("kind", "created")}
    old["tasks"] = [{k: v for k, v in t.items() if k != "submission"} for t in old["tasks"]]
    path.write_text(json.dumps(old))
    assert read_record(path, GradingRecord).tasks[0].submission is None
    assert read_scores(path).dim == 1
    damaged = {**old, "tasks": [{**old["tasks"][0], "score": "high"}]}
    path.write_text(json.dumps(damaged))
    with pytest.raises(InputError) as found:
        read_scores(path)
    assert "results.json" in str(found.value) and "field 'tasks.0.score'" in str(found.value)
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"tasks": [], "kind": "todo"}))
    with pytest.raises(InputError, match="not a grading record"):
        read_scores(foreign)
    comparison = tmp_path / "comparison.json"
    comparison.write_text(json.dumps({"kind": "jury-comparison", "eigenjury": "9"}))
    with pytest.raises(InputError, match="this is a jury-comparison record, not a grading"):
        read_scores(comparison)


def test_grade_generates_submissions_from_candidates(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = grade_args(
        contract,
        tmp_path,
        "--candidate",
        "scripted:candidate-paris",
        "--jury",
        "scripted:juror-yes",
    )
    assert main(args) == 0
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert [(t["task_id"], t["score"]) for t in record["tasks"]] == [("france", 100), ("italy", 0)]
    assert record["tasks"][0]["candidate"] == "scripted:candidate-paris"


def test_candidates_and_jurors_take_short_names_and_specs_get_short_labels(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """NAME=SPEC names a candidate or a juror in every table and record, the record
    keeping which spec each name stands for; a juror named by a long spec is shown under
    a short label in the report's vote grid (its full name as the header's title)."""
    with ServerThread() as server:
        served = f"openai-compatible:org/judge-model@{server.base_url}"
        args = grade_args(contract, tmp_path, "--candidate", "paris=scripted:candidate-paris",
                          "--jury", "yes=scripted:juror-yes", "--jury", served)  # fmt: skip
        assert main(args) == 0
    record = read_record(tmp_path / "out" / "results.json", GradingRecord)
    assert {t.candidate for t in record.tasks} == {"paris"}
    assert record.candidates == {"paris": "scripted:candidate-paris"}
    assert record.jury.jurors == ["yes", served]
    assert record.jury.specs == ["scripted:juror-yes", served]
    page = (tmp_path / "out" / "report.html").read_text()
    assert f'<th title="{served}">judge-model</th>' in page and '<th title="yes">yes</th>' in page
    unnamed = grade_args(contract, tmp_path / "plain", "--candidate", "scripted:candidate-paris",
                         "--jury", "scripted:juror-yes")  # fmt: skip
    assert main(unnamed) == 0
    plain = json.loads((tmp_path / "plain" / "out" / "results.json").read_text())
    assert "candidates" not in plain and "specs" not in plain["jury"]


@pytest.mark.slow
def test_failed_juror_calls_exit_1_and_a_rerun_resumes(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"task_id": "france", "submission": f"answer {i}", "candidate": f"m{i}"} for i in range(8)
    ]
    subs = write_submissions(tmp_path / "s.jsonl", rows)
    with ServerThread(faults=Faults(server_error=0.5), seed=3) as server:
        args = grade_args(
            contract,
            tmp_path,
            "--submissions",
            str(subs),
            "--jury",
            f"openai-compatible:judge@{server.base_url}",
        )
        assert main([*args, "--max-attempts", "1"]) == 1
        assert "rest on failed calls" in capsys.readouterr().out
        first = json.loads((tmp_path / "out" / "results.json").read_text())
        assert any(not t["complete"] for t in first["tasks"])
        assert main([*args, "--max-attempts", "20"]) == 0
        again = json.loads((tmp_path / "out" / "results.json").read_text())
        assert all(t["complete"] for t in again["tasks"])
        # nothing that succeeded was asked twice
        assert server.stats()["most_successes_for_one_request"] == 1


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([{"task_id": "spain", "submission": "x"}], "line 1: task_id 'spain' is not a task"),
        ([{"task_id": "france"}], "line 1: field 'submission'"),
        (
            [{"task_id": "france", "submission": "a"}, {"task_id": "france", "submission": "b"}],
            "line 2: candidate 'submission' already submitted task 'france' on line 1",
        ),
        ([], "no submissions"),
    ],
)
def test_bad_submissions_are_located(
    contract: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rows: list[dict[str, Any]],
    expected: str,
) -> None:
    subs = write_submissions(tmp_path / "subs.jsonl", rows)
    code = main(
        grade_args(contract, tmp_path, "--submissions", str(subs), "--jury", "scripted:juror-yes")
    )
    err = capsys.readouterr().err
    assert code == 2 and expected in err and "Traceback" not in err
    assert not (tmp_path / "store.sqlite").exists()  # refused before the store was opened


def test_an_output_that_cannot_be_written_is_refused_before_any_call(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(
        tmp_path / "subs.jsonl", [{"task_id": "france", "submission": "Answer: Paris"}]
    )
    (tmp_path / "out" / "results.json").mkdir(parents=True)
    args = grade_args(
        contract, tmp_path, "--submissions", str(subs), "--jury", "scripted:juror-yes"
    )
    assert main(args) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "results.json: this is a folder" in err
    assert not (tmp_path / "store.sqlite").exists()  # nothing was asked


def test_unknown_juror_spec_is_an_input_error(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(tmp_path / "s.jsonl", [{"task_id": "italy", "submission": "Rome"}])
    code = main(grade_args(contract, tmp_path, "--submissions", str(subs), "--jury", "gpt-4o"))
    assert code == 2 and "has no provider" in capsys.readouterr().err


# --- the comparison arithmetic on constructed votes -------------------------------------


def _criterion(ident: str, weight: float) -> Criterion:
    return Criterion(id=ident, weight=weight, grader="llm_judge", prompt="p")


def _votes(grades: str, cost: float) -> tuple[Vote, ...]:
    table = {"C": "C", "I": "I", "?": None}
    return tuple(
        Vote(f"j{k}", table[g], "t", output_tokens=10, latency_s=1.0, cost_usd=cost)
        for k, g in enumerate(grades)
    )


def _result(task: str, grades: list[str], cost: float) -> TaskResult:
    criteria = []
    for k, g in enumerate(grades):
        votes = _votes(g, cost)
        c_votes = sum(v.grade == "C" for v in votes)
        criteria.append(CriterionResult(_criterion(f"c{k}", 50), 2 * c_votes > len(votes), votes))
    return TaskResult(task, "m", 50, tuple(criteria), Submission(task, "m", "text"))


def test_comparison_and_cascade_arithmetic() -> None:
    # pool A (3 compact jurors, $1 a vote) and pool B (5 large jurors, $10 a vote)
    a = [_result("t1", ["CCI", "III"], 1.0), _result("t2", ["CCC", "CI?"], 1.0)]
    b = [_result("t1", ["CCCCI", "IIIII"], 10.0), _result("t2", ["CCCII", "CCCIC"], 10.0)]
    # outcomes A: pass fail | pass fail ; B: pass fail | pass pass  -> agreement 3/4
    jury_a = Jury.from_specs(["scripted:a"] * 3)
    jury_b = Jury.from_specs(["scripted:b"] * 5)
    record = compare_pools(a, b, jury_a, jury_b, rounds=200, seed=1)
    assert record["criteria"] == 4
    assert record["agreement"]["value"] == 0.75
    assert record["agreement_common"]["value"] == 1.0 and record["criteria_common"] == 3
    assert record["split_rate"]["a"]["value"] == 0.5  # CCI and CI? (unread = not C) are 2-1
    assert record["split_rate"]["b"]["value"] == 0.25  # only CCCII is 3-2
    assert record["identical_task_scores"]["value"] == 0.5  # t1: 50/50, t2: 50/100
    assert record["per_criterion"]["a"]["cost_usd"]["value"] == 3.0
    assert record["per_criterion"]["b"]["cost_usd"]["value"] == 50.0
    assert record["a_relative_to_b"]["cost_usd"]["value"] == pytest.approx(12 / 200)
    cascade = record["cascade"]
    # escalated: CCI (split), CI? (split, unread); kept: III, CCC
    assert cascade["escalation_rate"]["value"] == 0.5
    assert cascade["agreement_with_b"]["value"] == 1.0
    assert cascade["identical_task_scores_with_b"]["value"] == 1.0
    assert cascade["relative_to_b"]["cost_usd"]["value"] == pytest.approx((12 + 100) / 200)
    lo, hi = record["agreement"]["ci"]
    assert 0.0 <= lo <= 0.75 <= hi <= 1.0


def test_juries_compare_command(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(
        tmp_path / "subs.jsonl",
        [
            {
                "task_id": "france",
                "submission": f"lovely {XSS}.\nAnswer: Paris",
                "candidate": f"m{i}",
            }
            for i in range(3)
        ],
    )
    code = main(
        [
            "juries",
            "compare",
            str(contract),
            "--submissions",
            str(subs),
            "--pool-a",
            "scripted:juror-yes",
            "--pool-a",
            "scripted:juror-no",
            "--pool-b",
            "scripted:juror-keyword",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--no-progress",
            "--rounds",
            "50",
            "--out",
            str(tmp_path / "cmp"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    record = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert record["agreement"]["value"] == 0.0  # A ties (fails); B passes
    # A never passes, B always does: chance agreement 0, and kappa 0 (no more than that)
    assert record["chance_agreement"]["value"] == 0.0 and record["kappa"]["value"] == 0.0
    assert record["split_rate"]["a"]["value"] == 1.0
    assert record["cascade"]["agreement_with_b"]["value"] == 1.0
    assert (tmp_path / "cmp" / "pool_a" / "judgements.csv").is_file()
    assert "criterion majority agreement" in out
    assert record["kind"] == "jury-comparison" and record["incomplete_submissions"] == 0
    comparison = read_record(tmp_path / "cmp" / "comparison.json", JuryComparisonRecord)
    assert comparison.model_dump(mode="json") == record
    assert comparison.overview().models == ("scripted:juror-yes", "scripted:juror-no",
                                            "scripted:juror-keyword")  # fmt: skip
    html = (tmp_path / "cmp" / "report.html").read_text()
    assert "criterion majority agreement" in html and "Cascade: A first" in html
    pool = (tmp_path / "cmp" / "pool_a" / "report.html").read_text()
    assert XSS not in pool and "&lt;script&gt;" in pool
    pool_a = read_record(tmp_path / "cmp" / "pool_a" / "results.json", GradingRecord)
    assert pool_a.jury.jurors == ["scripted:juror-yes", "scripted:juror-no"]
    assert (
        pool_a.accounting is None and pool_a.tasks[0].submission == f"lovely {XSS}.\nAnswer: Paris"
    )
    # names a user gave and a note are text, never markup
    hostile = comparison.model_copy(update={"contract": XSS, "note": XSS})
    html = render_comparison(hostile)
    assert XSS not in html and html.count("&lt;script&gt;") == 3  # title, heading, note
    # a comparison written before records had a kind is still read
    legacy = {
        k: v
        for k, v in record.items()
        if k not in ("kind", "eigenjury", "schema_version", "created")
    }
    (tmp_path / "old.json").write_text(json.dumps(legacy))
    assert read_any_record(tmp_path / "old.json") == comparison.model_copy(update={"created": None})


# --- bad input --------------------------------------------------------------------------

RULES_ONLY = """\
name: rules
tasks:
  - task_id: as
    execution: {prompt: "Write some a's."}
    evaluation:
      criteria:
        - {id: backtracks, weight: 50, grader: regex, prompt: "(a|aa)+$"}
        - {id: short, weight: 40, grader: regex, prompt: "^.{0,80}$"}
"""


def test_a_contract_without_jury_criteria_grades_without_a_jury(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from eigenjury.contracts import graders

    monkeypatch.setattr(graders, "REGEX_TIMEOUT_S", 0.05)
    contract = tmp_path / "rules.yaml"
    contract.write_text(RULES_ONLY)
    subs = write_submissions(
        tmp_path / "s.jsonl",
        # the first pattern backtracks through every split of the a's before it fails
        [{"task_id": "as", "submission": "a" * 34 + "b"}],
    )
    code = main(grade_args(contract, tmp_path, "--submissions", str(subs)))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    trace = [
        json.loads(line) for line in (tmp_path / "out" / "trace.jsonl").read_text().splitlines()
    ]
    timed_out, short = trace
    assert timed_out["grade"] == "I" and "timed out" in timed_out["text"]
    assert short["grade"] == "C"
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert record["jury"]["jurors"] == [] and record["tasks"][0]["score"] == 40


def test_a_missing_jury_names_the_criteria_that_need_one(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(tmp_path / "s.jsonl", [{"task_id": "italy", "submission": "Rome"}])
    code = main(grade_args(contract, tmp_path, "--submissions", str(subs)))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "task 'france' criterion 'lovely'" in err and "--jury" in err
    assert not (tmp_path / "out").exists()


def test_a_python_grader_that_cannot_be_imported_stops_grading_before_any_call(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract.write_text(
        CONTRACT.replace("grader: exact_match, prompt: Rome", "grader: python, prompt: gone:fn")
    )
    code = main(
        grade_args(
            contract,
            tmp_path,
            "--candidate",
            "scripted:candidate-paris",
            "--jury",
            "scripted:juror-yes",
        )
    )
    err = capsys.readouterr().err
    assert code == 2 and "task 'italy', criterion 'city': cannot import 'gone'" in err
    assert not (tmp_path / "store.sqlite").exists()  # no candidate or juror was asked


def test_bootstrap_rounds_are_bounded(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = write_submissions(tmp_path / "s.jsonl", [{"task_id": "italy", "submission": "Rome"}])
    with pytest.raises(SystemExit) as stop:
        main(
            [
                "juries",
                "compare",
                str(contract),
                "--submissions",
                str(subs),
                "--pool-a",
                "scripted:juror-yes",
                "--pool-b",
                "scripted:juror-no",
                "--rounds",
                "1000000000",
            ]
        )
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--rounds" in err and "100000" in err


def test_names_with_markup_characters_are_printed_as_they_are(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.models.providers.scripted import register_script

    register_script("[bold]juror", lambda request: "GRADE: C")
    contract = tmp_path / "c.yaml"
    contract.write_text(
        CONTRACT.replace("task_id: france", 'task_id: "[bold]x"').replace("id: lovely", 'id: "[/]"')
    )
    subs = write_submissions(
        tmp_path / "s.jsonl", [{"task_id": "[bold]x", "submission": "Paris", "candidate": "[/]"}]
    )
    args = grade_args(contract, tmp_path, "--submissions", str(subs))
    code = main([*args, "--jury", "scripted:[bold]juror"])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, captured.err
    assert "│ [/] " in out and "scripted:[bold]juror" in out
    contract.write_text(
        contract.read_text().replace("weight: 50, grader: llm", "weight: 5, grader: llm")
    )
    assert main(["contracts", "check", str(contract)]) == 0
    assert "task '[bold]x': criterion weights sum to 55" in capsys.readouterr().out


def test_grade_counts_how_served_jurors_gave_their_verdicts(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.testing.server import Judging

    rows = [
        {"task_id": "france", "submission": f"answer {i}", "candidate": f"m{i}"} for i in (1, 2)
    ]
    subs = write_submissions(tmp_path / "s.jsonl", rows)
    judging = Judging("enforce", verdicts={"GRADE: C": 1.0})
    with ServerThread(judging=judging) as server:
        juror = f"openai-compatible:judge@{server.base_url}"
        args = grade_args(contract, tmp_path, "--submissions", str(subs), "--jury", juror)
        assert main(args) == 0
        out = capsys.readouterr().out
        record = json.loads((tmp_path / "out" / "results.json").read_text())
        judged = sum(c["grader"] == "llm_judge" for t in record["tasks"] for c in t["criteria"])
        assert judged > 0
        assert record["verdicts"] == {
            juror: {"structured": judged, "scores": 0, "text": 0, "unread": 0, "unread_rate": 0.0}
        }
        assert "Verdicts of served jurors" in out and "structured" in out
        assert "<h2>Verdicts</h2>" in (tmp_path / "out" / "report.html").read_text()
        asked = server.stats()["requests"]
        assert main([*args, "--verdict-format", "text", "--out", str(tmp_path / "text")]) == 0
        text = json.loads((tmp_path / "text" / "results.json").read_text())
        assert text["jury"]["verdict_format"] == "text"
        assert text["verdicts"][juror]["text"] == judged
        assert server.stats()["requests"] > asked  # a forced mode is its own request


def test_scripted_jurors_write_no_verdict_counts(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"task_id": "france", "submission": "Answer: Paris", "candidate": "m"}]
    subs = write_submissions(tmp_path / "s.jsonl", rows)
    args = grade_args(
        contract, tmp_path, "--submissions", str(subs), "--jury", "scripted:juror-yes"
    )
    assert main(args) == 0
    assert "Verdicts" not in capsys.readouterr().out
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "verdicts" not in record and "verdict_format" not in record["jury"]


def test_juries_compare_prints_the_verdict_modes_of_served_pools(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from eigenjury.testing.server import Judging

    rows = [{"task_id": "france", "submission": "Answer: Paris", "candidate": "m"}]
    subs = write_submissions(tmp_path / "s.jsonl", rows)
    with ServerThread(judging=Judging("enforce", verdicts={"GRADE: I": 1.0})) as server:
        args = ["juries", "compare", str(contract), "--submissions", str(subs)]
        args += ["--pool-a", f"openai-compatible:judge@{server.base_url}"]
        args += ["--pool-b", "scripted:juror-yes", "--rounds", "10", "--out", str(tmp_path / "c")]
        args += ["--store", str(tmp_path / "s.sqlite"), "--no-progress"]
        assert main(args) == 0
    out = capsys.readouterr().out
    assert "Pool A verdicts of served jurors" in out and "Pool B verdicts" not in out
    pool_a = json.loads((tmp_path / "c" / "pool_a" / "results.json").read_text())
    [modes] = pool_a["verdicts"].values()
    assert modes["structured"] > 0 and modes["unread"] == 0
    assert "verdicts" not in json.loads((tmp_path / "c" / "pool_b" / "results.json").read_text())


def test_a_contract_whose_weights_sum_past_100_is_graded_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Weights that do not sum to 100 are legal (a warning): a submission that passes
    every criterion scores their sum, and the record is written, not refused after the
    calls were paid for."""
    path = tmp_path / "wide.yaml"
    path.write_text(
        'name: wide\ntasks:\n  - task_id: t\n    execution: {prompt: "Capital of Italy?"}\n'
        "    evaluation:\n      criteria:\n"
        "        - {id: city, weight: 100, grader: exact_match, prompt: Rome}\n"
        "        - {id: again, weight: 50, grader: regex, prompt: Rome}\n"
    )
    subs = write_submissions(
        tmp_path / "subs.jsonl", [{"task_id": "t", "submission": "Answer: Rome", "candidate": "a"}]
    )
    assert main(grade_args(path, tmp_path, "--submissions", str(subs))) == 0
    assert "weights sum to 150, not 100" in capsys.readouterr().out
    record = read_record(tmp_path / "out" / "results.json", GradingRecord)
    assert (record.tasks[0].score, record.tasks[0].reward, record.tasks[0].passed) == (
        150,
        1.5,
        True,
    )


def test_juries_that_pass_everything_agree_by_chance_and_say_so(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Both pools vote yes on every criterion: agreement 1.000 is what any two such pools
    reach, so the base rate is 1 and kappa is undefined, said in words (issue 32)."""
    subs = write_submissions(
        tmp_path / "subs.jsonl",
        [
            {"task_id": "france", "submission": "Answer: Paris", "candidate": f"m{i}"}
            for i in range(4)
        ],
    )
    args = ["juries", "compare", str(contract), "--submissions", str(subs),
            "--pool-a", "scripted:juror-yes", "--pool-b", "scripted:juror-yes",
            "--store", str(tmp_path / "s.sqlite"), "--no-progress", "--rounds", "50",
            "--out", str(tmp_path / "cmp")]  # fmt: skip
    assert main(args) == 0
    out = " ".join(capsys.readouterr().out.split())
    record = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    assert record["agreement"]["value"] == 1.0
    assert record["chance_agreement"]["value"] == 1.0
    assert record["kappa"] == {"value": None, "ci": [None, None]}
    assert "by chance, at the pools' pass rates" in out
    assert "undefined: both pools gave every criterion the same outcome" in out
    html = (tmp_path / "cmp" / "report.html").read_text()
    assert "undefined: both pools gave every criterion the same outcome" in html


def test_a_jury_of_one_model_three_times_warns_and_reads_as_one_opinion(
    contract: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three copies of one spec at temperature 0: warned of before any call, and the
    record says the replies were identical and the votes carry no disagreement to
    measure (issue 32); two different models beside each other are not warned of."""
    subs = write_submissions(
        tmp_path / "subs.jsonl",
        [
            {"task_id": "france", "submission": "Answer: Paris", "candidate": f"m{i}"}
            for i in range(3)
        ],
    )
    jury = ["--jury", "scripted:juror-yes"] * 3
    assert main(grade_args(contract, tmp_path, "--submissions", str(subs), *jury)) == 0
    captured = capsys.readouterr()
    said = " ".join((captured.out + captured.err).split())
    assert "the juror scripted:juror-yes sits on the jury 3 times at temperature 0" in said
    record = read_record(tmp_path / "out" / "results.json", GradingRecord)
    assert any("3 times at temperature 0" in w for w in record.warnings)
    assert record.diversity is not None and record.diversity.criteria > 0
    assert record.diversity.identical_replies == 1.0
    assert record.diversity.fleiss_kappa is None  # every vote C: nothing to measure
    assert "identical replies on 100% of them; Fleiss' kappa undefined" in said
    report = (tmp_path / "out" / "report.html").read_text()
    assert "identical replies on 100% of them" in report

    mixed = ["--jury", "scripted:juror-keyword", "--jury", "scripted:juror-no"]
    args = grade_args(contract, tmp_path / "mixed", "--submissions", str(subs), *mixed)
    assert main(args) == 0
    assert "at temperature 0" not in capsys.readouterr().out
    record = read_record(tmp_path / "mixed" / "out" / "results.json", GradingRecord)
    assert record.warnings == [] or all("temperature 0" not in w for w in record.warnings)
    assert record.diversity is not None and record.diversity.identical_replies == 0.0
