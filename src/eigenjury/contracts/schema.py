"""The evaluation contract: tasks whose execution inputs (what the solver sees) are kept
apart from their evaluation inputs (criteria, weights, pass threshold).

A criterion names its grader: `exact_match` (the prompt is the expected answer),
`regex` (a pattern searched in the submission), `numeric` (an expected number, with
tolerances), `llm_judge` (the prompt is the criterion a jury grades) or `python`
(`package.module:function`, called with the submission, task and criterion).
Fields a bundle carries that eigenjury does not interpret are kept in `extra`, so
reading and writing a bundle loses nothing.

A criterion's weight may be negative: it then describes something the reply must not
do, and its points are subtracted when it is met. A task states its scoring rule
(contracts.rules): "weighted" (the AsymmetryZero sum of the weights met) or
"healthbench" (points met over the positive points, clipped to [0, 1], as a share of
100). A task's prompt is text or a conversation (system, user and assistant turns,
ending with the user's); criteria and tasks carry free tags ("axis:accuracy",
"theme:emergency_referrals") that results are broken down by.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

import regex
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictStr,
    ValidationError,
    field_validator,
    model_validator,
)

GraderKind = Literal["exact_match", "regex", "numeric", "llm_judge", "python"]
GRADERS: tuple[GraderKind, ...] = ("exact_match", "regex", "numeric", "llm_judge", "python")
Scoring = Literal["weighted", "healthbench"]
SCORINGS: tuple[Scoring, ...] = ("weighted", "healthbench")
PromptRole = Literal["system", "developer", "user", "assistant"]
# Weights are meant to sum to 100: far larger ones are a typo, and scores (sums of
# weights) near the float limit overflow when averaged.
MAX_WEIGHT = 1e6
MAX_REPEATS = 25
DEFAULT_PASS_THRESHOLD = 100.0  # one default everywhere (the reference tool mixed 70 and 100)
_IMPORT_PATH = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


# a mantissa always (an exponent alone, as in "e92", is no number: "92" is read)
_NUMBER = re.compile(r"[-+−]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?")


def parse_number(text: str) -> float | None:
    """The last number in `text` ("1,234.5", "-3e2", "42%" -> 42), or None."""
    numbers = [m.group(0) for m in _NUMBER.finditer(text) if any(ch.isdigit() for ch in m.group(0))]
    if not numbers:
        return None
    value = float(numbers[-1].replace(",", "").replace("−", "-"))
    return value if math.isfinite(value) else None


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Tag = Annotated[StrictStr, Field(min_length=1)]


class Criterion(_Frozen):
    id: str = Field(min_length=1)
    name: str = ""
    # negative: something the reply must not do, subtracted when met
    weight: float = Field(ge=-MAX_WEIGHT, le=MAX_WEIGHT, allow_inf_nan=False)
    grader: GraderKind
    prompt: str = Field(min_length=1)
    match: Literal["equals", "contains"] = "equals"  # exact_match only
    tolerance: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # numeric: absolute
    relative_tolerance: float = Field(0.0, ge=0.0, allow_inf_nan=False)  # numeric: relative
    tags: tuple[Tag, ...] = ()
    extra: dict[str, Any] = Field(default_factory=dict)

    @property
    def negative(self) -> bool:
        """Met means the reply did what it must not."""
        return self.weight < 0

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


class PromptMessage(_Frozen):
    """One turn of a task given as a conversation."""

    role: PromptRole
    content: StrictStr


class Execution(_Frozen):
    """What the solver is given: a prompt, or a conversation that ends with the user's
    turn."""

    prompt: str | tuple[PromptMessage, ...] = Field(min_length=1)
    reference_file: str = ""  # relative to the contract's refs/ folder
    metadata: dict[str, Any] = Field(default_factory=dict)
    environment: dict[str, Any] = Field(default_factory=dict)
    extra: dict[str, Any] = Field(default_factory=dict)

    @field_validator("prompt", mode="before")
    @classmethod
    def _turns(cls, value: Any) -> Any:
        """A list is a conversation: a bad turn is named by its number, not as a failed
        alternative to text."""
        if not isinstance(value, list | tuple):
            return value
        if not value:
            raise ValueError("the conversation has no turns")
        turns = []
        for number, turn in enumerate(value, 1):
            try:
                turns.append(PromptMessage.model_validate(turn))
            except ValidationError as exc:
                error = exc.errors()[0]
                field = ".".join(str(p) for p in error["loc"])
                raise ValueError(
                    f"turn {number}: {field + ': ' if field else ''}{error['msg']}"
                ) from None
        return tuple(turns)

    @model_validator(mode="after")
    def _conversation(self) -> Execution:
        if isinstance(self.prompt, str):
            if not self.prompt.strip():
                raise ValueError("the prompt is blank")
        elif self.prompt[-1].role != "user":
            raise ValueError(
                f"a conversation ends with the user's turn, not the {self.prompt[-1].role}'s: "
                "the candidate replies to it"
            )
        elif not self.prompt[-1].content.strip():
            raise ValueError("the conversation's last turn, the user's, is blank")
        return self


class Evaluation(_Frozen):
    """How a submission is judged; never shown to the solver. `ideal` is a reference
    reply, shown to jurors where `show_ideal` says so."""

    criteria: tuple[Criterion, ...] = Field(min_length=1)
    pass_threshold: float = Field(DEFAULT_PASS_THRESHOLD, allow_inf_nan=False)
    scoring: Scoring = "weighted"
    reference_file: str = ""
    ideal: str = ""
    show_ideal: bool = False
    batch_criteria: bool = False  # jurors may grade all its jury criteria in one call
    tools: tuple[Any, ...] = ()
    extra: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _unique_ids(self) -> Evaluation:
        seen: set[str] = set()
        for criterion in self.criteria:
            if criterion.id in seen:
                raise ValueError(f"criterion id '{criterion.id}' is used twice")
            seen.add(criterion.id)
        if self.scoring == "healthbench" and self.positive_weight <= 0:
            raise ValueError(
                "no criterion has positive points, so the healthbench score (points met over "
                "the positive points) is undefined; give some criterion positive points"
            )
        if self.show_ideal and not self.ideal.strip():
            raise ValueError("show_ideal is set but there is no ideal reply to show")
        return self

    @property
    def positive_weight(self) -> float:
        """The most points a reply can gain: the positive weights' sum."""
        return math.fsum(c.weight for c in self.criteria if c.weight > 0)

    @property
    def negative_weight(self) -> float:
        """The most points a reply can lose (at most 0)."""
        return math.fsum(c.weight for c in self.criteria if c.weight < 0)


class Task(_Frozen):
    task_id: str = Field(min_length=1)
    execution: Execution
    evaluation: Evaluation
    tags: tuple[Tag, ...] = ()


class Contract(_Frozen):
    """Tasks, and the defaults a contract may state once for all of them: `scoring` and
    `batch_criteria` apply to every task whose evaluation does not say otherwise,
    `show_ideal` to every such task that has an ideal reply. `repeats`: each juror is
    asked that many times about each criterion (at a temperature above 0, distinct
    samples), every answer a vote."""

    tasks: tuple[Task, ...] = Field(min_length=1)
    name: str = ""
    # each juror asked this many times (distinct samples) about each criterion
    repeats: int = Field(1, ge=1, le=MAX_REPEATS)
    _by_id: dict[str, Task] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _defaults_to_tasks(cls, data: Any) -> Any:
        """Top-level `scoring` and `show_ideal` given to each task not stating its own."""
        if not isinstance(data, dict) or not isinstance(data.get("tasks"), list | tuple):
            return data
        defaults = {k: data[k] for k in _CONTRACT_DEFAULTS if k in data}
        if not defaults:
            return data
        if "scoring" in defaults and defaults["scoring"] not in SCORINGS:  # named here,
            # not at the first task it would be given to
            raise ValueError(
                f"scoring {defaults['scoring']!r} is not a scoring rule; use "
                + " or ".join(SCORINGS)
            )
        tasks = []
        for task in data["tasks"]:
            if isinstance(task, dict) and isinstance(task.get("evaluation"), dict):
                evaluation = task["evaluation"]
                given = {
                    k: v
                    for k, v in defaults.items()
                    if k != "show_ideal" or str(evaluation.get("ideal") or "").strip()
                }
                task = {**task, "evaluation": {**given, **evaluation}}
            tasks.append(task)
        rest = {k: v for k, v in data.items() if k not in _CONTRACT_DEFAULTS}
        return {**rest, "tasks": tasks}

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
        """Legal but suspicious: weighted tasks whose positive weights do not sum to 100,
        and tasks no reply could pass, or none could fail."""
        from eigenjury.contracts.rules import score_range

        out = []
        for task in self.tasks:
            ev, where = task.evaluation, f"task '{task.task_id}'"
            total = ev.positive_weight
            if ev.scoring == "weighted" and not math.isclose(total, 100.0, abs_tol=1e-9):
                which = "positive criterion weights" if ev.negative_weight else "criterion weights"
                out.append(f"{where}: {which} sum to {total:g}, not 100")
            low, high = score_range(ev)
            if ev.pass_threshold > high + 1e-9:
                out.append(
                    f"{where}: the pass threshold {ev.pass_threshold:g} is above the highest "
                    f"score a reply can reach ({high:g}); the task can never pass"
                )
            elif ev.pass_threshold <= low + 1e-9:
                out.append(
                    f"{where}: the pass threshold {ev.pass_threshold:g} is at or below the "
                    f"lowest score a reply can get ({low:g}); the task can never fail"
                )
        return out


_CONTRACT_DEFAULTS = ("scoring", "show_ideal", "batch_criteria")
