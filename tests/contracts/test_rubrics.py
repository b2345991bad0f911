"""Rubrics as experts write them: negative criteria, the healthbench scoring rule,
conversations, ideal replies, tags and their breakdowns, and HealthBench files read
and written back unchanged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import contract_scripts
from contract_scripts import run_grade
from eigenjury.cli import main
from eigenjury.contracts.bundle import load_contract
from eigenjury.contracts.grading import CriterionResult, Submission, TaskResult
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.rules import score_range, task_score
from eigenjury.contracts.schema import Contract, Criterion, Evaluation
from eigenjury.contracts.trace import grading_record, summary
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest
from eigenjury.reports.grading import agreement_lines, render

# --- the scoring rules, against hand-computed values -------------------------------------


def test_the_weighted_rule_subtracts_negative_criteria_met() -> None:
    weights = [50, 30, -20]
    assert task_score(weights, [True, False, True]) == 30  # 50 - 20
    assert task_score(weights, [False, False, True]) == -20  # not clipped: the sum as it is
    assert task_score(weights, [True, True, False]) == 80


def test_the_healthbench_rule_is_points_met_over_positive_points_clipped() -> None:
    weights = [7, 5, 10, -6]
    # met: 7 + 10 - 6 = 11 of the 22 positive points
    assert task_score(weights, [True, False, True, True], "healthbench") == pytest.approx(50.0)
    assert task_score([5, -10], [False, True], "healthbench") == 0.0  # -200 clipped at 0
    assert task_score([5, -10], [True, False], "healthbench") == 100.0  # the top is reachable
    assert task_score([5, 5, -1], [True, True, False], "healthbench") == 100.0


def test_score_range_says_what_no_reply_can_pass_or_fail() -> None:
    def evaluation(weights: list[float], threshold: float, scoring: str) -> Evaluation:
        criteria = [
            Criterion(id=f"c{k}", weight=w, grader="llm_judge", prompt="x")
            for k, w in enumerate(weights)
        ]
        return Evaluation(criteria=criteria, pass_threshold=threshold, scoring=scoring)  # type: ignore[arg-type]

    assert score_range(evaluation([60, 40, -30], 100, "weighted")) == (-30, 100)
    assert score_range(evaluation([6, 4, -30], 50, "healthbench")) == (0, 100)
    never_passes = evaluation([30, 20], 60, "weighted")
    never_fails = evaluation([60, 40], -5, "weighted")
    contract = Contract.model_validate(
        {
            "tasks": [
                {"task_id": "a", "execution": {"prompt": "q"}, "evaluation": never_passes},
                {"task_id": "b", "execution": {"prompt": "q"}, "evaluation": never_fails},
            ]
        }
    )
    warned = " ".join(contract.warnings())
    assert "task 'a'" in warned and "can never pass" in warned
    assert "task 'b'" in warned and "can never fail" in warned


def _result(
    task_id: str,
    criteria: list[tuple[float, bool, tuple[str, ...]]],
    scoring: str = "healthbench",
    tags: tuple[str, ...] = (),
) -> TaskResult:
    outcomes = tuple(
        CriterionResult(
            Criterion(id=f"c{k}", weight=w, grader="exact_match", prompt="x", tags=t), met
        )
        for k, (w, met, t) in enumerate(criteria)
    )
    submission = Submission(task_id, "model", "reply")
    return TaskResult(task_id, "model", 50, outcomes, submission, scoring, tags)  # type: ignore[arg-type]


def test_axis_and_theme_scores_and_the_clipped_mean_by_hand() -> None:
    acc, comp = ("axis:accuracy",), ("axis:completeness",)
    first = _result(
        "t1", [(7, True, acc), (-6, True, acc), (10, False, comp)], tags=("theme:emergency",)
    )
    second = _result("t2", [(4, True, acc), (-20, True, ())], tags=("theme:emergency",))
    third = _result("t3", [(10, True, comp)])
    # task scores: (7 - 6) / 17 = 5.88; (4 - 20) / 4 = -400 clipped to 0; 100
    assert first.score == pytest.approx(100 / 17) and second.score == 0 and third.score == 100
    assert second.unclipped == pytest.approx(-400)
    [row] = summary([first, second, third], rounds=50)
    # HealthBench's mean: of the unclipped scores, then clipped: (5.88 - 400 + 100) / 3 < 0
    assert row.mean_score.value == 0.0
    by_tag = {(t.level, t.tag): t for t in row.tags or []}
    # accuracy: t1 (7 - 6) / 7 = 14.29, t2 4 / 4 = 100: mean 57.14
    assert by_tag["criterion", "axis:accuracy"].score.value == pytest.approx(57.14, abs=0.01)
    assert by_tag["criterion", "axis:accuracy"].tasks == 2
    # completeness: t1 0 / 10 = 0, t3 100: mean 50
    assert by_tag["criterion", "axis:completeness"].score.value == pytest.approx(50.0)
    # a theme: the clipped mean of its tasks' unclipped scores, (5.88 - 400) / 2 -> 0
    assert by_tag["task", "theme:emergency"].score.value == 0.0
    assert by_tag["task", "theme:emergency"].tasks == 2


def test_the_weighted_rule_keeps_its_plain_mean() -> None:
    tasks = [_result("a", [(60, True, ()), (-30, True, ())], "weighted")]
    tasks.append(_result("b", [(60, False, ()), (-30, True, ())], "weighted"))
    [row] = summary(tasks, rounds=50)
    assert row.mean_score.value == pytest.approx((30 - 30) / 2)
    assert row.tags is None  # no tags, no breakdown


# --- conversations, negative criteria and the ideal reply, through the engine --------------

SEEN: list[ChatRequest] = []


def _recording_juror(request: ChatRequest) -> str:
    SEEN.append(request)
    return contract_scripts.juror_keyword(request)


def _recording_candidate(request: ChatRequest) -> str:
    SEEN.append(request)
    return "Call an ambulance now."


register_script("juror-recording", _recording_juror)
register_script("candidate-recording", _recording_candidate)

CONVERSATION = """\
name: triage
scoring: healthbench
tasks:
  - task_id: stroke
    tags: [theme:emergency]
    execution:
      prompt:
        - {role: system, content: "You are a careful assistant."}
        - {role: user, content: "My father's face droops."}
        - {role: assistant, content: "How long ago did it start?"}
        - {role: user, content: "Ten minutes ago. What now?"}
    evaluation:
      ideal: Call emergency services immediately; note the time symptoms began.
      show_ideal: true
      pass_threshold: 50
      criteria:
        - {id: ambulance, weight: 10, grader: llm_judge, prompt: Advises calling an ambulance,
           tags: [axis:accuracy]}
        - {id: wait, weight: -8, grader: llm_judge, prompt: Advises to wait,
           tags: [axis:accuracy]}
        - {id: time, weight: 5, grader: llm_judge, prompt: Asks to note the time,
           tags: [axis:completeness]}
"""


def test_a_conversation_is_sent_as_turns_and_shown_to_jurors(tmp_path: Path) -> None:
    path = tmp_path / "triage.yaml"
    path.write_text(CONVERSATION)
    source = load_contract(path)
    assert source.contract.tasks[0].evaluation.scoring == "healthbench"  # the contract's default
    SEEN.clear()
    from eigenjury.contracts.grading import generate_submissions
    from eigenjury.engine import Engine, Store

    async def answer() -> list[Submission]:
        async with Engine(Store(tmp_path / "s.sqlite"), progress=False) as engine:
            from eigenjury.models.spec import ModelSpec

            return await generate_submissions(
                engine, source, [ModelSpec.parse("scripted:candidate-recording")]
            )

    import asyncio

    [submission] = asyncio.run(answer())
    [candidate_request] = SEEN
    assert [(m.role, m.content) for m in candidate_request.messages] == [
        ("system", "You are a careful assistant."),
        ("user", "My father's face droops."),
        ("assistant", "How long ago did it start?"),
        ("user", "Ten minutes ago. What now?"),
    ]
    SEEN.clear()
    jury = Jury.from_specs(["scripted:juror-recording"])
    [result], _ = run_grade(source, [submission], jury, tmp_path)
    asked = {r.messages[-1].content.split("Criterion: ")[1].split("\n")[0]: r for r in SEEN}
    text = asked["Advises to wait"].messages[-1].content
    assert "[assistant]\nHow long ago did it start?" in text  # the transcript, turn by turn
    assert "the assistant's next reply" in text
    assert "must not do" in text  # a negative criterion is put as what it is
    assert "<<<IDEAL\nCall emergency services immediately" in text
    assert "must not do" not in asked["Advises calling an ambulance"].messages[-1].content
    # juror-keyword: met iff the criterion's last word is in the reply ("ambulance" only)
    assert [c.passed for c in result.criteria] == [True, False, False]
    assert result.score == pytest.approx(100 * 10 / 15)


def test_a_contract_wide_show_ideal_applies_where_there_is_an_ideal(tmp_path: Path) -> None:
    path = tmp_path / "triage.yaml"
    text = CONVERSATION.replace("      show_ideal: true\n", "").replace(
        "scoring: healthbench\n", "scoring: healthbench\nshow_ideal: true\n"
    )
    second = text[text.index("  - task_id: stroke") :].replace("stroke", "no-ideal")
    second = second.replace(
        "      ideal: Call emergency services immediately; note the time symptoms began.\n", ""
    )
    path.write_text(text + second)
    tasks = load_contract(path).contract.tasks
    assert [t.evaluation.show_ideal for t in tasks] == [True, False]


def test_the_ideal_stays_hidden_unless_the_contract_says(tmp_path: Path) -> None:
    path = tmp_path / "triage.yaml"
    path.write_text(CONVERSATION.replace("      show_ideal: true\n", ""))
    source = load_contract(path)
    SEEN.clear()
    run_grade(
        source,
        [Submission("stroke", "m", "wait")],
        Jury.from_specs(["scripted:juror-recording"]),
        tmp_path,
    )
    assert SEEN and all("IDEAL" not in r.messages[-1].content for r in SEEN)


# --- HealthBench files --------------------------------------------------------------------


def _example(**changes: Any) -> dict[str, Any]:
    example: dict[str, Any] = {
        "prompt": [
            {"role": "user", "content": "I have had a headache for three days."},
            {"role": "assistant", "content": "Any fever or stiff neck?"},
            {"role": "user", "content": "A stiff neck, yes. Should I worry?"},
        ],
        "rubrics": [
            {
                "criterion": "Advises urgent in-person care because of the stiff neck.",
                "points": 9,
                "tags": ["level:example", "axis:accuracy"],
            },
            {
                "criterion": "Reassures that it is surely a tension headache.",
                "points": -7,
                "tags": ["level:example", "axis:accuracy"],
            },
            {
                "criterion": "Uses plain words.",
                "points": 2.5,
                "tags": ["axis:communication_quality"],
                "reviewer": "kept as it is",
            },
        ],
        "example_tags": ["theme:emergency_referrals", "physician_agreed_category:urgent"],
        "ideal_completions_data": {
            "ideal_completion": "A headache with a stiff neck needs urgent care today.",
            "ideal_completions_group": "Group 2",
            "ideal_completions_ref_completions": ["one", "two"],
        },
        "prompt_id": "hb-0001",
        "canary": "our-own-canary",
    }
    return {**example, **changes}


def _write(path: Path, examples: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in examples))
    return path


def test_healthbench_converts_and_converts_back_unchanged(tmp_path: Path) -> None:
    second = _example(prompt_id="hb-0002", ideal_completions_data=None, example_tags=[])
    del second["canary"]
    original = _write(tmp_path / "hb.jsonl", [_example(), second])
    for middle in (tmp_path / "c.yaml", tmp_path / "bundle"):
        assert (
            main(["contracts", "convert", "--from", "healthbench", str(original), str(middle)]) == 0
        )
        back = tmp_path / f"back-{middle.name}.jsonl"
        assert main(["contracts", "convert", str(middle), str(back)]) == 0
        assert back.read_bytes() == original.read_bytes(), middle
    contract = load_contract(original).contract
    task = contract.task("hb-0001")
    assert task.evaluation.scoring == "healthbench"
    assert [c.weight for c in task.evaluation.criteria] == [9, -7, 2.5]
    assert task.tags == ("theme:emergency_referrals", "physician_agreed_category:urgent")
    assert task.evaluation.ideal.startswith("A headache with a stiff neck")
    assert not task.evaluation.show_ideal  # HealthBench's grader does not see it
    assert task.evaluation.criteria[2].extra == {"healthbench": {"reviewer": "kept as it is"}}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"rubrics": [{"criterion": "Bad.", "points": -3, "tags": []}]},
            "no criterion has positive",
        ),
        ({"prompt": [{"role": "nurse", "content": "hi"}]}, "turn 1: role"),
        (
            {"prompt": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]},
            "ends with the user's turn",
        ),
        (
            {"rubrics": [{"criterion": "Good.", "points": 3, "tags": ["axis:accuracy", 4]}]},
            "rubrics item 1: tags.1",
        ),
        ({"example_tags": ["theme:x", None]}, "example_tags.1"),
        (
            {"rubrics": [{"criterion": "Good.", "points": "3"}]},
            "rubrics item 1: points must be a number",
        ),
        ({"prompt_id": ""}, "prompt_id must be"),
    ],
)
def test_bad_healthbench_lines_are_located(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], expected: str
) -> None:
    path = _write(tmp_path / "hb.jsonl", [_example(), _example(**{"prompt_id": "hb-2", **change})])
    code = main(["contracts", "convert", str(path), str(tmp_path / "out.yaml")])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    message = captured.out + captured.err
    assert "hb.jsonl" in message and "line 2" in message and expected in message, message
    assert not (tmp_path / "out.yaml").exists()


def _grade(
    tmp_path: Path, contract: Path, rows: list[dict[str, str]], jury: list[str], *more: str
) -> tuple[int, Path]:
    """`eigenjury grade` of `rows` (the submissions) by `jury`: the exit code and --out."""
    submissions, out = tmp_path / "subs.jsonl", tmp_path / "out"
    submissions.write_text("".join(json.dumps(row) + "\n" for row in rows))
    jurors = [arg for spec in jury for arg in ("--jury", spec)]
    store = ["--store", str(tmp_path / "s.sqlite"), "--out", str(out), "--no-progress"]
    command = ["grade", str(contract), "--submissions", str(submissions), *jurors, *more]
    return main([*command, *store]), out


def test_a_healthbench_file_is_graded_as_it_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "hb.jsonl", [_example(), _example(prompt_id="hb-2", example_tags=[])])
    rows = [
        {"task_id": "hb-0001", "submission": "Your stiff neck needs care today. Plain words."},
        {"task_id": "hb-2", "submission": "It is surely a tension headache."},
    ]
    jury = ["scripted:juror-keyword", "scripted:juror-keyword", "scripted:juror-yes"]
    code, out = _grade(tmp_path, path, rows, jury, "--juror-temperature", "0.5")
    printed = capsys.readouterr().out
    assert code == 0, printed
    record = json.loads((out / "results.json").read_text())
    tasks = {t["task_id"]: t for t in record["tasks"]}
    # juror-keyword meets a criterion iff its last word is in the reply: hb-0001 meets
    # "neck" (9) and "words" (2.5), all 11.5 positive points; hb-2 meets only "headache"
    # (-7): -61, clipped to 0. juror-yes always says C; the two keyword jurors outvote it
    assert tasks["hb-0001"]["score"] == pytest.approx(100.0, abs=0.01)
    assert tasks["hb-0001"]["scoring"] == "healthbench"
    assert tasks["hb-2"]["unclipped_score"] < 0 and tasks["hb-2"]["score"] == 0.0
    levels = {(t["level"], t["tag"]) for t in record["summary"][0]["tags"]}
    assert ("criterion", "axis:accuracy") in levels and (
        "task",
        "theme:emergency_referrals",
    ) in levels
    assert "Scores by tag" in printed and "Fleiss' kappa" in printed
    assert record["agreement"]["jurors"][2]["juror"] == "scripted:juror-yes"


# --- what an adversarial review found ---------------------------------------------------


def test_a_failure_on_a_negative_criterion_never_spares_the_reply(tmp_path: Path) -> None:
    """An unread vote is not C on a positive criterion (no points), and counts as C on a
    negative one (the penalty): a failure is never in the reply's favour."""
    path = tmp_path / "c.yaml"
    path.write_text(
        "tasks:\n  - task_id: t\n    execution: {prompt: q}\n    evaluation:\n"
        "      pass_threshold: 50\n      criteria:\n"
        "        - {id: good, weight: 100, grader: llm_judge, prompt: Says fine}\n"
        "        - {id: bad, weight: -100, grader: llm_judge, prompt: Says headache}\n"
    )
    jury = Jury.from_specs(["scripted:juror-keyword", "scripted:juror-mute", "scripted:juror-mute"])
    [r], _ = run_grade(load_contract(path), [Submission("t", "m", "fine headache")], jury, tmp_path)
    good, bad = r.criteria
    assert not good.passed and bad.passed  # 1 C + 2 unread: no points, and the penalty
    assert bad.c_share == 1.0 and r.score == -100 and not r.passed


def test_imported_items_count_apart_and_edits_and_extra_keys_survive(tmp_path: Path) -> None:
    first = _example()
    first["rubrics"][0].update({"id": "own-id", "weight": 1, "grader_type": "regex"})
    original = _write(tmp_path / "hb.jsonl", [first, _example(prompt_id="hb-2")])
    bundle, back = tmp_path / "bundle", tmp_path / "back.jsonl"
    assert main(["contracts", "convert", str(original), str(bundle)]) == 0
    # an item's own keys do not take the place of the bundle's
    answers = json.loads((bundle / "answers.json").read_text())
    assert answers[0]["criteria"][0]["id"] == "c1" and answers[0]["criteria"][0]["weight"] == 9
    text = (bundle / "answers.json").read_text()
    (bundle / "answers.json").write_text(text.replace("A headache with a stiff neck", "EDITED"))
    assert main(["contracts", "convert", str(bundle), str(back)]) == 0
    lines = [json.loads(line) for line in back.read_text().splitlines()]
    assert lines[0]["rubrics"][0]["id"] == "own-id"  # kept, and written back
    assert lines[0]["ideal_completions_data"]["ideal_completion"].startswith("EDITED")
    assert lines[0]["ideal_completions_data"]["ideal_completions_group"] == "Group 2"


def test_writing_healthbench_refuses_what_it_cannot_hold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    weighted = tmp_path / "w.yaml"
    weighted.write_text(CONVERSATION.replace("scoring: healthbench\n", ""))
    assert main(["contracts", "convert", str(weighted), str(tmp_path / "w.jsonl")]) == 2
    assert "weighted rule" in capsys.readouterr().err
    assert not (tmp_path / "w.jsonl").exists()
    path = tmp_path / "t.yaml"
    path.write_text(CONVERSATION)
    assert main(["contracts", "convert", str(path), str(tmp_path / "t.jsonl")]) == 0
    said = capsys.readouterr().out
    assert "pass threshold 50" in said and "criterion ids or names" in said


def test_report_colours_a_met_negative_criterion_as_bad(tmp_path: Path) -> None:
    path = tmp_path / "triage.yaml"
    path.write_text(CONVERSATION)
    rows = [{"task_id": "stroke", "submission": "just wait"}]
    code, out = _grade(tmp_path, path, rows, ["scripted:juror-keyword"])
    assert code == 0
    html = (out / "report.html").read_text()
    assert '<td class="fail">met</td>' in html and '<td class="pass">met</td>' not in html


# --- repeats and batching, as the contract asks -----------------------------------------

REPEATED = """\
repeats: 3
tasks:
  - task_id: t
    execution: {prompt: q}
    evaluation:
      pass_threshold: 50
      criteria:
        - {id: one, weight: 60, grader: llm_judge, prompt: Is good}
        - {id: two, weight: 40, grader: llm_judge, prompt: Is fine}
  - task_id: u
    execution: {prompt: q}
    evaluation:
      batch_criteria: true
      criteria:
        - {id: one, weight: 50, grader: llm_judge, prompt: Says good}
        - {id: two, weight: 50, grader: llm_judge, prompt: Says fine}
"""


def test_repeats_are_distinct_answers_each_a_vote(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(REPEATED)
    source = load_contract(path)
    assert source.contract.repeats == 3 and source.contract.task("u").evaluation.batch_criteria
    # juror-seeded votes C for an even seed; a juror's answers are samples (and seed
    # offsets) 0, 1000, 2000: three calls in the store, three votes
    jury = Jury.from_specs(["scripted:juror-seeded"], temperature=0.5)
    results, _ = run_grade(source, [Submission("t", "m", "x")], jury, tmp_path)
    one = results[0].criteria[0]
    assert [v.grade for v in one.votes] == ["C", "C", "C"]
    assert [v.repeat for v in one.votes] == [0, 1, 2]
    assert one.passed and one.c_share == 1.0
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        samples = sorted(row[0] for row in db.execute("select sample from results"))
    assert samples == [0, 0, 1000, 1000, 2000, 2000]  # two criteria, three answers each
    record = grading_record(results, contract="c", jury=jury, repeats=3)
    assert [j.repeat for j in record.judgements][:3] == [0, 1, 2]
    assert not record.warnings  # at temperature 0.5 the repeats are real samples
    cold = Jury.from_specs(["scripted:juror-seeded"])
    assert "repeats add no information" in " ".join(cold.warnings(3))
    # two jurors: samples 0, 1000, 2000 (all C) and 1, 1001, 2001 (all I): each steady,
    # and a tie
    pair = Jury.from_specs(["scripted:juror-seeded", "scripted:juror-seeded"], temperature=0.5)
    results, _ = run_grade(source, [Submission("t", "m", "x")], pair, tmp_path)
    assert [v.grade for v in results[0].criteria[0].votes] == ["C"] * 3 + ["I"] * 3
    assert not results[0].criteria[0].passed  # 3 of 6: a tie fails
    paired = grading_record(results, contract="c", jury=pair, repeats=3)
    assert paired.agreement is not None
    assert [j.consistency.value for j in paired.agreement.jurors if j.consistency] == [1.0, 1.0]
    said = agreement_lines(paired)
    assert said is not None and "steady over repeats" in said[1][0]
    assert "C C C" in render(paired, source.contract)  # a juror's repeats side by side


def test_a_task_may_ask_for_its_criteria_in_one_call(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(REPEATED.replace("repeats: 3\n", ""))
    jury = Jury.from_specs(["scripted:juror-keyword"])
    subs = [Submission("t", "m", "good"), Submission("u", "m", "good")]
    results, _ = run_grade(load_contract(path), subs, jury, tmp_path)
    calls_per_vote = {r.task_id: [v.share for c in r.criteria for v in c.votes] for r in results}
    assert calls_per_vote == {"t": [1.0, 1.0], "u": [0.5, 0.5]}  # u: both in one call
    assert [c.passed for c in results[1].criteria] == [True, False]


def test_one_task_gives_no_interval_and_odd_contracts_are_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [row] = summary([_result("only", [(5, True, ("axis:a",))])], rounds=50)
    assert row.mean_score.value == 100.0 and row.mean_score.ci == (None, None)
    path = tmp_path / "c.yaml"
    path.write_text("scoring: vibes\n" + REPEATED.replace("repeats: 3\n", ""))
    assert main(["contracts", "check", str(path)]) == 2
    said = capsys.readouterr().err
    assert "scoring 'vibes' is not a scoring rule" in said and "line 1" in said, said
    path.write_text(CONVERSATION.replace('"Ten minutes ago. What now?"', '"  "'))
    assert main(["contracts", "check", str(path)]) == 2
    assert "last turn, the user's, is blank" in capsys.readouterr().err


def test_jurors_of_one_model_under_different_names_are_distinct_samples() -> None:
    """Found trying a real served model: `g1=M --jury g2=M` were one reply from the store
    counted twice (kappa 1.00, identical replies on every criterion)."""
    from eigenjury.models.spec import named_spec

    named = [named_spec(f"{n}=scripted:juror-seeded") for n in ("g1", "g2", "g1")]
    jury = Jury.from_specs([spec for _, spec in named], names=[name for name, _ in named])
    assert [(j.name, j.sample) for j in jury.jurors] == [("g1", 0), ("g2", 1), ("g1#2", 2)]


def test_a_tag_on_one_task_has_no_interval() -> None:
    tasks = [
        _result("a", [(5, True, ("axis:rare",)), (5, False, ("axis:common",))]),
        _result("b", [(5, True, ("axis:common",))]),
        _result("c", [(5, False, ("axis:common",))]),
    ]
    [row] = summary(tasks, rounds=50)
    by_tag = {t.tag: t.score for t in row.tags or []}
    assert by_tag["axis:rare"].value == 100.0 and by_tag["axis:rare"].ci == (None, None)
    assert by_tag["axis:common"].ci[0] is not None


def test_repeats_in_the_jury_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A second review: diversity kept every criterion out with repeats, a juror tied
    with itself was 'unread', a lone juror's steadiness went unreported, two spellings
    of one endpoint shared a sample, and exports lost the repeats."""
    path = tmp_path / "c.yaml"
    path.write_text(REPEATED.replace("repeats: 3", "repeats: 2"))
    source = load_contract(path)
    subs = [Submission("t", "m", "good fine")]
    # juror-seeded: C for even seeds; with a stride of 1000 the first copy says C, C and
    # the second (sample 1) I, I; juror-keyword says C on both criteria
    mixed = Jury.from_specs(
        ["scripted:juror-seeded", "scripted:juror-keyword", "scripted:juror-seeded"],
        temperature=0.5,
    )
    results, _ = run_grade(source, subs, mixed, tmp_path)
    record = grading_record(results, contract="c", jury=mixed, repeats=2)
    assert record.diversity is not None and record.diversity.criteria == 2
    assert record.jury.repeats == 2
    assert record.agreement is not None and record.agreement.criteria_all_read == 2
    # one juror alone, asked twice: its steadiness is still reported
    alone = Jury.from_specs(["scripted:juror-keyword"], temperature=0.5)
    results, _ = run_grade(source, subs, alone, tmp_path)
    agreement = grading_record(results, contract="c", jury=alone, repeats=2).agreement
    assert agreement is not None and agreement.jurors[0].consistency is not None
    assert agreement.jurors[0].tied == 0 and agreement.pairs == []
    # two spellings of one endpoint are one model: distinct samples
    spelled = Jury.from_specs(
        ["openai-compatible:m@http://h:8080/v1", "openai-compatible:m@http://h:8080/v1/"]
    )
    assert [j.sample for j in spelled.jurors] == [0, 1]
    assert "sits on the jury 2 times" in " ".join(spelled.warnings(2))
    assert "asked 2 times" in " ".join(spelled.warnings(2))
    # the Harbor export keeps the repeats; HealthBench names it leaves them out
    assert main(["contracts", "export-harbor", str(path), str(tmp_path / "harbor"),
                 "--jury", "scripted:juror-keyword"]) == 0  # fmt: skip
    exported = next((tmp_path / "harbor").glob("*/tests/contract.yaml")).read_text()
    assert "repeats: 2" in exported
    hb = tmp_path / "hb.yaml"
    hb.write_text("scoring: healthbench\n" + REPEATED.replace("repeats: 3", "repeats: 2"))
    assert main(["contracts", "convert", str(hb), str(tmp_path / "hb.jsonl")]) == 0
    said = capsys.readouterr().out
    assert "repeats (2)" in said and "batch_criteria" in said
