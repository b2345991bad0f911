"""Graders that need no model: exact match, regular expression, number, Python function.

Each returns whether the criterion passed and a one-line explanation for the trace.
Exact match and numeric graders read the submission's final answer: the last line
starting with "Answer:" (or "Final answer:"), else its last non-empty line.
"""

from __future__ import annotations

import importlib
import math
import re
import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import regex as regex_engine

from eigenjury.errors import InputError

if TYPE_CHECKING:
    from pathlib import Path

    from eigenjury.contracts.schema import Contract, Criterion, Task

_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*:\s*(.*?)\s*$", re.IGNORECASE | re.MULTILINE)
_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")
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


def parse_number(text: str) -> float | None:
    """The last number in `text` ("1,234.5", "-3e2", "42%" -> 42), or None."""
    numbers = [m.group(0) for m in _NUMBER.finditer(text) if any(ch.isdigit() for ch in m.group(0))]
    if not numbers:
        return None
    value = float(numbers[-1].replace(",", "").replace("−", "-"))
    return value if math.isfinite(value) else None


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


def load_function(criterion: Criterion) -> Callable[..., Any]:
    """The user's grading function; a bad import path is an input error."""
    module_name, _, name = criterion.prompt.strip().partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise InputError(
            f"criterion '{criterion.id}': cannot import {module_name!r} ({exc}); "
            "is it installed or on PYTHONPATH?"
        ) from None
    function = getattr(module, name, None)
    if not callable(function):
        raise InputError(
            f"criterion '{criterion.id}': module {module_name!r} has no function {name!r}"
        )
    return function  # type: ignore[no-any-return]


def check_python_graders(contract: Contract, path: Path) -> None:
    """Import every `python` grader of `contract` now, so that a wrong import path is
    reported by `contracts check`, and stops grading before any model call is paid for."""
    for task in contract.tasks:
        for criterion in task.evaluation.criteria:
            if criterion.grader == "python":
                try:
                    load_function(criterion)
                except InputError as exc:
                    raise InputError(f"task '{task.task_id}', {exc.message}", path=path) from None


def python(criterion: Criterion, submission: str, task: Task) -> tuple[bool, str]:
    """`function(submission, task, criterion)` returns a truth value, or (value, reason).
    An exception in the user's function fails the criterion and is recorded."""
    function = load_function(criterion)
    try:
        outcome = function(submission, task, criterion)
    except Exception as exc:
        return False, f"{criterion.prompt} raised {type(exc).__name__}: {exc}"
    if isinstance(outcome, tuple) and len(outcome) == 2:
        return bool(outcome[0]), str(outcome[1])
    return bool(outcome), f"{criterion.prompt} returned {outcome!r}"


def grade_without_model(criterion: Criterion, submission: str, task: Task) -> tuple[bool, str]:
    """Every grader except `llm_judge`."""
    if criterion.grader == "exact_match":
        return exact_match(criterion, submission)
    if criterion.grader == "regex":
        return regex(criterion, submission)
    if criterion.grader == "numeric":
        return numeric(criterion, submission)
    if criterion.grader == "python":
        return python(criterion, submission, task)
    raise ValueError(f"{criterion.grader} needs a jury")
