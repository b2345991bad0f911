"""The grading rules, exactly: reading a juror's grade, the jury's majority, the score.

- A served juror asked about one criterion may answer with a structured verdict (JSON
  whose `verdict` is one of GRADE_CHOICES, models.verdict_format): its verdict counts.
- Otherwise a juror's reply ends with a verdict `GRADE: C` (meets the criterion) or `GRADE: I`,
  read wherever it stands, as models write it: at the end of a sentence, in markdown
  emphasis or code, `GRADE:C`, in any case. The LAST verdict counts, so an example
  echoed earlier in the text cannot decide it; a reply without one is unparseable.
  A letter followed by a lowercase word is prose that mentions a grade, not a verdict
  ("Grade: I think...", "GRADE: C meets it"), and the format itself, echoed before or
  after the verdict ("GRADE: C|I", "GRADE: C or GRADE: I", "GRADE: C if it meets..."),
  is never a vote: the rule every reader shares (models.verdict_format.votes).
- A criterion passes iff its C votes are more than half the jury: a tie fails, and an
  unparseable reply or a failed call is a vote that is not C.
- A criterion is met or not; a negative one (weight below 0) describes what the reply
  must not do, and its points are subtracted when met.
- The task score, by the task's rule: "weighted" (AsymmetryZero), the sum of the
  weights of the criteria met; "healthbench", 100 x the points met over the sum of the
  positive points, clipped to [0, 100]. The task passes iff the score reaches the
  threshold; the reward is score / 100.
- Over tasks, a mean score; under the healthbench rule the mean of the unclipped task
  scores, clipped (as HealthBench reports it). A tag's score restricts the rule to the
  criteria carrying the tag (100 x points met over positive points, on tasks where
  those are above 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from eigenjury.models.verdict_format import last_vote, read_structured, votes

if TYPE_CHECKING:
    from eigenjury.contracts.schema import Evaluation, Scoring

CORRECT, INCORRECT = "C", "I"
GRADE_CHOICES = ("GRADE: C", "GRADE: I")  # the verdict lines a juror may give
# The verdict letter, between optional markdown or brackets: not a word ("I'm"), not
# followed by a lowercase word (prose). Whether it is a vote or the format: `votes`.
_LETTER = r"""[\s*_`'"(\[]*([CI])(?![\w'’])(?![*_`'")\]]*[ \t]+(?-i:[a-z]))"""
_GRADE = re.compile(r"\bGRADE[\s*_`]*:" + _LETTER, re.IGNORECASE)
_GRADE_FOR = re.compile(r"\bGRADE\s*\[\s*([^\]\n]+?)\s*\][\s*_`]*:" + _LETTER, re.IGNORECASE)
_SCORE_TOLERANCE = 1e-9  # weights like 33.3 + 33.3 + 33.4 must reach a threshold of 100


def parse_grade(text: str) -> str | None:
    """ "C" or "I" from a structured reply's verdict, else from the last verdict in the
    reply, else None."""
    structured = read_structured(text, GRADE_CHOICES)
    if structured is not None:
        return structured[-1]
    found = last_vote(_GRADE, text)
    return None if found is None else found.group(1).upper()


def parse_grades(text: str, criterion_ids: Sequence[str]) -> dict[str, str | None]:
    """Several criteria in one reply: the last `GRADE[id]: C|I` vote for each id."""
    grades: dict[str, str | None] = dict.fromkeys(criterion_ids)
    for found in votes(_GRADE_FOR, text):
        if found.group(1) in grades:
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


def points_met(weights: Iterable[float], met: Iterable[bool]) -> float:
    """The weights of the criteria met, negative ones subtracting."""
    return math.fsum(w for w, ok in zip(weights, met, strict=True) if ok)


def positive_points(weights: Iterable[float]) -> float:
    return math.fsum(w for w in weights if w > 0)


def unclipped_score(weights: Sequence[float], met: Sequence[bool], scoring: Scoring) -> float:
    """The task score before the healthbench rule's clipping (the weighted rule has none)."""
    return score_of_points(points_met(weights, met), positive_points(weights), scoring)


def score_of_points(points: float, positive: float, scoring: Scoring) -> float:
    """The unclipped score of `points` met on a task whose positive points sum to `positive`."""
    return points if scoring == "weighted" else 100.0 * points / positive


def clip_score(score: float, scoring: Scoring) -> float:
    return min(max(score, 0.0), 100.0) if scoring == "healthbench" else score


def task_score(
    weights: Sequence[float], met: Sequence[bool], scoring: Scoring = "weighted"
) -> float:
    return clip_score(unclipped_score(weights, met, scoring), scoring)


def tag_score(weights: Sequence[float], met: Sequence[bool]) -> float | None:
    """100 x the points met over the positive points of some criteria (one tag's), or
    None where none of them has positive points (the score is undefined there)."""
    possible = positive_points(weights)
    return None if possible <= 0 else 100.0 * points_met(weights, met) / possible


def score_range(evaluation: Evaluation) -> tuple[float, float]:
    """The lowest and highest task score a reply can get: every negative criterion met
    and no positive one, or the reverse."""
    weights = [c.weight for c in evaluation.criteria]
    low = task_score(weights, [w < 0 for w in weights], evaluation.scoring)
    high = task_score(weights, [w > 0 for w in weights], evaluation.scoring)
    return low, high


def task_passes(score: float, threshold: float) -> bool:
    return score >= threshold - _SCORE_TOLERANCE


def reward(score: float) -> float:
    return score / 100.0
