"""Contracts: the grading rules, graders, bundle I/O and grading through the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from contract_scripts import run_grade  # also registers the scripted jurors
from eigenjury.cli import main
from eigenjury.contracts.bundle import load_contract, read_bundle, write_bundle
from eigenjury.contracts.graders import exact_match, final_answer, numeric, parse_number
from eigenjury.contracts.grading import Submission
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.rules import (
    flip_distance,
    is_split,
    parse_grade,
    parse_grades,
    passes,
    task_passes,
    task_score,
)
from eigenjury.contracts.schema import Criterion
from eigenjury.errors import InputError
from eigenjury.models.providers.scripted import ScriptedProvider

CONTRACT = """\
name: capitals
tasks:
  - task_id: france
    execution: {prompt: "What is the capital of France? End with 'Answer: <city>'."}
    evaluation:
      pass_threshold: 60
      criteria:
        - {id: city, weight: 50, grader: exact_match, prompt: Paris}
        - {id: names-paris, weight: 30, grader: llm_judge, prompt: The answer names paris}
        - {id: mentions-lovely, weight: 20, grader: llm_judge, prompt: The answer says lovely}
  - task_id: sum
    execution: {prompt: "What is 2.5 + 2.5?"}
    evaluation:
      criteria:
        - {id: value, weight: 60, grader: numeric, prompt: "5", tolerance: 0.01}
        - {id: shows-work, weight: 40, grader: regex, prompt: "\\\\d\\\\s*\\\\+\\\\s*\\\\d"}
"""


@pytest.fixture
def contract_path(tmp_path: Path) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    return path


def crit(**fields: Any) -> Criterion:
    base: dict[str, Any] = {"id": "c", "weight": 100, "grader": "exact_match", "prompt": "Paris"}
    return Criterion(**{**base, **fields})


# --- the rules -------------------------------------------------------------------------


def test_the_last_verdict_line_counts() -> None:
    assert parse_grade("GRADE: C\nbut then\nGRADE: I") == "I"
    assert parse_grade("Example: reply 'GRADE: C'.\nMy verdict:\n**GRADE: I**") == "I"
    assert parse_grade("reasoning...\n  grade:  c \n") == "C"
    assert parse_grade("Grade: I think it passes") is None  # prose is not a verdict line
    assert parse_grade("no verdict at all") is None
    assert parse_grade("GRADE: X") is None
    text = "GRADE[a]: I\nGRADE[b]: C\nchanged my mind\nGRADE[a]: C\nGRADE[zz]: I"
    assert parse_grades(text, ["a", "b", "c"]) == {"a": "C", "b": "C", "c": None}


@pytest.mark.parametrize(
    ("reply", "grade"),
    [
        # verdicts as models write them: wherever they stand, the last one counts
        ("The response names the scattering. GRADE: C", "C"),
        ("At first GRADE: C seemed right, but no. GRADE: I", "I"),
        ("It misses the date, so GRADE: I.", "I"),
        ("GRADE:C", "C"),
        ("grade: i", "I"),
        ("**GRADE:** C", "C"),
        ("**GRADE**: I", "I"),
        ("Verdict: GRADE: **C**", "C"),
        ("`GRADE: C`", "C"),
        ("Grade: (I)", "I"),
        ("GRADE: C The rest is commentary.", "C"),
        ("GRADE: C\nand that is final", "C"),
        # mentions of the format or of a grade in prose never decide
        ("I must answer GRADE: C or GRADE: I. It meets it.", None),
        ("Reply with GRADE: C|I", None),
        ("GRADE: C if it meets the criterion, GRADE: I if it does not.", None),
        ("GRADE: I'm not sure yet", None),
        ("UPGRADE: C", None),
        ("GRADE: CI", None),
        ("Reply with GRADE: C or GRADE: I.\nIt names the scattering. GRADE: C", "C"),
    ],
)
def test_a_verdict_is_read_wherever_it_stands(reply: str, grade: str | None) -> None:
    assert parse_grade(reply) == grade


def test_batched_verdicts_are_read_wherever_they_stand() -> None:
    text = "For a it holds, GRADE[a]: C. For b it does not: **GRADE[b]:** I"
    assert parse_grades(text, ["a", "b"]) == {"a": "C", "b": "I"}
    echo = "Reply with GRADE[a]: C or GRADE[a]: I. Then: GRADE[a]: I, sadly."
    assert parse_grades(echo, ["a"]) == {"a": "I"}


@pytest.mark.parametrize(
    ("c_votes", "size", "passed", "distance"),
    [
        (3, 5, True, 1),
        (2, 5, False, 1),
        (5, 5, True, 3),
        (0, 5, False, 3),
        (2, 4, False, 1),
        (3, 4, True, 1),
        (4, 4, True, 2),
        (1, 2, False, 1),
        (1, 1, True, 1),
    ],
)
def test_strict_majority_and_margins(c_votes: int, size: int, passed: bool, distance: int) -> None:
    assert passes(c_votes, size) is passed
    assert flip_distance(c_votes, size) == distance
    assert is_split(c_votes, size) is (distance == 1)


def test_score_and_threshold() -> None:
    assert task_score([50, 30, 20], [True, False, True]) == 70
    assert task_passes(task_score([33.3, 33.3, 33.4], [True] * 3), 100)
    assert not task_passes(69.99, 70)
    assert task_passes(70, 70)


# --- graders without a model -------------------------------------------------------------


def test_exact_match_is_equality_of_the_final_answer_unless_contains() -> None:
    assert exact_match(crit(), "Some thoughts.\nAnswer: paris.")[0]
    assert exact_match(crit(), "The capital is  PARIS")[0] is False  # last line != Paris
    assert exact_match(crit(), "It is Paris")[0] is False
    assert exact_match(crit(match="contains"), "It is Paris")[0]
    assert exact_match(crit(match="contains"), "Answer: Parisian")[0]  # the reference's semantics
    assert final_answer("x\nFinal answer: 42\nbye") == "42"


def test_numbers_and_tolerances() -> None:
    assert parse_number("about 1,234.5 units") == 1234.5
    assert parse_number("-3e2") == -300
    assert parse_number("none") is None
    # an exponent is no number without a mantissa ("e92" in a word once crashed a grading)
    assert parse_number("code e92") == 92 and parse_number("e") is None
    assert parse_number("x .5") == 0.5 and parse_number("1.5e3 units") == 1500
    c = crit(grader="numeric", prompt="5", tolerance=0.01)
    assert numeric(c, "so 2.5 + 2.5 = 5.0")[0]
    assert not numeric(c, "Answer: 5.02")[0]
    assert numeric(crit(grader="numeric", prompt="1000", relative_tolerance=0.01), "Answer: 1,009")[
        0
    ]
    assert not numeric(c, "Answer: five")[0]


def test_python_grader_calls_the_users_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_checks.py").write_text(
        "def short(submission, task, criterion):\n"
        "    return len(submission) < 20, f'{len(submission)} characters'\n"
        "def broken(submission, task, criterion):\n"
        "    raise RuntimeError('bug')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    from eigenjury.contracts.sandbox import GraderOutcome, GraderSandbox

    task = load_contract(_yaml(tmp_path, CONTRACT)).contract.tasks[0]
    with GraderSandbox() as sandbox:
        short = crit(grader="python", prompt="my_checks:short")
        assert sandbox.grade(short, "tiny", task) == GraderOutcome(True, "4 characters")
        assert sandbox.grade(short, "x" * 20, task) == GraderOutcome(False, "20 characters")
        got = sandbox.grade(crit(grader="python", prompt="my_checks:broken"), "x", task)
    assert not got.passed and got.error == "my_checks:broken raised RuntimeError: bug"


def _yaml(folder: Path, text: str) -> Path:
    path = folder / "c.yaml"
    path.write_text(text)
    return path


# --- bundles -----------------------------------------------------------------------------

REFERENCE_TASKS = [
    {"task_id": "t1", "prompt": "Capital of France?", "reference_file": "", "note": "kept"},
    {"task_id": "t2", "task_prompt": "Summarise the file.", "reference_file": "doc.txt"},
]
REFERENCE_ANSWERS = [
    {
        "task_id": "t1",
        "reference_file": "",
        "tools": [],
        "criteria": [
            {
                "id": "city",
                "name": "city",
                "weight": 100,
                "grader_type": "ExactMatch",
                "description": "Paris",
                "rationale": "kept too",
                "examples": [],
            },
        ],
        "passThreshold": 100,
    },
    {
        "task_id": "t2",
        "criteria": [
            {
                "id": "gist",
                "weight": 70,
                "grader_type": "llm-judge",
                "semanticPrompt": "States the main point",
            },
            {"id": "short", "weight": 30, "grader_type": "regex", "semanticPrompt": "^.{0,400}$"},
        ],
        "passThreshold": 70,
        "owner": "expert-7",
    },
]


def write_reference_bundle(folder: Path, tasks: Any = None, answers: Any = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tasks.json").write_text(json.dumps(REFERENCE_TASKS if tasks is None else tasks))
    (folder / "answers.json").write_text(
        json.dumps(REFERENCE_ANSWERS if answers is None else answers)
    )
    (folder / "refs").mkdir(exist_ok=True)
    (folder / "refs" / "doc.txt").write_text("The main point is kindness.")
    return folder


def test_bundle_round_trip_is_identical(tmp_path: Path) -> None:
    first = read_bundle(write_reference_bundle(tmp_path / "a"))
    c = first.contract
    assert c.tasks[0].execution.prompt == "Capital of France?"
    city = c.tasks[0].evaluation.criteria[0]
    assert (city.grader, city.match, city.prompt) == ("exact_match", "contains", "Paris")
    assert city.extra["rationale"] == "kept too"
    assert c.tasks[0].execution.extra == {"note": "kept"}
    assert c.tasks[1].evaluation.extra == {"owner": "expert-7"}
    write_bundle(first, tmp_path / "b")
    second = read_bundle(tmp_path / "b")
    assert second.contract == first.contract
    assert (tmp_path / "b" / "refs" / "doc.txt").read_text() == "The main point is kindness."
    # bundle -> YAML -> bundle
    assert main(["contracts", "convert", str(tmp_path / "b"), str(tmp_path / "y" / "c.yaml")]) == 0
    third = load_contract(tmp_path / "y" / "c.yaml")
    assert third.contract.tasks == first.contract.tasks
    assert third.reference_text("doc.txt") == "The main point is kindness."
    assert main(["contracts", "convert", str(tmp_path / "y" / "c.yaml"), str(tmp_path / "d")]) == 0
    assert read_bundle(tmp_path / "d").contract.tasks == first.contract.tasks
    for same in (tmp_path / "d", tmp_path / "y" / "c.yaml"):  # never over the contract itself
        assert main(["contracts", "convert", str(same), str(same)]) == 2


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["contracts", "check", str(path)])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


@pytest.mark.parametrize(
    ("tasks", "answers", "expected"),
    [
        (None, [{"task_id": "t9", "criteria": []}], "task 't9' is not in tasks.json"),
        (None, [REFERENCE_ANSWERS[0]], "task 't2' has no answer record"),
        (
            None,
            [
                REFERENCE_ANSWERS[0],
                {
                    **REFERENCE_ANSWERS[1],
                    "criteria": [
                        {"id": "gist", "weight": 70, "grader_type": "Vibes", "semanticPrompt": "x"}
                    ],
                },
            ],
            "task 't2', criterion 'gist': unknown grader_type 'Vibes'",
        ),
        (
            None,
            [
                REFERENCE_ANSWERS[0],
                {
                    **REFERENCE_ANSWERS[1],
                    "criteria": [{"id": "gist", "weight": 70, "grader_type": "llm-judge"}],
                },
            ],
            "task 't2', criterion 'gist' has no prompt",
        ),
        (
            None,
            [
                REFERENCE_ANSWERS[0],
                {
                    **REFERENCE_ANSWERS[1],
                    "criteria": [
                        {
                            "id": "gist",
                            "weight": "seventy",
                            "grader_type": "llm-judge",
                            "semanticPrompt": "x",
                        }
                    ],
                },
            ],
            "weight must be a number",
        ),
        (
            None,
            [
                REFERENCE_ANSWERS[0],
                {
                    **REFERENCE_ANSWERS[1],
                    "criteria": [
                        {
                            "id": "re",
                            "weight": 70,
                            "grader_type": "regex",
                            "semanticPrompt": "(unclosed",
                        }
                    ],
                },
            ],
            "not a valid regular expression",
        ),
        (
            None,
            [REFERENCE_ANSWERS[0], {**REFERENCE_ANSWERS[1], "criteria": []}],
            "task 't2' has no criteria",
        ),
        ([REFERENCE_TASKS[0], REFERENCE_TASKS[0]], REFERENCE_ANSWERS, "task id 't1' is used twice"),
        ([{"task_id": "t1"}], REFERENCE_ANSWERS, "task 't1' has no prompt"),
        (
            [REFERENCE_TASKS[0], {**REFERENCE_TASKS[1], "reference_file": "gone.png"}],
            REFERENCE_ANSWERS,
            "reference file 'gone.png' is missing",
        ),
        ({"version": "twelve", "prompts": REFERENCE_TASKS}, None, "unknown bundle version"),
        (
            None,
            [
                REFERENCE_ANSWERS[0],
                {
                    **REFERENCE_ANSWERS[1],
                    "criteria": [
                        {
                            "id": "gist",
                            "name": "Gist",
                            "weight": 70,
                            "grader_type": "llm-judge",
                            "semanticPrompt": [1, {"a": 2}],
                        }
                    ],
                },
            ],
            "task 't2', criterion 'gist': semanticPrompt must be text",
        ),
    ],
)
def test_bad_bundles_give_located_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tasks: Any, answers: Any, expected: str
) -> None:
    folder = write_reference_bundle(tmp_path / "bad", tasks, answers)
    code, out = _check(folder, capsys)
    assert code == 2, out
    assert expected in out
    assert "Traceback" not in out
    assert str(folder) in out


def test_missing_bundle_files_and_bad_yaml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "empty"
    folder.mkdir()
    code, out = _check(folder, capsys)
    assert code == 2 and "tasks.json" in out and "missing" in out
    (folder / "tasks.json").write_text("{not json")
    code, out = _check(folder, capsys)
    assert code == 2 and "not valid JSON" in out and "line 1" in out
    bad = _yaml(tmp_path, CONTRACT.replace("weight: 30", "weight: 3e9"))
    code, out = _check(bad, capsys)
    assert code == 2 and "line 9" in out and "criteria.1.weight" in out
    code, out = _check(_yaml(tmp_path, CONTRACT.replace("grader: regex", "grader: vibes")), capsys)
    assert code == 2 and "grader" in out
    code, out = _check(tmp_path / "nowhere", capsys)
    assert code == 2 and "no such contract" in out


def test_weights_far_beyond_100_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A weight near the float limit would overflow the mean scores (a numpy warning
    in grade's output); it is a typo, refused on the contract's line."""
    code, out = _check(_yaml(tmp_path, CONTRACT.replace("weight: 30", "weight: 1.0e308")), capsys)
    assert code == 2 and "line 9" in out and "criteria.1.weight" in out
    assert "at most 1000000" in out


def test_weights_not_summing_to_100_warn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(_yaml(tmp_path, CONTRACT.replace("weight: 20", "weight: 25")), capsys)
    assert code == 0
    assert "task 'france': criterion weights sum to 105, not 100" in out


# --- grading through the engine ----------------------------------------------------------


def test_a_tie_fails_and_weights_add_up(contract_path: Path, tmp_path: Path) -> None:
    source = load_contract(contract_path)
    subs = [Submission("france", "x", "Paris is lovely.\nAnswer: Paris")]
    tie = Jury.from_specs(["scripted:juror-yes", "scripted:juror-no"])
    [r], _ = run_grade(source, subs, tie, tmp_path)
    assert [c.passed for c in r.criteria] == [True, False, False]
    assert r.score == 50 and not r.passed  # threshold 60
    assert [v.grade for v in r.criteria[1].votes] == ["C", "I"]  # last verdict lines won
    majority = Jury.from_specs(["scripted:juror-yes", "scripted:juror-no", "scripted:juror-yes"])
    [r], _ = run_grade(source, subs, majority, tmp_path)
    assert r.score == 100 and r.passed and r.reward == 1.0
    assert r.criteria[1].split and r.criteria[1].c_votes == 2
    assert [v.juror for v in r.criteria[1].votes][-1] == "scripted:juror-yes#2"


def test_unparseable_is_a_fail_vote_retried_once(contract_path: Path, tmp_path: Path) -> None:
    source = load_contract(contract_path)
    subs = [Submission("france", "x", "Answer: Paris")]
    mute = ScriptedProvider("juror-mute")
    late = ScriptedProvider("juror-late")
    jury = Jury.from_specs(["scripted:juror-mute", "scripted:juror-late", "scripted:juror-yes"])
    providers = {"scripted:juror-mute": mute, "scripted:juror-late": late}
    [r], _ = run_grade(source, subs, jury, tmp_path, engine={"providers": providers})
    votes = r.criteria[1].votes
    assert [v.grade for v in votes] == [None, "C", "C"]
    assert (
        votes[0].unparsed and votes[0].attempts == 2 and votes[0].retry_text == "I cannot decide."
    )
    assert votes[1].attempts == 2 and votes[2].attempts == 1
    assert mute.calls == 4 and late.calls == 4  # two criteria, each asked once and repaired once
    assert r.criteria[1].passed  # 2 of 3
    jury2 = Jury.from_specs(["scripted:juror-mute", "scripted:juror-yes"])
    [r2], _ = run_grade(source, subs, jury2, tmp_path, engine={"providers": providers})
    assert not r2.criteria[1].passed  # C + unparsed = a tie: fails
    assert mute.calls == 4  # the store answered


@pytest.mark.parametrize("batch", [False, True])
def test_verdicts_ending_a_sentence_are_votes_without_repair(
    contract_path: Path, tmp_path: Path, batch: bool
) -> None:
    source = load_contract(contract_path)
    subs = [Submission("france", "x", "Paris, a lovely city.\nAnswer: Paris")]
    subs.append(Submission("france", "y", "Answer: Paris"))
    prose = ScriptedProvider("juror-prose")
    jury = Jury.from_specs(["scripted:juror-prose"] * 3, batch_criteria=batch)
    providers = {"scripted:juror-prose": prose}
    results, _ = run_grade(source, subs, jury, tmp_path, engine={"providers": providers})
    assert [[c.passed for c in r.criteria] for r in results] == [
        [True, True, True],
        [True, True, False],
    ]
    votes = [v for r in results for c in r.criteria[1:] for v in c.votes]
    assert all(v.attempts == 1 and not v.unparsed for v in votes)  # no repair was asked for
    assert prose.calls == 3 * 2 * (1 if batch else 2)  # jurors x submissions x calls each


def test_copies_of_one_model_on_a_jury_are_asked_with_their_own_seeds(
    contract_path: Path, tmp_path: Path
) -> None:
    source = load_contract(contract_path)
    subs = [Submission("france", "x", "Answer: Paris")]
    jury = Jury.from_specs(["scripted:juror-seeded"] * 3, seed=4)
    [r], _ = run_grade(source, subs, jury, tmp_path)
    assert [v.grade for v in r.criteria[1].votes] == ["C", "I", "C"]  # seeds 4, 5, 6


def test_failed_calls_are_error_votes_and_make_the_result_incomplete(
    contract_path: Path, tmp_path: Path
) -> None:
    source = load_contract(contract_path)
    failing = ScriptedProvider("juror-yes", failure_rate=1.0, failure_kinds=("auth",))
    jury = Jury.from_specs(
        ["scripted:juror-yes", "scripted:juror-keyword", "scripted:juror-keyword"]
    )
    subs = [Submission("france", "x", "Answer: Paris")]
    [r], _ = run_grade(
        source, subs, jury, tmp_path, engine={"providers": {"scripted:juror-yes": failing}}
    )
    first = r.criteria[1].votes[0]
    assert first.grade is None and first.error is not None and first.error.startswith("auth")
    assert not r.complete


def test_batched_criteria_use_one_call_per_juror(contract_path: Path, tmp_path: Path) -> None:
    source = load_contract(contract_path)
    subs = [
        Submission("france", "x", "Paris, a lovely city.\nAnswer: Paris"),
        Submission("france", "y", "Answer: Paris"),
    ]
    keyword = ScriptedProvider("juror-keyword")
    single = Jury.from_specs(["scripted:juror-keyword"])
    batched = Jury.from_specs(["scripted:juror-keyword"], batch_criteria=True)
    engine = {"providers": {"scripted:juror-keyword": keyword}}
    one, _ = run_grade(source, subs, single, tmp_path / "1", engine=engine)
    assert keyword.calls == 4
    both, _ = run_grade(source, subs, batched, tmp_path / "2", engine=engine)
    assert keyword.calls == 6
    assert [r.score for r in one] == [r.score for r in both] == [100, 80]
    assert both[0].criteria[1].votes[0].share == 0.5


def test_cascade_escalates_only_split_or_unread_criteria(
    contract_path: Path, tmp_path: Path
) -> None:
    from eigenjury.contracts.trace import result_cost
    from eigenjury.models.prices import Price, PriceTable

    source = load_contract(contract_path)
    subs = [Submission("france", "x", "Paris it is.\nAnswer: Paris")]
    # compact: 2-1 on "names paris" (split: escalated), 0-3 on "says lovely" (kept)
    compact = Jury.from_specs(
        ["scripted:juror-keyword", "scripted:juror-keyword", "scripted:juror-no"]
    )
    large_provider = ScriptedProvider("juror-yes")
    large = Jury.from_specs(["scripted:juror-yes"] * 3)
    prices = PriceTable({"scripted:juror-yes": Price(1e6, 0.0)})  # $1 per input token
    engine = {"providers": {"scripted:juror-yes": large_provider}, "prices": prices}
    [r], _ = run_grade(source, subs, compact, tmp_path, escalate_to=large, engine=engine)
    paris, lovely = r.criteria[1], r.criteria[2]
    assert paris.escalated_from and [v.grade for v in paris.escalated_from] == ["C", "C", "I"]
    assert [v.grade for v in paris.votes] == ["C", "C", "C"] and paris.passed
    assert not lovely.escalated_from and not lovely.passed
    assert large_provider.calls == 3  # one criterion x three large jurors, nothing more
    cost = result_cost(r)["jury_cost_usd"]
    assert cost == sum(v.input_tokens for v in paris.votes) > 0  # the compact pool is free
    assert r.score == 80
    unanimous = Jury.from_specs(["scripted:juror-no"] * 3)
    [r2], _ = run_grade(source, subs, unanimous, tmp_path / "u", escalate_to=large, engine=engine)
    assert not any(c.escalated_from for c in r2.criteria)  # 0-3 is two flips from changing
    assert large_provider.calls == 3


def test_the_grading_record_and_its_trace_round_trip_and_escape_juror_text(
    contract_path: Path, tmp_path: Path
) -> None:
    from eigenjury.contracts.record import GradingRecord, Judgement, JudgementLines
    from eigenjury.contracts.trace import grading_record
    from eigenjury.models.providers.scripted import register_script
    from eigenjury.records import parse_record
    from eigenjury.reports.grading import outputs
    from eigenjury.reports.output import write_outputs

    xss = "<script>alert('x')</script>"
    register_script("juror-xss", lambda request: f"{xss}\nGRADE: C")
    source = load_contract(contract_path)
    subs = [
        Submission("france", "x", "Paris it is.\nAnswer: Paris"),
        Submission("sum", "x", None, error="auth: no key"),
    ]
    compact = Jury.from_specs(
        ["scripted:juror-keyword", "scripted:juror-keyword", "scripted:juror-no"]
    )
    large = Jury.from_specs(["scripted:juror-xss"] * 3)
    results, _ = run_grade(source, subs, compact, tmp_path, escalate_to=large)
    record = grading_record(
        results, contract="capitals", jury=compact, escalate_to=large, escalate_margin=1
    )
    assert record.escalate_to is not None and record.escalate_to.jurors[0] == "scripted:juror-xss"
    assert record.incomplete == 1 and record.tasks[1].error == "auth: no key"
    paris = record.tasks[0].criteria[1]
    assert (paris.id, paris.escalated, paris.passed) == ("names-paris", True, True)
    stages = [j.stage for j in record.judgements if j.criterion_id == "names-paris"]
    assert stages == ["first"] * 3 + ["escalated"] * 3
    written = write_outputs(tmp_path / "out", outputs(record, source.contract))
    assert [p.name for p in written] == [
        "results.json", "trace.jsonl", "tasks.csv", "criteria.csv", "judgements.csv",
        "report.html",
    ]  # fmt: skip
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert "judgements" not in data and "accounting" not in data
    assert "error" in data["tasks"][1] and "error" not in data["tasks"][0]
    assert "votes" not in data["tasks"][0]["criteria"][0]  # exact_match has no jury
    again = parse_record(data, tmp_path / "out" / "results.json", GradingRecord)
    assert again == record.model_copy(update={"judgements": JudgementLines()})
    lines = (tmp_path / "out" / "trace.jsonl").read_text().splitlines()
    trace = [Judgement.model_validate_json(line) for line in lines]
    assert trace == list(record.judgements)
    grader = json.loads(lines[0])
    assert grader["juror"] is None and "input_tokens" not in grader  # no call behind it
    html = (tmp_path / "out" / "report.html").read_text()
    assert xss not in html and "&lt;script&gt;" in html and " · escalated" in html
    assert "Criterion: The answer names paris" in html and "auth: no key" in html


# --- bad input: references, encodings, nesting, aliases, patterns, graders ----------------


def _reference_escapes(folder: Path, how: str) -> None:
    """Make the reference file `doc.txt` of task t2 lead outside refs/ in the way `how`."""
    secret = folder.parent / "secret.txt"
    secret.write_text("the private key")
    refs = folder / "refs"
    if how == "link":
        (refs / "doc.txt").unlink()
        (refs / "doc.txt").symlink_to(secret)
    elif how == "linked-refs":
        (refs / "doc.txt").unlink()
        refs.rmdir()
        outside = folder.parent / "elsewhere"
        outside.mkdir()
        (outside / "doc.txt").write_text("the private key")
        refs.symlink_to(outside)
    else:
        tasks = json.loads((folder / "tasks.json").read_text())
        tasks[1]["reference_file"] = "../secret.txt" if how == "dotdot" else str(secret)
        (folder / "tasks.json").write_text(json.dumps(tasks))


@pytest.mark.parametrize("how", ["link", "linked-refs", "dotdot", "absolute"])
def test_a_reference_outside_refs_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    folder = write_reference_bundle(tmp_path / "b")
    _reference_escapes(folder, how)
    code, out = _check(folder, capsys)
    assert code == 2 and "Traceback" not in out, out
    assert "task 't2'" in out and "refs" in out and str(folder) in out
    if how in ("link", "linked-refs"):  # read without the checks of load_contract
        with pytest.raises(InputError, match="outside"):
            read_bundle(folder).reference_text("doc.txt")


def test_bundle_files_are_read_as_text_with_a_bom_and_located_when_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_reference_bundle(tmp_path / "b")
    for name in ("tasks.json", "answers.json"):
        path = folder / name
        path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())  # a BOM, as Windows tools write
    assert _check(folder, capsys)[0] == 0
    (folder / "answers.json").write_bytes(b'[{"task_id": "t1", "note": "caf\xe9"}]')
    code, out = _check(folder, capsys)
    assert code == 2 and "answers.json" in out and "UTF-8" in out and "Traceback" not in out


@pytest.mark.fuzz
@pytest.mark.parametrize("name", ["tasks.json", "answers.json", "c.yaml"])
def test_deep_nesting_is_a_located_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    folder = write_reference_bundle(tmp_path / "b")
    (folder / name).write_text("[" * 100_000)
    code, out = _check(folder / name if name.endswith(".yaml") else folder, capsys)
    assert code == 2 and "nested too deeply" in out and name in out and "Traceback" not in out


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{x}: &{x} [{', '.join([f'*{p}'] * 9)}]\n" for p, x in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_yaml_aliases_that_explode_or_loop_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _check(_yaml(tmp_path, BILLION_LAUGHS), capsys)  # 9**9 nodes once expanded
    assert code == 2 and "aliases" in out and "line 5" in out, out
    code, out = _check(_yaml(tmp_path, "tasks: &t [*t]\n"), capsys)
    assert code == 2 and "refers to a node that contains it" in out and "line 1" in out
    # aliases within reason (shared criterion settings) still work, lines still point right
    shared = CONTRACT.replace(
        "{id: value, weight: 60, grader: numeric,", "&num {id: value, weight: 60, grader: numeric,"
    ).replace("{id: shows-work, weight: 40,", "{<<: *num, id: shows-work, weight: 40,")
    assert _check(_yaml(tmp_path, shared), capsys)[0] == 0
    code, out = _check(_yaml(tmp_path, CONTRACT.replace("weight: 30", "weight: 3e9")), capsys)
    assert code == 2 and "line 9" in out


def test_regex_patterns_are_checked_on_load_and_searched_with_a_time_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out = _check(_yaml(tmp_path, CONTRACT.replace("\\\\d\\\\s*", "(\\\\d")), capsys)
    assert code == 2 and "not a valid regular expression" in out and "line 16" in out, out
    from eigenjury.contracts import graders

    monkeypatch.setattr(graders, "REGEX_TIMEOUT_S", 0.05)
    slow = crit(grader="regex", prompt="(a|aa)+$")  # backtracks through every split of the a's
    ok, why = graders.regex(slow, "a" * 34 + "b")
    assert not ok and "timed out" in why
    assert graders.regex(crit(grader="regex", prompt=r"\p{Lu}\w+"), "in Paris") == (
        True,
        "pattern '\\\\p{Lu}\\\\w+': matched 'Paris'",
    )


def test_a_python_grader_that_cannot_be_imported_is_reported_by_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_checks.py").write_text(
        "def short(submission, task, criterion):\n    return True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for prompt, expected in [
        ("no_such_module_here:short", "cannot import 'no_such_module_here'"),
        ("my_checks:long", "module 'my_checks' has no function 'long'"),
    ]:
        text = CONTRACT.replace("grader: regex,", "grader: python,").replace(
            '"\\\\d\\\\s*\\\\+\\\\s*\\\\d"', prompt
        )
        code, out = _check(_yaml(tmp_path, text), capsys)
        assert code == 2 and "Traceback" not in out, out
        assert f"task 'sum', criterion 'shows-work': {expected}" in out
    good = CONTRACT.replace("grader: regex,", "grader: python,").replace(
        '"\\\\d\\\\s*\\\\+\\\\s*\\\\d"', "my_checks:short"
    )
    assert _check(_yaml(tmp_path, good), capsys)[0] == 0


def test_fleiss_kappa_of_the_textbook_table_and_of_one_grade_throughout() -> None:
    """Fleiss (1971) as the usual worked example gives it: 10 items, 14 raters, 5
    categories, kappa 0.210; one category throughout leaves chance at 1: undefined."""
    from eigenjury.stats.agreement import fleiss_kappa

    table = [[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0],
             [2, 2, 8, 1, 1], [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2],
             [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]]  # fmt: skip
    assert round(fleiss_kappa(table), 3) == 0.210
    assert np.isnan(fleiss_kappa([[3, 0], [3, 0]]))
    assert fleiss_kappa([[3, 0], [0, 3]]) == 1.0
    with pytest.raises(ValueError, match="same number of ratings"):
        fleiss_kappa([[3, 0], [1, 1]])


def test_a_model_twice_at_temperature_zero_is_warned_of_and_not_above_it() -> None:
    twice = Jury.from_specs(["scripted:juror-yes", "scripted:juror-yes", "scripted:juror-no"])
    [warning] = twice.warnings()
    assert "scripted:juror-yes sits on the jury 2 times at temperature 0" in warning
    assert Jury.from_specs(["scripted:juror-yes"] * 2, temperature=0.7).warnings() == []
    assert Jury.from_specs(["scripted:juror-yes", "scripted:juror-no"]).warnings() == []
