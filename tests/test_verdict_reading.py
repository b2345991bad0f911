"""One rule for every reader of free-text verdicts (peer tags and criterion lines, bound
ratings and pairwise verdicts, contract grades): the last vote counts, and the format
the judge was shown, repeated before or after its verdict, is never a vote. The formats
are taken from the real prompts, so the tests follow them when they change."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from eigenjury.bounds.judges import JudgeProtocol
from eigenjury.bounds.neighbours import JudgedItem
from eigenjury.contracts.prompts import juror_request
from eigenjury.contracts.prompts import repair_request as juror_repair
from eigenjury.contracts.rules import parse_grade, parse_grades
from eigenjury.contracts.schema import Criterion, Evaluation, Execution, Task
from eigenjury.models.types import ChatRequest
from eigenjury.models.verdict_format import structured_label_logprobs, verdict_line_logprobs
from eigenjury.peer.config import Generation
from eigenjury.peer.data import Constitution
from eigenjury.peer.parsing import parse_criteria, parse_verdict
from eigenjury.peer.prompts import comparison_request, repair_request
from eigenjury.stats.verdicts import FIRST, SECOND, TIE

CONSTITUTION = Constitution("kindness", ("Be kind.", "Be clear."))
ITEM = JudgedItem("i", "q", ("r",), (None,))


def _last_paragraph(request: ChatRequest) -> str:
    return request.messages[-1].content.rpartition("\n\n")[2]


def _peer_formats(ties: bool, per_criterion: bool = False) -> list[str]:
    asked = comparison_request(
        None,
        CONSTITUTION,
        "hello",
        ("reply one", "reply two"),
        None,
        Generation(),
        ties=ties,
        per_criterion=per_criterion,
        constrained=False,
    )
    repair = repair_request(asked, "no tag", ties=ties, per_criterion=per_criterion, n_criteria=2)
    return [_last_paragraph(asked), repair.messages[-1].content]


def _bound_format(kind: str) -> str:
    item = ITEM if kind == "single" else JudgedItem("p", "q", ("a", "b"), (None, None))
    return JudgeProtocol(kind).request(item, 0).messages[0].content


def _task(*criteria: str) -> Task:
    return Task(
        task_id="t",
        execution=Execution(prompt="Say hi"),
        evaluation=Evaluation(
            criteria=tuple(
                Criterion(id=c, weight=50, grader="llm_judge", prompt=f"It says {c}")
                for c in criteria
            )
        ),
    )


def _grade_formats(*ids: str) -> list[str]:
    task = _task(*ids)
    criteria = task.evaluation.criteria
    asked = juror_request(
        task, None, "hi", criteria, constrained=False, temperature=0.0, seed=0, max_tokens=99
    )
    repair = juror_repair(asked, "no verdict", criteria)
    return [_last_paragraph(asked), repair.messages[-1].content]


@dataclass(frozen=True)
class Reader:
    """A reader, the formats its judges are shown, and how a verdict is written."""

    name: str
    read: Callable[[str], object]
    formats: list[str]
    votes: dict[str, object]  # a verdict as written -> what the reader makes of it


READERS = [
    Reader(
        "peer tags with ties",
        lambda text: parse_verdict(text, ties=True),
        _peer_formats(ties=True),
        {
            "<verdict>A</verdict>": FIRST,
            "<verdict>B</verdict>": SECOND,
            "<verdict>tie</verdict>": TIE,
        },
    ),
    Reader(
        "peer tags without ties",
        lambda text: parse_verdict(text, ties=False),
        _peer_formats(ties=False),
        {"<verdict>A</verdict>": FIRST, "<verdict>B</verdict>": SECOND},
    ),
    Reader(
        "peer criterion lines",
        lambda text: parse_criteria(text, 2, ties=True),
        _peer_formats(ties=True, per_criterion=True),
        {
            '<criterion n="1">A</criterion>\n<criterion n="2">tie</criterion>': [FIRST, TIE],
            '<criterion n="1">B</criterion>\n<criterion n="2">A</criterion>': [SECOND, FIRST],
        },
    ),
    Reader(
        "bound ratings",
        lambda text: JudgeProtocol("single").parse(text, ITEM),
        [_bound_format("single")],
        {"[[2]]": 2.0, "[[10]]": 10.0, "[[7]]": 7.0},
    ),
    Reader(
        "bound pairwise verdicts",
        lambda text: JudgeProtocol("pairwise").parse(text, ITEM),
        [_bound_format("pairwise")],
        {"[[A>>B]]": 1.0, "[[A=B]]": 3.0, "[[B>>A]]": 5.0, "[[B>A]]": 4.0},
    ),
    Reader("contract grades", parse_grade, _grade_formats("a"), {"GRADE: C": "C", "GRADE: I": "I"}),
    Reader(
        "contract grade lines",
        lambda text: parse_grades(text, ["a", "b"]),
        _grade_formats("a", "b"),
        {
            "GRADE[a]: C\nGRADE[b]: I": {"a": "C", "b": "I"},
            "GRADE[a]: I\nGRADE[b]: C": {"a": "I", "b": "C"},
        },
    ),
]
NOTHING: dict[str, object] = {
    "contract grade lines": {"a": None, "b": None},
}


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_the_format_repeated_after_the_verdict_is_not_a_vote(reader: Reader) -> None:
    for written, meant in reader.votes.items():
        for shown in reader.formats:
            assert reader.read(f"Reasons.\n{written}\n{shown}") == meant
            assert reader.read(f"{shown}\nReasons.\n{written}") == meant
            assert reader.read(f"Reasons. {written}\n\n{shown}\n{shown}") == meant


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_the_format_alone_is_no_verdict(reader: Reader) -> None:
    for shown in reader.formats:
        assert reader.read(f"I am not sure.\n{shown}") == NOTHING.get(reader.name)


def test_an_example_is_not_a_vote_but_a_changed_mind_is() -> None:
    single = JudgeProtocol("single")
    assert single.parse("[[3]] at first; on reflection [[8]]", ITEM) == 8.0
    assert single.parse("[[8]]. Ratings look like [[5]] or [[6]].", ITEM) == 8.0
    assert single.parse("[[8]]. e.g. [[5]]", ITEM) == 8.0
    assert single.parse("I rate it [[6]]/10", ITEM) == 6.0  # a scale, not alternatives
    assert parse_grade("GRADE: C/I") is None and parse_grade("GRADE: C / GRADE: I") is None
    assert parse_verdict("<verdict>A</verdict> ... no: <verdict>B</verdict>") == SECOND
    assert parse_verdict("<verdict>A</verdict>\nand that is final") == FIRST


def test_a_json_verdict_is_not_overruled_by_a_tag_quoted_after_it() -> None:
    structured = json.dumps({"reasoning": "A is kinder", "verdict": "A"})
    assert parse_verdict(f'{structured}\nI was told to end with "<verdict>B</verdict>".') == FIRST
    assert parse_verdict(f"```json\n{structured}\n```\n<verdict>B</verdict>") == FIRST
    graded = json.dumps({"reasoning": "", "verdict": "GRADE: C"})
    assert parse_grade(f"{graded} (the format: GRADE: I)") == "C"
    rated = json.dumps({"reasoning": "", "verdict": "[[4]]"})
    assert JudgeProtocol("single").parse(f"{rated}\nfor example [[7]]", ITEM) == 4.0


def test_label_scores_of_a_json_verdict_are_read_in_it_not_in_text_quoted_after_it() -> None:
    head = '{"reasoning": "x", "verdict": '
    tail = '"}\nThe schema: {"verdict": "B"}'
    text = f'{head}"A{tail}'
    alternatives = [{"token": '"A', "logprob": -0.2}, {"token": '"B', "logprob": -1.7}]
    tokens = [
        {"token": head, "logprob": 0.0, "top_logprobs": []},
        {"token": '"A', "logprob": -0.2, "top_logprobs": alternatives},
        {"token": tail, "logprob": 0.0, "top_logprobs": []},
    ]
    assert structured_label_logprobs(text, tokens, ("A", "B")) == {"A": -0.2, "B": -1.7}


def test_label_scores_are_read_on_the_verdict_line_not_on_a_repeated_format() -> None:
    shown = _peer_formats(ties=True)[0]
    text = f"Reasons.\n<verdict>B</verdict>\n{shown}"
    at = text.index("<verdict>B") + len("<verdict>")
    tokens = [
        {"token": text[:at], "logprob": 0.0, "top_logprobs": []},
        {
            "token": "B",
            "logprob": -0.1,
            "top_logprobs": [{"token": "B", "logprob": -0.1}, {"token": "A", "logprob": -2.5}],
        },
        {"token": text[at + 1 :], "logprob": 0.0, "top_logprobs": []},
    ]
    assert verdict_line_logprobs(text, tokens, ("A", "B", "tie")) == {"B": -0.1, "A": -2.5}
    assert verdict_line_logprobs(f"Unsure.\n{shown}", tokens, ("A", "B", "tie")) is None


_WRAPS = ("{}", "**{}**", "`{}`", "Verdict: {}", "So: {}.", "Final answer - {}")
_PROSE = ("Both replies are polite.", "Reply A is warmer; B is curt.", "", "Reasons:\n- one\n- two")


@pytest.mark.fuzz
@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_random_replies_with_echoed_formats_are_read_by_their_vote(reader: Reader) -> None:
    """Replies put together at random: prose, the format quoted or not, the verdict in
    markup, then the format repeated whole or in part (cut at a sentence or a comma),
    any number of times. The vote is always what is read."""
    rng = random.Random(27)
    for _ in range(300):
        written, meant = rng.choice(list(reader.votes.items()))
        shown = rng.choice(reader.formats)
        pieces = [p for p in shown.replace(". ", ".|").replace(", ", ",|").split("|") if p]
        cut = rng.randrange(len(pieces))
        echo = " ".join(pieces[cut:]) if rng.random() < 0.5 else shown
        before = [rng.choice(_PROSE)] + ([shown] if rng.random() < 0.3 else [])
        after = [echo] * rng.randrange(0, 3)
        wrap = "{}" if "\n" in written else rng.choice(_WRAPS)
        text = "\n".join([*before, wrap.format(written), *after])
        assert reader.read(text) == meant, text
