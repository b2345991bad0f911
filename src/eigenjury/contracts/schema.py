"""The evaluation contract: tasks whose execution inputs (what the solver sees) are kept
apart from their evaluation inputs (criteria, weights, pass threshold).

A criterion names its grader: `exact_match` (the prompt is the expected answer),
`regex` (a pattern searched in the submission), `numeric` (an expected number, with
tolerances), `llm_judge` (the prompt is the criterion a jury grades) or `python`
(`package.module:function`, called with the submission, task and criterion).
Fields a bundle carries that eigenjury does not interpret are kept in `extra`, so
reading and writing a bundle loses nothing.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import regex
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

GraderKind = Literal["exact_match", "regex", "numeric", "llm_judge", "python"]
GRADERS: tuple[GraderKind, ...] = ("exact_match", "regex", "numeric", "llm_judge", "python")
# Weights are meant to sum to 100: far larger ones are a typo, and scores (sums of
# weights) near the float limit overflow when averaged.
MAX_WEIGHT = 1e6
DEFAULT_PASS_THRESHOLD = 100.0  # one default everywhere (the reference tool mixed 70 and 100)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


_NUMBER = re.compile(r"[-+−]?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][-+]?\d+)?")


def parse_number(text: str) -> float | None:
    """The last number in `text` ("1,234.5", "-3e2", "42%" -> 42), or None."""
    numbers = [m.group(0) for m in _NUMBER.finditer(text) if any(ch.isdigit() for ch in m.group(0))]
    if not numbers:
        return None
    value = float(numbers[-1].replace(",", "").replace("−", "-"))
    return value if math.isfinite(value) else None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Criterion(_Frozen):
    id: str = Field(min_length=1)
    name: str = ""
    weight: float = Field(ge=0.0, le=MAX_WEIGHT, allow_inf_nan=False)
    grader: GraderKind
    prompt: str = Field(min_length=1)
    match: Literal["equals", "contains"] = "equals"  # exact_match only
    tolerance: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # numeric: absolute
    relative_tolerance: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # numeric: relative
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _prompt_fits_grader(self) -> Criterion:
        if not self.prompt.strip():
            raise ValueError("the prompt is blank")
        if self.grader == "regex":
            try:
                regex.compile(self.prompt, regex.MULTILINE)  # as the regex grader searches
            except regex.error as exc:
                raise ValueError(f"the prompt is not a valid regular expression ({exc})") from None
        elif self.grader == "numeric":
            if parse_number(self.prompt) is None:
                raise ValueError(f"the prompt {self.prompt!r} is not a number")
        elif self.grader == "python" and not _IMPORT_PATH.match(self.prompt.strip()):
            raise ValueError(
                f"the prompt {self.prompt!r} is not an import path like 'package.module:function'"
            )
        return self


class Execution(_Frozen):
    """What the solver is given."""

    prompt: str = Field(min_length=1)
    reference_file: str = ""  # relative to the contract's refs/ folder
    metadata: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)


class Evaluation(_Frozen):
    """How a submission is judged; never shown to the solver."""

    criteria: tuple[Criterion, ...] = Field(min_length=1)
    pass_threshold: float = Field(DEFAULT_PASS_THRESHOLD, allow_inf_nan=False)
    reference_file: str = ""
    tools: tuple[Any, ...] = ()
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_ids(self) -> Evaluation:
        seen: set[str] = set()
        for criterion in self.criteria:
            if criterion.id in seen:
                raise ValueError(f"criterion id '{criterion.id}' is used twice")
            seen.add(criterion.id)
        return self

    @property
    def total_weight(self) -> float:
        return math.fsum(c.weight for c in self.criteria)


class Task(_Frozen):
    task_id: str = Field(min_length=1)
    execution: Execution
    evaluation: Evaluation


class Contract(_Frozen):
    tasks: tuple[Task, ...] = Field(min_length=1)
    name: str = ""
    _by_id: dict[str, Task] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _unique_ids(self) -> Contract:
        seen: set[str] = set()
        for task in self.tasks:
            if task.task_id in seen:
                raise ValueError(f"task id '{task.task_id}' is used twice")
            seen.add(task.task_id)
        return self

    def task(self, task_id: str) -> Task:
        return self._by_id[task_id]

    def model_post_init(self, context: Any) -> None:
        self._by_id = {t.task_id: t for t in self.tasks}

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    def warnings(self) -> list[str]:
        """Legal but suspicious: weights that do not sum to 100, thresholds out of reach."""
        out = []
        for task in self.tasks:
            total = task.evaluation.total_weight
            if not math.isclose(total, 100.0, abs_tol=1e-9):
                out.append(f"task '{task.task_id}': criterion weights sum to {total:g}, not 100")
            if task.evaluation.pass_threshold > total + 1e-9:
                out.append(
                    f"task '{task.task_id}': the pass threshold "
                    f"{task.evaluation.pass_threshold:g} is above the total weight {total:g}; "
                    "the task can never pass"
                )
        return out
