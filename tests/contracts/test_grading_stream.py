"""Grading as a stream: each submission is assembled as soon as its jury (and its
cascade's second jury) has voted, its judgements go to the trace and its replies are let
go; the results are those of grading every submission on its own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import contract_scripts
from contract_scripts import run_grade
from eigenjury.cli import main
from eigenjury.contracts.bundle import ContractSource, load_contract
from eigenjury.contracts.grading import Submission, TaskResult
from eigenjury.contracts.jury import Jury
from eigenjury.contracts.record import Judgement, JudgementLines
from eigenjury.contracts.trace import grading_record, kept_in
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest
from eigenjury.records import record_pieces, record_text

CONTRACT = """\
name: streamed
tasks:
  - task_id: t
    execution: {prompt: "Name a capital, kindly."}
    evaluation:
      pass_threshold: 50
      criteria:
        - {id: exact, weight: 10, grader: exact_match, match: contains, prompt: "Answer:"}
        - {id: paris, weight: 40, grader: llm_judge, prompt: The answer names paris}
        - {id: lovely, weight: 30, grader: llm_judge, prompt: The answer says lovely}
        - {id: rude, weight: -20, grader: llm_judge, prompt: The answer is rude}
"""

ASKED: list[str] = []  # the submissions juror-moody was asked about, in order


def _moody(request: ChatRequest) -> str:
    """Like juror-keyword, but with no verdict at first on a submission marked "odd"
    (a repair is asked for, and answered with C)."""
    user = request.messages[-1].content
    ASKED.append(user)
    if "did not end with" in user:
        return "GRADE: C"
    if "odd" in user:
        return "Hmm."
    return contract_scripts.juror_keyword(request)


register_script("juror-moody", _moody)


def _source(tmp_path: Path) -> ContractSource:
    path = tmp_path / "contract.yaml"
    path.write_text(CONTRACT)
    return load_contract(path)


def _submissions(n: int) -> list[Submission]:
    words = ["Paris", "lovely", "rude", "odd", "Answer: Rome"]
    texts = (" ".join([f"#{k}", *(w for j, w in enumerate(words) if k >> j & 1)]) for k in range(n))
    return [Submission("t", f"c{k}", text) for k, text in enumerate(texts)]


def _decided(results: list[TaskResult]) -> list[object]:
    """What grading decided, without timings or cache marks."""
    return [
        (
            r.candidate,
            r.score,
            r.passed,
            [
                (
                    c.criterion.id,
                    c.passed,
                    [(v.juror, v.grade, v.attempts, v.repeat) for v in c.votes],
                    [(v.juror, v.grade, v.attempts) for v in c.escalated_from],
                    c.explanation,
                )
                for c in r.criteria
            ],
        )
        for r in results
    ]


def test_a_stream_of_submissions_grades_as_each_one_alone_with_repairs_and_a_cascade(
    tmp_path: Path,
) -> None:
    source = _source(tmp_path)
    first = Jury.from_specs(["scripted:juror-keyword", "scripted:juror-moody"])
    second = Jury.from_specs(["scripted:juror-yes"] * 3)
    subs = _submissions(20)
    streamed, _ = run_grade(
        source, subs, first, tmp_path / "all", escalate_to=second, engine={"window": 8}
    )
    alone = [
        run_grade(source, [s], first, tmp_path / f"one{k}", escalate_to=second)[0][0]
        for k, s in enumerate(subs)
    ]
    assert _decided(streamed) == _decided(alone)
    odd = [r for r in streamed if "odd" in (r.submission.text or "")]
    assert odd and all(c.first_votes[1].attempts == 2 for r in odd for c in r.criteria if c.by_jury)
    # a 1-1 split (or a repaired vote) is within one flip: the second jury decides it
    assert any(c.escalated_from for r in streamed for c in r.criteria)


def test_each_submission_is_handed_over_once_as_soon_as_it_is_graded(tmp_path: Path) -> None:
    source = _source(tmp_path)
    jury = Jury.from_specs(["scripted:juror-moody"])
    subs = _submissions(64)
    ASKED.clear()
    seen: list[tuple[int, int]] = []  # (submission, juror calls made by then)
    trace = JudgementLines()
    keep = kept_in(trace)

    def graded(index: int, result: TaskResult) -> TaskResult:
        seen.append((index, len(ASKED)))
        return keep(index, result)

    results, _ = run_grade(source, subs, jury, tmp_path, graded=graded, engine={"window": 8})
    assert sorted(i for i, _ in seen) == list(range(64))
    calls = len(ASKED)  # 3 criteria x 64, and a repair for each criterion of an odd one
    assert calls == 3 * 64 + 3 * sum("odd" in (s.text or "") for s in subs)
    assert seen[0][1] < calls // 4  # the first is graded long before the last is asked
    # the results kept hold no reply; the trace holds every one, in submission order
    assert all(v.text is None for r in results for c in r.criteria for v in c.votes)
    kept = list(trace)
    assert [j.candidate for j in kept] == [s.candidate for s in subs for _ in range(4)]
    assert all(j.text for j in kept if j.juror is not None)
    record = grading_record(results, contract="streamed", jury=jury, trace=trace)
    assert record.diversity is None and record.tasks[5].candidate == "c5"


def test_the_trace_reads_back_in_submission_order_with_any_text(tmp_path: Path) -> None:
    def judgement(task: str, text: str) -> Judgement:
        return Judgement(
            task_id=task, candidate="m", criterion_id="c", stage="jury", juror="j",
            grade="C", weight=1, awarded=1, text=text,
        )  # fmt: skip

    odd = "line\u2028separator\x85next\u2029para\x1c\r\nend"  # splitlines would break these
    with (tmp_path / "spill").open("w+b") as spill:
        lines = JudgementLines(spill)
        lines.add(2, [judgement("b", odd), judgement("b", "x")])
        lines.add(0, [judgement("a", "first")])
        lines.add(1, [])
        assert [j.task_id for j in lines] == ["a", "b", "b"]
        assert lines.of(2)[0].text == odd and lines.of(1) == [] and lines.of(7) == []
        assert [row["text"] for row in lines.rows()] == ["first", odd, "x"]
        in_memory = JudgementLines()
        for k in (0, 1, 2):
            in_memory.add(k, lines.of(k))
        assert in_memory == lines
        with pytest.raises(ValueError, match="kept already"):
            lines.add(0, [])


def test_the_record_is_written_a_task_at_a_time_as_the_same_text(tmp_path: Path) -> None:
    source = _source(tmp_path)
    jury = Jury.from_specs(["scripted:juror-keyword", "scripted:juror-moody"])
    subs = [*_submissions(5), Submission("t", "ünïcode \u2028", 'quotes " and \\ and\nnew line')]
    results, _ = run_grade(source, subs, jury, tmp_path)
    record = grading_record(results, contract="streamed", jury=jury)
    pieces = list(record_pieces(record))
    assert len(pieces) == len(record.tasks) + 2
    assert "".join(pieces) == record_text(record)
    empty = record.model_copy(update={"tasks": []})
    assert "".join(record_pieces(empty)) == record_text(empty)


def test_grade_writes_the_trace_in_submission_order_and_leaves_no_scratch_file(
    tmp_path: Path,
) -> None:
    (tmp_path / "contract.yaml").write_text(CONTRACT)
    subs = _submissions(20)
    rows = [{"task_id": s.task_id, "candidate": s.candidate, "submission": s.text} for s in subs]
    answers = contract_scripts.write_submissions(tmp_path / "subs.jsonl", rows)
    out = tmp_path / "out"
    code = main(
        [
            "grade", str(tmp_path / "contract.yaml"), "--submissions", str(answers),
            "--jury", "scripted:juror-moody", "--jury", "scripted:juror-keyword",
            "--store", str(tmp_path / "store.sqlite"), "--out", str(out), "--no-progress",
        ]
    )  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "criteria.csv", "judgements.csv", "report.html", "results.json", "tasks.csv",
        "trace.jsonl",
    ]  # fmt: skip
    trace = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    per_task = 1 + 3 * 2  # the grader without a model, then 3 criteria x 2 jurors
    assert [t["candidate"] for t in trace] == [s.candidate for s in subs for _ in range(per_task)]
    record = json.loads((out / "results.json").read_text())
    assert [t["candidate"] for t in record["tasks"]] == [s.candidate for s in subs]


@pytest.mark.parametrize("unusable", ["first", "second"])
def test_a_juror_that_cannot_be_called_stops_the_grading_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unusable: str
) -> None:
    """A juror the engine refuses only when its first call is read (no key; as the
    Harbor verifier meets it), mid-stream or in a cascade's second jury, ends the
    grading with the reason: the stream never waits for calls that will not be made."""
    from eigenjury.contracts.grading import grade
    from eigenjury.engine import Engine, Store
    from eigenjury.errors import InputError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    source = _source(tmp_path)
    keyless = Jury.from_specs(["openai:gpt-4o-mini"])
    mute = Jury.from_specs(["scripted:juror-mute"])  # unread: every criterion escalates
    first, second = (keyless, None) if unusable == "first" else (mute, keyless)
    engine = Engine(Store(tmp_path / "store.sqlite"), progress=False)

    async def go() -> list[TaskResult]:
        async with engine:
            work = grade(engine, source, _submissions(3), first, escalate_to=second)
            return await asyncio.wait_for(work, timeout=30)

    try:
        with pytest.raises(InputError, match="OPENAI_API_KEY"):
            asyncio.run(go())
    finally:
        engine.store.close()
