"""Graders that need no model: exact match, regular expression, number, Python function
(run in a child process: contracts.sandbox).

Each returns whether the criterion passed and a one-line explanation for the trace.
Exact match and numeric graders read the submission's final answer: the last line
starting with "Answer:" (or "Final answer:"), else its last non-empty line.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

import regex as regex_engine

from eigenjury.contracts.sandbox import GraderOutcome
from eigenjury.contracts.schema import parse_number
from eigenjury.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

    from eigenjury.contracts.sandbox import GraderSandbox
    from eigenjury.contracts.schema import Contract, Criterion, Task

_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_EDGE_PUNCTUATION = " \t.,;:!?\"'`*_()[]{}"
REGEX_TIMEOUT_S = 1.0  # per submission; sane patterns take microseconds


def final_answer(submission: str) -> str:
    """The text a final-answer grader looks at."""
    found = _ANSWER_LINE.findall(submission)
    if found:
        return str(found[-1])
    lines = [line.strip() for line in submission.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def normalise(text: str) -> str:
    """Case, Unicode form, inner whitespace and surrounding punctuation do not count."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).strip(_EDGE_PUNCTUATION)


def exact_match(criterion: Criterion, submission: str) -> tuple[bool, str]:
    answer = final_answer(submission)
    expected, got = normalise(criterion.prompt), normalise(answer)
    passed = bool(expected) and (
        expected == got if criterion.match == "equals" else expected in got
    )
    return passed, f"expected {criterion.prompt!r} ({criterion.match}); final answer {answer!r}"


def regex(criterion: Criterion, submission: str) -> tuple[bool, str]:
    """Search with a time limit: a pattern that backtracks catastrophically on some text
    (`(a+)+$` on "aaa...ab") fails its criterion instead of hanging the run."""
    try:
        found = regex_engine.search(
            criterion.prompt, submission, regex_engine.MULTILINE, timeout=REGEX_TIMEOUT_S
        )
    except TimeoutError:
        return False, (
            f"pattern {criterion.prompt!r}: timed out after {REGEX_TIMEOUT_S:g} s on this "
            "submission (catastrophic backtracking?); counted as no match"
        )
    where = f"matched {found.group(0)[:80]!r}" if found else "no match"
    return found is not None, f"pattern {criterion.prompt!r}: {where}"


def numeric(criterion: Criterion, submission: str) -> tuple[bool, str]:
    expected = parse_number(criterion.prompt)
    assert expected is not None  # checked when the contract was read
    answer = final_answer(submission)
    got = parse_number(answer)
    if got is None:
        return False, f"expected {expected:g}; no number in the final answer {answer!r}"
    allowed = max(criterion.tolerance, criterion.relative_tolerance * abs(expected))
    passed = abs(got - expected) <= allowed + 1e-12 * max(1.0, abs(expected))
    return passed, f"expected {expected:g} ± {allowed:g}; got {got:g}"


def check_python_graders(contract: Contract, path: Path, sandbox: GraderSandbox) -> None:
    """Import every `python` grader of `contract` now (in the sandbox's child), so that
    a wrong import path is reported by `contracts check`, and stops grading before any
    model call is paid for."""
    for task in contract.tasks:
        for criterion in task.evaluation.criteria:
            if criterion.grader == "python":
                problem = sandbox.load_problem(criterion)
                if problem is not None:
                    raise InputError(
                        f"task '{task.task_id}', criterion '{criterion.id}': {problem}", path=path
                    )


def try_python_graders(contract: Contract, sandbox: GraderSandbox) -> list[str]:
    """Each `python` grader once on an empty submission of its task: what went wrong,
    per criterion (a grader that raises, exits, hangs or returns no verdict would be
    recorded as that criterion's error on every submission like it)."""
    problems = []
    for task in contract.tasks:
        for criterion in task.evaluation.criteria:
            if criterion.grader == "python":
                error = sandbox.grade(criterion, "", task).error
                if error is not None:
                    problems.append(f"task '{task.task_id}', criterion '{criterion.id}': {error}")
    return problems


def grade_without_model(
    criterion: Criterion, submission: str, task: Task, sandbox: GraderSandbox | None
) -> GraderOutcome:
    """Every grader except `llm_judge`; `python` graders run in `sandbox`."""
    if criterion.grader == "python":
        if sandbox is None:
            raise ValueError("a python grader runs in a GraderSandbox; none was given")
        return sandbox.grade(criterion, submission, task)
    if criterion.grader == "exact_match":
        return GraderOutcome(*exact_match(criterion, submission))
    if criterion.grader == "regex":
        return GraderOutcome(*regex(criterion, submission))
    if criterion.grader == "numeric":
        return GraderOutcome(*numeric(criterion, submission))
    raise ValueError(f"{criterion.grader} needs a jury")
