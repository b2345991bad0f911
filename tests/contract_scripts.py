"""Scripted jurors and candidates with known behaviour, for grading tests.

- `juror-keyword`: grades C iff the criterion's last word (lower case) appears in the
  submission; for batched criteria, one verdict line per criterion.
- `juror-yes` / `juror-no`: always C / always I, after an echoed example of the other.
- `juror-mute`: never gives a verdict line, not even when asked to repair.
- `juror-late`: no verdict at first; answers the repair request with GRADE: C.
- `juror-seeded`: C for an even seed, I for an odd one (as a server that honours it).
- `juror-prose`: grades like `juror-keyword`, but as models often write: the verdict ends
  a sentence after an echoed format ("... so GRADE: C."), never on a line of its own.
- `candidate-paris`: answers every task with "Answer: Paris".
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from eigenjury.contracts.bundle import ContractSource
from eigenjury.contracts.grading import Submission, TaskResult, grade
from eigenjury.contracts.jury import Jury
from eigenjury.engine import Engine, Store
from eigenjury.models.providers.scripted import register_script
from eigenjury.models.types import ChatRequest

SUBMISSION = re.compile(r"<<<SUBMISSION\n(.*?)\nSUBMISSION>>>", re.S)
CRITERION = re.compile(r"^Criterion: (.*)$", re.M)
LISTED = re.compile(r"^\[([^\]]+)\] (.*)$", re.M)


def _user(request: ChatRequest) -> str:
    return request.messages[-1].content


def _is_repair(request: ChatRequest) -> bool:
    return "did not end with" in _user(request)


def _meets(criterion: str, submission: str) -> bool:
    return criterion.split()[-1].strip(".").lower() in submission.lower()


def _keyword_grades(request: ChatRequest) -> tuple[str | None, list[tuple[str, str]]]:
    """What `juror-keyword` decides: the grade of a single criterion (else None), and
    (id, grade) for each listed criterion of a batched request."""
    user = _user(request)
    found = SUBMISSION.search(user)
    submission = found.group(1) if found else ""
    single = CRITERION.search(user)
    if single:
        return ("C" if _meets(single.group(1), submission) else "I"), []
    listed = [
        (ident, "C" if _meets(text, submission) else "I") for ident, text in LISTED.findall(user)
    ]
    return None, listed


def juror_keyword(request: ChatRequest) -> str:
    if _is_repair(request):
        return "GRADE: I"
    grade, listed = _keyword_grades(request)
    if grade is not None:
        return f"Looking at it, for example GRADE: X would be wrong.\nGRADE: {grade}"
    lines = [f"GRADE[{ident}]: {g}" for ident, g in listed]
    return "Each criterion on its own.\n" + "\n".join(lines)


def juror_prose(request: ChatRequest) -> str:
    if _is_repair(request):
        return "GRADE: I"
    grade, listed = _keyword_grades(request)
    if grade is not None:
        return f"I must end with GRADE: C or GRADE: I. Having read it, **GRADE: {grade}**."
    return " ".join(f"As for {ident}, GRADE[{ident}]: {g}." for ident, g in listed)


register_script("juror-keyword", juror_keyword)
register_script("juror-prose", juror_prose)
register_script(
    "juror-yes", lambda r: "GRADE: I would be wrong here.\nGRADE: I\nOn reflection:\nGRADE: C"
)
register_script("juror-no", lambda r: "GRADE: C\nNo, actually.\nGRADE: I")
register_script("juror-mute", lambda r: "I cannot decide.")
register_script("juror-seeded", lambda r: f"GRADE: {'C' if (r.seed or 0) % 2 == 0 else 'I'}")
register_script("juror-late", lambda r: "GRADE: C" if _is_repair(r) else "Thinking it over.")
register_script("candidate-paris", lambda r: "The capital is lovely.\nAnswer: Paris")


CONTRACT = """\
name: capitals
tasks:
  - task_id: france
    execution: {prompt: "What is the capital of France?"}
    evaluation:
      pass_threshold: 60
      criteria:
        - {id: city, weight: 50, grader: exact_match, prompt: Paris}
        - {id: lovely, weight: 50, grader: llm_judge, prompt: The answer says lovely}
  - task_id: italy
    execution: {prompt: "What is the capital of Italy?"}
    evaluation:
      criteria:
        - {id: city, weight: 100, grader: exact_match, prompt: Rome}
"""


XSS = "<script>alert('x')</script>"


def run_grade(
    source: ContractSource,
    submissions: list[Submission],
    jury: Jury,
    tmp_path: Path,
    **options: Any,
) -> tuple[list[TaskResult], Engine]:
    engine = Engine(Store(tmp_path / "store.sqlite"), progress=False, **options.pop("engine", {}))

    async def go() -> list[TaskResult]:
        async with engine:
            return await grade(engine, source, submissions, jury, **options)

    try:
        return asyncio.run(go()), engine
    finally:
        engine.store.close()


def write_submissions(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
