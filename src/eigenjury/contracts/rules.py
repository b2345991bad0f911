"""The grading rules, exactly: reading a juror's grade, the jury's majority, the score.

- A juror's reply ends with a verdict line `GRADE: C` (meets the criterion) or
  `GRADE: I`. The LAST verdict line counts, so a criterion or submission that echoes an
  example earlier in the text cannot decide it; a reply without one is unparseable.
- A criterion passes iff its C votes are more than half the jury: a tie fails, and an
  unparseable reply or a failed call is a vote that is not C.
- The task score is the sum of the weights of passed criteria; the task passes iff the
  score reaches the threshold; the reward is score / 100.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

CORRECT, INCORRECT = "C", "I"
_GRADE = re.compile(r"^[\s*_`>#-]*GRADE\s*:\s*[*_`]*\s*([CI])\s*[*_`]*\s*\.?\s*$", re.IGNORECASE)
_GRADE_FOR = re.compile(
    r"^[\s*_`>#-]*GRADE\s*\[\s*([^\]]+?)\s*\]\s*:\s*[*_`]*\s*([CI])\s*[*_`]*\s*\.?\s*$",
    re.IGNORECASE,
)
_SCORE_TOLERANCE = 1e-9  # weights like 33.3 + 33.3 + 33.4 must reach a threshold of 100


def parse_grade(text: str) -> str | None:
    """ "C" or "I" from the last verdict line, else None."""
    for line in reversed(text.splitlines()):
        found = _GRADE.match(line)
        if found:
            return found.group(1).upper()
    return None


def parse_grades(text: str, criterion_ids: Sequence[str]) -> dict[str, str | None]:
    """Several criteria in one reply: the last `GRADE[id]: C|I` line for each id."""
    wanted = set(criterion_ids)
    grades: dict[str, str | None] = dict.fromkeys(criterion_ids)
    for line in text.splitlines():
        found = _GRADE_FOR.match(line)
        if found and found.group(1) in wanted:
            grades[found.group(1)] = found.group(2).upper()
    return grades


def passes(c_votes: int, jury_size: int) -> bool:
    """Strict majority of the whole jury: a tie fails."""
    return 2 * c_votes > jury_size


def flip_distance(c_votes: int, jury_size: int) -> int:
    """How many jurors would have to change their vote to change the outcome."""
    if passes(c_votes, jury_size):
        return c_votes - jury_size // 2
    return jury_size // 2 + 1 - c_votes


def is_split(c_votes: int, jury_size: int) -> bool:
    """Decided by one vote (3-2 in a jury of five; 2-2 or 3-1 in a jury of four)."""
    return flip_distance(c_votes, jury_size) <= 1


def task_score(weights: Iterable[float], passed: Iterable[bool]) -> float:
    return math.fsum(w for w, ok in zip(weights, passed, strict=True) if ok)


def task_passes(score: float, threshold: float) -> bool:
    return score >= threshold - _SCORE_TOLERANCE


def reward(score: float) -> float:
    return score / 100.0
